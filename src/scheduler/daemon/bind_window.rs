//! How many bindings the scheduling loop lets wait on the API server.
//!
//! When pods arrive faster than the API server takes bindings, a loop that
//! kept placing would queue the difference as writes: at 15,000 nodes and
//! 100,000 pods the write backlog reached ~47,000 calls, each holding its
//! call, its per-object entry and its ready-list id. Placing no faster than
//! bindings finish keeps that memory bounded and changes nothing else: the
//! pods wait in the scheduling queue instead (where they already are), a
//! gang cycle is never cut in half (the window is checked between cycles,
//! and a barrier gang's members are popped together, see
//! `SchedulingQueue::gang_in_progress`), and a gang not yet attempted has
//! not started its timeout.

/// Bindings submitted to the writer whose outcome has not come back, and
/// how many may be.
#[derive(Debug, Clone)]
pub struct BindWindow {
    limit: usize,
    outstanding: usize,
}

/// Bindings allowed outstanding per binding allowed in flight: enough that
/// the writer's bindings lane stays full across a scheduling turn.
pub const WINDOW_PER_IN_FLIGHT: usize = 16;

impl BindWindow {
    /// A window for a writer with `in_flight` bindings at once.
    pub fn for_writer(in_flight: usize) -> Self {
        BindWindow {
            limit: in_flight.max(1).saturating_mul(WINDOW_PER_IN_FLIGHT),
            outstanding: 0,
        }
    }

    /// `n` bindings were handed to the writer.
    pub fn submitted(&mut self, n: usize) {
        self.outstanding = self.outstanding.saturating_add(n);
    }

    /// One binding's outcome came back (success or failure).
    pub fn finished(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
    }

    /// How many more pods may be placed before the loop waits for outcomes.
    pub fn room(&self) -> usize {
        self.limit.saturating_sub(self.outstanding)
    }

    #[cfg(test)]
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_closes_at_its_limit_and_reopens_as_outcomes_return() {
        let mut w = BindWindow::for_writer(4);
        assert_eq!(w.room(), 64);
        w.submitted(60);
        assert_eq!(w.room(), 4);
        w.submitted(10);
        assert_eq!(
            w.room(),
            0,
            "a gang cycle may overshoot; the room never wraps"
        );
        for _ in 0..7 {
            w.finished();
        }
        assert_eq!((w.outstanding(), w.room()), (63, 1));
    }

    #[test]
    fn counts_saturate() {
        let mut w = BindWindow::for_writer(0);
        w.finished();
        assert_eq!(w.outstanding(), 0, "an unexpected outcome never wraps");
        w.submitted(usize::MAX);
        w.submitted(1);
        assert_eq!(w.room(), 0);
    }
}
