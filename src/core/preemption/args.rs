//! `DefaultPreemptionArgs`: how many candidate nodes a preemption looks at
//! before choosing (kube-scheduler's defaults and validation).

use serde::Deserialize;

use crate::framework::args::{self, ConfigError};

pub const NAME: &str = "DefaultPreemption";

/// The plugin's arguments, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreemptionArgs {
    /// `minCandidateNodesPercentage` (0–100, default 10).
    pub min_candidate_nodes_percentage: u32,
    /// `minCandidateNodesAbsolute` (default 100).
    pub min_candidate_nodes_absolute: u32,
}

impl Default for PreemptionArgs {
    fn default() -> Self {
        PreemptionArgs {
            min_candidate_nodes_percentage: 10,
            min_candidate_nodes_absolute: 100,
        }
    }
}

impl PreemptionArgs {
    /// How many candidates to find among `nodes` potential nodes before
    /// choosing: the percentage of them, at least the absolute number, at
    /// most all of them (upstream's `calculateNumCandidates`).
    pub fn num_candidates(&self, nodes: usize) -> usize {
        let by_share = nodes.saturating_mul(self.min_candidate_nodes_percentage as usize) / 100;
        by_share
            .max(self.min_candidate_nodes_absolute as usize)
            .min(nodes)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireArgs {
    min_candidate_nodes_percentage: Option<i64>,
    min_candidate_nodes_absolute: Option<i64>,
}

/// Decodes and validates `pluginConfig[].args` for DefaultPreemption.
pub fn decode_args(path: &str, value: serde_json::Value) -> Result<PreemptionArgs, ConfigError> {
    let raw: WireArgs = args::decode(path, value)?;
    let d = PreemptionArgs::default();
    let pct = raw
        .min_candidate_nodes_percentage
        .unwrap_or(i64::from(d.min_candidate_nodes_percentage));
    let abs = raw
        .min_candidate_nodes_absolute
        .unwrap_or(i64::from(d.min_candidate_nodes_absolute));
    if !(0..=100).contains(&pct) {
        return Err(ConfigError::at(
            format!("{path}.minCandidateNodesPercentage"),
            format!("not in valid range [0, 100], got {pct}"),
        ));
    }
    let abs = u32::try_from(abs).map_err(|_| {
        ConfigError::at(
            format!("{path}.minCandidateNodesAbsolute"),
            format!("not in valid range [0, {}], got {abs}", u32::MAX),
        )
    })?;
    if pct == 0 && abs == 0 {
        return Err(ConfigError::at(
            path,
            "minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero",
        ));
    }
    Ok(PreemptionArgs {
        min_candidate_nodes_percentage: pct as u32,
        min_candidate_nodes_absolute: abs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn candidates_follow_upstream_arithmetic() {
        let d = PreemptionArgs::default();
        // 10% of 5,000 is 500; of 50 nodes, the absolute 100 caps at 50.
        assert_eq!(d.num_candidates(5000), 500);
        assert_eq!(d.num_candidates(50), 50);
        assert_eq!(d.num_candidates(600), 100);
        let a = PreemptionArgs {
            min_candidate_nodes_percentage: 0,
            min_candidate_nodes_absolute: 3,
        };
        assert_eq!(a.num_candidates(10), 3);
        assert_eq!(a.num_candidates(0), 0);
    }

    #[test]
    fn arguments_are_validated_as_upstream() {
        assert_eq!(
            decode_args("a", json!({})).unwrap(),
            PreemptionArgs::default()
        );
        let a = decode_args(
            "a",
            json!({"minCandidateNodesPercentage": 50, "minCandidateNodesAbsolute": 0}),
        )
        .unwrap();
        assert_eq!(a.min_candidate_nodes_percentage, 50);
        for bad in [
            json!({"minCandidateNodesPercentage": 101}),
            json!({"minCandidateNodesPercentage": -1}),
            json!({"minCandidateNodesAbsolute": -1}),
            json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}),
            json!({"bogus": 1}),
        ] {
            assert!(decode_args("a", bad.clone()).is_err(), "{bad}");
        }
    }
}
