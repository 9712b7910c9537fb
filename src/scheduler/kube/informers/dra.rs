//! The `resource.k8s.io/v1` informers: ResourceSlices, DeviceClasses,
//! DeviceTaintRules and ResourceClaims, each decoded into the allocator's
//! model. An object that
//! cannot be read is still reported, with why, so a pod that needs it is
//! told (a claim, a class) and an allocation that could only use it is
//! refused (a slice's pool), rather than the object being skipped.

use std::sync::Arc;

use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use kube::api::Api;
use tokio::sync::mpsc;
use tracing::warn;

use super::{Observed, Upsert, cluster_key, run_keyed, watch_config};
use muster_core::cache::{DraChange, ResourceClaimKey};
use muster_core::dra;
use muster_core::engine::ClusterEvent;
use muster_core::model::PodKey;

fn event(change: DraChange) -> Observed {
    Observed::Event(ClusterEvent::Dra(change))
}

/// The model, or the reason it cannot be built (logged once per change).
fn read<T>(
    kind: &str,
    object: &str,
    decoded: Result<T, dra::DraError>,
) -> Result<Arc<T>, Arc<str>> {
    decoded.map(Arc::new).map_err(|e| {
        warn!(kind, object, error = %e.0, "unreadable DRA object; pods that need it are refused");
        Arc::from(e.0.as_str())
    })
}

pub(super) async fn run_slices(
    name: &'static str,
    api: Api<ResourceSlice>,
    tx: mpsc::Sender<Observed>,
) {
    let key = |s: &ResourceSlice| cluster_key(&s.metadata);
    let upsert = move |s: ResourceSlice| {
        let name: Arc<str> = Arc::from(key(&s));
        let slice = read("ResourceSlice", &name, dra::Slice::from_api(&s));
        Upsert::Live(event(DraChange::SliceUpserted { name, slice }))
    };
    let deleted = |k: String| event(DraChange::SliceDeleted(Arc::from(k)));
    run_keyed(name, api, watch_config(), tx, key, upsert, deleted).await;
}

pub(super) async fn run_classes(
    name: &'static str,
    api: Api<DeviceClass>,
    tx: mpsc::Sender<Observed>,
) {
    let key = |c: &DeviceClass| cluster_key(&c.metadata);
    let upsert = move |c: DeviceClass| {
        let name: Arc<str> = Arc::from(key(&c));
        let class = read("DeviceClass", &name, dra::DeviceClass::from_api(&c));
        Upsert::Live(event(DraChange::ClassUpserted { name, class }))
    };
    let deleted = |k: String| event(DraChange::ClassDeleted(Arc::from(k)));
    run_keyed(name, api, watch_config(), tx, key, upsert, deleted).await;
}

pub(super) async fn run_taint_rules(
    name: &'static str,
    api: Api<DeviceTaintRule>,
    tx: mpsc::Sender<Observed>,
) {
    let key = |r: &DeviceTaintRule| cluster_key(&r.metadata);
    let upsert = move |r: DeviceTaintRule| {
        let name: Arc<str> = Arc::from(key(&r));
        let rule = read("DeviceTaintRule", &name, dra::TaintRule::from_api(&r));
        Upsert::Live(event(DraChange::TaintRuleUpserted { name, rule }))
    };
    let deleted = |k: String| event(DraChange::TaintRuleDeleted(Arc::from(k)));
    run_keyed(name, api, watch_config(), tx, key, upsert, deleted).await;
}

pub(super) async fn run_resource_claims(
    name: &'static str,
    api: Api<ResourceClaim>,
    tx: mpsc::Sender<Observed>,
) {
    fn key(c: &ResourceClaim) -> ResourceClaimKey {
        PodKey::of_meta(c.metadata.namespace.as_deref(), c.metadata.name.as_deref())
    }
    let upsert = |c: ResourceClaim| {
        let k = key(&c);
        let claim = read("ResourceClaim", &k.to_string(), dra::Claim::from_api(&c));
        Upsert::Live(event(DraChange::ClaimUpserted { key: k, claim }))
    };
    let deleted = |k| event(DraChange::ClaimDeleted(k));
    run_keyed(name, api, watch_config(), tx, key, upsert, deleted).await;
}
