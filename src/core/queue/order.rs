//! The active queue's order (gang-semantics §3): priority (higher first), then
//! the group's creation time, then the group key, then the pod's creation time,
//! then the pod key. An ordinary pod is its own group, so members of one gang
//! are popped consecutively and an older gang is not starved by a younger one.

use std::cmp::Ordering;

use crate::model::{GroupKey, PodInfo, PodKey};

/// What a pod is ordered with: its group, or itself when it has none.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueueGroup {
    Group(GroupKey),
    Pod(PodKey),
}

/// A pod's position in the active queue. `Ord` is "greater pops first", which
/// is what the max-heap in `priority-queue` wants.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OrderKey {
    pub priority: i32,
    pub group_created_ms: i64,
    pub group: QueueGroup,
    pub pod_created_ms: i64,
    pub pod: PodKey,
}

impl OrderKey {
    /// The order of a pod treated as its own group.
    pub fn plain(pod: &PodInfo) -> Self {
        OrderKey {
            priority: pod.priority,
            group_created_ms: pod.created_ms,
            group: QueueGroup::Pod(pod.key.clone()),
            pod_created_ms: pod.created_ms,
            pod: pod.key.clone(),
        }
    }

    /// The order of a member of `group`, created at `group_created_ms`.
    pub fn member(pod: &PodInfo, group: &GroupKey, group_created_ms: i64) -> Self {
        OrderKey {
            priority: pod.priority,
            group_created_ms,
            group: QueueGroup::Group(group.clone()),
            pod_created_ms: pod.created_ms,
            pod: pod.key.clone(),
        }
    }
}

impl Ord for OrderKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.group_created_ms.cmp(&self.group_created_ms))
            .then_with(|| other.group.cmp(&self.group))
            .then_with(|| other.pod_created_ms.cmp(&self.pod_created_ms))
            .then_with(|| other.pod.cmp(&self.pod))
    }
}

impl PartialOrd for OrderKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::fixtures::{group_key, member, pod};

    #[test]
    fn priority_then_group_age_then_group_then_pod() {
        let (old, young) = (group_key("old"), group_key("young"));
        let mut high = pod("high", 1, 1);
        high.priority = 10;
        high.created_ms = 900;
        let mut early = member("o1", &old, 1, 1);
        early.created_ms = 60;
        let o1 = OrderKey::member(&early, &old, 100);
        let mut late = member("o0", &old, 1, 1);
        late.created_ms = 50;
        let o0 = OrderKey::member(&late, &old, 100);
        let y = OrderKey::member(&member("y", &young, 1, 1), &young, 200);
        let mut plain = pod("plain", 1, 1);
        plain.created_ms = 150;
        let mut keys = [
            y.clone(),
            OrderKey::plain(&plain),
            o1.clone(),
            OrderKey::plain(&high),
            o0.clone(),
        ];
        keys.sort_by(|a, b| b.cmp(a));
        let names: Vec<_> = keys.iter().map(|k| k.pod.name.to_string()).collect();
        assert_eq!(names, ["high", "o0", "o1", "plain", "y"]);
    }
}
