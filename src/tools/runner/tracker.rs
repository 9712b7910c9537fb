//! What a running scenario has reached so far, built only from observations
//! (pods seen, pods bound, pods deleted, PodGroup conditions) stamped with
//! the time since the run started. Pure state: no I/O and no clock of its
//! own, so outcomes and timings are testable with made-up times.
//!
//! A pod deleted (or marked for deletion) after it was bound was preempted:
//! it keeps its timings and counts as preempted, not as lost. A pod deleted
//! before it was bound is forgotten, as if never created.

use std::collections::HashMap;
use std::time::Duration;

use crate::scenario::{Outcome, Plan, WorkloadPlan};

/// The scheduler's `PodGroupInitiallyScheduled` condition on a PodGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupCondition {
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// One change seen through the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// A pod exists; `bound` once `spec.nodeName` is set, `terminating`
    /// once `metadata.deletionTimestamp` is.
    Pod {
        namespace: String,
        name: String,
        bound: bool,
        terminating: bool,
    },
    PodGone {
        namespace: String,
        name: String,
    },
    /// A PodGroup exists, with its condition if the scheduler wrote one.
    Group {
        namespace: String,
        name: String,
        condition: Option<GroupCondition>,
    },
}

/// When a pod was first seen, first seen bound, and first seen going after
/// it was bound.
#[derive(Debug, Clone, Copy, Default)]
struct Member {
    seen: Option<Duration>,
    bound: Option<Duration>,
    preempted: Option<Duration>,
}

impl Member {
    fn state(&self) -> (bool, bool, bool) {
        (
            self.seen.is_some(),
            self.bound.is_some(),
            self.preempted.is_some(),
        )
    }
}

/// One planned pod's timings, since the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodTimes {
    /// First seen through the API (`None`: never created or deleted).
    pub created: Option<Duration>,
    /// First seen bound.
    pub bound: Option<Duration>,
    /// A gang member (else a plain pod).
    pub in_gang: bool,
}

#[derive(Debug, Clone)]
struct Gang {
    namespace: String,
    name: String,
    min_count: u32,
    timeout: Duration,
    expect: Option<Outcome>,
    measured: bool,
    members: Vec<Member>,
    condition: Option<GroupCondition>,
}

#[derive(Debug, Clone)]
struct Batch {
    namespace: String,
    name_prefix: String,
    expect: Option<Outcome>,
    measured: bool,
    members: Vec<Member>,
}

/// Where a pod's record lives.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Gang(usize, usize),
    Batch(usize, usize),
}

/// Where a plan workload's record lives.
#[derive(Debug, Clone, Copy)]
enum Entry {
    Gang(usize),
    Batch(usize),
}

/// Running totals, for the progress line and the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub pods_planned: usize,
    pub pods_created: usize,
    /// Pods ever seen bound, including those since preempted.
    pub pods_bound: usize,
    /// Pods deleted (or marked for deletion) after they were bound.
    pub pods_preempted: usize,
    pub gangs_bound: usize,
    pub gangs_waiting: usize,
    pub gangs_timed_out: usize,
    pub gangs_preempted: usize,
}

impl Counts {
    pub fn pods_pending(&self) -> usize {
        self.pods_created.saturating_sub(self.pods_bound)
    }
}

/// One gang at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangReport {
    pub namespace: String,
    pub name: String,
    /// Member pods the scenario creates.
    pub members: usize,
    pub created: usize,
    /// Members ever bound, including those since preempted.
    pub bound: usize,
    pub preempted: usize,
    pub min_count: u32,
    pub outcome: Outcome,
    /// From quorum observed (the last of the first `min_count` members
    /// existed) to the last member bound.
    pub quorum_to_bound: Option<Duration>,
    /// From the last member created to the last member bound.
    pub created_to_bound: Option<Duration>,
    pub expect: Option<Outcome>,
    pub condition: Option<GroupCondition>,
}

/// One workload of plain pods at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodsReport {
    pub namespace: String,
    pub name_prefix: String,
    pub count: usize,
    pub created: usize,
    /// Pods ever bound, including those since preempted.
    pub bound: usize,
    pub preempted: usize,
    pub outcome: Outcome,
    pub expect: Option<Outcome>,
}

