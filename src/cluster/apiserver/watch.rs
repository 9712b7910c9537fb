//! Watch streams: newline-delimited JSON `{type, object}` events over a
//! chunked response, with bookmarks, timeouts, resumption from a
//! resourceVersion and `410 Gone` (as an ERROR event, like a real server)
//! when that version has left the history window. A watcher that falls
//! behind its resource's live events by more than the watch buffer is
//! closed without an error, as a real server closes an unresponsive one.
//!
//! Every event's object is the store's shared serialized bytes: a watcher
//! writes a static prefix, the shared object bytes and a static suffix, so
//! fan-out to many watchers never re-serializes or copies objects.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::fault::{Faults, Target};
use super::registry::ResourceDef;
use super::selectors::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::{Event, EventType, Store, Stored};
use super::table::{self, Include};
use super::views;

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Replay changes after this version.
    After(u64),
    /// Synthetic ADDED events for every current object first; with
    /// `end_bookmark`, then a BOOKMARK marking the end of them
    /// (`sendInitialEvents=true`).
    Current { end_bookmark: bool },
}

/// What one watch request asked for.
pub struct WatchRequest {
    pub def: Arc<ResourceDef>,
    pub resource: Arc<str>,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub start: Start,
    pub bookmarks: bool,
    /// Close the stream after this long (`timeoutSeconds`, forced closes).
    pub close_after: Option<Duration>,
    /// Send each object as a one-row Table (kubectl's human-readable watch).
    pub table: Option<Include>,
}

impl WatchRequest {
    fn matches(&self, obj: &Stored) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| obj.namespace == ns)
            && self.labels.matches(|k| obj.label(k))
            && self.fields.matches(|p| obj.field(p))
    }

    /// The event this watcher sees for a store event, if any, and the object
    /// it carries. As in the API server's watch cache, a change that makes an
    /// object start matching is an ADDED, and one that makes it stop matching
    /// is a DELETED carrying the previous content (the last state this watch
    /// saw) at the change's resourceVersion. That is how a watch on
    /// `status.phase!=Succeeded,status.phase!=Failed` sees a pod finish.
    fn translate(&self, event: &Event) -> Option<(EventType, Arc<Stored>)> {
        let other_namespace = self
            .namespace
            .as_deref()
            .is_some_and(|ns| event.obj.namespace != ns);
        if event.resource != self.resource || other_namespace {
            return None;
        }
        let now = self.matches(&event.obj);
        let kind = match event.kind {
            EventType::Added | EventType::Deleted => now.then_some(event.kind)?,
            EventType::Modified => {
                let before = event.prev.as_deref().filter(|p| self.matches(p));
                match (before, now) {
                    (Some(_), true) => EventType::Modified,
                    (None, true) => EventType::Added,
                    (Some(prev), false) => {
                        let last_seen = prev.restamped(event.obj.rv);
                        return Some((
                            EventType::Deleted,
                            last_seen.unwrap_or_else(|| event.obj.clone()),
                        ));
                    }
                    (None, false) => return None,
                }
            }
        };
        Some((kind, event.obj.clone()))
    }
}

/// The injected faults a watch is subject to (`watch-stall`,
/// `resume-gone`), and what the rules match it on.
pub struct WatchFaults {
    pub faults: Arc<Faults>,
    pub group: String,
    pub plural: String,
    pub user_agent: String,
}

impl WatchFaults {
    fn target(&self) -> Target<'_> {
        Target::new("watch", &self.group, &self.plural, &self.user_agent)
    }

    /// Holds the stream while a `watch-stall` rule matches it.
    async fn wait_unstalled(&self) {
        self.faults.wait_unstalled(self.target()).await;
    }
}

/// Starts a watch and returns the streaming body. The stream ends on
/// timeout, on `shutdown`, or when the client goes away.
pub fn serve(
    store: Arc<Store>,
    req: WatchRequest,
    faults: WatchFaults,
    bookmark_every: Duration,
    shutdown: CancellationToken,
) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(async move {
        let mut out = Sink {
            tx,
            table: req.table,
            headers_sent: false,
        };
        run(&store, &req, &faults, bookmark_every, &shutdown, &mut out).await;
    });
    Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, Infallible>))
}

/// The writing half; every send fails once the client is gone.
struct Sink {
    tx: mpsc::Sender<Bytes>,
    table: Option<Include>,
    /// Table column definitions go with the first event only.
    headers_sent: bool,
}

