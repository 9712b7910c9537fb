//! Builders for nodes, pods and group definitions used by tests, the
//! deterministic driver and the benchmarks. Everything lives in namespace
//! `default` and is scheduled by `SCHEDULER` unless changed afterwards.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::{
    DefinitionKey, GroupDef, GroupKey, GroupMembership, GroupSource, NodeInfo, PodInfo, PodKey,
    PodPhase, Resources,
};

/// The scheduler name the fixtures' pods ask for.
pub const SCHEDULER: &str = "muster";

const GIB: i64 = 1 << 30;

/// Resources with CPU in millicores and memory in GiB.
pub fn resources(milli_cpu: i64, memory_gib: i64) -> Resources {
    Resources {
        milli_cpu,
        memory: memory_gib * GIB,
        ..Resources::default()
    }
}

/// A node with the given CPU (millicores) and memory (GiB) and room for 110 pods.
pub fn node(name: &str, milli_cpu: i64, memory_gib: i64) -> NodeInfo {
    let mut allocatable = resources(milli_cpu, memory_gib);
    allocatable.pods = 110;
    NodeInfo::new(name, allocatable)
}

/// A pending ordinary pod requesting CPU (millicores) and memory (GiB).
pub fn pod(name: &str, milli_cpu: i64, memory_gib: i64) -> PodInfo {
    let mut requests = resources(milli_cpu, memory_gib);
    requests.pods = 1;
    PodInfo {
        key: PodKey::new("default", name),
        uid: Arc::from(format!("uid-{name}")),
        scheduler_name: Arc::from(SCHEDULER),
        node_name: None,
        phase: PodPhase::Pending,
        deleting: false,
        scheduling_gates: Arc::from([]),
        priority: 0,
        priority_class_name: None,
        preemption_policy: crate::model::PreemptionPolicy::PreemptLowerPriority,
        active_deadline_seconds: None,
        created_ms: 0,
        started_ms: 0,
        nominated_node: None,
        non_zero_milli_cpu: milli_cpu.max(crate::model::DEFAULT_MILLI_CPU_REQUEST),
        non_zero_memory: requests.memory.max(crate::model::DEFAULT_MEMORY_REQUEST),
        requests,
        constraints: Default::default(),
        images: Arc::default(),
        labels: Default::default(),
        annotations: BTreeMap::new(),
        group: GroupMembership::None,
    }
}

/// A pending member of `group`.
pub fn member(name: &str, group: &GroupKey, milli_cpu: i64, memory_gib: i64) -> PodInfo {
    let mut p = pod(name, milli_cpu, memory_gib);
    p.group = GroupMembership::Member(group.clone());
    p
}

/// The definition key of a `PodGroup` named `name` in `default`.
pub fn def_key(name: &str) -> DefinitionKey {
    DefinitionKey::new("default", GroupSource::PodGroup, name)
}

/// The group of the `PodGroup` named `name` in `default`.
pub fn group_key(name: &str) -> GroupKey {
    GroupKey::new(def_key(name))
}

/// A gang definition for `PodGroup` `name`.
pub fn gang_def(name: &str, min_count: u32, created_ms: i64) -> GroupDef {
    GroupDef::gang(def_key(name), min_count, created_ms)
}

/// The group of the Kueue pod group named `name` in `default` (no
/// definition object: the engine synthesizes it from the members).
pub fn kueue_group_key(name: &str) -> GroupKey {
    GroupKey::new(DefinitionKey::new("default", GroupSource::Kueue, name))
}

/// A pending member of the Kueue pod group `group` whose members announce
/// `total` as the group's size, as the informer reports it.
pub fn kueue_member(name: &str, group: &str, total: u32, milli_cpu: i64) -> PodInfo {
    use crate::dialects::kueue::{GROUP_NAME_LABEL, TOTAL_COUNT_ANNOTATION};
    let mut p = member(name, &kueue_group_key(group), milli_cpu, 1);
    Arc::make_mut(&mut p.labels).insert(GROUP_NAME_LABEL.into(), group.into());
    p.annotations
        .insert(TOTAL_COUNT_ANNOTATION.into(), total.to_string());
    p
}

/// Shorthand for an `Arc` of anything.
pub fn arc<T>(v: T) -> Arc<T> {
    Arc::new(v)
}