/// Everything a run reached; rendered by `report`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub scenario: String,
    pub elapsed: Duration,
    pub gangs: Vec<GangReport>,
    pub pods: Vec<PodsReport>,
    pub totals: Counts,
    /// Broken scheduler guarantees (a partially bound or partially
    /// preempted gang), whatever the scenario expects.
    pub violations: Vec<String>,
}

/// Tracks one run of one plan.
#[derive(Debug, Clone)]
pub struct Tracker {
    scenario: String,
    gangs: Vec<Gang>,
    batches: Vec<Batch>,
    /// The plan's workloads, in plan order.
    order: Vec<Entry>,
    index: HashMap<(String, String), Slot>,
    /// (namespace, name) → index into `gangs`.
    gang_index: HashMap<(String, String), usize>,
}

impl Tracker {
    /// `gang` gives the timeout of gangs whose scenario entry sets none.
    pub fn new(scenario: &str, plan: &Plan, gang: &muster_core::gang::GangArgs) -> Tracker {
        let mut tracker = Tracker {
            scenario: scenario.to_string(),
            gangs: Vec::new(),
            batches: Vec::new(),
            order: Vec::new(),
            index: HashMap::new(),
            gang_index: HashMap::new(),
        };
        for workload in &plan.workloads {
            let slot = |j| match workload {
                WorkloadPlan::Gang(_) => Slot::Gang(tracker.gangs.len(), j),
                WorkloadPlan::Pods(_) => Slot::Batch(tracker.batches.len(), j),
            };
            let slots: Vec<_> = workload
                .pods()
                .iter()
                .enumerate()
                .map(|(j, pod)| {
                    let ns = pod.namespace.clone().unwrap_or_default();
                    ((ns, pod.name.clone()), slot(j))
                })
                .collect();
            tracker.index.extend(slots);
            let members = vec![Member::default(); workload.pods().len()];
            tracker.order.push(match workload {
                WorkloadPlan::Gang(_) => Entry::Gang(tracker.gangs.len()),
                WorkloadPlan::Pods(_) => Entry::Batch(tracker.batches.len()),
            });
            match workload {
                WorkloadPlan::Gang(g) => {
                    let key = (g.namespace.clone(), g.name.clone());
                    tracker.gang_index.insert(key, tracker.gangs.len());
                    tracker.gangs.push(Gang {
                        namespace: g.namespace.clone(),
                        name: g.name.clone(),
                        min_count: g.min_count,
                        timeout: g.timeout.unwrap_or_else(|| gang.default_timeout(g.source)),
                        expect: g.expect,
                        measured: g.measured,
                        members,
                        condition: None,
                    })
                }
                WorkloadPlan::Pods(p) => tracker.batches.push(Batch {
                    namespace: p.namespace.clone(),
                    name_prefix: p.name_prefix.clone(),
                    expect: p.expect,
                    measured: p.measured,
                    members,
                }),
            }
        }
        tracker
    }

    /// Records an observation made `at` after the start; true if anything changed.
    pub fn observe(&mut self, observation: Observation, at: Duration) -> bool {
        match observation {
            Observation::Pod {
                namespace,
                name,
                bound,
                terminating,
            } => self.member(namespace, name).is_some_and(|m| {
                let before = m.state();
                m.seen.get_or_insert(at);
                if bound {
                    m.bound.get_or_insert(at);
                }
                if terminating && m.bound.is_some() {
                    m.preempted.get_or_insert(at);
                }
                before != m.state()
            }),
            Observation::PodGone { namespace, name } => {
                self.member(namespace, name).is_some_and(|m| {
                    let before = m.state();
                    if m.bound.is_some() {
                        m.preempted.get_or_insert(at);
                    } else {
                        *m = Member::default();
                    }
                    before != m.state()
                })
            }
            Observation::Group {
                namespace,
                name,
                condition,
            } => self
                .gang_index
                .get(&(namespace, name))
                .and_then(|&i| self.gangs.get_mut(i))
                .is_some_and(|g| {
                    let changed = g.condition != condition && condition.is_some();
                    if condition.is_some() {
                        g.condition = condition;
                    }
                    changed
                }),
        }
    }

