//! The explanation as people read it: the answer first, then the facts
//! behind it, one section per kind of fact, only those that apply.

use std::fmt::Write as _;

use super::{Explanation, Source};

/// Renders `e` for a terminal.
pub fn render(e: &Explanation) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}: {}", e.target, e.summary);
    if e.source == Source::ApiObjects {
        let _ = writeln!(out, "Source: API objects (conditions and events)");
    }
    if let Some(note) = &e.note {
        let _ = writeln!(out, "Note: {note}");
    }
    if let Some(g) = &e.gang {
        let min = g
            .min_count
            .map_or_else(|| "no minCount".to_string(), |m| format!("minCount {m}"));
        let _ = writeln!(
            out,
            "Gang: {} ({min}): {} present, {} gated, {} placed, {} bound",
            g.group, g.present, g.gated, g.placed, g.bound
        );
        if let Some(s) = g.satisfied {
            let words = if s { "yes" } else { "no: below minCount" };
            let _ = writeln!(out, "  Satisfied: {words}");
        }
    }
    if !e.members.is_empty() {
        let _ = writeln!(out, "Pods:");
        let width = e.members.iter().map(|m| m.name.len()).max().unwrap_or(0);
        for m in &e.members {
            let mut line = format!("  {:width$}  {}", m.name, m.state);
            if let Some(n) = &m.node {
                let _ = write!(line, " on {n}");
            }
            if let Some(n) = &m.nominated_node {
                let _ = write!(line, " (nominated to {n})");
            }
            if !m.scheduling_gates.is_empty() {
                let _ = write!(line, " by {}", m.scheduling_gates.join(", "));
            }
            if let Some(msg) = &m.message {
                let _ = write!(line, ": {msg}");
            }
            let _ = writeln!(out, "{line}");
        }
    }
    if let Some(q) = &e.queue {
        let place = match q.position {
            Some(p) => format!("position {p} of {} active pods", q.active_pods),
            None => format!("not active ({} active pods)", q.active_pods),
        };
        let _ = writeln!(
            out,
            "Queue ({}): {place}; {} attempt(s)",
            q.profile, q.attempts
        );
        if let Some(s) = q.backoff_seconds {
            let _ = writeln!(out, "  backing off for {s:.1}s more");
        }
        if q.ahead_total > 0 {
            let _ = writeln!(out, "  ahead of it ({} in all):", q.ahead_total);
            for a in &q.ahead {
                let _ = writeln!(
                    out,
                    "    {} ({} pod(s), priority {})",
                    a.unit, a.pods, a.priority
                );
            }
        }
    }
    if let Some(p) = &e.permit {
        let timeout = p
            .timeout_seconds
            .map_or_else(String::new, |s| format!("; rejected in {s:.1}s"));
        let _ = writeln!(
            out,
            "Permit: {} waiting, {} needed{timeout}",
            p.waiting, p.needed
        );
    }
    if let Some(r) = &e.last_release {
        let _ = writeln!(
            out,
            "Last release: {} {:.0}s ago: {}",
            r.reason, r.seconds_ago, r.message
        );
    }
    if let Some(a) = &e.last_attempt {
        let _ = writeln!(out, "Last attempt:");
        if let Some(m) = &a.group_message {
            let _ = writeln!(out, "  gang: {m}");
        }
        if !a.domains_tried.is_empty() {
            let chosen = a.domain_chosen.as_deref().unwrap_or("none held it");
            let _ = writeln!(
                out,
                "  domains tried: {}; placed in {chosen}",
                a.domains_tried.join(", ")
            );
        }
        for p in &a.pods {
            let _ = writeln!(out, "  {} ({}): {}", p.pod, p.reason, p.message);
        }
    }
    if let Some(r) = &e.reservation {
        let start = r.expected_start_seconds.map_or_else(
            || "start unknown".to_string(),
            |s| format!("expected start in {s:.0}s"),
        );
        let _ = writeln!(
            out,
            "Reservation: {} node(s) [{}], held {:.0}s; {start}",
            r.nodes.len(),
            r.nodes.join(", "),
            r.held_seconds
        );
    }
    if let Some(p) = &e.preemption {
        let _ = writeln!(out, "Preemption:");
        for n in &p.nominated {
            let _ = writeln!(out, "  {} nominated to {}", n.pod, n.node);
        }
        if p.victims_terminating.is_empty() {
            let _ = writeln!(out, "  no victim left terminating");
        } else {
            let _ = writeln!(
                out,
                "  victims still terminating: {}",
                p.victims_terminating.join(", ")
            );
        }
        for r in &p.why_victims {
            let _ = writeln!(out, "  {} ({})", r.why, r.pods.join(", "));
        }
    }
    out
}
