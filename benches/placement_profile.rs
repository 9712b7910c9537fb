//! Profiling harness for placement: schedules the benchmark's pod over the
//! benchmark's 5,000-node cluster in a loop, so `perf stat -e task-clock` (CPU
//! time, robust on a shared machine) or `perf record` can be run on it.
//!
//! `perf stat -e task-clock cargo bench --bench placement_profile -- PCT PAR_MIN ITERS [NODES]`
//! PCT 0 = adaptive sampling; PAR_MIN = `Framework::parallel_min_nodes`
//! (a huge value forces the sequential path). Subtract a run with ITERS 0
//! (cluster construction) to get the per-pod cost.

mod common;

/// The i-th positional argument (cargo bench adds flags such as `--bench`;
/// they are skipped).
fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args()
        .filter(|a| !a.starts_with("--"))
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let mut nodes = common::cluster();
    nodes.truncate(arg(4, nodes.len()));
    let pod = common::incoming();
    let pct: u32 = arg(1, 0);
    let defaults = muster::framework::Framework::default();
    let framework = muster::framework::Framework {
        percentage_of_nodes_to_score: (pct > 0).then_some(pct),
        parallel_min_nodes: arg(2, defaults.parallel_min_nodes),
        ..defaults
    };
    let iters: u32 = arg(3, 1000);
    let mut start = 0;
    let t = std::time::Instant::now();
    for _ in 0..iters {
        std::hint::black_box(framework.schedule(&pod, &nodes, &mut start).ok());
    }
    if iters > 0 {
        eprintln!("wall per pod: {:?}", t.elapsed() / iters);
    }
}
