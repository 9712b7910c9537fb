//! Where a gang cycle tries to place a gang with a topology request: the
//! domains to plan in, in order, and why none will do.
//!
//! Levels are tried from the narrowest asked for outwards — from the
//! preferred level up to the required one, or up to the whole cluster when
//! nothing is required (`TopologyRequest`). In each level only the domains
//! whose room (whole copies of one member's requests, summed over their
//! nodes, and `minResources` against their free capacity) holds the members
//! still to place are tried, chosen by the configured domain choice:
//! `BestFit` (Kueue's default: the tightest fit first, so big domains stay
//! free for big gangs) or `LeastFreeCapacity` (the domain with the least
//! free capacity first). Every try of the narrowest level in which a plan
//! meets the quorum is planned, and the best-scored plan is committed
//! (`placement_score`); the estimate only orders and prunes, the plans
//! decide.

use crate::cache::Cache;
use crate::framework::NodeRestriction;
use crate::model::{GroupKey, LevelRef, PodInfo, Resources};

use super::GangScheduling;
use super::levels::{self, Hierarchy};
use super::topology::{Domain, DomainIndex};

/// Fitting domains tried per level, and in all, before the gang backs off.
pub const TRIES_PER_LEVEL: usize = 3;
pub const MAX_TRIES: usize = 8;

/// How the domains of one level are ordered (`topologyDomainOrder`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DomainOrder {
    /// Fewest spare member slots first (Kueue's `BestFit`).
    #[default]
    BestFit,
    /// Least free capacity first (Kueue's `LeastFreeCapacity`).
    LeastFreeCapacity,
}

/// One place to plan a gang in.
#[derive(Debug, Clone)]
pub struct PlacementTry {
    /// The domain's nodes; `None` is the whole cluster.
    pub restriction: Option<NodeRestriction>,
    /// For messages and `/debug`: `topology.kubernetes.io/rack b1/r7`.
    pub label: String,
    /// Every `size` members within one domain of this level, inside it.
    pub slices: Option<SlicePlan>,
    /// The level just inside this try's (when the gang fell back to a wider
    /// level, or to the whole cluster): members are packed into as few of
    /// its domains as hold them, as Kueue's BestFit does.
    pub pack: Option<SlicePlan>,
    /// The rank of the try's level, 0 for the narrowest tried: among the
    /// tries that hold the gang, only those of the lowest rank compete on
    /// placement score (`placement_score`).
    pub tier: usize,
}

/// A slice level resolved in the gang's hierarchy.
#[derive(Debug, Clone)]
pub struct SlicePlan {
    pub hierarchy: Hierarchy,
    pub level: usize,
    pub size: usize,
}

impl SlicePlan {
    /// The slice level, for messages.
    pub fn level_name(&self) -> String {
        level_key(&self.hierarchy, self.level)
    }
}

/// One domain of a level inside another's: its id, nodes and room.
struct InnerDomain {
    value: String,
    restriction: NodeRestriction,
    room: usize,
}

/// A composite's domain, which its child groups' tries are cut to.
struct Envelope {
    nodes: Vec<usize>,
    reason: String,
    label: String,
}

enum Envelopes {
    /// No composite above asks for a level.
    None,
    Within(Vec<Envelope>),
    Refused(String),
}

/// Node indices in both ascending lists.
fn intersect(a: &[usize], b: &[usize]) -> Vec<usize> {
    a.iter()
        .copied()
        .filter(|n| b.binary_search(n).is_ok())
        .collect()
}

impl PlacementTry {
    /// This try inside an envelope (a composite's domain, the nodes a
    /// shared claim's devices reach): its nodes that are in `nodes`
    /// (ascending), labelled `label > <own label>`; `None` when none is.
    pub fn within_envelope(&self, nodes: &[usize], label: &str, reason: &str) -> Option<Self> {
        let inside = match &self.restriction {
            None => nodes.to_vec(),
            Some(r) => intersect(&r.nodes, nodes),
        };
        if inside.is_empty() {
            return None;
        }
        let reason = match &self.restriction {
            Some(r) => format!("{reason}; {}", r.reason),
            None => reason.to_string(),
        };
        let label = match self.label.as_str() {
            "" | "the whole cluster" => label.to_string(),
            own => format!("{label} > {own}"),
        };
        Some(PlacementTry {
            restriction: Some(NodeRestriction {
                nodes: inside,
                reason,
            }),
            label,
            slices: self.slices.clone(),
            pack: self.pack.clone(),
            tier: self.tier,
        })
    }

