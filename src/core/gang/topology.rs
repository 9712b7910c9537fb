//! Required topology: every member of a gang on nodes that share one value of
//! a node label (a *domain*, e.g. one rack). Nodes without the label are
//! ineligible.
//!
//! The first member of a gang (none assumed or bound) picks the domain: the
//! one with the tightest fit among those with room for the gang's remaining
//! members, counting whole copies of the member's requests per node (and the
//! definition's `minResources` against the domain's summed free capacity).
//! Later members are confined to the domain their group is already in. A
//! domain in which the gang was rejected (early release, timeout) is avoided
//! on the next attempt while another one fits. All of it is a pure function of
//! the node table: no I/O, deterministic (ties go to the lowest label value).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::cache::{Cache, NodeState};
use crate::framework::NodeRestriction;
use crate::model::{GroupKey, Resources};

/// One domain of a topology key: how many more members fit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Domain {
    /// Whole copies of the member's requests that fit, summed over the nodes.
    pub room: u64,
    /// Free capacity summed over the nodes (only when `minResources` asks).
    pub free: Resources,
}

/// What the gang needs from a domain (one member's requests, the arriving
/// pod's taken as representative, are already folded into `Domain::room`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Need<'a> {
    /// Members still to place.
    pub remaining: u64,
    /// The definition's `minResources`, when nothing is placed yet.
    pub min_resources: Option<&'a Resources>,
}

/// Node indices by value of one topology key (nodes without the label are
/// in no domain), rebuilt only when the cache's node labels change, with the
/// room of each node memoized by its generation: choosing a domain for a
/// gang then recomputes only the nodes that changed since the last choice,
/// and confining a member costs a lookup, not a label comparison per node.
#[derive(Debug, Clone, Default)]
pub(super) struct DomainIndex {
    generation: u64,
    by_value: BTreeMap<String, Vec<usize>>,
    memo: RoomMemo,
}

/// Whole copies of one member shape per node, with the node generation they
/// were computed at, and the domains summed from them.
#[derive(Debug, Clone, Default)]
struct RoomMemo {
    per_member: Resources,
    per_node: Vec<Option<(u64, u64)>>,
    summed: Option<Summed>,
}

/// The domains as last computed (in `by_value` order) and the cache's
/// node-change sequence they reflect: the next call re-sums only the
/// domains of the nodes changed since, so choosing a domain for a gang
/// costs the changes, not every node.
#[derive(Debug, Clone)]
struct Summed {
    /// The change log (`NodeChanges::id`) and position they reflect.
    log: u64,
    seq: u64,
    with_free: bool,
    domains: Vec<Domain>,
    /// Node index → position of its domain in `by_value` (`u32::MAX`: none).
    node_domain: Vec<u32>,
    /// Position → the domain's node indices (as in `by_value`).
    members: Vec<Vec<usize>>,
    /// Position → the domain's value (as in `by_value`).
    values: Vec<String>,
    /// Every domain as (room, position), kept as rooms change: positions
    /// follow value order, so this is the BestFit order (least room, then
    /// lowest value), and the tightest domains holding a gang are a range
    /// query instead of a pass over every domain (2,500 racks at 50,000
    /// nodes, per gang).
    by_room: BTreeSet<(u64, u32)>,
}

/// The index of `key`, from `indexes` if the node labels did not change.
pub(super) fn index_for<'a>(
    indexes: &'a mut HashMap<String, DomainIndex>,
    cache: &Cache,
    key: &str,
) -> &'a mut DomainIndex {
    index_with(indexes, key, cache.labels_generation(), || {
        build_index(cache.nodes(), key)
    })
}

/// The index named `name`, rebuilt with `build` when `generation` moved.
pub(super) fn index_with<'a>(
    indexes: &'a mut HashMap<String, DomainIndex>,
    name: &str,
    generation: u64,
    build: impl FnOnce() -> BTreeMap<String, Vec<usize>>,
) -> &'a mut DomainIndex {
    let index = indexes
        .entry(name.to_string())
        .or_insert_with(|| DomainIndex {
            generation: generation.wrapping_add(1),
            ..DomainIndex::default()
        });
    if index.generation != generation {
        index.by_value = build();
        // Node indices may have moved.
        index.memo = RoomMemo::default();
        index.generation = generation;
    }
    index
}

