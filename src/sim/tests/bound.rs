//! The makespan lower bound (`sim::MakespanBound`) against closed forms and against the event
//! loop: never above a simulated makespan, on the closed forms equal to it, and what
//! `run_sealed_within` gives up by; and the compiler's bound from the layouts alone
//! (`compile_within`) on a closed form.

use crate::cluster::{Cluster, load_cluster};
use crate::compile::{CompileOptions, Replicas, TaskRole, compile_within};
use crate::cost::CostModel;
use crate::problem::Problem;
use crate::sim::{ExecGraph, MakespanBound, Order, Simulator, TaskId, TaskKind, TaskSpec};
use crate::strategy::Reference;
use crate::zoo::{ZooOptions, build};
use proptest::prelude::*;

/// A task of `duration` µs taking `lanes[i]` lanes of `resources[i]`, its output on device 0.
fn task(g: &mut ExecGraph, resources: &[u32], lanes: &[u32], duration: f64) -> TaskId {
    let spec = TaskSpec {
        kind: TaskKind::Compute,
        duration,
        resources,
        out_device: 0,
        out_bytes: 0.0,
        priority: 0.0,
        label: 0,
    };
    g.add_task_with_lanes(spec, lanes)
}

fn bound_and_makespan(g: &mut ExecGraph) -> (f64, f64) {
    g.seal();
    let bound = MakespanBound::new().of(g).expect("acyclic");
    let makespan = Simulator::new()
        .run_sealed(g, Order::Fifo)
        .unwrap()
        .makespan;
    (bound, makespan)
}

/// A chain over three devices: the bound is its sum, to the last bit, and so is the makespan.
#[test]
fn a_chain_is_bounded_by_its_sum_exactly() {
    let mut g = ExecGraph::new(vec![f64::INFINITY; 3], 0);
    let durations = [3.5, 1.25, 7.0, 0.1, 2.2];
    let mut sum = 0.0;
    let mut previous = None;
    for (i, &d) in durations.iter().enumerate() {
        let t = task(&mut g, &[(i % 3) as u32], &[1], d);
        if let Some(p) = previous {
            g.add_dep(p, t);
        }
        previous = Some(t);
        sum += d;
    }
    let (bound, makespan) = bound_and_makespan(&mut g);
    assert_eq!(bound, sum);
    assert_eq!(makespan, sum);
}

/// Independent tasks on one GPU: the busiest resource, their total work.
#[test]
fn independent_tasks_on_one_gpu_are_bounded_by_their_total() {
    let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 0);
    for d in [4.0, 6.0, 2.5] {
        task(&mut g, &[0], &[1], d);
    }
    task(&mut g, &[1], &[1], 9.0);
    let (bound, makespan) = bound_and_makespan(&mut g);
    assert!((bound - 12.5).abs() <= 1e-7, "{bound}");
    assert!(bound <= makespan && makespan == 12.5);
}

/// A fork-join whose middle pair shares a GPU: 10 µs before it, 5 + 5 µs on it, 10 µs after.
/// The longest chain is 25 µs and the busiest GPU holds 20, but the middle GPU's work framed by
/// its tasks' earliest start and shortest tail is 30 µs, the makespan.
#[test]
fn a_resource_framed_by_its_heads_and_tails_bounds_a_fork_join() {
    let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 0);
    let first = task(&mut g, &[0], &[1], 10.0);
    let middle = [task(&mut g, &[1], &[1], 5.0), task(&mut g, &[1], &[1], 5.0)];
    let last = task(&mut g, &[0], &[1], 10.0);
    for m in middle {
        g.add_dep(first, m);
        g.add_dep(m, last);
    }
    let (bound, makespan) = bound_and_makespan(&mut g);
    assert_eq!(makespan, 30.0);
    assert!(
        bound > 25.0 && bound <= 30.0 && 30.0 - bound <= 1e-7,
        "{bound}"
    );
}

/// Four 10 µs transfers on a three-lane port: 40/3 µs of work per lane bounds the 20 µs the
/// fourth, queued, makes it take.
#[test]
fn lanes_divide_a_resources_work() {
    let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 1);
    g.set_link_lanes(0, 3);
    let port = g.link_resource(0);
    for _ in 0..4 {
        task(&mut g, &[port], &[1], 10.0);
    }
    let (bound, makespan) = bound_and_makespan(&mut g);
    assert!((bound - 40.0 / 3.0).abs() <= 1e-7, "{bound}");
    assert_eq!(makespan, 20.0);
}

