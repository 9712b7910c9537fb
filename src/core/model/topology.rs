//! Topology as the dialects describe it: the hierarchies a cluster declares
//! (Kueue `Topology` objects, Volcano `HyperNode` tiers, the plugin's
//! `topologyLevels`) and what a group asks of them (`TopologyRequest`).
//!
//! These are descriptions only; the domains they induce over the node table
//! are the cache's (`cache::topology`), and placing a gang within them is the
//! gang planner's (`gang::plan`).

use std::sync::Arc;

use super::LabelSelector;

/// A level of a hierarchy as a group names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LevelRef {
    /// A node label key (Kueue, the Workload API, Muster's annotation): a
    /// domain at this level is the nodes sharing the values of this label
    /// and of every outer level of the hierarchy that lists it.
    Label(Arc<str>),
    /// A Volcano HyperNode tier (1 is the innermost): a domain is one
    /// HyperNode of that tier with every node under it.
    Tier(u32),
    /// A Volcano HyperNode tier named by its `spec.tierName` (PodGroup
    /// `networkTopology.highestTierName`): the tier of the HyperNodes that
    /// carry this name, resolved when the hierarchy is known. Volcano
    /// resolves it the same way, from the HyperNodes it has seen.
    TierName(Arc<str>),
}

impl std::fmt::Display for LevelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LevelRef::Label(key) => write!(f, "{key}"),
            LevelRef::Tier(t) => write!(f, "HyperNode tier {t}"),
            LevelRef::TierName(name) => write!(f, "HyperNode tier {name:?}"),
        }
    }
}

/// `podset-slice-required-topology` with `podset-slice-size`: the gang is
/// cut into slices of `size` members, each within one domain of `level`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceRequest {
    pub level: LevelRef,
    pub size: u32,
}

/// What a group asks of topology, whatever the dialect.
///
/// The planner tries levels from the narrowest asked for outwards: from
/// `preferred` (when set) up to `required`; the gang goes into one domain of
/// the first level that holds it. With no `required` level a gang that fits
/// no domain is placed across the cluster; with one, it is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyRequest {
    /// The widest level the gang may span (PodGroup
    /// `schedulingConstraints.topology`, Kueue `podset-required-topology`,
    /// Volcano hard mode's `highestTierAllowed`).
    pub required: Option<LevelRef>,
    /// The level to try first (Kueue `podset-preferred-topology`, Muster's
    /// `muster.dev/preferred-topology`, Volcano's tier 1).
    pub preferred: Option<LevelRef>,
    /// Slices within the required (or preferred) domain.
    pub slice: Option<SliceRequest>,
    /// Kueue `podset-unconstrained-topology: "true"`: no constraint; the
    /// gang is packed into as few domains as the heuristics find.
    pub unconstrained: bool,
}

impl TopologyRequest {
    /// Nothing asked.
    pub fn is_empty(&self) -> bool {
        self.required.is_none()
            && self.preferred.is_none()
            && self.slice.is_none()
            && !self.unconstrained
    }

    /// Only a required level (the common case: one label, one domain).
    pub fn required(level: LevelRef) -> Self {
        TopologyRequest {
            required: Some(level),
            ..TopologyRequest::default()
        }
    }

    /// Only a preferred level, falling back to the whole cluster.
    pub fn preferred(level: LevelRef) -> Self {
        TopologyRequest {
            preferred: Some(level),
            ..TopologyRequest::default()
        }
    }
}

/// A Kueue `Topology` object (`kueue.x-k8s.io`): node label keys, outermost
/// level first (`spec.levels[].nodeLabel`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyDef {
    pub name: Arc<str>,
    pub levels: Vec<Arc<str>>,
}

/// The most levels a hierarchy may have (Kueue's limit is 16).
pub const MAX_TOPOLOGY_LEVELS: usize = 16;

/// A Volcano `HyperNode` (`topology.volcano.sh`): one domain of its tier,
/// whose members are nodes (tier 1) or HyperNodes of a lower tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HyperNodeDef {
    pub name: Arc<str>,
    /// `spec.tier`, at most [`MAX_HYPERNODE_TIER`].
    pub tier: u32,
    /// `spec.tierName`, when set: what `highestTierName` refers to.
    pub tier_name: Option<Arc<str>>,
    /// `spec.members`, at least one and at most [`MAX_HYPERNODE_MEMBERS`].
    pub members: Vec<HyperNodeMember>,
}

/// The highest HyperNode tier accepted (Volcano sets no maximum; real
/// hierarchies have three or four tiers, and Kueue allows 16 levels).
pub const MAX_HYPERNODE_TIER: u32 = 16;

/// The most members one HyperNode may list (a tier-1 HyperNode listing its
/// nodes one by one is the large case: a few hundred).
pub const MAX_HYPERNODE_MEMBERS: usize = 10_000;

/// The longest `regexMatch.pattern` accepted.
pub const MAX_REGEX_PATTERN_LEN: usize = 1024;

