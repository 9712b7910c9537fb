//! A bounded log of which node-table entries changed, so memos over every
//! node (a gang's room per topology domain) redo only what changed since
//! they last looked instead of walking all nodes per gang (issue 18: that
//! walk made each gang cost O(nodes)).
//!
//! Positions are numbered by a running sequence; a reader keeps the sequence
//! it has seen and asks for what came after. Structural changes (a node added
//! or removed: indices move) are not logged here: they bump
//! `Cache::labels_generation`, on which such memos rebuild anyway.

/// Entries kept before the oldest half is dropped; a reader further behind
/// than that recomputes everything.
const CAP: usize = 1 << 16;

#[derive(Debug, Clone, Default)]
pub struct NodeChanges {
    /// Node indices in the order they changed (repeats allowed).
    log: Vec<usize>,
    /// The sequence number of `log[0]`.
    start: u64,
}

impl NodeChanges {
    /// Node `index` changed (its accounting or its spec).
    pub fn record(&mut self, index: usize) {
        if self.log.len() >= CAP {
            let drop = CAP / 2;
            self.log.drain(..drop);
            self.start = self.start.saturating_add(drop as u64);
        }
        self.log.push(index);
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
}