/// The bound kept as the loop runs: a long task on GPU 1 makes `b` wait 9 µs for it, idle time
/// the bound before the run cannot see (11 µs: GPU 1's work) but the run can. When `b` ends at
/// 11 µs, the chain after it (three 1 µs tasks) reaches 14 µs, past a 13.5 µs limit: the run is
/// given up there, three task ends before the first of them would end past the limit.
#[test]
fn the_running_bound_gives_up_when_a_tail_passes_the_limit() {
    let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 0);
    let a = task(&mut g, &[0], &[1], 1.0);
    task(&mut g, &[1], &[1], 10.0);
    let b = task(&mut g, &[1], &[1], 1.0);
    g.add_dep(a, b);
    let mut previous = b;
    for _ in 0..3 {
        let next = task(&mut g, &[0], &[1], 1.0);
        g.add_dep(previous, next);
        previous = next;
    }
    let (bound, makespan) = bound_and_makespan(&mut g);
    assert_eq!(makespan, 14.0);
    assert!(bound <= 11.0 + 1e-7, "{bound}");
    let limit = 13.5;
    assert!(!MakespanBound::new().exceeds(&g, limit));
    let mut simulator = Simulator::new();
    let within = simulator.run_sealed_within(&g, Order::Fifo, limit).unwrap();
    assert!(within.is_none());
    // Started: a, the long task, b and the first of the chain; ended: a, the long task and b.
    assert_eq!(simulator.result().events, 4 + 3);
}

#[test]
fn a_cycle_has_no_bound_and_is_never_given_up_for_one() {
    let mut g = ExecGraph::new(vec![f64::INFINITY], 0);
    let a = task(&mut g, &[0], &[1], 1.0);
    let b = task(&mut g, &[0], &[1], 1.0);
    g.add_dep(a, b);
    g.add_dep(b, a);
    g.seal();
    let mut bound = MakespanBound::new();
    assert_eq!(bound.of(&g), None);
    assert!(!bound.exceeds(&g, 0.5));
    // The simulation, not the bound, reports the cycle.
    assert!(
        Simulator::new()
            .run_sealed_within(&g, Order::Fifo, 0.5)
            .is_err()
    );
}

/// A random DAG whose ids are not in dependency order (the compiler adds a transfer after the
/// task that consumes it), with order dependencies and multi-lane links: `rank` gives each task
/// its place in a hidden order, and every dependency follows it.
fn random_graph(
    rank: &[usize],
    picks: &[(u8, u8, u16, bool)],
    dep_bits: &[bool],
    order_every: usize,
) -> ExecGraph {
    let (devices, links) = (3usize, 3usize);
    let mut g = ExecGraph::new(vec![f64::INFINITY; devices], links);
    g.set_link_lanes(1, 2);
    g.set_link_lanes(2, 3);
    let resources = (devices + links) as u32;
    for &(a, b, duration, two) in picks.iter().cycle().take(rank.len()) {
        let (r1, r2) = (u32::from(a) % resources, u32::from(b) % resources);
        let mut on = vec![r1];
        if two && r1 != r2 {
            on.push(r2);
        }
        // A collective takes every lane of a port; others take one.
        let lanes: Vec<u32> = on
            .iter()
            .map(|&r| {
                if duration % 5 == 0 {
                    g.resource_lanes(r)
                } else {
                    1
                }
            })
            .collect();
        task(&mut g, &on, &lanes, f64::from(duration % 97) * 0.37 + 0.1);
    }
    let by_rank = {
        let mut ids: Vec<TaskId> = (0..rank.len() as TaskId).collect();
        ids.sort_by_key(|&t| rank[t as usize]);
        ids
    };
    let mut k = 0;
    for (j, &after) in by_rank.iter().enumerate() {
        for &before in &by_rank[j.saturating_sub(5)..j] {
            if dep_bits[k % dep_bits.len()] {
                if k % order_every == 0 {
                    g.add_order_dep(before, after);
                } else {
                    g.add_dep(before, after);
                }
            }
            k += 1;
        }
    }
    g.seal();
    g
}