impl Sink {
    async fn event(&mut self, def: &ResourceDef, kind: EventType, obj: &Stored) -> Result<(), ()> {
        let prefix: &'static [u8] = match kind {
            EventType::Added => b"{\"type\":\"ADDED\",\"object\":",
            EventType::Modified => b"{\"type\":\"MODIFIED\",\"object\":",
            EventType::Deleted => b"{\"type\":\"DELETED\",\"object\":",
        };
        self.send(Bytes::from_static(prefix)).await?;
        if let Some(include) = self.table {
            // Rendered per watcher, but only kubectl watches ask for tables.
            let row = views::to_view(def, obj.value());
            let t = table::table(def, json!({}), &[row], include, !self.headers_sent);
            self.headers_sent = true;
            self.send(Bytes::from(t.to_string())).await?;
            return self.send(Bytes::from_static(b"}\n")).await;
        }
        self.send(views::render(def, obj)).await?;
        self.send(Bytes::from_static(b"}\n")).await
    }

    async fn bookmark(&mut self, def: &ResourceDef, rv: u64, initial_end: bool) -> Result<(), ()> {
        let mut metadata = json!({ "resourceVersion": rv.to_string() });
        if initial_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        let line = json!({
            "type": "BOOKMARK",
            "object": { "kind": def.kind, "apiVersion": def.api_version(), "metadata": metadata },
        });
        self.line(line).await
    }

    async fn error(&mut self, err: ApiError) -> Result<(), ()> {
        self.line(json!({ "type": "ERROR", "object": err.to_value() }))
            .await
    }

    async fn line(&mut self, v: serde_json::Value) -> Result<(), ()> {
        let mut text = v.to_string();
        text.push('\n');
        self.send(Bytes::from(text)).await
    }

    async fn send(&mut self, b: Bytes) -> Result<(), ()> {
        self.tx.send(b).await.map_err(|_| ())
    }
}

async fn run(
    store: &Store,
    req: &WatchRequest,
    faults: &WatchFaults,
    bookmark_every: Duration,
    shutdown: &CancellationToken,
    out: &mut Sink,
) {
    let Some((mut live, mut last_rv)) = replay(store, req, faults, out).await else {
        return;
    };
    let deadline = async {
        match req.close_after {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let mut ticker = tokio::time::interval(bookmark_every);
    ticker.reset();
    loop {
        let sent = tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = &mut deadline => return,
            _ = out.tx.closed() => return,
            _ = ticker.tick(), if req.bookmarks => out.bookmark(&req.def, last_rv, false).await,
            next = live.recv() => match next {
                Ok(event) => {
                    if event.obj.rv <= last_rv {
                        continue;
                    }
                    // A stalled connection: the event waits (and later ones
                    // queue in the broadcast buffer, or overflow it into a 410).
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = out.tx.closed() => return,
                        _ = faults.wait_unstalled() => {}
                    }
                    last_rv = event.obj.rv;
                    match req.translate(&event) {
                        Some((kind, obj)) => out.event(&req.def, kind, &obj).await,
                        None => Ok(()),
                    }
                }
                // Too slow to keep up: closed and logged, as kube-apiserver's
                // watch cache closes an unresponsive watcher (its V(1) line).
                // No `410`: the client resumes from the last version it read,
                // replayed from the history window; only a resume older than
                // that window is told `410` and re-lists.
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::info!(resource = %req.resource, last_rv, missed, "closing a watcher that fell behind");
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Sends what happened before the live stream: the backlog after the
/// requested version, or the current objects. Returns the live receiver
/// and the version everything up to which has been sent.
async fn replay(
    store: &Store,
    req: &WatchRequest,
    faults: &WatchFaults,
    out: &mut Sink,
) -> Option<(broadcast::Receiver<Arc<Event>>, u64)> {
    match req.start {
        Start::After(since) if faults.faults.resume_gone(faults.target()) => {
            let msg = format!("too old resource version: {since} (compacted)");
            let _ = out.error(ApiError::gone(msg)).await;
            None
        }
        Start::After(since) => match store.watch_from(&req.resource, since) {
            Ok(start) => {
                for event in &start.backlog {
                    if let Some((kind, obj)) = req.translate(event) {
                        out.event(&req.def, kind, &obj).await.ok()?;
                    }
                }
                Some((start.live, start.rv))
            }
            Err(compacted) => {
                let msg = format!("too old resource version: {since} ({compacted})");
                let _ = out.error(ApiError::gone(msg)).await;
                None
            }
        },
        Start::Current { end_bookmark } => {
            let (objs, live, rv) =
                store.snapshot_and_subscribe(&req.resource, req.namespace.as_deref());
            for obj in objs.iter().filter(|o| req.matches(o)) {
                out.event(&req.def, EventType::Added, obj).await.ok()?;
            }
            if end_bookmark {
                out.bookmark(&req.def, rv, true).await.ok()?;
            }
            Some((live, rv))
        }
    }
}
