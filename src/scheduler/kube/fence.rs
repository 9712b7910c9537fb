//! Leader fencing (gang-semantics I7): no API write leaves a replica whose
//! last successful lease renewal is older than `renewDeadline` by its own
//! monotonic clock.
//!
//! The elector records the moment it *sent* each renewal that succeeded; the
//! executor checks the fence immediately before every API attempt. A standby
//! takes the lease only after it has seen our last record unchanged for
//! `leaseDuration`, which is longer than `renewDeadline`, so every write we
//! still let through lands before anyone else may lead. A process frozen
//! past that (SIGSTOP, a stalled VM) wakes up with its renewal too old: its
//! queued and in-flight writes are dropped at the fence, and the loop stands
//! down. kube-scheduler does not promise this; Muster does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Nanoseconds since `origin` of the last renewal, or `NEVER`.
const NEVER: u64 = u64::MAX;

#[derive(Debug)]
pub struct Fence {
    origin: Instant,
    renewed: AtomicU64,
    /// `None`: leader election is off, every write is allowed.
    renew_deadline: Option<Duration>,
}

impl Fence {
    /// A fence that never closes (leader election disabled).
    pub fn open() -> Self {
        Fence {
            origin: Instant::now(),
            renewed: AtomicU64::new(NEVER),
            renew_deadline: None,
        }
    }

    /// A fence closed until the first successful renewal.
    pub fn new(renew_deadline: Duration) -> Self {
        Fence {
            origin: Instant::now(),
            renewed: AtomicU64::new(NEVER),
            renew_deadline: Some(renew_deadline),
        }
    }

    /// A renewal sent at `sent_at` succeeded.
    pub fn renewed(&self, sent_at: Instant) {
        let nanos = sent_at.saturating_duration_since(self.origin).as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(NEVER - 1).min(NEVER - 1);
        self.renewed.fetch_max_or_set(nanos);
    }

    /// This replica stepped down or lost the lease: close at once.
    pub fn revoke(&self) {
        self.renewed.store(NEVER, Ordering::SeqCst);
    }

    /// Whether a write may leave now.
    pub fn allows(&self, now: Instant) -> bool {
        let Some(deadline) = self.renew_deadline else {
            return true;
        };
        let renewed = self.renewed.load(Ordering::SeqCst);
        if renewed == NEVER {
            return false;
        }
        let Some(at) = self.origin.checked_add(Duration::from_nanos(renewed)) else {
            return false;
        };
        now.saturating_duration_since(at) < deadline
    }
}

/// `fetch_max`, except that a revoked fence (`NEVER`) is replaced.
trait FetchMaxOrSet {
    fn fetch_max_or_set(&self, v: u64);
}

impl FetchMaxOrSet for AtomicU64 {
    fn fetch_max_or_set(&self, v: u64) {
        let _ = self.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |cur| {
            (cur == NEVER || v > cur).then_some(v)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_fence_always_allows() {
        assert!(Fence::open().allows(Instant::now()));
    }

    #[test]
    fn closed_until_renewed_and_after_the_deadline() {
        let f = Fence::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert!(!f.allows(t0), "never renewed");
        f.renewed(t0);
        assert!(f.allows(t0 + Duration::from_secs(9)));
        assert!(
            !f.allows(t0 + Duration::from_secs(10)),
            "frozen past renewDeadline"
        );
        // An older renewal reported late does not move the fence back.
        f.renewed(t0 + Duration::from_secs(5));
        f.renewed(t0 + Duration::from_secs(1));
        assert!(f.allows(t0 + Duration::from_secs(14)));
        f.revoke();
        assert!(!f.allows(t0 + Duration::from_secs(6)), "stepped down");
        f.renewed(t0 + Duration::from_secs(7));
        assert!(f.allows(t0 + Duration::from_secs(8)), "leading again");
    }
}