proptest! {
    /// The bound never exceeds a simulated makespan (FIFO or by priority), a limit is judged
    /// past by the bound exactly when the bound is above it, and the simulation with a limit is
    /// given up exactly when its makespan is past it, bound or no bound.
    #[test]
    fn the_bound_never_exceeds_a_simulated_makespan(
        rank in Just((0..40usize).collect::<Vec<_>>()).prop_shuffle(),
        picks in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u16>(), any::<bool>()), 1..40),
        dep_bits in prop::collection::vec(prop::bool::weighted(0.35), 1..200),
        order_every in 1usize..7,
        fraction in 0.0f64..1.3,
    ) {
        let g = random_graph(&rank, &picks, &dep_bits, order_every);
        let mut bound = MakespanBound::new();
        let lower = bound.of(&g).expect("acyclic");
        for order in [Order::Fifo, Order::Priority] {
            let full = Simulator::new().run_sealed(&g, order).unwrap().makespan;
            prop_assert!(lower <= full, "bound {} above makespan {}", lower, full);
            let limit = full * fraction;
            prop_assert_eq!(bound.exceeds(&g, limit), lower > limit);
            let mut limited = Simulator::new();
            let finished = limited.run_sealed_within(&g, order, limit).unwrap().is_some();
            prop_assert_eq!(finished, full <= limit);
        }
    }
}

/// A cluster of `configs/` and the default cost model.
fn shipped(config: &str) -> (Cluster, CostModel) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let cluster = load_cluster(root.join(format!("configs/{config}.toml"))).unwrap();
    (cluster, CostModel::default())
}

/// On one GPU the iteration is its op compute and nothing else, so the compiler's bound from the
/// layouts alone (`compile::compute_bound`) is the iteration: a limit a hair below it is refused
/// before the execution graph is built, one a hair above is compiled.
#[test]
fn one_gpu_is_refused_before_compiling_just_below_its_compute() {
    let (cluster, cost) = shipped("tag-testbed");
    let opts = ZooOptions {
        batch_size: Some(32),
        ..ZooOptions::default()
    };
    for model in ["alexnet", "transformer"] {
        let graph = build(model, &opts).unwrap();
        let strategy = Reference::Single.strategy(&graph, &cluster);
        let how = CompileOptions::FIFO_BY_CLASS;
        let within = |limit| {
            compile_within(
                &Problem::new(&graph, &cluster, &cost),
                &strategy,
                how,
                limit,
            )
        };
        let mut compiled = within(f64::INFINITY).expect("no limit");
        let exec = &mut compiled.exec;
        let compute: f64 = (0..exec.len() as TaskId)
            .filter(|&t| exec.kind(t) == TaskKind::Compute)
            .map(|t| exec.duration(t))
            .sum();
        let makespan = Simulator::new().run(exec, Order::Fifo).unwrap().makespan;
        assert!((makespan - compute).abs() <= 1e-9 * compute, "{model}");
        assert!(within(compute * (1.0 - 1e-6)).is_none(), "{model}");
        assert!(within(compute * (1.0 + 1e-6)).is_some(), "{model}");
    }
}

/// Data parallelism over every GPU is compiled one GPU per class, and the compiler's bound sums
/// the representatives' compute: it is the busiest GPU's op compute of the full compilation.
#[test]
fn data_parallelism_is_refused_by_its_busiest_gpu_from_the_representatives() {
    let (cluster, cost) = shipped("tag-cloud");
    let graph = build("transformer", &ZooOptions::default()).unwrap();
    let strategy = Reference::Dp.strategy(&graph, &cluster);
    let compile = |replicas, limit| {
        let how = CompileOptions {
            priority: None,
            replicas,
        };
        compile_within(
            &Problem::new(&graph, &cluster, &cost),
            &strategy,
            how,
            limit,
        )
    };
    let every = compile(Replicas::Every, f64::INFINITY).expect("no limit");
    let exec = &every.exec;
    let mut load = vec![0.0; exec.devices()];
    // Op replicas only: the compute NCCL's kernels take from a GPU comes with the wiring.
    for t in (0..exec.len() as TaskId).filter(|&t| every.roles[t as usize] == TaskRole::Op) {
        load[exec.task_resources(t)[0] as usize] += exec.duration(t);
    }
    let busiest = load.iter().copied().fold(0.0, f64::max);
    let by_class = compile(Replicas::ByClass, f64::INFINITY).expect("no limit");
    assert!(by_class.classes.is_some(), "compiled one GPU per class");
    assert!(compile(Replicas::ByClass, busiest * (1.0 - 1e-6)).is_none());
    assert!(compile(Replicas::ByClass, busiest * (1.0 + 1e-6)).is_some());
}
