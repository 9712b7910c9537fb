//! Scheduling-queue operations at 100,000 pods: filling and draining the
//! active heap in gang order, and one pop + push against a full queue.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use muster::driver::fixtures::{group_key, member, pod};
use muster::model::PodInfo;
use muster::queue::{OrderKey, QueueConfig, SchedulingQueue};

const PODS: usize = 100_000;

/// 100,000 pods: half plain, half members of 500 gangs of 100, mixed priorities.
fn pods() -> Vec<(Arc<PodInfo>, OrderKey)> {
    (0..PODS)
        .map(|i| {
            let (mut p, order_group) = if i % 2 == 0 {
                (pod(&format!("plain-{i}"), 100, 1), None)
            } else {
                let g = group_key(&format!("gang-{}", (i / 2) % 500));
                (member(&format!("m-{i}"), &g, 100, 1), Some(g))
            };
            p.priority = (i % 3) as i32;
            p.created_ms = i as i64;
            let order = match &order_group {
                Some(g) => OrderKey::member(&p, g, (i % 500) as i64),
                None => OrderKey::plain(&p),
            };
            (Arc::new(p), order)
        })
        .collect()
}

fn full_queue(pods: &[(Arc<PodInfo>, OrderKey)]) -> SchedulingQueue {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    for (p, o) in pods {
        q.upsert(p.clone(), o.clone(), Ok(()));
    }
    q
}

fn queue_ops(c: &mut Criterion) {
    let pods = pods();
    let mut group = c.benchmark_group("queue");
    group.sample_size(10);
    group.bench_function("push_100k", |b| b.iter(|| black_box(full_queue(&pods))));
    group.bench_function("push_then_pop_100k", |b| {
        b.iter(|| {
            let mut q = full_queue(&pods);
            let mut n = 0;
            while let Some(p) = q.pop() {
                black_box(p);
                n += 1;
            }
            assert_eq!(n, PODS);
        })
    });
    group.bench_function("pop_push_at_100k", |b| {
        b.iter_batched_ref(
            || full_queue(&pods),
            |q| {
                for _ in 0..1000 {
                    if let Some(p) = q.pop() {
                        let o = OrderKey::plain(&p);
                        q.upsert(p, o, Ok(()));
                    }
                }
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, queue_ops);
criterion_main!(benches);
