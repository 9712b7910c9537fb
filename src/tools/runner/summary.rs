//! The end of a run in words: the summary table printed on stdout, the
//! progress line printed on stderr while it runs, and the list of scenario
//! expectations that do not hold.

use std::fmt::Write as _;
use std::time::Duration;

use super::tracker::{Counts, Summary};
use crate::scenario::Outcome;

/// One compact progress line, e.g.
/// `[  2.0s] pods 30/30 created, 26 bound, 4 pending | gangs 3 bound, 1 waiting, 0 timed out`;
/// once anything was preempted, the counts of preempted pods and gangs too.
pub fn progress_line(at: Duration, c: &Counts) -> String {
    let (pods_preempted, gangs_preempted) = if c.pods_preempted > 0 {
        (
            format!(" ({} since preempted)", c.pods_preempted),
            format!(", {} preempted", c.gangs_preempted),
        )
    } else {
        (String::new(), String::new())
    };
    format!(
        "[{:>5.1}s] pods {}/{} created, {} bound{}, {} pending | gangs {} bound, {} waiting, {} timed out{}",
        at.as_secs_f64(),
        c.pods_created,
        c.pods_planned,
        c.pods_bound,
        pods_preempted,
        c.pods_pending(),
        c.gangs_bound,
        c.gangs_waiting,
        c.gangs_timed_out,
        gangs_preempted,
    )
}

/// The expectations that do not hold, and broken guarantees; empty = pass.
pub fn failures(s: &Summary) -> Vec<String> {
    let gangs = s.gangs.iter().filter_map(|g| {
        let expected = g.expect?;
        (!expected.accepts(g.outcome)).then(|| {
            format!(
                "gang {}/{}: expected {}, got {}",
                g.namespace, g.name, expected, g.outcome
            )
        })
    });
    let pods = s.pods.iter().filter_map(|p| {
        let expected = p.expect?;
        (!expected.accepts(p.outcome)).then(|| {
            format!(
                "pods {}/{}-*: expected {}, got {} ({}/{} bound)",
                p.namespace, p.name_prefix, expected, p.outcome, p.bound, p.count
            )
        })
    });
    s.violations
        .iter()
        .cloned()
        .chain(gangs)
        .chain(pods)
        .collect()
}

/// The summary table: gangs, plain pods, totals, scheduler messages for
/// gangs that did not bind, and the verdict on the expectations. A
/// PREEMPTED column appears once anything was preempted.
pub fn render(s: &Summary) -> String {
    let preemption = s.totals.pods_preempted > 0;
    // The PREEMPTED cell goes after BOUND, only when there was preemption.
    let cells = |mut cells: Vec<String>, preempted: String| {
        if preemption {
            cells.insert(4, preempted);
        }
        cells
    };
    let mut rows = vec![cells(
        row([
            "GANG",
            "NAMESPACE",
            "MEMBERS",
            "BOUND",
            "MIN",
            "OUTCOME",
            "QUORUM-TO-BOUND",
            "CHECK",
        ]),
        "PREEMPTED".into(),
    )];
    rows.extend(s.gangs.iter().map(|g| {
        cells(
            row([
                g.name.as_str(),
                &g.namespace,
                &g.members.to_string(),
                &g.bound.to_string(),
                &g.min_count.to_string(),
                g.outcome.label(),
                &g.quorum_to_bound.map(millis).unwrap_or_else(|| "-".into()),
                &verdict(g.expect, g.outcome),
            ]),
            g.preempted.to_string(),
        )
    }));
    let mut out = table(&rows);
    if !s.pods.is_empty() {
        let mut rows = vec![cells(
            row(["PODS", "NAMESPACE", "COUNT", "BOUND", "OUTCOME", "CHECK"]),
            "PREEMPTED".into(),
        )];
        rows.extend(s.pods.iter().map(|p| {
            cells(
                row([
                    format!("{}-*", p.name_prefix).as_str(),
                    &p.namespace,
                    &p.count.to_string(),
                    &p.bound.to_string(),
                    p.outcome.label(),
                    &verdict(p.expect, p.outcome),
                ]),
                p.preempted.to_string(),
            )
        }));
        out.push('\n');
        out.push_str(&table(&rows));
    }
    let t = &s.totals;
    let (pods_preempted, gangs_preempted) = if preemption {
        (
            format!(" ({} since preempted)", t.pods_preempted),
            format!(", {} preempted", t.gangs_preempted),
        )
    } else {
        (String::new(), String::new())
    };
    let _ = writeln!(
        out,
        "\nTOTAL  {} pods created, {} bound{}, {} pending; {} gangs: {} bound, {} timed out, {} waiting{}; {:.1}s",
        t.pods_created,
        t.pods_bound,
        pods_preempted,
        t.pods_pending(),
        s.gangs.len(),
        t.gangs_bound,
        t.gangs_timed_out,
        t.gangs_waiting,
        gangs_preempted,
        s.elapsed.as_secs_f64(),
    );
    for g in s
        .gangs
        .iter()
        .filter(|g| !matches!(g.outcome, Outcome::Bound | Outcome::Preempted))
    {
        if let Some(c) = &g.condition {
            let _ = writeln!(
                out,
                "  {}/{}: {}: {}",
                g.namespace, g.name, c.reason, c.message
            );
        }
    }
    let failures = failures(s);
    if failures.is_empty() {
        let _ = writeln!(out, "\nscenario {}: every expectation holds", s.scenario);
    } else {
        let _ = writeln!(
            out,
            "\nscenario {}: {} expectation(s) failed",
            s.scenario,
            failures.len()
        );
        for f in &failures {
            let _ = writeln!(out, "  - {f}");
        }
    }
    out
}

