//! What a running scenario has reached so far, built only from observations
//! (pods seen, pods bound, PodGroup conditions) stamped with the time since
//! the run started. Pure state: no I/O and no clock of its own, so outcomes
//! and timings are testable with made-up times.

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
    /// A pod exists; `bound` once `spec.nodeName` is set.
    Pod {
        namespace: String,
        name: String,
        bound: bool,
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

/// When a pod was first seen and first seen bound.
#[derive(Debug, Clone, Copy, Default)]
struct Member {
    seen: Option<Duration>,
    bound: Option<Duration>,
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
    members: Vec<Member>,
    condition: Option<GroupCondition>,
}

#[derive(Debug, Clone)]
struct Batch {
    namespace: String,
    name_prefix: String,
    expect: Option<Outcome>,
    members: Vec<Member>,
}

/// Where a pod's record lives.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Gang(usize, usize),
    Batch(usize, usize),
}

/// Running totals, for the progress line and the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub pods_planned: usize,
    pub pods_created: usize,
    pub pods_bound: usize,
    pub gangs_bound: usize,
    pub gangs_waiting: usize,
    pub gangs_timed_out: usize,
}

impl Counts {
    pub fn pods_pending(&self) -> usize {
        self.pods_created - self.pods_bound
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
    pub bound: usize,
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
    pub bound: usize,
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
    /// Broken scheduler guarantees (a partially bound gang), whatever the
    /// scenario expects.
    pub violations: Vec<String>,
}

/// Tracks one run of one plan.
#[derive(Debug, Clone)]
pub struct Tracker {
    scenario: String,
    gangs: Vec<Gang>,
    batches: Vec<Batch>,
    index: HashMap<(String, String), Slot>,
    /// (namespace, name) → index into `gangs`.
    gang_index: HashMap<(String, String), usize>,
}

impl Tracker {
    /// `gang` gives the timeout of gangs whose scenario entry sets none.
    pub fn new(scenario: &str, plan: &Plan, gang: &crate::gang::GangArgs) -> Tracker {
        let mut tracker = Tracker {
            scenario: scenario.to_string(),
            gangs: Vec::new(),
            batches: Vec::new(),
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
                        members,
                        condition: None,
                    })
                }
                WorkloadPlan::Pods(p) => tracker.batches.push(Batch {
                    namespace: p.namespace.clone(),
                    name_prefix: p.name_prefix.clone(),
                    expect: p.expect,
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
            } => self.member(namespace, name).is_some_and(|m| {
                let before = (m.seen.is_some(), m.bound.is_some());
                m.seen.get_or_insert(at);
                if bound {
                    m.bound.get_or_insert(at);
                }
                before != (true, m.bound.is_some())
            }),
            Observation::PodGone { namespace, name } => {
                self.member(namespace, name).is_some_and(|m| {
                    let had = m.seen.is_some();
                    *m = Member::default();
                    had
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

    /// True when every gang is bound or timed out and every plain pod is
    /// bound: nothing more will change the outcome.
    pub fn settled(&self, at: Duration) -> bool {
        self.gangs.iter().all(|g| g.outcome(at) != Outcome::Waiting)
            && self.batches.iter().all(|b| b.outcome() == Outcome::Bound)
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
            ..Counts::default()
        };
        for g in &self.gangs {
            match g.outcome(at) {
                Outcome::Bound => counts.gangs_bound += 1,
                Outcome::TimedOut => counts.gangs_timed_out += 1,
                Outcome::Waiting => counts.gangs_waiting += 1,
            }
        }
        counts
    }

    /// Every planned pod's timings, gang members first.
    pub fn pod_times(&self) -> Vec<PodTimes> {
        let times = |in_gang| {
            move |m: &Member| PodTimes {
                created: m.seen,
                bound: m.bound,
                in_gang,
            }
        };
        self.gangs
            .iter()
            .flat_map(|g| g.members.iter().map(times(true)))
            .chain(
                self.batches
                    .iter()
                    .flat_map(|b| b.members.iter().map(times(false))),
            )
            .collect()
    }

    pub fn summary(&self, at: Duration) -> Summary {
        let gangs: Vec<GangReport> = self.gangs.iter().map(|g| g.report(at)).collect();
        let violations = gangs
            .iter()
            .filter(|g| g.bound > 0 && g.bound < g.min_count as usize)
            .filter(|g| !g.condition.as_ref().is_some_and(|c| c.status))
            .map(|g| {
                format!(
                    "gang {}/{} is partially bound: {} of min count {} members bound",
                    g.namespace, g.name, g.bound, g.min_count
                )
            })
            .collect();
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
        if self.all_bound_at().is_some() {
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
    fn outcome(&self) -> Outcome {
        if self.members.iter().all(|m| m.bound.is_some()) {
            Outcome::Bound
        } else {
            Outcome::Waiting
        }
    }

    fn report(&self) -> PodsReport {
        PodsReport {
            namespace: self.namespace.clone(),
            name_prefix: self.name_prefix.clone(),
            count: self.members.len(),
            created: self.members.iter().filter(|m| m.seen.is_some()).count(),
            bound: self.members.iter().filter(|m| m.bound.is_some()).count(),
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
        let uniform = crate::gang::GangArgs {
            dialect_timeouts: crate::gang::DialectTimeouts::UNIFORM,
            ..crate::gang::GangArgs::default()
        };
        Tracker::new(&s.name, &s.plan(), &uniform)
    }

    fn pod(name: &str, bound: bool) -> Observation {
        Observation::Pod {
            namespace: "default".into(),
            name: name.into(),
            bound,
        }
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
    fn deleted_pods_are_forgotten() {
        let mut t = tracker();
        t.observe(pod("p-0", true), secs(1.0));
        assert!(t.observe(
            Observation::PodGone {
                namespace: "default".into(),
                name: "p-0".into()
            },
            secs(2.0)
        ));
        assert_eq!(t.counts(secs(2.0)).pods_created, 0);
    }
}