impl DomainIndex {
    pub fn values(&self) -> &BTreeMap<String, Vec<usize>> {
        &self.by_value
    }

    /// The domains with their room for `per_member` (and free capacity when
    /// `with_free`), recomputing only the domains of nodes changed since the
    /// last call (the cache's node-change log), and only those nodes' room.
    /// A view of the index, not a copy: a gang's cycle costs one pass over
    /// the domains, with nothing cloned.
    pub fn domains(
        &mut self,
        cache: &Cache,
        per_member: &Resources,
        with_free: bool,
    ) -> Domains<'_> {
        let nodes = cache.nodes();
        let changes = cache.node_changes();
        let memo = &mut self.memo;
        if memo.per_member != *per_member || memo.per_node.len() != nodes.len() {
            memo.per_member = per_member.clone();
            memo.per_node = vec![None; nodes.len()];
            memo.summed = None;
        }
        let per_node = &mut memo.per_node;
        let mut room_at = |i: usize, node: &NodeState| match per_node.get(i).copied().flatten() {
            Some((generation, copies)) if generation == node.generation => copies,
            _ => {
                let c = copies(&node.free(), per_member);
                if let Some(slot) = per_node.get_mut(i) {
                    *slot = Some((node.generation, c));
                }
                c
            }
        };
        // What changed since the last sum, when that sum can be reused.
        let dirty = memo
            .summed
            .as_ref()
            .filter(|s| s.with_free == with_free && s.log == changes.id())
            .and_then(|s| changes.since(s.seq));
        match (dirty, memo.summed.as_mut()) {
            (Some(changed), Some(summed)) => {
                let mut positions: Vec<u32> = changed
                    .iter()
                    .filter_map(|&i| summed.node_domain.get(i).copied())
                    .filter(|&p| p != u32::MAX)
                    .collect();
                positions.sort_unstable();
                positions.dedup();
                for p in positions {
                    if let (Some(members), Some(slot)) = (
                        summed.members.get(p as usize),
                        summed.domains.get_mut(p as usize),
                    ) {
                        let fresh = sum_domain(members, nodes, with_free, &mut room_at);
                        if fresh.room != slot.room {
                            summed.by_room.remove(&(slot.room, p));
                            summed.by_room.insert((fresh.room, p));
                        }
                        *slot = fresh;
                    }
                }
                summed.seq = changes.seq();
            }
            _ => {
                let members: Vec<Vec<usize>> = self.by_value.values().cloned().collect();
                let mut node_domain = vec![u32::MAX; nodes.len()];
                for (p, list) in members.iter().enumerate() {
                    for &i in list {
                        if let Some(slot) = node_domain.get_mut(i) {
                            *slot = u32::try_from(p).unwrap_or(u32::MAX);
                        }
                    }
                }
                let domains: Vec<Domain> = members
                    .iter()
                    .map(|list| sum_domain(list, nodes, with_free, &mut room_at))
                    .collect();
                let by_room = (0u32..).zip(&domains).map(|(p, d)| (d.room, p)).collect();
                memo.summed = Some(Summed {
                    log: changes.id(),
                    seq: changes.seq(),
                    with_free,
                    domains,
                    node_domain,
                    members,
                    values: self.by_value.keys().cloned().collect(),
                    by_room,
                });
            }
        }
        Domains {
            by_value: &self.by_value,
            summed: memo.summed.as_ref(),
        }
    }
}

/// The domains of an index with their room, as `DomainIndex::domains`
/// summed them: each value with its nodes, in value order.
#[derive(Debug, Clone, Copy)]
pub(super) struct Domains<'a> {
    by_value: &'a BTreeMap<String, Vec<usize>>,
    /// One domain per entry of `by_value`, in its order (none before the
    /// first sum).
    summed: Option<&'a Summed>,
}

