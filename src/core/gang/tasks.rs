//! Per-task quorum (Volcano `spec.minTaskMember`): besides `min_count`
//! members in all, each named task needs its own minimum of members — pods
//! whose `volcano.sh/task-spec` annotation names the task.
//!
//! Counting walks the group's members, so it is only done for definitions
//! that name tasks, and only once the overall count is satisfied (the cheap
//! check comes first at the gate and at the barrier).

use std::collections::BTreeMap;

use crate::cache::Cache;
use crate::model::{GroupDef, PodSet, TASK_ANNOTATION};

/// The first task (in name order) with fewer than its minimum among `members`,
/// as `task "ps": 0/1`; `None` when every task has its minimum.
pub(super) fn shortfall<'a>(
    def: &GroupDef,
    cache: &Cache,
    members: impl IntoIterator<Item = &'a PodSet>,
) -> Option<String> {
    if def.min_task_members.is_empty() {
        return None;
    }
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    for key in members.into_iter().flatten() {
        let task = cache
            .pod(key)
            .and_then(|p| p.info.annotations.get(TASK_ANNOTATION));
        if let Some(t) = task {
            *counts.entry(t.as_str()).or_default() += 1;
        }
    }
    def.min_task_members.iter().find_map(|(task, min)| {
        let have = counts.get(task.as_str()).copied().unwrap_or(0);
        (have < *min).then(|| format!("task {task:?}: {have}/{min}"))
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::driver::fixtures::{SCHEDULER, gang_def, group_key, member};

    #[test]
    fn counts_members_per_task() {
        let mut cache = Cache::new([Arc::from(SCHEDULER)]);
        let g = group_key("job");
        let mut def = gang_def("job", 3, 1);
        assert_eq!(
            shortfall(&def, &cache, []),
            None,
            "no tasks, nothing to count"
        );
        def.min_task_members = [("ps".to_string(), 1), ("worker".to_string(), 2)].into();
        for (name, task) in [("w0", "worker"), ("w1", "worker"), ("x", "other")] {
            let mut p = member(name, &g, 100, 1);
            p.annotations.insert(TASK_ANNOTATION.into(), task.into());
            cache.upsert_pod(Arc::new(p));
        }
        let members = cache
            .group(&g)
            .map(|m| m.pending().clone())
            .unwrap_or_default();
        assert_eq!(
            shortfall(&def, &cache, [&members]).as_deref(),
            Some("task \"ps\": 0/1")
        );
        let mut ps = member("ps0", &g, 100, 1);
        ps.annotations.insert(TASK_ANNOTATION.into(), "ps".into());
        cache.upsert_pod(Arc::new(ps));
        let members = cache
            .group(&g)
            .map(|m| m.pending().clone())
            .unwrap_or_default();
        assert_eq!(shortfall(&def, &cache, [&members]), None);
    }
}