    /// A plain try: the nodes of `restriction` (all nodes when `None`),
    /// no slices, no packing, no label.
    pub fn within(restriction: Option<NodeRestriction>) -> Self {
        PlacementTry {
            restriction,
            label: String::new(),
            slices: None,
            pack: None,
            tier: 0,
        }
    }
}

/// Where the gang can go (a group without a topology request: the whole
/// cluster, once), or why it can go nowhere (a required level none of whose
/// domains holds it).
pub type Tries = Result<Vec<PlacementTry>, String>;

impl GangScheduling {
    /// The places to plan `group` in, `needed` members still to place, each
    /// like `pod` (its requests stand for every member's): the group's own
    /// tries, inside the domain its composite's required level confines
    /// every child group to (`composite_envelopes`).
    pub fn placement_tries(
        &mut self,
        pod: &PodInfo,
        group: &GroupKey,
        cache: &Cache,
        needed: u64,
    ) -> Tries {
        let own = self.own_tries(pod, group, cache, needed);
        let envelopes = match self.composite_envelopes(pod, group, cache) {
            Envelopes::None => return own,
            Envelopes::Refused(message) => return Err(message),
            Envelopes::Within(e) => e,
        };
        let own = own?;
        let mut tries = Vec::new();
        for envelope in &envelopes {
            tries.extend(own.iter().filter_map(|t| {
                t.within_envelope(&envelope.nodes, &envelope.label, &envelope.reason)
            }));
        }
        tries.truncate(MAX_TRIES);
        if tries.is_empty() {
            return Err(format!(
                "0/{} nodes are available: {group} fits in no domain its CompositePodGroup requires",
                cache.nodes().len()
            ));
        }
        Ok(tries)
    }

    /// A composite above `group` with a required level confines all its
    /// child groups to one domain of that level: the domain its placed
    /// members are in, or, before any is placed, the domains with room for
    /// every child's remaining quorum (BestFit, at most three).
    fn composite_envelopes(&mut self, pod: &PodInfo, group: &GroupKey, cache: &Cache) -> Envelopes {
        let Ok(chain) = self.ancestors(&group.definition) else {
            return Envelopes::None;
        };
        let Some((composite, level)) = chain.iter().find_map(|k| {
            let required = self.defs.get(k)?.topology.required.clone()?;
            Some((k.clone(), required))
        }) else {
            return Envelopes::None;
        };
        let scope: Vec<GroupKey> = self
            .leaves_under(&composite)
            .into_iter()
            .map(GroupKey::new)
            .collect();
        let (hierarchy, at) = levels::resolve(&self.declared, &level);
        let key = level_key(&hierarchy, at);
        let placed = scope.iter().find_map(|g| {
            let m = cache.group(g)?;
            m.assumed()
                .iter()
                .chain(m.bound())
                .find_map(|k| cache.pod(k)?.state.node().and_then(|n| cache.node_index(n)))
        });
        let remaining: u64 = scope
            .iter()
            .map(|g| {
                let min = u64::from(self.min_count(g).unwrap_or(0));
                let have = cache.group(g).map_or(0, |m| {
                    u64::try_from(m.assumed_or_bound()).unwrap_or(u64::MAX)
                });
                min.saturating_sub(have)
            })
            .fold(0u64, u64::saturating_add);
        let index = self.level_index(cache, &hierarchy, at);
        let envelope = |value: &String, nodes: &Vec<usize>| Envelope {
            nodes: nodes.clone(),
            reason: format!("node(s) outside {key} {value} required by {composite}"),
            label: format!("{key} {value}"),
        };
        if let Some(node) = placed {
            return match index
                .values()
                .iter()
                .find(|(_, n)| n.binary_search(&node).is_ok())
            {
                Some((value, nodes)) => Envelopes::Within(vec![envelope(value, nodes)]),
                None => Envelopes::Refused(format!(
                    "0/{} nodes are available: the placed members of {composite} are outside every domain of {key}",
                    cache.nodes().len()
                )),
            };
        }
        let need = super::topology::Need {
            remaining: remaining.max(1),
            min_resources: None,
        };
        let out: Vec<Envelope> = index
            .domains(cache, &pod.room_requests(), false)
            .best_fit(&need, TRIES_PER_LEVEL)
            .into_iter()
            .map(|(v, nodes, _)| envelope(v, nodes))
            .collect();
        if out.is_empty() {
            return Envelopes::Refused(format!(
                "0/{} nodes are available: {composite} requires all its groups within one domain of {key}, and none has room for their {remaining} remaining member(s)",
                cache.nodes().len()
            ));
        }
        Envelopes::Within(out)
    }