    fn member(&mut self, namespace: String, name: String) -> Option<&mut Member> {
        match *self.index.get(&(namespace, name))? {
            Slot::Gang(g, j) => self.gangs.get_mut(g)?.members.get_mut(j),
            Slot::Batch(b, j) => self.batches.get_mut(b)?.members.get_mut(j),
        }
    }

    /// True when every gang is bound, preempted or timed out and every
    /// plain pod is bound or preempted: nothing more will change the outcome.
    pub fn settled(&self, at: Duration) -> bool {
        self.gangs.iter().all(|g| g.outcome(at) != Outcome::Waiting)
            && self.batches.iter().all(|b| b.outcome() != Outcome::Waiting)
    }

    /// The index of the first plan workload at or after `from` that has not
    /// settled (the plan's length when all have): phase gates open once it
    /// reaches their first workload. Walks only from `from`, so a caller
    /// keeping the last answer pays for each workload about once.
    pub fn first_unsettled(&self, from: usize, at: Duration) -> usize {
        let settled = |entry: &Entry| match *entry {
            Entry::Gang(i) => self
                .gangs
                .get(i)
                .is_some_and(|g| g.outcome(at) != Outcome::Waiting),
            Entry::Batch(i) => self
                .batches
                .get(i)
                .is_some_and(|b| b.outcome() != Outcome::Waiting),
        };
        let rest = self.order.get(from..).unwrap_or_default();
        from + rest.iter().take_while(|e| settled(e)).count()
    }

    /// The next moment a gang's timeout expires, if any gang is waiting for one.
    pub fn next_timeout(&self, at: Duration) -> Option<Duration> {
        self.gangs
            .iter()
            .filter(|g| g.outcome(at) == Outcome::Waiting)
            .filter_map(|g| Some(g.quorum()? + g.timeout))
            .filter(|t| *t > at)
            .min()
    }

    pub fn counts(&self, at: Duration) -> Counts {
        let members = || {
            self.gangs
                .iter()
                .flat_map(|g| &g.members)
                .chain(self.batches.iter().flat_map(|b| &b.members))
        };
        let mut counts = Counts {
            pods_planned: members().count(),
            pods_created: members().filter(|m| m.seen.is_some()).count(),
            pods_bound: members().filter(|m| m.bound.is_some()).count(),
            pods_preempted: members().filter(|m| m.preempted.is_some()).count(),
            ..Counts::default()
        };
        for g in &self.gangs {
            match g.outcome(at) {
                Outcome::Bound => counts.gangs_bound += 1,
                Outcome::TimedOut => counts.gangs_timed_out += 1,
                Outcome::Preempted => counts.gangs_preempted += 1,
                // Never an actual outcome; counted as not settled.
                Outcome::Waiting | Outcome::BoundOrPreempted => counts.gangs_waiting += 1,
            }
        }
        counts
    }

    /// Every planned pod's timings, gang members first.
    pub fn pod_times(&self) -> Vec<PodTimes> {
        self.times_where(false)
    }

    /// The timings of the measured workloads' pods (every pod's when no
    /// workload is measured): what throughput and latency are computed on.
    pub fn measured_pod_times(&self) -> Vec<PodTimes> {
        let any = self.gangs.iter().any(|g| g.measured) || self.batches.iter().any(|b| b.measured);
        self.times_where(any)
    }

    /// The timings of every pod, or only of the measured workloads' pods.
    fn times_where(&self, measured_only: bool) -> Vec<PodTimes> {
        let times = |in_gang| {
            move |m: &Member| PodTimes {
                created: m.seen,
                bound: m.bound,
                in_gang,
            }
        };
        self.gangs
            .iter()
            .filter(|g| g.measured || !measured_only)
            .flat_map(|g| g.members.iter().map(times(true)))
            .chain(
                self.batches
                    .iter()
                    .filter(|b| b.measured || !measured_only)
                    .flat_map(|b| b.members.iter().map(times(false))),
            )
            .collect()
    }