fn row<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

fn verdict(expect: Option<Outcome>, outcome: Outcome) -> String {
    match expect {
        None => "-".into(),
        Some(e) if e.accepts(outcome) => "ok".into(),
        Some(e) => format!("FAIL: expected {e}"),
    }
}

fn millis(d: Duration) -> String {
    if d < Duration::from_secs(10) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Left-aligned columns two spaces apart, sized by character count.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (cell, width) in r.iter().zip(&widths) {
            let pad = width.saturating_sub(cell.chars().count());
            let _ = write!(line, "{cell}{}  ", " ".repeat(pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::tracker::{GangReport, PodsReport};

    fn summary() -> Summary {
        Summary {
            scenario: "t".into(),
            elapsed: Duration::from_millis(10_500),
            gangs: vec![GangReport {
                namespace: "ml".into(),
                name: "huge-0".into(),
                members: 4,
                created: 4,
                bound: 0,
                preempted: 0,
                min_count: 4,
                outcome: Outcome::TimedOut,
                quorum_to_bound: None,
                created_to_bound: None,
                expect: Some(Outcome::Bound),
                condition: None,
            }],
            pods: vec![PodsReport {
                namespace: "default".into(),
                name_prefix: "web".into(),
                count: 2,
                created: 2,
                bound: 2,
                preempted: 0,
                outcome: Outcome::Bound,
                expect: Some(Outcome::Bound),
            }],
            totals: Counts {
                pods_planned: 6,
                pods_created: 6,
                pods_bound: 2,
                gangs_timed_out: 1,
                ..Counts::default()
            },
            violations: Vec::new(),
        }
    }

    #[test]
    fn failed_expectations_are_listed() {
        let s = summary();
        assert_eq!(
            failures(&s),
            ["gang ml/huge-0: expected all bound, got timed out"]
        );
        let text = render(&s);
        assert!(text.contains("huge-0  ml"), "{text}");
        assert!(text.contains("web-*"), "{text}");
        assert!(
            text.contains("TOTAL  6 pods created, 2 bound, 4 pending"),
            "{text}"
        );
        assert!(text.contains("1 expectation(s) failed"), "{text}");
        assert!(text.contains("FAIL: expected all bound"), "{text}");
    }

    #[test]
    fn progress_line_is_compact() {
        let line = progress_line(Duration::from_secs(2), &summary().totals);
        assert_eq!(
            line,
            "[  2.0s] pods 6/6 created, 2 bound, 4 pending | gangs 0 bound, 0 waiting, 1 timed out"
        );
    }

    /// With preemption: a PREEMPTED column, the counts in the totals, and
    /// `boundOrPreempted` met by a preempted workload.
    #[test]
    fn preemption_is_shown_and_accepted() {
        let mut s = summary();
        s.gangs[0].expect = Some(Outcome::TimedOut);
        s.pods[0].preempted = 1;
        s.pods[0].outcome = Outcome::Preempted;
        s.pods[0].expect = Some(Outcome::BoundOrPreempted);
        s.totals.pods_preempted = 1;
        assert!(failures(&s).is_empty(), "{:?}", failures(&s));
        let text = render(&s);
        assert!(text.contains("BOUND  PREEMPTED  OUTCOME"), "{text}");
        assert!(text.contains("2      1          preempted"), "{text}");
        assert!(
            text.contains("TOTAL  6 pods created, 2 bound (1 since preempted), 4 pending"),
            "{text}"
        );
        assert!(text.contains("waiting, 0 preempted; 10.5s"), "{text}");
        s.pods[0].expect = Some(Outcome::Bound);
        assert_eq!(
            failures(&s),
            ["pods default/web-*: expected all bound, got preempted (2/2 bound)"]
        );
        assert!(progress_line(Duration::ZERO, &s.totals).contains("2 bound (1 since preempted)"));
    }
}
