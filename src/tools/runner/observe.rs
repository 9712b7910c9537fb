//! Watches the scenario's pods and PodGroups (selected by the scenario
//! label) and turns watch events into tracker observations. Each watcher
//! reports `Synced` after its first full list, so the run can start creating
//! objects knowing it will see every one of them appear.

use futures::{Stream, StreamExt};
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::tracker::{GroupCondition, Observation};
use crate::scenario::Kind;
use crate::scenario::manifests::SCENARIO_LABEL;
use muster_core::dialects::workload_api::{POD_GROUP_CONDITION, POD_GROUP_CONDITION_V1ALPHA2};
use muster_scheduler::kube::objects::PodPlacement;

/// What the watchers send.
#[derive(Debug)]
pub enum Watched {
    Change(Observation),
    /// A watcher finished its initial list.
    Synced,
}

/// Watchers started by [`spawn`]; they stop when this is dropped.
pub struct Watchers {
    tasks: Vec<JoinHandle<()>>,
}

impl Watchers {
    /// How many `Synced` messages to wait for.
    pub fn count(&self) -> usize {
        self.tasks.len()
    }
}

impl Drop for Watchers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Starts a pod watcher, and one watcher per kind in `group_kinds`, for
/// scenario `name`.
pub fn spawn(
    client: &kube::Client,
    name: &str,
    group_kinds: &[Kind],
    tx: mpsc::UnboundedSender<Watched>,
) -> Watchers {
    let config = watcher::Config::default().labels(&format!("{SCENARIO_LABEL}={name}"));
    let pods: Api<PodPlacement> = Api::all(client.clone());
    let pod_stream = watcher::watcher(pods, config.clone()).default_backoff();
    let mut tasks = vec![tokio::spawn(forward(
        pod_stream,
        tx.clone(),
        pod_observation,
    ))];
    for kind in group_kinds {
        let (group, version, kind_name, plural) = kind.gvk();
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, kind_name),
            plural,
        );
        let groups: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let stream = watcher::watcher(groups, config.clone()).default_backoff();
        tasks.push(tokio::spawn(forward(stream, tx.clone(), group_observation)));
    }
    Watchers { tasks }
}

/// Sends one observation per applied or deleted object until the receiver
/// goes away. Watch errors are retried by the stream's backoff.
async fn forward<K, S>(
    stream: S,
    tx: mpsc::UnboundedSender<Watched>,
    observe: fn(&K, bool) -> Observation,
) where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut synced = false;
    while let Some(event) = stream.next().await {
        let message = match event {
            Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                Watched::Change(observe(&obj, false))
            }
            Ok(watcher::Event::Delete(obj)) => Watched::Change(observe(&obj, true)),
            Ok(watcher::Event::InitDone) if !synced => {
                synced = true;
                Watched::Synced
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "scenario watch failed; retrying");
                continue;
            }
        };
        if tx.send(message).is_err() {
            return;
        }
    }
}

fn pod_observation(pod: &PodPlacement, deleted: bool) -> Observation {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    if deleted {
        return Observation::PodGone { namespace, name };
    }
    Observation::Pod {
        namespace,
        name,
        bound: pod.is_bound(),
        terminating: pod.metadata.deletion_timestamp.is_some(),
    }
}

/// A group object's scheduling status: the PodGroup condition, or for
/// Coscheduling and Volcano their `status.phase` (released once it is
/// `Scheduled` or `Running`).
fn group_observation(group: &DynamicObject, _deleted: bool) -> Observation {
    let status = &group.data["status"];
    let condition = status["conditions"]
        .as_array()
        .and_then(|cs| {
            cs.iter().find(|c| {
                c["type"] == POD_GROUP_CONDITION || c["type"] == POD_GROUP_CONDITION_V1ALPHA2
            })
        })
        .map(|c| GroupCondition {
            status: c["status"] == "True",
            reason: text(&c["reason"]),
            message: text(&c["message"]),
        })
        .or_else(|| {
            let phase = status["phase"].as_str()?;
            Some(GroupCondition {
                status: matches!(phase, "Scheduled" | "Running"),
                reason: phase.to_string(),
                message: String::new(),
            })
        });
    Observation::Group {
        namespace: group.metadata.namespace.clone().unwrap_or_default(),
        name: group.metadata.name.clone().unwrap_or_default(),
        condition,
    }
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}
