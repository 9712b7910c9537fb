//! Creates a scenario's objects through the API, in plan order: setup
//! objects (which may already exist), then each gang's PodGroup and pods and
//! each batch of plain pods, pods paced at the scenario's creation rate.

use std::time::Duration;

use anyhow::{Context, Result};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use tokio::time::{Interval, MissedTickBehavior};

use crate::scenario::{Manifest, Plan, WorkloadPlan};

/// Creates everything in `plan`; `rate` is pods per second (`None`: unpaced).
pub async fn apply(client: &kube::Client, plan: &Plan, rate: Option<f64>) -> Result<()> {
    for manifest in &plan.setup {
        create(client, manifest, IfExists::Keep).await?;
    }
    let mut pace = rate.map(pacer);
    for workload in &plan.workloads {
        if let WorkloadPlan::Gang(g) = workload {
            create(client, &g.group, IfExists::Fail).await?;
        }
        for pod in workload.pods() {
            if let Some(p) = pace.as_mut() {
                p.tick().await;
            }
            create(client, pod, IfExists::Fail).await?;
        }
    }
    Ok(())
}

fn pacer(rate: f64) -> Interval {
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    interval.set_missed_tick_behavior(MissedTickBehavior::Burst);
    interval
}

/// What an object that already exists means.
#[derive(Clone, Copy, PartialEq, Eq)]
enum IfExists {
    /// Shared setup (namespaces, nodes): use the existing one.
    Keep,
    /// A workload object: the scenario ran here before; say so.
    Fail,
}

async fn create(client: &kube::Client, m: &Manifest, if_exists: IfExists) -> Result<()> {
    let (group, version, kind, plural) = m.kind.gvk();
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let api: Api<DynamicObject> = match &m.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let what = || match &m.namespace {
        Some(ns) => format!("creating {kind} {ns}/{}", m.name),
        None => format!("creating {kind} {}", m.name),
    };
    let object: DynamicObject = serde_json::from_value(m.object.clone()).with_context(what)?;
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 && if_exists == IfExists::Keep => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Err(anyhow::anyhow!(
            "{}: it already exists (was this scenario run against this cluster before?)",
            what()
        )),
        Err(e) => Err(e).with_context(what),
    }
}
