//! Load figures from per-pod timings: throughput over 1 s windows (as
//! scheduler-perf's `SchedulingThroughput` samples it), creation→bound
//! latency percentiles, and the pods-over-time series the plots draw. Pure
//! functions of the timings; no clock, no I/O.

use std::time::Duration;

use serde::Serialize;

use crate::runner::PodTimes;

/// Throughput windows are this long.
pub const WINDOW: Duration = Duration::from_secs(1);

/// Nearest-rank percentiles of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub count: usize,
}

/// Pods bound per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Throughput {
    /// Pods bound divided by the time from the first pod created to the
    /// last one bound.
    pub average: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// Pods bound in each whole window from the first pod created (a final
    /// partial window is left out unless it is the only one).
    pub windows: Vec<f64>,
}

/// Nearest-rank percentiles; `None` for an empty sample.
pub fn percentiles(values: &[f64]) -> Option<Percentiles> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = |p: f64| {
        let index = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[index.clamp(1, sorted.len()) - 1]
    };
    Some(Percentiles {
        p50: rank(50.0),
        p90: rank(90.0),
        p99: rank(99.0),
        max: sorted[sorted.len() - 1],
        count: sorted.len(),
    })
}

/// The span the throughput is measured over: first pod created to last pod
/// bound. `None` when no pod was bound.
pub fn measured_span(pods: &[PodTimes]) -> Option<(Duration, Duration)> {
    let first = pods.iter().filter_map(|p| p.created).min()?;
    let last = pods.iter().filter_map(|p| p.bound).max()?;
    Some((first, last.max(first)))
}

/// Throughput over [`WINDOW`]s; `None` when no pod was bound.
pub fn throughput(pods: &[PodTimes]) -> Option<Throughput> {
    let (first, last) = measured_span(pods)?;
    let bound: Vec<Duration> = pods.iter().filter_map(|p| p.bound).collect();
    let span = last - first;
    let whole = (span.as_secs_f64() / WINDOW.as_secs_f64()).floor() as usize;
    let count = whole.max(1);
    let mut windows = vec![0.0; count];
    for b in &bound {
        let offset = b.saturating_sub(first).as_secs_f64() / WINDOW.as_secs_f64();
        if let Some(w) = windows.get_mut(offset as usize) {
            *w += 1.0;
        } else if whole == 0 {
            windows[0] += 1.0;
        }
    }
    let per_second = 1.0 / WINDOW.as_secs_f64();
    windows.iter_mut().for_each(|w| *w *= per_second);
    let average = if span.is_zero() {
        bound.len() as f64
    } else {
        bound.len() as f64 / span.as_secs_f64()
    };
    let p = percentiles(&windows)?;
    Some(Throughput {
        average,
        p50: p.p50,
        p90: p.p90,
        p99: p.p99,
        max: p.max,
        windows,
    })
}

/// Creation→bound latency of every bound pod, in seconds.
pub fn latencies(pods: &[PodTimes]) -> Vec<f64> {
    pods.iter()
        .filter_map(|p| Some(p.bound?.saturating_sub(p.created?).as_secs_f64()))
        .collect()
}

/// Pods created and bound by each moment: one point per `step` from 0 to
/// the last event, as `(seconds, created, bound)`.
pub fn over_time(pods: &[PodTimes], step: Duration) -> Vec<(f64, usize, usize)> {
    let mut created: Vec<Duration> = pods.iter().filter_map(|p| p.created).collect();
    let mut bound: Vec<Duration> = pods.iter().filter_map(|p| p.bound).collect();
    created.sort();
    bound.sort();
    let end = created.last().copied().max(bound.last().copied());
    let Some(end) = end else {
        return Vec::new();
    };
    let steps = (end.as_secs_f64() / step.as_secs_f64()).ceil() as u32;
    (0..=steps)
        .map(|i| {
            let t = step * i;
            (
                t.as_secs_f64(),
                created.partition_point(|c| *c <= t),
                bound.partition_point(|b| *b <= t),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(created: f64, bound: Option<f64>) -> PodTimes {
        PodTimes {
            created: Some(Duration::from_secs_f64(created)),
            bound: bound.map(Duration::from_secs_f64),
            in_gang: false,
        }
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = percentiles(&v).unwrap();
        assert_eq!(
            (p.p50, p.p90, p.p99, p.max, p.count),
            (50.0, 90.0, 99.0, 100.0, 100)
        );
        let one = percentiles(&[3.0]).unwrap();
        assert_eq!((one.p50, one.p99), (3.0, 3.0));
        assert!(percentiles(&[]).is_none());
    }

    #[test]
    fn throughput_counts_whole_windows_from_the_first_creation() {
        // Created at 10 s; 3 bound in [10, 11), 1 in [11, 12), 2 in the
        // partial window [12, 12.5].
        let pods = vec![
            pod(10.0, Some(10.2)),
            pod(10.0, Some(10.5)),
            pod(10.1, Some(10.9)),
            pod(10.1, Some(11.5)),
            pod(10.1, Some(12.1)),
            pod(10.1, Some(12.5)),
            pod(10.2, None),
        ];
        let t = throughput(&pods).unwrap();
        assert_eq!(t.windows, vec![3.0, 1.0]);
        assert!((t.average - 6.0 / 2.5).abs() < 1e-9);
        assert_eq!((t.p50, t.max), (1.0, 3.0));
    }

    #[test]
    fn a_run_shorter_than_a_window_has_one_window() {
        let pods = vec![pod(0.0, Some(0.1)), pod(0.0, Some(0.3))];
        let t = throughput(&pods).unwrap();
        assert_eq!(t.windows, vec![2.0]);
        assert!((t.average - 2.0 / 0.3).abs() < 1e-9);
        assert!(throughput(&[pod(0.0, None)]).is_none());
    }

    #[test]
    fn latency_and_series() {
        let pods = vec![pod(0.0, Some(0.5)), pod(1.0, Some(3.0)), pod(1.5, None)];
        assert_eq!(latencies(&pods), vec![0.5, 2.0]);
        let series = over_time(&pods, Duration::from_secs(1));
        assert_eq!(
            series,
            vec![(0.0, 1, 0), (1.0, 2, 1), (2.0, 3, 1), (3.0, 3, 2)]
        );
    }
}
