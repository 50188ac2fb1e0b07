//! Simulator throughput: events (task starts + ends) per second on a large synthetic execution
//! graph, one core. Run: `cargo bench --bench sim`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use topoplace::sim::{ExecGraph, Order, Simulator, TaskKind, TaskSpec};

/// A layered random DAG: `tasks` tasks on 32 GPUs and 64 links, each with two inputs from the
/// previous few hundred tasks, a fifth of them transfers. A fixed LCG keeps it reproducible.
fn synthetic(tasks: usize) -> ExecGraph {
    let (devices, links) = (32usize, 64usize);
    let mut g = ExecGraph::new(vec![f64::INFINITY; devices], links);
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    for i in 0..tasks {
        let is_transfer = next() % 5 == 0;
        let resource = if is_transfer {
            (devices + next() % links) as u32
        } else {
            (next() % devices) as u32
        };
        let t = g.add_task(TaskSpec {
            kind: if is_transfer {
                TaskKind::Transfer
            } else {
                TaskKind::Compute
            },
            duration: 1.0 + (next() % 100) as f64,
            resources: &[resource],
            out_device: (next() % devices) as u32,
            out_bytes: 1024.0,
            priority: 0.0,
            label: i as u32,
        });
        if i > 0 {
            for _ in 0..2 {
                let back = 1 + next() % i.min(300);
                g.add_dep((i - back) as u32, t);
            }
        }
    }
    g.seal();
    g
}

fn events_per_second(c: &mut Criterion) {
    let tasks = 200_000;
    let g = synthetic(tasks);
    let mut sim = Simulator::new();
    let mut group = c.benchmark_group("simulate");
    group.throughput(Throughput::Elements(2 * tasks as u64));
    group.sample_size(20);
    group.bench_function("fifo 200k tasks, 32 GPUs, 64 links", |b| {
        b.iter(|| sim.run_sealed(&g, Order::Fifo).unwrap().makespan)
    });
    group.finish();
}

criterion_group!(benches, events_per_second);
criterion_main!(benches);
