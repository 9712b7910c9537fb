//! Creates a scenario's objects through the API, in plan order: setup
//! objects (which may already exist), then each gang's group object and pods
//! and each batch of plain pods, pods paced at the scenario's creation rate.
//!
//! Up to `concurrency` units are in flight at once (1 = strictly in order):
//! a unit is one plain pod, or one gang (its group object, then its member
//! pods one after another, as a controller creates them). Setup finishes
//! before any workload starts; its cluster-scoped objects (namespaces,
//! nodes, device classes) before its namespaced ones (claim templates).
//!
//! Workloads are created in phases (`Plan::stages`): a phase starts once the
//! one before it has started, its gate is open (the run reports how far the
//! plan has settled through a watch channel) and its delay has passed;
//! phases already started keep creating meanwhile. Churn workloads (an
//! interval of their own) create one pod per interval beside the phase's
//! other units.

use std::time::Duration;

use anyhow::{Context, Result};
use futures::stream::FuturesUnordered;
use futures::{StreamExt, TryStreamExt, stream};
use kube::Resource;
use kube::api::{DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind, Request};
use tokio::sync::{Mutex, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::scenario::{Manifest, Plan, Stage, WorkloadPlan};

/// How fast and how wide to create.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Pods per second (`None`: as fast as the API accepts them).
    pub rate: Option<f64>,
    /// Creations in flight at once (at least 1).
    pub concurrency: usize,
}

/// Creates everything in `plan` at `pace`. `settled` carries the index of
/// the first plan workload that has not settled yet (`Tracker::first_unsettled`).
pub async fn apply(
    client: &kube::Client,
    plan: &Plan,
    pace: Pace,
    mut settled: watch::Receiver<usize>,
) -> Result<()> {
    let width = pace.concurrency.max(1);
    // Cluster-scoped setup (namespaces among it) before the namespaced
    // objects that live in those namespaces.
    for namespaced in [false, true] {
        stream::iter(
            plan.setup
                .iter()
                .filter(|m| m.namespace.is_some() == namespaced),
        )
        .map(|m| create(client, m, IfExists::Keep))
        .buffer_unordered(width)
        .try_collect::<()>()
        .await?;
    }
    let pacer = pace.rate.map(|r| Mutex::new(pacer(r)));
    let pacer = pacer.as_ref();
    let mut running = FuturesUnordered::new();
    let mut previous_start = Instant::now();
    for stage in &plan.stages {
        let workloads = plan
            .workloads
            .get(stage.workloads.clone())
            .unwrap_or_default();
        let mut opening = std::pin::pin!(open(stage, &mut settled, previous_start));
        // Phases already started go on creating while this one waits.
        loop {
            tokio::select! {
                opened = &mut opening => {
                    opened?;
                    break;
                }
                Some(created) = running.next() => created?,
            }
        }
        previous_start = Instant::now();
        running.push(create_phase(client, workloads, width, pacer));
    }
    while let Some(created) = running.next().await {
        created?;
    }
    Ok(())
}

/// Waits until `stage` may start: its gate, then its delay (counted from
/// the gate opening, or without a gate from the start of the phase before).
async fn open(
    stage: &Stage,
    settled: &mut watch::Receiver<usize>,
    previous_start: Instant,
) -> Result<()> {
    if stage.after_settled {
        settled
            .wait_for(|&first_unsettled| first_unsettled >= stage.workloads.start)
            .await
            .context("the run stopped reporting progress")?;
    }
    // No timer for no delay: the phase starts in the same poll.
    let not_before = if stage.after_settled {
        Instant::now() + stage.delay
    } else {
        previous_start + stage.delay
    };
    if not_before > Instant::now() {
        tokio::time::sleep_until(not_before).await;
    }
    Ok(())
}