    pub fn summary(&self, at: Duration) -> Summary {
        let gangs: Vec<GangReport> = self.gangs.iter().map(|g| g.report(at)).collect();
        let violations = gangs.iter().filter_map(violation).collect();
        Summary {
            scenario: self.scenario.clone(),
            elapsed: at,
            gangs,
            pods: self.batches.iter().map(Batch::report).collect(),
            totals: self.counts(at),
            violations,
        }
    }
}

/// A gang left running below its quorum: bound in part and not released
/// (members of a released gang bind one by one), or preempted in part (I1
/// holds for victims: a gang is evicted whole or not at all).
fn violation(g: &GangReport) -> Option<String> {
    let min = g.min_count as usize;
    if g.preempted > 0 {
        let running = g.bound.saturating_sub(g.preempted);
        return (running > 0 && running < min).then(|| {
            format!(
                "gang {}/{} is partially preempted: {} of min count {} members still running, {} preempted",
                g.namespace, g.name, running, g.min_count, g.preempted
            )
        });
    }
    let released = g.condition.as_ref().is_some_and(|c| c.status);
    (g.bound > 0 && g.bound < min && !released).then(|| {
        format!(
            "gang {}/{} is partially bound: {} of min count {} members bound",
            g.namespace, g.name, g.bound, g.min_count
        )
    })
}

impl Gang {
    /// When the last of the first `min_count` members was seen.
    fn quorum(&self) -> Option<Duration> {
        let mut seen: Vec<Duration> = self.members.iter().filter_map(|m| m.seen).collect();
        seen.sort();
        let index = (self.min_count as usize).checked_sub(1)?;
        seen.get(index).copied()
    }

    fn all_bound_at(&self) -> Option<Duration> {
        self.members
            .iter()
            .map(|m| m.bound)
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .max()
    }

    fn outcome(&self, at: Duration) -> Outcome {
        if self.members.iter().any(|m| m.preempted.is_some()) {
            Outcome::Preempted
        } else if self.all_bound_at().is_some() {
            Outcome::Bound
        } else if self.quorum().is_some_and(|q| at >= q + self.timeout) {
            Outcome::TimedOut
        } else {
            Outcome::Waiting
        }
    }

    fn report(&self, at: Duration) -> GangReport {
        let all_bound = self.all_bound_at();
        let quorum_to_bound = match (self.quorum(), all_bound) {
            (Some(q), Some(b)) => Some(b.saturating_sub(q)),
            _ => None,
        };
        let last_created = self.members.iter().filter_map(|m| m.seen).max();
        let created_to_bound = match (last_created, all_bound) {
            (Some(c), Some(b)) => Some(b.saturating_sub(c)),
            _ => None,
        };
        GangReport {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            members: self.members.len(),
            created: self.members.iter().filter(|m| m.seen.is_some()).count(),
            bound: self.members.iter().filter(|m| m.bound.is_some()).count(),
            preempted: self
                .members
                .iter()
                .filter(|m| m.preempted.is_some())
                .count(),
            min_count: self.min_count,
            outcome: self.outcome(at),
            quorum_to_bound,
            created_to_bound,
            expect: self.expect,
            condition: self.condition.clone(),
        }
    }
}

impl Batch {
    /// Preempted pods stay bound in their record, so "all bound" includes
    /// them.
    fn outcome(&self) -> Outcome {
        if !self.members.iter().all(|m| m.bound.is_some()) {
            Outcome::Waiting
        } else if self.members.iter().any(|m| m.preempted.is_some()) {
            Outcome::Preempted
        } else {
            Outcome::Bound
        }
    }