impl<'a> Domains<'a> {
    fn summed(self) -> &'a [Domain] {
        self.summed.map_or(&[][..], |s| s.domains.as_slice())
    }

    /// Each domain's value, nodes and room.
    pub fn iter(self) -> impl Iterator<Item = (&'a String, &'a Vec<usize>, &'a Domain)> + Clone {
        self.by_value
            .iter()
            .zip(self.summed())
            .map(|((value, nodes), d)| (value, nodes, d))
    }

    /// Each domain's value and room (what `choose` reads).
    pub fn rooms(self) -> impl Iterator<Item = (&'a String, &'a Domain)> + Clone {
        self.by_value.keys().zip(self.summed())
    }

    /// The first `n` domains that hold `need`, tightest first (least room,
    /// then lowest value): BestFit's choice, read from the room order
    /// starting at the room the gang needs, not from every domain.
    pub fn best_fit(
        self,
        need: &Need<'_>,
        n: usize,
    ) -> Vec<(&'a String, &'a Vec<usize>, &'a Domain)> {
        let Some(s) = self.summed else {
            return Vec::new();
        };
        s.by_room
            .range((need.remaining, 0)..)
            .filter_map(|&(_, p)| {
                let p = p as usize;
                Some((s.values.get(p)?, s.members.get(p)?, s.domains.get(p)?))
            })
            .filter(|(_, _, d)| d.holds(need))
            .take(n)
            .collect()
    }

    /// A copy by value, for tests to compare with a fresh sum.
    #[cfg(test)]
    pub fn to_map(self) -> BTreeMap<String, Domain> {
        self.rooms().map(|(v, d)| (v.clone(), d.clone())).collect()
    }
}

/// Node indices (ascending) by value of `key`.
pub(super) fn build_index(nodes: &[NodeState], key: &str) -> BTreeMap<String, Vec<usize>> {
    let mut by_value: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, node) in nodes.iter().enumerate() {
        if let Some(value) = node.info.labels.get(key) {
            by_value.entry(value.clone()).or_default().push(i);
        }
    }
    by_value
}

/// The domains of an index, with room and free capacity from the
/// schedulable nodes, computed afresh.
#[cfg(test)]
pub(super) fn domains(
    nodes: &[NodeState],
    index: &BTreeMap<String, Vec<usize>>,
    per_member: &Resources,
) -> BTreeMap<String, Domain> {
    domains_with(index, nodes, true, |_, node| {
        copies(&node.free(), per_member)
    })
}

#[cfg(test)]
fn domains_with(
    index: &BTreeMap<String, Vec<usize>>,
    nodes: &[NodeState],
    with_free: bool,
    mut copies_at: impl FnMut(usize, &NodeState) -> u64,
) -> BTreeMap<String, Domain> {
    index
        .iter()
        .map(|(value, members)| {
            (
                value.clone(),
                sum_domain(members, nodes, with_free, &mut copies_at),
            )
        })
        .collect()
}

/// One domain's room (and free capacity when `with_free`) over its
/// schedulable nodes.
fn sum_domain(
    members: &[usize],
    nodes: &[NodeState],
    with_free: bool,
    copies_at: &mut impl FnMut(usize, &NodeState) -> u64,
) -> Domain {
    let mut d = Domain::default();
    for &i in members {
        let Some(node) = nodes.get(i) else {
            continue;
        };
        if node.info.unschedulable {
            continue;
        }
        // Saturating: a member requesting nothing fits `u64::MAX` times.
        d.room = d.room.saturating_add(copies_at(i, node));
        if with_free {
            d.free.add(&node.free());
        }
    }
    d
}

/// How many copies of `per_member` fit in `free` (every requested resource).
pub fn copies(free: &Resources, per_member: &Resources) -> u64 {
    let mut fixed = [
        (per_member.milli_cpu, free.milli_cpu),
        (per_member.memory, free.memory),
        (per_member.ephemeral_storage, free.ephemeral_storage),
        (per_member.pods, free.pods),
    ]
    .into_iter()
    .chain(per_member.scalar.iter().map(|(k, v)| (*v, free.get(k))))
    .filter(|(want, _)| *want > 0)
    .peekable();
    if fixed.peek().is_none() {
        return u64::MAX;
    }
    fixed
        .map(|(want, have)| u64::try_from(have.max(0) / want).unwrap_or(0))
        .min()
        .unwrap_or(0)
}

