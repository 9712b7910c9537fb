//! The daemon's critical tasks, watched: the API writer and every informer
//! must run until shutdown. One that ends or panics before then is logged
//! with why and reported to the scheduling loop, which fails readiness and
//! liveness and stops the daemon with an error, so the process exits non-zero
//! and its Deployment restarts it (kube-scheduler exits the same way when a
//! part it cannot do without stops). Without this, a dead writer left the loop
//! assuming pods that never bound, and a dead informer left a stale cache,
//! both behind green probes.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::{Notify, mpsc, watch};
use tokio::task::{AbortHandle, JoinHandle};
use tracing::error;

/// A critical task that stopped before shutdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEnded {
    /// `api-writer`, or the informer's name (`pods`, `nodes`, …).
    pub task: String,
    /// `ended` or `panicked: <message>`.
    pub why: String,
}

impl std::fmt::Display for TaskEnded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "critical task {} {}", self.task, self.why)
    }
}

/// A fault to inject into one critical task, by name: once `trigger` is
/// notified (`notify_one`, which keeps a permit for a task that is not
/// waiting yet) the task stops running its work and ends or panics. For the
/// tests that prove a dead task takes the daemon down; `DaemonOptions` has
/// none by default.
#[derive(Debug, Clone)]
pub struct InjectedFault {
    pub task: String,
    pub kind: FaultKind,
    pub trigger: Arc<Notify>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The task returns as if its work were done.
    End,
    /// The task panics.
    Panic,
}

/// Spawns and watches the critical tasks.
pub struct Supervisor {
    ended: mpsc::UnboundedSender<TaskEnded>,
    shutdown: watch::Receiver<bool>,
    faults: Vec<InjectedFault>,
}

/// A spawned critical task.
pub struct Critical {
    task: AbortHandle,
    /// Completes once the task has stopped and its end has been reported
    /// (if it had to be).
    pub stopped: JoinHandle<()>,
}

impl Critical {
    /// Stops the task (shutdown); its end is not reported.
    pub fn abort(&self) {
        self.task.abort();
    }
}

impl Supervisor {
    /// A supervisor whose reports arrive on the returned receiver; a task
    /// that ends once `shutdown` is true, or once the receiver is dropped
    /// (the loop has stopped), is not reported (its panic is still logged).
    pub fn new(
        shutdown: watch::Receiver<bool>,
        faults: Vec<InjectedFault>,
    ) -> (Supervisor, mpsc::UnboundedReceiver<TaskEnded>) {
        let (ended, reports) = mpsc::unbounded_channel();
        let supervisor = Supervisor {
            ended,
            shutdown,
            faults,
        };
        (supervisor, reports)
    }

    /// Spawns `work` as the critical task `name`.
    pub fn spawn(&self, name: &str, work: impl Future<Output = ()> + Send + 'static) -> Critical {
        let fault = self.faults.iter().find(|f| f.task == name).cloned();
        let task = tokio::spawn(async move {
            match fault {
                None => work.await,
                Some(fault) => {
                    tokio::select! {
                        () = work => {}
                        () = fault.trigger.notified() => match fault.kind {
                            FaultKind::End => {}
                            FaultKind::Panic => panic!("injected fault"),
                        },
                    }
                }
            }
        });
        let abort = task.abort_handle();
        let name = name.to_string();
        let ended = self.ended.clone();
        let shutdown = self.shutdown.clone();
        let stopped = tokio::spawn(async move {
            let why = match task.await {
                Ok(()) => "ended".to_string(),
                // Only `Critical::abort` cancels, and only at shutdown.
                Err(e) if e.is_cancelled() => return,
                Err(e) => format!("panicked: {}", panic_message(e.into_panic())),
            };
            // The loop owns the receiver: once it has stopped, the informers
            // end because their channel closed, before shutdown is flagged.
            let shutting_down = *shutdown.borrow() || ended.is_closed();
            if shutting_down && why == "ended" {
                return;
            }
            error!(task = %name, %why, "a critical task stopped; the scheduler cannot go on without it");
            if !shutting_down {
                let _ = ended.send(TaskEnded { task: name, why });
            }
        });
        Critical {
            task: abort,
            stopped,
        }
    }
}

/// A panic's message, as `std` prints it: a `&str` or `String` payload.
fn panic_message(payload: Box<dyn Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_task_that_ends_or_panics_is_reported_with_why() {
        let (_tx, shutdown) = watch::channel(false);
        let (sup, mut reports) = Supervisor::new(shutdown, Vec::new());
        sup.spawn("api-writer", async {}).stopped.await.unwrap();
        assert_eq!(
            reports.recv().await,
            Some(TaskEnded {
                task: "api-writer".into(),
                why: "ended".into()
            })
        );
        sup.spawn("pods", async { panic!("decoder bug {}", 7) })
            .stopped
            .await
            .unwrap();
        let report = reports.recv().await.unwrap();
        assert_eq!(report.task, "pods");
        assert_eq!(report.why, "panicked: decoder bug 7");
        assert_eq!(
            report.to_string(),
            "critical task pods panicked: decoder bug 7"
        );
    }

    #[tokio::test]
    async fn nothing_is_reported_once_shutdown_has_begun() {
        let (tx, shutdown) = watch::channel(false);
        let (sup, mut reports) = Supervisor::new(shutdown, Vec::new());
        let forever = sup.spawn("nodes", std::future::pending());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let writer = sup.spawn("api-writer", async move {
            let _ = stop_rx.await;
        });
        tx.send_replace(true);
        drop(stop_tx);
        writer.stopped.await.unwrap();
        forever.abort();
        forever.stopped.await.unwrap();
        drop(sup);
        assert_eq!(reports.recv().await, None);
    }

    #[tokio::test]
    async fn injected_faults_end_or_panic_the_named_task_only() {
        let (_tx, shutdown) = watch::channel(false);
        let fault = |task: &str, kind| InjectedFault {
            task: task.into(),
            kind,
            trigger: Arc::new(Notify::new()),
        };
        let faults = vec![
            fault("api-writer", FaultKind::End),
            fault("pods", FaultKind::Panic),
        ];
        let triggers: Vec<_> = faults.iter().map(|f| f.trigger.clone()).collect();
        let (sup, mut reports) = Supervisor::new(shutdown, faults);
        let nodes = sup.spawn("nodes", std::future::pending());
        let writer = sup.spawn("api-writer", std::future::pending());
        let pods = sup.spawn("pods", std::future::pending());
        // A permit is kept for a task that is not waiting yet.
        for t in &triggers {
            t.notify_one();
        }
        writer.stopped.await.unwrap();
        pods.stopped.await.unwrap();
        let mut got = [reports.recv().await.unwrap(), reports.recv().await.unwrap()];
        got.sort_by(|a, b| a.task.cmp(&b.task));
        assert_eq!(got[0].task, "api-writer");
        assert_eq!(got[0].why, "ended");
        assert_eq!(got[1].task, "pods");
        assert_eq!(got[1].why, "panicked: injected fault");
        assert!(!nodes.stopped.is_finished());
        nodes.abort();
    }
}