/// Creates one phase's workloads: churn workloads on their own interval,
/// the rest as units, `width` in flight, in plan order.
async fn create_phase(
    client: &kube::Client,
    workloads: &[WorkloadPlan],
    width: usize,
    pacer: Option<&Mutex<Interval>>,
) -> Result<()> {
    let churns = workloads.iter().filter_map(|w| match w {
        WorkloadPlan::Pods(p) => Some((p.interval?, p.pods.as_slice())),
        WorkloadPlan::Gang(_) => None,
    });
    let churning =
        futures::future::try_join_all(churns.map(|(every, pods)| churn(client, pods, every)));
    // A gang is one unit (its group object, then its pods); a plain pod is a
    // unit of its own. Units start in plan order, `width` in flight.
    let units = workloads.iter().flat_map(|w| match w {
        WorkloadPlan::Gang(g) => vec![Unit::Gang(g.group.as_ref(), &g.pods)],
        WorkloadPlan::Pods(p) if p.interval.is_some() => Vec::new(),
        WorkloadPlan::Pods(p) => p.pods.iter().map(Unit::Pod).collect(),
    });
    let creating = stream::iter(units)
        .map(|unit| async move {
            match unit {
                Unit::Pod(pod) => create_pod(client, pod, pacer).await,
                Unit::Gang(group, pods) => {
                    if let Some(group) = group {
                        create(client, group, IfExists::Fail).await?;
                    }
                    for pod in pods {
                        create_pod(client, pod, pacer).await?;
                    }
                    Ok(())
                }
            }
        })
        .buffer_unordered(width)
        .try_collect::<()>();
    futures::try_join!(creating, churning)?;
    Ok(())
}

/// Creates `pods` one per `every`, the first at once (scheduler-perf's
/// `churn` op in `create` mode, bounded by the workload's count). A slow
/// creation delays the ones after it rather than bunching them.
async fn churn(client: &kube::Client, pods: &[Manifest], every: Duration) -> Result<()> {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    for pod in pods {
        tick.tick().await;
        create(client, pod, IfExists::Fail).await?;
    }
    Ok(())
}

/// What one in-flight slot creates.
enum Unit<'a> {
    Gang(Option<&'a Manifest>, &'a [Manifest]),
    Pod(&'a Manifest),
}

/// Creates a pod once the pacer (if any) gives it a turn.
async fn create_pod(
    client: &kube::Client,
    pod: &Manifest,
    pacer: Option<&Mutex<Interval>>,
) -> Result<()> {
    if let Some(p) = pacer {
        p.lock().await.tick().await;
    }
    create(client, pod, IfExists::Fail).await
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

/// POSTs the manifest's JSON as is and reads only the status of the answer:
/// a load generator must not spend its CPU decoding what it just sent.
async fn create(client: &kube::Client, m: &Manifest, if_exists: IfExists) -> Result<()> {
    let (group, version, kind, plural) = m.kind.gvk();
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let what = || match &m.namespace {
        Some(ns) => format!("creating {kind} {ns}/{}", m.name),
        None => format!("creating {kind} {}", m.name),
    };
    let url = DynamicObject::url_path(&resource, m.namespace.as_deref());
    let body = serde_json::to_vec(&m.object).with_context(what)?;
    let request = Request::new(url)
        .create(&PostParams::default(), body)
        .with_context(what)?;
    match client.request_text(request).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 && if_exists == IfExists::Keep => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Err(anyhow::anyhow!(
            "{}: it already exists (was this scenario run against this cluster before?)",
            what()
        )),
        Err(e) => Err(e).with_context(what),
    }
}

#[cfg(test)]
mod tests {
    use std::task::Poll;

    use super::*;

    fn stage(first: usize, after_settled: bool, delay: Duration) -> Stage {
        Stage {
            workloads: first..first + 1,
            after_settled,
            delay,
        }
    }

    /// A gated phase opens once the first unsettled workload reaches its
    /// first workload, not before; an ungated one at once.
    #[tokio::test]
    async fn a_gate_opens_when_the_workloads_before_it_settle() {
        let (tx, mut rx) = watch::channel(0usize);
        let gated = stage(2, true, Duration::ZERO);
        let mut opening = std::pin::pin!(open(&gated, &mut rx, Instant::now()));
        assert!(futures::poll!(&mut opening).is_pending());
        tx.send(1).unwrap();
        assert!(futures::poll!(&mut opening).is_pending(), "one still waits");
        tx.send(2).unwrap();
        assert!(matches!(futures::poll!(&mut opening), Poll::Ready(Ok(()))));

        let (_tx, mut rx) = watch::channel(0usize);
        let free = stage(2, false, Duration::ZERO);
        let mut opening = std::pin::pin!(open(&free, &mut rx, Instant::now()));
        assert!(matches!(futures::poll!(&mut opening), Poll::Ready(Ok(()))));
    }

    /// A run that stops reporting (the sender dropped) fails the gate
    /// instead of hanging.
    #[tokio::test]
    async fn a_gate_without_reports_fails() {
        let (tx, mut rx) = watch::channel(0usize);
        drop(tx);
        let gated = stage(1, true, Duration::ZERO);
        let e = open(&gated, &mut rx, Instant::now()).await.unwrap_err();
        assert!(e.to_string().contains("stopped reporting"), "{e}");
    }
}