    /// The group's own tries, from its own topology request.
    /// The slice level and size a request asks for, resolved.
    fn slice_plan(&self, request: &crate::model::TopologyRequest) -> Option<SlicePlan> {
        request.slice.as_ref().map(|s| {
            let (h, level) = levels::resolve(&self.declared, &s.level);
            SlicePlan {
                hierarchy: h,
                level,
                size: usize::try_from(s.size).unwrap_or(usize::MAX).max(1),
            }
        })
    }

    /// Every domain of the group's required level, whatever its room:
    /// what preemption weighs when no domain holds the gang as the
    /// cluster stands. Empty when the group requires no level.
    pub fn required_domains(&mut self, group: &GroupKey, cache: &Cache) -> Vec<PlacementTry> {
        let Some(def) = self.defs.get(&group.definition) else {
            return Vec::new();
        };
        let request = def.topology.as_ref().clone();
        let Some(required) = &request.required else {
            return Vec::new();
        };
        let (hierarchy, level) = levels::resolve(&self.declared, required);
        let key = level_key(&hierarchy, level);
        let slices = self.slice_plan(&request);
        let pack = inner_level(&hierarchy, level, slices.is_some());
        let index = self.level_index(cache, &hierarchy, level);
        index
            .values()
            .iter()
            .map(|(value, nodes)| PlacementTry {
                restriction: Some(NodeRestriction {
                    nodes: nodes.clone(),
                    reason: format!("node(s) outside {key} {value} required by {group}"),
                }),
                label: format!("{key} {value}"),
                slices: slices.clone(),
                pack: pack.clone(),
                tier: 0,
            })
            .collect()
    }