impl Domain {
    pub(super) fn holds(&self, need: &Need<'_>) -> bool {
        self.room >= need.remaining
            && need
                .min_resources
                .is_none_or(|m| m.exceeding(&self.free).next().is_none())
    }
}

/// The domain for a gang that holds nothing yet: the tightest fit (least room)
/// among the domains that hold it, preferring those not in `avoid`; `Err`
/// says why none does.
pub(super) fn choose<'a>(
    domains: impl IntoIterator<Item = (&'a String, &'a Domain)> + Clone,
    need: &Need<'_>,
    avoid: &BTreeSet<String>,
) -> Result<String, NoDomain> {
    let fitting = || domains.clone().into_iter().filter(|(_, d)| d.holds(need));
    let tightest = |it: &mut dyn Iterator<Item = (&String, &Domain)>| {
        it.min_by_key(|(v, d)| (d.room, v.as_str()))
            .map(|(v, _)| v.clone())
    };
    tightest(&mut fitting().filter(|(v, _)| !avoid.contains(*v)))
        .or_else(|| tightest(&mut fitting()))
        .ok_or_else(|| NoDomain {
            domains: domains.clone().into_iter().count(),
            most_room: domains
                .clone()
                .into_iter()
                .max_by_key(|(v, d)| (d.room, std::cmp::Reverse(v.as_str())))
                .map(|(v, d)| (v.clone(), d.room)),
        })
}

/// No domain can hold the gang.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NoDomain {
    pub domains: usize,
    /// The domain with the most room, and that room.
    pub most_room: Option<(String, u64)>,
}

impl NoDomain {
    /// kube-scheduler-style message naming the topology key.
    pub fn message(&self, group: &GroupKey, key: &str, need: &Need<'_>, nodes: usize) -> String {
        let detail = match &self.most_room {
            None => format!("no node has the label {key}"),
            Some((value, room)) => format!(
                "{} domain(s); the most room is {key}={value} with {room}",
                self.domains
            ),
        };
        let min_resources = if need.min_resources.is_some() {
            " and its minResources"
        } else {
            ""
        };
        format!(
            "0/{nodes} nodes are available: {group} requires all members within one value of node label {key}, \
             but no domain has room for its {} remaining member(s){min_resources} ({detail})",
            need.remaining
        )
    }
}

