//! Queueing hints: the cluster events that can make a rejected pod
//! schedulable. Each plugin's registry row declares the events that can
//! lift its rejections (kube-scheduler's `EnqueueExtensions`
//! `EventsToRegister`); a pod parked as unschedulable waits for the events of
//! the plugins that rejected it, and the engine names the event each change
//! is, so a change moves only the pods it can help.

/// A kind of cluster change that can make a parked pod schedulable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum QueueingEvent {
    /// A node added.
    NodeAdded = 0,
    /// A node's labels changed (affinity, topology domains, volume zones).
    NodeLabels = 1,
    /// A node's taints or `spec.unschedulable` changed.
    NodeTaints = 2,
    /// A node's allocatable resources changed.
    NodeAllocatable = 3,
    /// A pod newly placed on a node (assumed or bound), or a placed pod's
    /// labels changed: what inter-pod affinity and topology spread count.
    PodPlaced = 4,
    /// A placed pod gone (deleted, finished, its reservation or binding
    /// given back): its node's resources, ports and volumes are free.
    PodRemoved = 5,
    /// A namespace added, relabelled or deleted (`namespaceSelector`).
    Namespace = 6,
    /// A storage object changed: claim, volume, class, CSINode, CSIDriver.
    Storage = 7,
    /// A gang's definition or a topology hierarchy changed.
    Gang = 8,
    /// A ResourceClaim created, changed (allocated, deallocated, reserved)
    /// or deleted.
    ResourceClaim = 9,
    /// A ResourceSlice or DeviceClass changed: devices published,
    /// withdrawn or reclassified.
    Devices = 10,
}

impl QueueingEvent {
    pub const ALL: [QueueingEvent; 11] = [
        QueueingEvent::NodeAdded,
        QueueingEvent::NodeLabels,
        QueueingEvent::NodeTaints,
        QueueingEvent::NodeAllocatable,
        QueueingEvent::PodPlaced,
        QueueingEvent::PodRemoved,
        QueueingEvent::Namespace,
        QueueingEvent::Storage,
        QueueingEvent::Gang,
        QueueingEvent::ResourceClaim,
        QueueingEvent::Devices,
    ];
}

/// A set of [`QueueingEvent`]s (one bit each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EventSet(u16);

impl EventSet {
    pub const EMPTY: EventSet = EventSet(0);
    /// Every event: what a pod waits for when what rejected it is not known.
    pub const ALL: EventSet = EventSet::of(&QueueingEvent::ALL);
    /// Every change to a node that can add room: what a pod waits for when
    /// any of them may help (capacity, domains, taints).
    pub const ANY_NODE: EventSet = EventSet::of(&[
        QueueingEvent::NodeAdded,
        QueueingEvent::NodeLabels,
        QueueingEvent::NodeTaints,
        QueueingEvent::NodeAllocatable,
    ]);

    pub const fn of(events: &[QueueingEvent]) -> EventSet {
        let mut bits = 0u16;
        let mut i = 0;
        while i < events.len() {
            bits |= 1 << events[i] as u8;
            i += 1;
        }
        EventSet(bits)
    }

    pub const fn union(self, other: EventSet) -> EventSet {
        EventSet(self.0 | other.0)
    }

    pub fn contains(self, event: QueueingEvent) -> bool {
        self.0 & (1 << event as u8) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The events a node update is: what changed between `old` (`None`: the
    /// node is new) and `new`. A change to none of labels, taints,
    /// schedulability and allocatable (a heartbeat, new images) is no event:
    /// nothing a plugin rejects on moved.
    pub fn of_node_update(
        old: Option<&crate::model::NodeInfo>,
        new: &crate::model::NodeInfo,
    ) -> EventSet {
        let Some(old) = old else {
            return EventSet::of(&[QueueingEvent::NodeAdded]);
        };
        let mut events = EventSet::EMPTY;
        if old.labels != new.labels {
            events = events.union(EventSet::of(&[QueueingEvent::NodeLabels]));
        }
        if old.taints != new.taints || old.unschedulable != new.unschedulable {
            events = events.union(EventSet::of(&[QueueingEvent::NodeTaints]));
        }
        if old.allocatable != new.allocatable {
            events = events.union(EventSet::of(&[QueueingEvent::NodeAllocatable]));
        }
        events
    }

    /// Whether the sets share an event.
    pub fn intersects(self, other: EventSet) -> bool {
        self.0 & other.0 != 0
    }
}

impl From<QueueingEvent> for EventSet {
    fn from(e: QueueingEvent) -> Self {
        EventSet::of(&[e])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_hold_exactly_their_events() {
        let s = EventSet::of(&[QueueingEvent::NodeLabels, QueueingEvent::Storage]);
        for e in QueueingEvent::ALL {
            assert_eq!(
                s.contains(e),
                matches!(e, QueueingEvent::NodeLabels | QueueingEvent::Storage)
            );
            assert!(EventSet::ALL.contains(e));
            assert!(!EventSet::EMPTY.contains(e));
        }
        let u = s.union(EventSet::of(&[QueueingEvent::Gang]));
        assert!(u.contains(QueueingEvent::Gang) && u.contains(QueueingEvent::NodeLabels));
        assert!(EventSet::EMPTY.is_empty() && !u.is_empty());
    }

    #[test]
    fn a_node_update_is_the_events_of_what_changed() {
        use crate::model::{NodeInfo, Resources};
        let node = NodeInfo::new("n", Resources::default());
        assert_eq!(
            EventSet::of_node_update(None, &node),
            EventSet::of(&[QueueingEvent::NodeAdded])
        );
        assert!(
            EventSet::of_node_update(Some(&node), &node).is_empty(),
            "a heartbeat"
        );
        let mut relabelled = node.clone();
        relabelled.labels.insert("zone".into(), "a".into());
        relabelled.unschedulable = true;
        assert_eq!(
            EventSet::of_node_update(Some(&node), &relabelled),
            EventSet::of(&[QueueingEvent::NodeLabels, QueueingEvent::NodeTaints])
        );
        let mut images = node.clone();
        images.images.push(("busybox".into(), 1));
        assert!(EventSet::of_node_update(Some(&node), &images).is_empty());
    }
}
