//! Property test of preemption: random clusters filled with gangs and plain
//! pods of mixed priorities and disruption modes, then more of both
//! arriving. After every step the invariants hold (I1 for preemptors and
//! for victims — a gang is evicted whole or not at all — and I2), and every
//! preemption paid off: its preemptor bound, or a more important pod that
//! arrived later took the room, or it is counted and printed (wasted
//! preemptions are possible; see docs/preemption.md).

use std::collections::BTreeMap;
use std::time::Duration;

use muster::driver::Harness;
use muster::driver::fixtures::{gang_def, group_key, member, node, pod};
use muster::engine::Action;
use muster::model::{DisruptionMode, PodKey};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
    Plain {
        cpu: i64,
        priority: i32,
    },
    Gang {
        size: usize,
        min: usize,
        cpu: i64,
        priority: i32,
        all: bool,
    },
    Wait(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1..=4i64, 0..4i32).prop_map(|(c, p)| Step::Plain {
            cpu: c * 500,
            priority: p * 10,
        }),
        (1..=4usize, 1..=4usize, 1..=4i64, 0..4i32, any::<bool>()).prop_map(
            |(size, min, c, p, all)| Step::Gang {
                size,
                min: min.min(size),
                cpu: c * 500,
                priority: p * 10,
                all,
            }
        ),
        (1..30u64).prop_map(Step::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn preemption_keeps_gangs_whole_and_pays_off(
        nodes in 2..6usize,
        node_cpu in 2..=4i64,
        grace in 0..20u64,
        steps in prop::collection::vec(step(), 1..24),
    ) {
        let mut h = Harness::new();
        h.termination_grace = Duration::from_secs(grace);
        for i in 0..nodes {
            h.add_node(node(&format!("n{i}"), node_cpu * 1000, 64));
        }
        // Every pod added, with its priority and the step it arrived at.
        let mut arrived: BTreeMap<PodKey, (i32, usize)> = BTreeMap::new();
        for (at, s) in steps.iter().enumerate() {
            match s {
                Step::Plain { cpu, priority } => {
                    let mut p = pod(&format!("p{at}"), *cpu, 1);
                    p.priority = *priority;
                    arrived.insert(p.key.clone(), (*priority, at));
                    h.put_pod(p);
                }
                Step::Gang { size, min, cpu, priority, all } => {
                    let name = format!("g{at}");
                    let g = group_key(&name);
                    let mut def = gang_def(&name, *min as u32, at as i64);
                    if *all {
                        def.extras.disruption_mode = Some(DisruptionMode::All);
                    }
                    h.put_def(def);
                    for i in 0..*size {
                        let mut p = member(&format!("{name}-{i}"), &g, *cpu, 1);
                        p.priority = *priority;
                        arrived.insert(p.key.clone(), (*priority, at));
                        h.put_pod(p);
                    }
                }
                Step::Wait(s) => h.advance(Duration::from_secs(*s)),
            }
            h.settle();
            if let Err(e) = h.check_invariants() {
                prop_assert!(false, "step {at} ({s:?}): {e}");
            }
        }
        // Let every victim terminate and every preemptor retry.
        h.advance(Duration::from_secs(grace + 60));
        if let Err(e) = h.check_invariants() {
            prop_assert!(false, "at the end: {e}");
        }
        // Preemptors: pods nominated after their preemption.
        let mut preemptors: Vec<PodKey> = h
            .actions
            .iter()
            .filter_map(|(_, a)| match a {
                Action::Nominate { pod, node: Some(_), .. } => Some(pod.clone()),
                _ => None,
            })
            .collect();
        preemptors.sort();
        preemptors.dedup();
        let mut wasted = Vec::new();
        for p in &preemptors {
            if h.node_of(p).is_some() || h.pod(p).is_none() {
                continue;
            }
            let (priority, at) = arrived.get(p).copied().unwrap_or((0, 0));
            let outranked = arrived
                .values()
                .any(|(q, later)| *later >= at && *q > priority);
            if !outranked {
                wasted.push(p.clone());
            }
        }
        // Counted, as the issue asks, not asserted: a preemption can be
        // wasted when the victims' room goes to a pod that was placed
        // before the preemptor's retry (found by this test; see
        // docs/preemption.md, "What is not done").
        if !wasted.is_empty() {
            eprintln!("preempted for, but neither bound nor outranked by a later pod: {wasted:?}");
        }
    }
}