/// The domain the group's placed members are in: the value most of them share
/// (ties to the lowest), or `None` when none is on a labelled node.
pub(super) fn current(cache: &Cache, group: &GroupKey, key: &str) -> Option<String> {
    let members = cache.group(group)?;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for pod in members.assumed().iter().chain(members.bound()) {
        let value = cache
            .pod(pod)
            .and_then(|p| p.state.node())
            .and_then(|n| cache.node(n))
            .and_then(|n| n.info.labels.get(key));
        if let Some(v) = value {
            *counts.entry(v.as_str()).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .max_by_key(|(v, n)| (*n, std::cmp::Reverse(*v)))
        .map(|(v, _)| v.to_string())
}

/// The restriction to `value`'s nodes.
pub(super) fn restriction(
    index: &BTreeMap<String, Vec<usize>>,
    group: &GroupKey,
    key: &str,
    value: &str,
) -> NodeRestriction {
    NodeRestriction {
        nodes: index.get(value).cloned().unwrap_or_default(),
        reason: format!("node(s) outside {key}={value} required by {group}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::driver::fixtures::{group_key, node, resources};
    use crate::model::NodeInfo;

    const RACK: &str = "topology.kubernetes.io/rack";

    fn labelled(name: &str, rack: Option<&str>, cpu: i64) -> NodeState {
        let mut n: NodeInfo = node(name, cpu, 64);
        if let Some(r) = rack {
            n.labels.insert(RACK.into(), r.into());
        }
        NodeState::new(Arc::new(n))
    }

    fn need(remaining: u64) -> Need<'static> {
        Need {
            remaining,
            min_resources: None,
        }
    }

    /// r1: 2 nodes of 4 cpu; r2: 4 nodes of 4 cpu; one unlabelled node of 64.
    fn racks() -> Vec<NodeState> {
        vec![
            labelled("a0", Some("r1"), 4000),
            labelled("a1", Some("r1"), 4000),
            labelled("b0", Some("r2"), 4000),
            labelled("b1", Some("r2"), 4000),
            labelled("b2", Some("r2"), 4000),
            labelled("b3", Some("r2"), 4000),
            labelled("x", None, 64000),
        ]
    }

    #[test]
    fn room_counts_whole_members_per_node() {
        let nodes = racks();
        let per = resources(3000, 1);
        let d = domains(&nodes, &build_index(&nodes, RACK), &per);
        assert_eq!(d.keys().collect::<Vec<_>>(), ["r1", "r2"]);
        assert_eq!(d["r1"].room, 2, "3 cpu fits once per 4-cpu node");
        assert_eq!(d["r2"].room, 4);
        assert_eq!(build_index(&nodes, RACK)["r2"], vec![2, 3, 4, 5]);
        assert_eq!(copies(&resources(5000, 1), &Resources::default()), u64::MAX);
    }

    #[test]
    fn tightest_fitting_domain_wins_and_unlabelled_nodes_never_count() {
        let nodes = racks();
        let per = resources(3000, 1);
        let d = domains(&nodes, &build_index(&nodes, RACK), &per);
        let none = BTreeSet::new();
        assert_eq!(choose(&d, &need(2), &none), Ok("r1".to_string()));
        assert_eq!(choose(&d, &need(3), &none), Ok("r2".to_string()));
        // The unlabelled 64-cpu node could hold 21 members: it does not help.
        let err = choose(&d, &need(5), &none).unwrap_err();
        assert_eq!(err.most_room, Some(("r2".to_string(), 4)));
        let msg = err.message(&group_key("g"), RACK, &need(5), nodes.len());
        assert!(
            msg.contains("within one value of node label topology.kubernetes.io/rack"),
            "{msg}"
        );
        assert!(msg.contains("room for its 5 remaining member(s)"), "{msg}");
        assert!(
            msg.contains("the most room is topology.kubernetes.io/rack=r2 with 4"),
            "{msg}"
        );
    }

    #[test]
    fn avoided_domains_are_a_last_resort() {
        let nodes = racks();
        let per = resources(1000, 1);
        let d = domains(&nodes, &build_index(&nodes, RACK), &per);
        let avoid: BTreeSet<String> = ["r1".to_string()].into();
        assert_eq!(choose(&d, &need(2), &avoid), Ok("r2".to_string()));
        let both: BTreeSet<String> = ["r1".to_string(), "r2".to_string()].into();
        assert_eq!(choose(&d, &need(2), &both), Ok("r1".to_string()));
    }

    #[test]
    fn min_resources_must_fit_the_domain() {
        let nodes = racks();
        let per = resources(100, 1);
        let d = domains(&nodes, &build_index(&nodes, RACK), &per);
        let min = resources(10_000, 1);
        let n = Need {
            remaining: 2,
            min_resources: Some(&min),
        };
        assert_eq!(choose(&d, &n, &BTreeSet::new()), Ok("r2".to_string()));
    }

    #[test]
    fn no_label_anywhere() {
        let nodes = vec![labelled("x", None, 4000)];
        let per = resources(1000, 1);
        let d = domains(&nodes, &build_index(&nodes, RACK), &per);
        let err = choose(&d, &need(1), &BTreeSet::new()).unwrap_err();
        let msg = err.message(&group_key("g"), RACK, &need(1), 1);
        assert!(
            msg.ends_with("(no node has the label topology.kubernetes.io/rack)"),
            "{msg}"
        );
    }

    #[test]
    fn the_memoized_room_follows_every_node_change() {
        use crate::driver::fixtures::{SCHEDULER, arc, pod};
        let mut cache = Cache::new([Arc::from(SCHEDULER)]);
        for n in racks() {
            cache.upsert_node(n.info.clone());
        }
        let per = resources(3000, 1);
        let mut indexes = HashMap::new();
        let fresh = |c: &Cache| domains(c.nodes(), &build_index(c.nodes(), RACK), &per);
        let memo = |i: &mut HashMap<String, DomainIndex>, c: &Cache| {
            index_for(i, c, RACK).domains(c, &per, true).to_map()
        };
        assert_eq!(memo(&mut indexes, &cache), fresh(&cache));
        // A pod lands on b0: only that node's room changes.
        let mut p = pod("p", 2000, 1);
        p.node_name = Some(Arc::from("b0"));
        p.phase = crate::model::PodPhase::Running;
        cache.upsert_pod(arc(p));
        assert_eq!(memo(&mut indexes, &cache)["r2"].room, 3);
        assert_eq!(memo(&mut indexes, &cache), fresh(&cache));
        // A node leaves: indices move, the memo starts over.
        cache.remove_node("a0");
        assert_eq!(memo(&mut indexes, &cache), fresh(&cache));
        assert_eq!(memo(&mut indexes, &cache)["r1"].room, 1);
    }

    /// The domains are re-summed from the cache's change log, not
    /// walked whole; every kind of in-place change must reach them, and a
    /// reader switching between with and without free capacity starts over.
    #[test]
    fn the_summed_domains_follow_every_in_place_change() {
        use crate::driver::fixtures::{SCHEDULER, arc, pod};
        let mut cache = Cache::new([Arc::from(SCHEDULER)]);
        for n in racks() {
            cache.upsert_node(n.info.clone());
        }
        let per = resources(1000, 1);
        let mut indexes = HashMap::new();
        let check = |i: &mut HashMap<String, DomainIndex>, c: &Cache, with_free: bool| {
            let got = index_for(i, c, RACK).domains(c, &per, with_free);
            let mut want = domains(c.nodes(), &build_index(c.nodes(), RACK), &per);
            if !with_free {
                for d in want.values_mut() {
                    d.free = Resources::default();
                }
            }
            assert_eq!(got.to_map(), want);
            // The room order kept beside them gives what sorting them would.
            for remaining in 0..4 {
                let best: Vec<&String> = got
                    .best_fit(&need(remaining), 2)
                    .into_iter()
                    .map(|(v, _, _)| v)
                    .collect();
                let mut sorted: Vec<(u64, &String)> = want
                    .iter()
                    .filter(|(_, d)| d.room >= remaining)
                    .map(|(v, d)| (d.room, v))
                    .collect();
                sorted.sort();
                let sorted: Vec<&String> = sorted.into_iter().take(2).map(|(_, v)| v).collect();
                assert_eq!(best, sorted, "{remaining} remaining");
            }
        };
        check(&mut indexes, &cache, false);
        // Pods land and leave on nodes of two racks.
        for (name, node) in [("p0", "a0"), ("p1", "b1"), ("p2", "b1")] {
            let mut p = pod(name, 1500, 1);
            p.node_name = Some(Arc::from(node));
            p.phase = crate::model::PodPhase::Running;
            cache.upsert_pod(arc(p));
        }
        check(&mut indexes, &cache, false);
        cache.remove_pod(&crate::model::PodKey::new("default", "p1"));
        check(&mut indexes, &cache, false);
        // A node is cordoned (same labels: no index rebuild).
        let mut cordoned = (*cache.node("a1").unwrap().info).clone();
        cordoned.unschedulable = true;
        cache.upsert_node(Arc::new(cordoned));
        check(&mut indexes, &cache, false);
        // Free capacity asked for, then not: both right.
        check(&mut indexes, &cache, true);
        check(&mut indexes, &cache, false);
        // Another cache with the same nodes (same labels generation): its
        // change log is not the memo's, so the memo starts over.
        let mut other = Cache::new([Arc::from(SCHEDULER)]);
        for n in racks() {
            other.upsert_node(n.info.clone());
        }
        assert_eq!(other.labels_generation(), cache.labels_generation());
        check(&mut indexes, &other, false);
    }

    #[test]
    fn restriction_lists_the_domain_nodes() {
        let nodes = racks();
        let r = restriction(&build_index(&nodes, RACK), &group_key("g"), RACK, "r1");
        assert_eq!(r.nodes, vec![0, 1]);
        assert!(
            r.reason
                .starts_with("node(s) outside topology.kubernetes.io/rack=r1 required by")
        );
    }
}
