//! A bounded log of which node-table entries changed, so memos over every
//! node (a gang's room per topology domain) redo only what changed since
//! they last looked instead of walking all nodes per gang (that walk made
//! each gang cost O(nodes)).
//!
//! Positions are numbered by a running sequence; a reader keeps the sequence
//! it has seen and asks for what came after. Structural changes (a node added
//! or removed: indices move) are not logged by index: they cut the log
//! (`restructured`), so every reader recomputes everything, as it must.

/// Entries kept before the oldest half is dropped; a reader further behind
/// than that recomputes everything.
const CAP: usize = 1 << 16;

#[derive(Debug)]
pub struct NodeChanges {
    /// Node indices in the order they changed (repeats allowed).
    log: Vec<usize>,
    /// The sequence number of `log[0]`.
    start: u64,
    /// Which log this is: a memo filled from one cache's table must not be
    /// updated from another's (a copy diverges from its original).
    id: u64,
}

impl Default for NodeChanges {
    fn default() -> Self {
        NodeChanges {
            log: Vec::new(),
            start: 0,
            id: next_id(),
        }
    }
}

/// A copy is a different log: it gets its own id.
impl Clone for NodeChanges {
    fn clone(&self) -> Self {
        NodeChanges {
            log: self.log.clone(),
            start: self.start,
            id: next_id(),
        }
    }
}

fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl NodeChanges {
    /// This log's identity (distinct for every log and every copy).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Node `index` changed (its accounting or its spec).
    pub fn record(&mut self, index: usize) {
        if self.log.len() >= CAP {
            let dropped = CAP / 2;
            self.log.drain(..dropped);
            self.start = self.start.saturating_add(dropped as u64);
        }
        self.log.push(index);
    }

    /// Nodes were added or removed, so indices moved: no reader can catch
    /// up by index any more. The log starts over past a gap in the sequence,
    /// where every earlier sequence falls.
    pub fn restructured(&mut self) {
        self.start = self.seq().saturating_add(1);
        self.log.clear();
    }

    /// The sequence number of the next change: what a reader has seen once
    /// it has caught up.
    pub fn seq(&self) -> u64 {
        self.start.saturating_add(self.log.len() as u64)
    }

    /// The nodes changed since `seq` (repeats possible), or `None` when the
    /// log no longer reaches back that far.
    pub fn since(&self, seq: u64) -> Option<&[usize]> {
        let skip = usize::try_from(seq.checked_sub(self.start)?).ok()?;
        self.log.get(skip..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_sees_what_changed_after_its_sequence() {
        let mut c = NodeChanges::default();
        assert_eq!(c.since(0), Some(&[][..]));
        c.record(3);
        let seen = c.seq();
        c.record(7);
        c.record(3);
        assert_eq!(c.since(seen), Some(&[7, 3][..]));
        assert_eq!(c.since(c.seq()), Some(&[][..]));
        assert_eq!(c.since(c.seq() + 1), None, "a sequence from the future");
    }

    #[test]
    fn a_reader_left_behind_by_trimming_must_recompute() {
        let mut c = NodeChanges::default();
        for i in 0..CAP + 1 {
            c.record(i);
        }
        assert_eq!(c.since(0), None);
        let recent = c.seq() - 1;
        assert_eq!(c.since(recent), Some(&[CAP][..]));
        assert_eq!(c.log.len(), CAP / 2 + 1, "bounded");
    }

    #[test]
    fn a_structural_change_leaves_every_reader_behind() {
        let mut c = NodeChanges::default();
        c.record(1);
        let (caught_up, behind) = (c.seq(), c.seq() - 1);
        c.restructured();
        assert_eq!(c.since(caught_up), None);
        assert_eq!(c.since(behind), None);
        let after = c.seq();
        c.record(2);
        assert_eq!(c.since(after), Some(&[2][..]));
    }

    #[test]
    fn every_log_and_every_copy_has_its_own_id() {
        let a = NodeChanges::default();
        let b = NodeChanges::default();
        assert_ne!(a.id(), b.id());
        assert_ne!(a.clone().id(), a.id());
    }
}
