//! How many feasible nodes to look for before scoring (`percentageOfNodesToScore`).

/// Below this many nodes every node is evaluated (`minFeasibleNodesToFind`).
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// Floor of the adaptive percentage (`minFeasibleNodesPercentageToFind`).
pub const MIN_FEASIBLE_NODES_PERCENTAGE: usize = 5;

/// kube-scheduler's `numFeasibleNodesToFind`: all nodes below 100; otherwise the
/// configured percentage, or when unset (or 0) the adaptive `50 - nodes/125`
/// floored at 5%; never fewer than 100. 100% (or more) means every node.
pub fn num_feasible_nodes_to_find(percentage: Option<u32>, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let percentage = match percentage {
        Some(p) if p > 0 => p as usize,
        _ => 50usize
            .saturating_sub(num_all_nodes / 125)
            .max(MIN_FEASIBLE_NODES_PERCENTAGE),
    };
    if percentage >= 100 {
        return num_all_nodes;
    }
    (num_all_nodes * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_clusters_use_every_node() {
        assert_eq!(num_feasible_nodes_to_find(None, 0), 0);
        assert_eq!(num_feasible_nodes_to_find(None, 99), 99);
        assert_eq!(num_feasible_nodes_to_find(Some(10), 99), 99);
    }

    #[test]
    fn adaptive_default() {
        // 50 - 100/125 = 50% of 100 = 50, raised to the 100 minimum.
        assert_eq!(num_feasible_nodes_to_find(None, 100), 100);
        // 50 - 1000/125 = 42%.
        assert_eq!(num_feasible_nodes_to_find(None, 1000), 420);
        // 50 - 5000/125 = 10%.
        assert_eq!(num_feasible_nodes_to_find(None, 5000), 500);
        // 50 - 6000/125 = 2% -> floor 5%.
        assert_eq!(num_feasible_nodes_to_find(None, 6000), 300);
        assert_eq!(num_feasible_nodes_to_find(Some(0), 5000), 500);
    }

    #[test]
    fn configured_percentage() {
        assert_eq!(num_feasible_nodes_to_find(Some(100), 5000), 5000);
        assert_eq!(num_feasible_nodes_to_find(Some(30), 5000), 1500);
        assert_eq!(num_feasible_nodes_to_find(Some(1), 5000), 100);
        assert_eq!(num_feasible_nodes_to_find(Some(150), 5000), 5000);
    }
}
