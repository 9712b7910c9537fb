use std::sync::Arc;

use super::*;
use crate::cache::Cache;
use crate::driver::fixtures::{SCHEDULER, arc, node};
use crate::model::NodeInfo;

fn state(name: &str, labels: &[(&str, &str)]) -> NodeState {
    let mut info = NodeInfo::new(name, Default::default());
    for (k, v) in labels {
        info.labels.insert(k.to_string(), v.to_string());
    }
    NodeState::new(Arc::new(info))
}

#[test]
fn numbers_keys_and_values_densely_and_decodes_back() {
    let mut nodes = vec![
        state("a", &[("zone", "z1"), ("host", "a")]),
        state("b", &[("zone", "z1"), ("host", "b"), ("rack", "r")]),
        state("c", &[]),
    ];
    let t = LabelIds::of_nodes(&mut nodes);
    assert_ne!(t.stamp(), 0);
    let (host, zone) = (t.key("host").unwrap(), t.key("zone").unwrap());
    assert_eq!(t.key("missing"), None);
    assert_eq!(t.value_count(zone), 1, "z1 numbered once");
    assert_eq!(t.value_count(host), 2);
    assert_eq!((t.len(), t.live_pairs()), (4, 5));
    for n in &nodes {
        assert!(t.numbered(&n.label_ids));
        assert_eq!(t.decode(&n.label_ids).as_ref(), Some(&n.info.labels));
        let keys: Vec<u32> = n.label_ids.pairs().iter().map(|(k, _)| *k).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "sorted by key id");
    }
    assert_eq!(nodes[0].label_ids.value(zone), t.value(zone, "z1"));
    assert_eq!(nodes[1].label_ids.value(host), t.value(host, "b"));
    assert_eq!(nodes[2].label_ids.value(zone), None);
    assert_eq!(pack(1, 2), (1 << 32) | 2);
}

#[test]
fn unmaintained_tables_and_clones_number_nothing_of_others() {
    let mut n = state("a", &[("zone", "z1")]);
    let mut unmaintained = LabelIds::default();
    unmaintained.assign(&mut n);
    assert_eq!(n.label_ids.stamp(), 0, "hand-built facts leave strings");
    assert!(!unmaintained.numbered(&n.label_ids));

    let mut t = LabelIds::maintained();
    t.assign(&mut n);
    assert!(t.numbered(&n.label_ids));
    let copy = t.clone();
    assert!(!copy.numbered(&n.label_ids), "a clone has its own stamp");
    assert_eq!(copy.key("zone"), t.key("zone"));
}

#[test]
fn a_relabel_voids_the_ids_until_renumbered() {
    let mut t = LabelIds::maintained();
    let mut n = state("a", &[("zone", "z1")]);
    t.assign(&mut n);
    let mut info = (*n.info).clone();
    info.allocatable.pods = 7;
    n.set_info(Arc::new(info.clone()));
    assert!(t.numbered(&n.label_ids), "same labels keep their ids");
    info.labels.insert("zone".into(), "z2".into());
    t.release(&n);
    n.set_info(Arc::new(info));
    assert_eq!(n.label_ids.stamp(), 0);
    t.assign(&mut n);
    assert_eq!(t.decode(&n.label_ids), Some(n.info.labels.clone()));
    assert_eq!((t.len(), t.live_pairs()), (2, 1), "z1 stays numbered");
}

#[test]
fn dead_values_past_the_slack_rebuild_the_table() {
    let mut t = LabelIds::maintained_with_slack(0);
    let mut nodes: Vec<NodeState> = (0..3)
        .map(|i| state(&format!("n{i}"), &[("host", &format!("n{i}"))]))
        .collect();
    for n in &mut nodes {
        t.assign(n);
    }
    let old = t.stamp();
    // Churn: each replacement leaves a dead value behind.
    for i in 3..8 {
        let gone = nodes.remove(0);
        t.release(&gone);
        let mut fresh = state(&format!("n{i}"), &[("host", &format!("n{i}"))]);
        t.assign(&mut fresh);
        nodes.push(fresh);
        t.compact_if_sparse(&mut nodes);
        assert!(t.len() <= 2 * t.live_pairs(), "bounded");
    }
    assert_ne!(t.stamp(), old, "rebuilt under a fresh stamp");
    for n in &nodes {
        assert!(t.numbered(&n.label_ids));
        assert_eq!(t.decode(&n.label_ids).as_ref(), Some(&n.info.labels));
    }
}

mod cache_numbers_every_node {
    //! Through any sequence of node arrivals, relabels and removals, every
    //! node of the cache carries ids from the cache's table that decode to
    //! its labels, and the table's live count is exact.

    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ids_follow_the_labels(
            ops in proptest::collection::vec((0..6u8, proptest::option::of((0..4u8, 0..3u8))), 1..60),
            slack in 0..3usize,
        ) {
            let mut c = Cache::new([Arc::from(SCHEDULER)]);
            c.facts_mut().label_ids = LabelIds::maintained_with_slack(slack);
            for (n, labels) in ops {
                let name = format!("n{n}");
                match labels {
                    None => {
                        c.remove_node(&name);
                    }
                    Some((zone, rack)) => {
                        let mut info = node(&name, 1000, 1);
                        info.labels.insert("zone".into(), format!("z{zone}"));
                        info.labels.insert("host".into(), name.clone());
                        if rack > 0 {
                            info.labels.insert("rack".into(), format!("r{rack}"));
                        }
                        c.upsert_node(arc(info));
                    }
                }
                let table = &c.facts().label_ids;
                let mut live = 0;
                for s in c.nodes() {
                    prop_assert!(table.numbered(&s.label_ids));
                    let decoded = table.decode(&s.label_ids);
                    prop_assert_eq!(decoded.as_ref(), Some(&s.info.labels));
                    live += s.label_ids.pairs().len();
                }
                prop_assert_eq!(table.live_pairs(), live);
                prop_assert!(table.len() <= 2 * live + slack);
            }
        }
    }
}
