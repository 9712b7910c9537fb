//! `TieBreaker`: the seeded random source that picks among equally scored nodes.
//!
//! kube-scheduler breaks ties uniformly at random so that identical nodes share
//! load. Muster does the same with a SplitMix64 generator whose state lives in
//! an atomic, so `Framework::schedule(&self, ..)` can draw without `&mut` and a
//! fixed seed makes every run — and every test — reproducible. A dependency such
//! as `rand_chacha` would buy nothing here: the draws are not security relevant
//! and SplitMix64 passes the statistical tests that matter for load spreading.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// SplitMix64's increment (the golden ratio in 64-bit fixed point).
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// Seed used by `TieBreaker::default()`.
pub const DEFAULT_TIE_BREAK_SEED: u64 = 0x6d75_7374_6572; // "muster"

pub struct TieBreaker {
    state: AtomicU64,
}

impl TieBreaker {
    pub fn new(seed: u64) -> Self {
        TieBreaker {
            state: AtomicU64::new(seed),
        }
    }

    /// The next 64 random bits. Deterministic for a given seed as long as draws
    /// are not raced from several threads (the scheduling loop is one task).
    pub fn next_u64(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`), by Lemire's multiply-shift; the bias is below
    /// `n / 2^64`, far under anything observable.
    pub fn below(&self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

impl Default for TieBreaker {
    fn default() -> Self {
        TieBreaker::new(DEFAULT_TIE_BREAK_SEED)
    }
}

/// A clone continues from the same point in the sequence, independently.
impl Clone for TieBreaker {
    fn clone(&self) -> Self {
        TieBreaker::new(self.state.load(Ordering::Relaxed))
    }
}

impl fmt::Debug for TieBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TieBreaker").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let (a, b) = (TieBreaker::new(7), TieBreaker::new(7));
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs[0], xs[1]);
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let t = TieBreaker::new(1);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[t.below(4) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }
}