    fn report(&self) -> PodsReport {
        PodsReport {
            namespace: self.namespace.clone(),
            name_prefix: self.name_prefix.clone(),
            count: self.members.len(),
            created: self.members.iter().filter(|m| m.seen.is_some()).count(),
            bound: self.members.iter().filter(|m| m.bound.is_some()).count(),
            preempted: self
                .members
                .iter()
                .filter(|m| m.preempted.is_some())
                .count(),
            outcome: self.outcome(),
            expect: self.expect,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    const S: &str = "name: t\nworkloads:\n  - gang: {namePrefix: g, size: 3, minCount: 2, timeoutSeconds: 5}\n  - pods: {namePrefix: p, count: 2}\n";

    fn tracker() -> Tracker {
        let s = Scenario::parse(S, "t").unwrap();
        let uniform = muster_core::gang::GangArgs {
            dialect_timeouts: muster_core::gang::DialectTimeouts::UNIFORM,
            ..muster_core::gang::GangArgs::default()
        };
        Tracker::new(&s.name, &s.plan(), &uniform)
    }

    fn pod(name: &str, bound: bool) -> Observation {
        Observation::Pod {
            namespace: "default".into(),
            name: name.into(),
            bound,
            terminating: false,
        }
    }

    fn terminating(name: &str) -> Observation {
        Observation::Pod {
            namespace: "default".into(),
            name: name.into(),
            bound: true,
            terminating: true,
        }
    }

    fn gone(name: &str) -> Observation {
        Observation::PodGone {
            namespace: "default".into(),
            name: name.into(),
        }
    }

    fn tracker_of(yaml: &str) -> Tracker {
        let s = Scenario::parse(yaml, "t").unwrap();
        Tracker::new(&s.name, &s.plan(), &muster_core::gang::GangArgs::default())
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn quorum_to_bound_counts_from_the_min_count_th_member() {
        let mut t = tracker();
        assert!(t.observe(pod("g-0-0", false), secs(1.0)));
        assert!(t.observe(pod("g-0-1", false), secs(2.0)));
        assert!(t.observe(pod("g-0-2", false), secs(3.0)));
        assert!(!t.observe(pod("g-0-2", false), secs(3.5)), "no change");
        assert!(!t.observe(pod("unrelated", true), secs(3.5)));
        for (name, at) in [("g-0-0", 2.5), ("g-0-1", 2.6), ("g-0-2", 3.25)] {
            t.observe(pod(name, true), secs(at));
        }
        let r = &t.summary(secs(4.0)).gangs[0];
        assert_eq!(r.outcome, Outcome::Bound);
        assert_eq!(r.quorum_to_bound, Some(secs(1.25)));
        assert_eq!(r.created_to_bound, Some(secs(0.25)));
        let times = t.pod_times();
        assert_eq!(times.len(), 5);
        assert_eq!(
            times[2],
            PodTimes {
                created: Some(secs(3.0)),
                bound: Some(secs(3.25)),
                in_gang: true
            }
        );
        assert!(!times[4].in_gang);
        assert_eq!((r.created, r.bound, r.members), (3, 3, 3));
    }

    #[test]
    fn a_gang_times_out_from_quorum_and_the_run_settles() {
        let mut t = tracker();
        t.observe(pod("g-0-0", false), secs(1.0));
        assert_eq!(t.next_timeout(secs(1.0)), None, "no quorum yet");
        t.observe(pod("g-0-1", false), secs(2.0));
        assert_eq!(t.next_timeout(secs(2.0)), Some(secs(7.0)));
        t.observe(pod("p-0", true), secs(2.0));
        t.observe(pod("p-1", true), secs(2.0));
        assert!(!t.settled(secs(6.9)));
        assert!(t.settled(secs(7.0)));
        let s = t.summary(secs(7.0));
        assert_eq!(s.gangs[0].outcome, Outcome::TimedOut);
        assert_eq!(s.pods[0].outcome, Outcome::Bound);
        assert_eq!(s.totals.gangs_timed_out, 1);
        assert_eq!((s.totals.pods_created, s.totals.pods_bound), (4, 2));
        assert!(s.violations.is_empty());
    }

    #[test]
    fn partial_binding_is_a_violation_unless_released() {
        let mut t = tracker();
        t.observe(pod("g-0-0", true), secs(1.0));
        assert_eq!(t.summary(secs(1.0)).violations.len(), 1);
        let released = GroupCondition {
            status: true,
            reason: "Scheduled".into(),
            message: String::new(),
        };
        t.observe(
            Observation::Group {
                namespace: "default".into(),
                name: "g-0".into(),
                condition: Some(released),
            },
            secs(1.0),
        );
        assert!(t.summary(secs(1.0)).violations.is_empty());
    }

    #[test]
    fn pods_deleted_before_binding_are_forgotten() {
        let mut t = tracker();
        t.observe(pod("p-0", false), secs(1.0));
        assert!(t.observe(
            Observation::PodGone {
                namespace: "default".into(),
                name: "p-0".into()
            },
            secs(2.0)
        ));
        assert_eq!(t.counts(secs(2.0)).pods_created, 0);
    }

    #[test]
    fn a_pod_deleted_before_binding_is_forgotten_after_binding_preempted() {
        let mut t = tracker();
        t.observe(pod("p-0", false), secs(1.0));
        assert!(t.observe(gone("p-0"), secs(1.5)), "forgotten");
        assert_eq!(t.counts(secs(1.5)).pods_created, 0);
        t.observe(pod("p-1", true), secs(2.0));
        assert!(t.observe(gone("p-1"), secs(3.0)));
        assert!(!t.observe(gone("p-1"), secs(3.1)), "already preempted");
        let c = t.counts(secs(3.0));
        assert_eq!((c.pods_created, c.pods_bound, c.pods_preempted), (1, 1, 1));
        let times = t.pod_times();
        assert_eq!(times[4].bound, Some(secs(2.0)), "timings kept");
    }

    /// Preempted at the first sight of `deletionTimestamp` on a bound pod;
    /// a pending pod marked for deletion is not preempted.
    #[test]
    fn terminating_while_bound_is_preempted() {
        let mut t = tracker();
        t.observe(pod("p-0", true), secs(1.0));
        t.observe(pod("p-1", true), secs(1.0));
        assert_eq!(t.summary(secs(1.0)).pods[0].outcome, Outcome::Bound);
        assert!(t.observe(terminating("p-0"), secs(2.0)));
        assert!(!t.observe(gone("p-0"), secs(2.5)), "already counted");
        let s = t.summary(secs(3.0));
        assert_eq!(s.pods[0].outcome, Outcome::Preempted);
        assert_eq!((s.pods[0].bound, s.pods[0].preempted), (2, 1));
        let pending = Observation::Pod {
            namespace: "default".into(),
            name: "g-0-0".into(),
            bound: false,
            terminating: true,
        };
        t.observe(pending, secs(3.0));
        assert_eq!(t.counts(secs(3.0)).pods_preempted, 1);
    }

    /// The outcomes a workload ends with, against what it expects.
    #[test]
    fn outcomes_with_preemption() {
        const P: &str = "name: t\nworkloads:\n  - pods: {namePrefix: p, count: 2, expect: {outcome: boundOrPreempted}}\n";
        // (observations, outcome, boundOrPreempted accepts, settled)
        let cases: [(&[Observation], Outcome, bool, bool); 4] = [
            (&[pod("p-0", true)], Outcome::Waiting, false, false),
            (
                &[pod("p-0", true), pod("p-1", true)],
                Outcome::Bound,
                true,
                true,
            ),
            (
                &[pod("p-0", true), pod("p-1", true), gone("p-1")],
                Outcome::Preempted,
                true,
                true,
            ),
            // One preempted, the other never bound: still waiting.
            (
                &[pod("p-0", true), gone("p-0"), pod("p-1", false)],
                Outcome::Waiting,
                false,
                false,
            ),
        ];
        for (i, (observations, outcome, accepted, settled)) in cases.into_iter().enumerate() {
            let mut t = tracker_of(P);
            for o in observations {
                t.observe(o.clone(), secs(1.0));
            }
            let s = t.summary(secs(2.0));
            assert_eq!(s.pods[0].outcome, outcome, "case {i}");
            assert_eq!(
                Outcome::BoundOrPreempted.accepts(outcome),
                accepted,
                "case {i}"
            );
            assert_eq!(
                Outcome::Bound.accepts(outcome),
                outcome == Outcome::Bound,
                "case {i}"
            );
            assert_eq!(t.settled(secs(2.0)), settled, "case {i}");
            assert_eq!(
                crate::runner::summary::failures(&s).is_empty(),
                accepted,
                "case {i}"
            );
        }
    }

    /// A victim gang evicted whole is preempted and settled; one left
    /// running below its minCount is a violation, released or not.
    #[test]
    fn gangs_preempted_whole_or_reported_partial() {
        const G: &str =
            "name: t\nworkloads:\n  - gang: {namePrefix: g, count: 2, size: 4, minCount: 3}\n";
        let mut t = tracker_of(G);
        for gang in 0..2 {
            for j in 0..4 {
                t.observe(pod(&format!("g-{gang}-{j}"), true), secs(1.0));
            }
        }
        // g-0 evicted whole; g-1 loses two members of four (2 < minCount 3).
        for j in 0..4 {
            t.observe(terminating(&format!("g-0-{j}")), secs(2.0));
        }
        t.observe(gone("g-1-0"), secs(2.0));
        t.observe(gone("g-1-1"), secs(2.0));
        let released = GroupCondition {
            status: true,
            reason: "Scheduled".into(),
            message: String::new(),
        };
        t.observe(
            Observation::Group {
                namespace: "default".into(),
                name: "g-1".into(),
                condition: Some(released),
            },
            secs(2.0),
        );
        let s = t.summary(secs(3.0));
        assert_eq!(s.gangs[0].outcome, Outcome::Preempted);
        assert_eq!(s.gangs[0].preempted, 4);
        assert_eq!(s.totals.gangs_preempted, 2);
        assert_eq!(
            s.violations,
            [
                "gang default/g-1 is partially preempted: 2 of min count 3 members still running, 2 preempted"
            ]
        );
        assert!(t.settled(secs(3.0)));
        // One member of a gang of minCount 3 preempted leaves 3 running: fine.
        let mut t = tracker_of(G);
        for j in 0..4 {
            t.observe(pod(&format!("g-0-{j}"), true), secs(1.0));
        }
        t.observe(gone("g-0-3"), secs(2.0));
        assert!(t.summary(secs(2.0)).violations.is_empty());
    }

    /// The phase gate's cursor: the first workload not settled, walking
    /// from where it was.
    #[test]
    fn first_unsettled_walks_the_plan_in_order() {
        const S: &str = "name: t\nworkloads:\n  - pods: {namePrefix: low, count: 2}\n  - gang: {namePrefix: g, count: 2, size: 1, timeoutSeconds: 5}\n  - pods: {namePrefix: high, count: 1, start: {after: previousSettled}}\n";
        let mut t = tracker_of(S);
        assert_eq!(t.first_unsettled(0, secs(0.0)), 0);
        t.observe(pod("low-0", true), secs(1.0));
        assert_eq!(t.first_unsettled(0, secs(1.0)), 0);
        t.observe(pod("low-1", true), secs(1.0));
        assert_eq!(t.first_unsettled(0, secs(1.0)), 1);
        t.observe(pod("g-0-0", true), secs(1.0));
        t.observe(pod("g-1-0", false), secs(1.0));
        assert_eq!(t.first_unsettled(1, secs(1.0)), 2, "g-1 waits");
        // g-1 times out 5 s after its quorum: settled without an event.
        assert_eq!(t.first_unsettled(2, secs(6.0)), 3);
        // Preempting the low pods keeps them settled.
        t.observe(gone("low-0"), secs(7.0));
        assert_eq!(t.first_unsettled(0, secs(7.0)), 3);
        t.observe(pod("high-0", true), secs(8.0));
        assert_eq!(t.first_unsettled(3, secs(8.0)), 4);
        assert_eq!(t.first_unsettled(9, secs(8.0)), 9, "past the end");
    }

    #[test]
    fn measured_pod_times_are_the_measured_workloads_or_all() {
        let mut t = tracker_of(
            "name: t\nworkloads:\n  - pods: {namePrefix: a, count: 2}\n  - pods: {namePrefix: b, count: 3, measured: true}\n",
        );
        t.observe(pod("b-0", true), secs(1.0));
        let measured = t.measured_pod_times();
        assert_eq!(measured.len(), 3);
        assert_eq!(measured[0].bound, Some(secs(1.0)));
        assert_eq!(tracker().measured_pod_times().len(), 5, "none marked: all");
    }
}
