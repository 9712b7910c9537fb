//! kube-scheduler's `DefaultNormalizeScore`: scale scores so the highest becomes
//! `MAX_NODE_SCORE`, optionally reversed (fewer is better).

use super::resource_allocation::mul_div;
use crate::framework::MAX_NODE_SCORE;

pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max <= 0 {
        // All zero: nothing distinguishes the nodes. Reversed, zero is the best.
        if reverse {
            scores.fill(MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        // Scores may sum tenant weights: scale without overflow.
        let scaled = mul_div(*s, MAX_NODE_SCORE, max);
        *s = if reverse {
            MAX_NODE_SCORE - scaled
        } else {
            scaled
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_to_max() {
        let mut s = [0, 2, 4, 3];
        default_normalize(&mut s, false);
        assert_eq!(s, [0, 50, 100, 75]);
        let mut s = [0, 2, 4, 3];
        default_normalize(&mut s, true);
        assert_eq!(s, [100, 50, 0, 25]);
    }

    #[test]
    fn all_zero() {
        let mut s = [0, 0];
        default_normalize(&mut s, false);
        assert_eq!(s, [0, 0]);
        default_normalize(&mut s, true);
        assert_eq!(s, [100, 100]);
    }
}