/// One `spec.members[]` entry of a HyperNode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HyperNodeMember {
    /// `type`: `Node` or `HyperNode`.
    pub kind: HyperNodeMemberKind,
    pub selector: MemberSelector,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HyperNodeMemberKind {
    Node,
    HyperNode,
}

/// `selector` of a HyperNode member: exactly one of these is set upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberSelector {
    /// `exactMatch.name`.
    Exact(Arc<str>),
    /// `regexMatch.pattern`, validated when read (a pattern that does not
    /// compile makes the HyperNode invalid, never a match-everything). As in
    /// Volcano (Go's `regexp.MatchString`), it matches anywhere in the node
    /// name unless anchored; compile it with [`compile_member_regex`].
    Regex(Arc<str>),
    /// `labelMatch`: a label selector over nodes.
    Labels(LabelSelector),
}

/// A change to the topology objects a cluster declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyChange {
    TopologyUpserted(TopologyDef),
    TopologyDeleted(Arc<str>),
    HyperNodeUpserted(HyperNodeDef),
    HyperNodeDeleted(Arc<str>),
}

/// Compiles a HyperNode `regexMatch.pattern` with bounded size (a tenant's
/// pattern must not make the scheduler build a huge automaton). Go's RE2
/// syntax, which Volcano uses, is what the `regex` crate implements.
pub fn compile_member_regex(pattern: &str) -> Result<regex::Regex, String> {
    if pattern.len() > MAX_REGEX_PATTERN_LEN {
        return Err(format!(
            "must be at most {MAX_REGEX_PATTERN_LEN} characters, got {}",
            pattern.len()
        ));
    }
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20)
        .build()
        .map_err(|e| format!("invalid regular expression: {e}"))
}

/// Why `key` is not a valid label key (apimachinery's qualified name: an
/// optional DNS subdomain prefix and `/`, then a name of at most 63
/// characters), worded as the API server words it; `None` when valid.
pub fn label_key_error(key: &str) -> Option<String> {
    const NAME_FORMAT: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let (prefix, name) = match key.split_once('/') {
        Some((_, name)) if name.contains('/') => {
            return Some("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into());
        }
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Some("prefix part must be non-empty".into());
        }
        if let Some(e) = dns_subdomain_error(prefix) {
            return Some(format!("prefix part {e}"));
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".into());
    }
    let bytes = name.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    let ends_ok = bytes.first().is_some_and(alnum) && bytes.last().is_some_and(alnum);
    if !ends_ok || !bytes.iter().all(inner) {
        return Some(NAME_FORMAT.into());
    }
    None
}

/// Why `s` is not a lowercase RFC 1123 subdomain, if it is not.
fn dns_subdomain_error(s: &str) -> Option<String> {
    if s.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        let lower_alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        b.first().is_some_and(lower_alnum)
            && b.last().is_some_and(lower_alnum)
            && b.iter().all(|c| lower_alnum(c) || *c == b'-')
    };
    if s.split('.').all(label_ok) {
        return None;
    }
    Some("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys() {
        for ok in [
            "rack",
            "kubernetes.io/hostname",
            "cloud.provider.com/topology-block",
            "a_b.c-D9",
            "x/y",
        ] {
            assert_eq!(label_key_error(ok), None, "{ok}");
        }
        let long = "n".repeat(64);
        let long_prefix = format!("{}/x", "p".repeat(254));
        for (bad, needle) in [
            ("", "name part must be non-empty"),
            ("a/", "name part must be non-empty"),
            ("/a", "prefix part must be non-empty"),
            ("a/b/c", "a qualified name must consist"),
            ("-rack", "name part must consist"),
            ("rack-", "name part must consist"),
            ("ra ck", "name part must consist"),
            (long.as_str(), "no more than 63 characters"),
            (
                "Example.com/a",
                "prefix part a lowercase RFC 1123 subdomain",
            ),
            ("a..b/c", "prefix part a lowercase RFC 1123 subdomain"),
            (long_prefix.as_str(), "prefix part must be no more than 253"),
        ] {
            let e = label_key_error(bad).unwrap_or_default();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
    }

    #[test]
    fn member_regexes_compile_bounded() {
        let r = compile_member_regex("^node-[0-9]+$").unwrap();
        assert!(r.is_match("node-12") && !r.is_match("node-x"));
        assert!(
            compile_member_regex("node-1")
                .unwrap()
                .is_match("a-node-12")
        );
        assert!(
            compile_member_regex("node-(")
                .unwrap_err()
                .contains("invalid regular expression")
        );
        let long = "a".repeat(MAX_REGEX_PATTERN_LEN + 1);
        assert!(
            compile_member_regex(&long)
                .unwrap_err()
                .contains("at most 1024")
        );
        // A pattern whose automaton would be huge is refused, not built.
        assert!(compile_member_regex("(\\w{100}){100}").is_err());
    }
}