    fn own_tries(&mut self, pod: &PodInfo, group: &GroupKey, cache: &Cache, needed: u64) -> Tries {
        let Some(def) = self
            .defs
            .get(&group.definition)
            .filter(|d| !d.topology.is_empty())
        else {
            return Ok(vec![PlacementTry::within(None)]);
        };
        // Owned: the domain indexes below borrow the plugin mutably.
        let request = def.topology.as_ref().clone();
        let min_resources = def.min_resources.clone();
        let choice = self.args_for(pod).domain_order;
        let (hierarchy, levels, anywhere_last) = self.levels_to_try(&request);
        let slices = self.slice_plan(&request);
        let mut tries = Vec::new();
        let mut closest: Option<(String, Domain)> = None;
        let tiers = levels.len();
        for (tier, level) in levels.into_iter().enumerate() {
            let key = level_key(&hierarchy, level);
            let index = self.level_index(cache, &hierarchy, level);
            let domains = index.domains(cache, &pod.room_requests(), min_resources.is_some());
            let need = super::topology::Need {
                remaining: needed.max(1),
                min_resources: min_resources.as_ref(),
            };
            let first = match choice {
                DomainOrder::BestFit => domains.best_fit(&need, TRIES_PER_LEVEL),
                DomainOrder::LeastFreeCapacity => {
                    let fitting: Vec<(&String, &Vec<usize>, &Domain)> =
                        domains.iter().filter(|(_, _, d)| d.holds(&need)).collect();
                    smallest(fitting, TRIES_PER_LEVEL, |a, b| {
                        free_order(&a.2.free, &b.2.free).then_with(|| a.0.cmp(b.0))
                    })
                }
            };
            let pack = inner_level(&hierarchy, level, slices.is_some());
            for (value, nodes, _) in first {
                tries.push(PlacementTry {
                    restriction: Some(NodeRestriction {
                        nodes: nodes.clone(),
                        reason: format!("node(s) outside {key} {value} required by {group}"),
                    }),
                    label: format!("{key} {value}"),
                    slices: slices.clone(),
                    pack: pack.clone(),
                    tier,
                });
            }
            // The domain with the most room, for the message if none fits:
            // only while nothing fits so far (a pass over every domain,
            // which a gang that fits somewhere never reads).
            if tries.is_empty()
                && let Some((value, d)) = domains
                    .rooms()
                    .max_by_key(|(v, d)| (d.room, std::cmp::Reverse(v.as_str())))
                && closest.as_ref().is_none_or(|(_, c)| d.room > c.room)
            {
                closest = Some((format!("{key} {value}"), d.clone()));
            }
        }
        tries.truncate(MAX_TRIES);
        if anywhere_last {
            // The whole cluster, packed into the outermost level's domains.
            let pack = match hierarchy.levels.is_empty() || slices.is_some() {
                true => None,
                false => Some(SlicePlan {
                    hierarchy: hierarchy.clone(),
                    level: 0,
                    size: 0,
                }),
            };
            tries.push(PlacementTry {
                restriction: None,
                label: "the whole cluster".into(),
                slices,
                pack,
                tier: tiers,
            });
        }
        if tries.is_empty() {
            let required = request
                .required
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            return Err(no_domain_message(
                group,
                &required,
                closest,
                needed,
                &pod.requests,
                cache.nodes().len(),
            ));
        }
        Ok(tries)
    }

    /// For a gang some of whose members are placed already (a bind failed,
    /// a member was deleted): the domain of the required level they are in,
    /// which the rest must join.
    pub fn confinement(&mut self, group: &GroupKey, cache: &Cache) -> Option<NodeRestriction> {
        let def = self.defs.get(&group.definition)?;
        let required = def.topology.required.clone()?;
        let members = cache.group(group)?;
        let placed: Vec<usize> = members
            .assumed()
            .iter()
            .chain(members.bound())
            .filter_map(|k| cache.pod(k)?.state.node().and_then(|n| cache.node_index(n)))
            .collect();
        let first = *placed.first()?;
        let (hierarchy, level) = levels::resolve(&self.declared, &required);
        let key = level_key(&hierarchy, level);
        let index = self.level_index(cache, &hierarchy, level);
        let (value, nodes) = index
            .values()
            .iter()
            .find(|(_, nodes)| nodes.binary_search(&first).is_ok())?;
        Some(NodeRestriction {
            nodes: nodes.clone(),
            reason: format!("node(s) outside {key} {value} required by {group}"),
        })
    }

    /// The domains of `inner`'s level lying wholly inside `outer` (every
    /// domain when `None`), each with its nodes and its room for members
    /// like `pod`, by domain id; `what` names them in the fit error
    /// (`node(s) outside <what><level> <id>`).
    fn domains_inside(
        &mut self,
        pod: &PodInfo,
        cache: &Cache,
        inner: &SlicePlan,
        outer: Option<&NodeRestriction>,
        what: &str,
    ) -> Vec<InnerDomain> {
        let key = level_key(&inner.hierarchy, inner.level);
        let index = self.level_index(cache, &inner.hierarchy, inner.level);
        let inside = |nodes: &[usize]| match outer {
            None => true,
            Some(o) => nodes.iter().all(|n| o.nodes.binary_search(n).is_ok()),
        };
        index
            .domains(cache, &pod.room_requests(), false)
            .iter()
            .filter(|(_, nodes, _)| inside(nodes))
            .map(|(value, nodes, d)| InnerDomain {
                restriction: NodeRestriction {
                    nodes: nodes.clone(),
                    reason: format!("node(s) outside {what}{key} {value}"),
                },
                room: usize::try_from(d.room).unwrap_or(usize::MAX),
                value: value.clone(),
            })
            .collect()
    }

