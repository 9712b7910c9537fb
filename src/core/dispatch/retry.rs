//! How often and how late a failed call is tried again.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The wait after the first failure; doubled after each further one.
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            max_attempts: 5,
            initial: Duration::from_millis(100),
            max: Duration::from_secs(5),
        }
    }
}

impl Backoff {
    /// The wait before the attempt after `attempt` (1-based) failed
    /// transiently, or `None` when no attempt is left.
    pub fn delay_after(&self, attempt: u32) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        Some(self.initial.saturating_mul(factor).min(self.max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_stops() {
        let b = Backoff {
            max_attempts: 40,
            ..Backoff::default()
        };
        assert_eq!(b.delay_after(1), Some(Duration::from_millis(100)));
        assert_eq!(b.delay_after(2), Some(Duration::from_millis(200)));
        assert_eq!(b.delay_after(7), Some(Duration::from_secs(5)));
        assert_eq!(b.delay_after(39), Some(Duration::from_secs(5)));
        assert_eq!(b.delay_after(40), None);
        assert_eq!(Backoff::default().delay_after(5), None);
    }
}
