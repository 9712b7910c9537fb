//! Saturating instant arithmetic. A duration read from an object or the
//! configuration may be anything up to `Duration::MAX`, and `Instant + Duration`
//! panics on overflow: every deadline the core computes goes through here so
//! no value can take the scheduler down (docs/reliability.md, "Tenant input").

use std::time::{Duration, Instant};

/// About a century: what "never" means for a deadline that would not fit.
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// `now + d`, or a century from now when that does not fit an `Instant`
/// (which is platform-defined), or `now` itself as a last resort.
pub fn after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(FAR.min(d)))
        .unwrap_or(now)
}

/// Whether `since + d` has been reached at `now`, without computing an
/// instant that may not exist.
pub fn elapsed(since: Instant, d: Duration, now: Instant) -> bool {
    now.checked_duration_since(since)
        .is_some_and(|gone| gone >= d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates_instead_of_panicking() {
        let now = Instant::now();
        assert_eq!(
            after(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        assert!(after(now, Duration::MAX) >= now + Duration::from_secs(365 * 24 * 3600));
        assert!(after(now, Duration::from_secs(i64::MAX as u64)) > now);
        assert!(!elapsed(now, Duration::MAX, now + Duration::from_secs(1)));
        assert!(elapsed(
            now,
            Duration::from_secs(1),
            now + Duration::from_secs(1)
        ));
        assert!(!elapsed(now + Duration::from_secs(2), Duration::ZERO, now));
    }
}
