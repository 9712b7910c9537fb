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
    /// A node added, or its labels, taints, capacity or images changed.
    Node = 0,
    /// A pod newly placed on a node (assumed or bound), or a placed pod's
    /// labels changed: what inter-pod affinity and topology spread count.
    PodPlaced = 1,
    /// A placed pod gone (deleted, finished, its reservation or binding
    /// given back): its node's resources, ports and volumes are free.
    PodRemoved = 2,
    /// A namespace added, relabelled or deleted (`namespaceSelector`).
    Namespace = 3,
    /// A storage object changed: claim, volume, class, CSINode, CSIDriver.
    Storage = 4,
    /// A gang's definition or a topology hierarchy changed.
    Gang = 5,
}

impl QueueingEvent {
    pub const ALL: [QueueingEvent; 6] = [
        QueueingEvent::Node,
        QueueingEvent::PodPlaced,
        QueueingEvent::PodRemoved,
        QueueingEvent::Namespace,
        QueueingEvent::Storage,
        QueueingEvent::Gang,
    ];
}

/// A set of [`QueueingEvent`]s (one bit each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EventSet(u8);

impl EventSet {
    pub const EMPTY: EventSet = EventSet(0);
    /// Every event: what a pod waits for when what rejected it is not known.
    pub const ALL: EventSet = EventSet::of(&QueueingEvent::ALL);

    pub const fn of(events: &[QueueingEvent]) -> EventSet {
        let mut bits = 0u8;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_hold_exactly_their_events() {
        let s = EventSet::of(&[QueueingEvent::Node, QueueingEvent::Storage]);
        for e in QueueingEvent::ALL {
            assert_eq!(
                s.contains(e),
                matches!(e, QueueingEvent::Node | QueueingEvent::Storage)
            );
            assert!(EventSet::ALL.contains(e));
            assert!(!EventSet::EMPTY.contains(e));
        }
        let u = s.union(EventSet::of(&[QueueingEvent::Gang]));
        assert!(u.contains(QueueingEvent::Gang) && u.contains(QueueingEvent::Node));
        assert!(EventSet::EMPTY.is_empty() && !u.is_empty());
    }
}