    /// The domains of `inner`'s level inside `outer` with their room for
    /// members like `pod`, the order to fill them in: the fewest domains
    /// that hold `count` members — the tightest single domain that holds
    /// them all if one does, else the roomiest first (Kueue's BestFit).
    pub fn pack_domains(
        &mut self,
        pod: &PodInfo,
        cache: &Cache,
        inner: &SlicePlan,
        outer: Option<&NodeRestriction>,
        count: usize,
    ) -> Vec<(NodeRestriction, usize)> {
        let mut left: Vec<InnerDomain> = self
            .domains_inside(pod, cache, inner, outer, "")
            .into_iter()
            .filter(|d| d.room > 0)
            .collect();
        let mut order = Vec::new();
        let mut remaining = count;
        while remaining > 0 && !left.is_empty() {
            let pick = left
                .iter()
                .enumerate()
                .filter(|(_, d)| d.room >= remaining)
                .min_by_key(|(_, d)| (d.room, d.value.as_str()))
                .or_else(|| {
                    left.iter()
                        .enumerate()
                        .max_by_key(|(_, d)| (d.room, std::cmp::Reverse(d.value.as_str())))
                })
                .map(|(i, _)| i);
            let Some(i) = pick else {
                break;
            };
            let d = left.swap_remove(i);
            let take = d.room.min(remaining);
            remaining -= take;
            order.push((d.restriction, take));
        }
        order
    }

    /// The slice domains inside `outer` for `size` members like `pod`,
    /// best first.
    pub fn slice_domains(
        &mut self,
        pod: &PodInfo,
        cache: &Cache,
        slices: &SlicePlan,
        outer: Option<&NodeRestriction>,
        size: usize,
    ) -> Vec<NodeRestriction> {
        let mut fitting: Vec<InnerDomain> = self
            .domains_inside(pod, cache, slices, outer, "slice domain ")
            .into_iter()
            .filter(|d| d.room >= size)
            .collect();
        fitting.sort_by(|a, b| (a.room, &a.value).cmp(&(b.room, &b.value)));
        fitting
            .into_iter()
            .take(TRIES_PER_LEVEL)
            .map(|d| d.restriction)
            .collect()
    }

    /// The hierarchy and the levels to try in it, narrowest first, and
    /// whether the whole cluster is the last resort.
    fn levels_to_try(
        &self,
        request: &crate::model::TopologyRequest,
    ) -> (Hierarchy, Vec<usize>, bool) {
        let start = request.preferred.as_ref().or(request.required.as_ref());
        let Some(start) = start else {
            // Unconstrained (or slices alone): pack into the innermost level
            // of the first declared hierarchy, widening to the whole cluster.
            let Some(level) = self.default_innermost() else {
                return (
                    Hierarchy {
                        source: String::new(),
                        levels: Vec::new(),
                    },
                    Vec::new(),
                    true,
                );
            };
            let (h, i) = levels::resolve(&self.declared, &level);
            return (h, (0..=i).rev().collect(), request.required.is_none());
        };
        let (h, from) = levels::resolve(&self.declared, start);
        let to = match &request.required {
            None => 0,
            Some(r) => {
                // The required level in the same hierarchy (a tier name
                // resolves to its tier). A preferred level of another
                // hierarchy cannot nest in it: the required level alone.
                let (rh, ri) = levels::resolve(&self.declared, r);
                if rh.levels != h.levels {
                    return (rh, vec![ri], false);
                }
                ri.min(from)
            }
        };
        (h, (to..=from).rev().collect(), request.required.is_none())
    }

    /// The innermost level of the first declared hierarchy.
    fn default_innermost(&self) -> Option<LevelRef> {
        if let Some(t) = self.declared.topologies().next() {
            return t.levels.last().map(|l| LevelRef::Label(l.clone()));
        }
        self.declared
            .plugin_levels()
            .last()
            .map(|l| LevelRef::Label(l.clone()))
    }

    /// The domain index of one level, rebuilt when node labels or the
    /// declared hierarchies changed.
    fn level_index(
        &mut self,
        cache: &Cache,
        hierarchy: &Hierarchy,
        level: usize,
    ) -> &mut DomainIndex {
        let name = format!("{}#{}", hierarchy.source, level_key(hierarchy, level));
        let generation = cache.labels_generation() ^ self.declared.generation().rotate_left(32);
        let declared = &self.declared;
        super::topology::index_with(&mut self.topology_index, &name, generation, || {
            levels::domains_of_level(cache.nodes(), declared, hierarchy, level)
        })
    }
}

/// The level just inside `level`, to pack a fallen-back gang into (none
/// with slices, which place themselves, nor at the innermost level).
fn inner_level(h: &Hierarchy, level: usize, sliced: bool) -> Option<SlicePlan> {
    let inner = level.checked_add(1)?;
    (!sliced && inner < h.levels.len()).then(|| SlicePlan {
        hierarchy: h.clone(),
        level: inner,
        size: 0,
    })
}

fn level_key(h: &Hierarchy, level: usize) -> String {
    h.levels
        .get(level)
        .map(ToString::to_string)
        .unwrap_or_default()
}

/// The first `n` of `items` in `order`, in that order: a partial selection,
/// linear in the number of items rather than a sort of them all.
pub(crate) fn smallest<T>(
    mut items: Vec<T>,
    n: usize,
    mut order: impl FnMut(&T, &T) -> std::cmp::Ordering,
) -> Vec<T> {
    if n == 0 {
        return Vec::new();
    }
    if items.len() > n {
        items.select_nth_unstable_by(n - 1, &mut order);
        items.truncate(n);
    }
    items.sort_by(order);
    items
}

/// Less free capacity first: cpu, then memory, then the rest.
fn free_order(a: &Resources, b: &Resources) -> std::cmp::Ordering {
    (a.milli_cpu, a.memory, a.ephemeral_storage).cmp(&(b.milli_cpu, b.memory, b.ephemeral_storage))
}

/// "rack b1/r7 has room for 6 of 8 members: 2 more need 8 cpu each".
fn no_domain_message(
    group: &GroupKey,
    level: &str,
    closest: Option<(String, Domain)>,
    needed: u64,
    per_member: &Resources,
    nodes: usize,
) -> String {
    let detail = match closest {
        None => format!("no node is in a domain of {level}"),
        Some((domain, d)) => {
            let room = d.room.min(needed);
            format!(
                "the closest, {domain}, has room for {room} of the {needed} members: {} more need {} each",
                needed.saturating_sub(room),
                describe(per_member)
            )
        }
    };
    format!(
        "0/{nodes} nodes are available: {group} requires all members within one domain of {level}, and none holds them ({detail})"
    )
}

/// A member's requests in the units operators read.
pub fn describe(r: &Resources) -> String {
    let mut parts = Vec::new();
    if r.milli_cpu > 0 {
        parts.push(match r.milli_cpu % 1000 {
            0 => format!("{} cpu", r.milli_cpu / 1000),
            _ => format!("{}m cpu", r.milli_cpu),
        });
    }
    if r.memory > 0 {
        const GI: i64 = 1 << 30;
        const MI: i64 = 1 << 20;
        parts.push(match (r.memory % GI, r.memory % MI) {
            (0, _) => format!("{}Gi memory", r.memory / GI),
            (_, 0) => format!("{}Mi memory", r.memory / MI),
            _ => format!("{} bytes of memory", r.memory),
        });
    }
    for (name, v) in &r.scalar {
        if *v > 0 {
            parts.push(format!("{v} {name}"));
        }
    }
    if parts.is_empty() {
        return "nothing".into();
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::smallest;
    use proptest::prelude::*;

    proptest! {
        /// The partial selection gives exactly the first `n` of a full sort.
        #[test]
        fn smallest_is_the_head_of_the_sorted_list(
            items in prop::collection::vec((0u64..5, 0u32..50), 0..40),
            n in 0usize..8,
        ) {
            let mut sorted = items.clone();
            sorted.sort();
            sorted.truncate(n);
            prop_assert_eq!(smallest(items, n, |a, b| a.cmp(b)), sorted);
        }
    }
}
