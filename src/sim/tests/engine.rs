//! The event loop on hand-built execution graphs: closed forms exactly, ordering rules, link
//! contention, reference-counted memory, OOM, and invariants over random graphs.

use crate::sim::{ExecGraph, Order, SimError, SimResult, Simulator, TaskId, TaskKind, TaskSpec};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

fn compute(g: &mut ExecGraph, device: u32, duration: f64, out_bytes: f64) -> TaskId {
    g.add_task(TaskSpec {
        kind: TaskKind::Compute,
        duration,
        resources: &[device],
        out_device: device,
        out_bytes,
        priority: 0.0,
        label: 0,
    })
}

fn transfer(
    g: &mut ExecGraph,
    links: &[usize],
    to_device: u32,
    duration: f64,
    bytes: f64,
) -> TaskId {
    let resources: Vec<u32> = links.iter().map(|&l| g.link_resource(l)).collect();
    g.add_task(TaskSpec {
        kind: TaskKind::Transfer,
        duration,
        resources: &resources,
        out_device: to_device,
        out_bytes: bytes,
        priority: 0.0,
        label: 0,
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn chain_on_one_gpu_takes_the_sum() {
    let mut g = ExecGraph::new(vec![f64::INFINITY], 0);
    let times = [3.5, 1.25, 7.0, 0.125];
    let mut prev = None;
    for &t in &times {
        let task = compute(&mut g, 0, t, 0.0);
        if let Some(p) = prev {
            g.add_dep(p, task);
        }
        prev = Some(task);
    }
    let mut sim = Simulator::new();
    let r = sim.run(&mut g, Order::Fifo).unwrap();
    assert!(close(r.makespan, times.iter().sum()));
    assert!(close(r.busy[0], times.iter().sum()));
    assert_eq!(r.events, 8);
}

/// `n` tasks of `duration` µs chained on device `device`, each issued by the host in `host` µs.
fn host_chain(g: &mut ExecGraph, device: u32, n: usize, duration: f64, host: f64) {
    let mut prev = None;
    for _ in 0..n {
        let t = compute(g, device, duration, 0.0);
        g.set_host_us(t, host);
        if let Some(p) = prev {
            g.add_dep(p, t);
        }
        prev = Some(t);
    }
}

#[test]
fn short_kernels_wait_for_the_host_that_issues_them() {
    // Host 10 µs a task, kernels 1 µs: kernel k begins when the host has issued it, at 10·k.
    let mut g = ExecGraph::new(vec![f64::INFINITY], 0);
    host_chain(&mut g, 0, 5, 1.0, 10.0);
    let r = Simulator::new().run(&mut g, Order::Fifo).unwrap().clone();
    assert!(close(r.makespan, 5.0 * 10.0 + 1.0), "{}", r.makespan);
    for k in 0..5 {
        assert!(close(r.start[k], 10.0 * (k + 1) as f64), "{:?}", r.start);
    }
    // The device computed for 5 µs; the rest it waited.
    assert!(close(r.busy[0], 5.0));
}

#[test]
fn long_kernels_hide_the_host_behind_the_first() {
    // Kernels 100 µs: the host issues every later one while the device is busy.
    let mut g = ExecGraph::new(vec![f64::INFINITY], 0);
    host_chain(&mut g, 0, 5, 100.0, 10.0);
    let makespan = Simulator::new().run(&mut g, Order::Fifo).unwrap().makespan;
    assert!(close(makespan, 10.0 + 5.0 * 100.0), "{makespan}");
}

#[test]
fn each_device_has_its_own_host() {
    // Two host-bound chains on two devices overlap: one host's time, not both.
    let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 0);
    host_chain(&mut g, 0, 4, 1.0, 10.0);
    host_chain(&mut g, 1, 4, 1.0, 10.0);
    let makespan = Simulator::new().run(&mut g, Order::Fifo).unwrap().makespan;
    assert!(close(makespan, 4.0 * 10.0 + 1.0), "{makespan}");
}

#[test]
fn independent_chains_on_two_gpus_take_the_max() {
    let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 0);
    let chains = [[2.0, 3.0, 4.0], [5.0, 6.0, 0.5]];
    for (d, chain) in chains.iter().enumerate() {
        let mut prev = None;
        for &t in chain {
            let task = compute(&mut g, d as u32, t, 0.0);
            if let Some(p) = prev {
                g.add_dep(p, task);
            }
            prev = Some(task);
        }
    }
    let r = Simulator::new().run(&mut g, Order::Fifo).unwrap().clone();
    assert!(close(r.makespan, 11.5));
}

#[test]
fn compute_transfer_compute_adds_up() {
    let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 1);
    let a = compute(&mut g, 0, 10.0, 400.0);
    let latency = 5.0;
    let (bytes, bandwidth) = (400.0, 25.0);
    let x = transfer(&mut g, &[0], 1, latency + bytes / bandwidth, bytes);
    let b = compute(&mut g, 1, 2.0, 0.0);
    g.add_dep(a, x);
    g.add_dep(x, b);
    let r = Simulator::new().run(&mut g, Order::Fifo).unwrap().clone();
    assert!(close(r.makespan, 10.0 + 5.0 + 16.0 + 2.0));
    assert!(close(r.start[x as usize], 10.0));
    assert!(close(r.busy[g.link_resource(0) as usize], 21.0));
}

#[test]
fn fifo_runs_in_ready_order_and_priority_overrides_it() {
    // Two tasks become ready on device 0: `late` at 1.0, `early` at 0 (but the device is busy
    // until 4 with `blocker`). FIFO runs `early` first; priorities can flip that.
    let build = |prio_early: f64, prio_late: f64| {
        let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 0);
        let blocker = compute(&mut g, 0, 4.0, 0.0);
        let pre = compute(&mut g, 1, 1.0, 0.0);
        let spec = |p: f64| TaskSpec {
            kind: TaskKind::Compute,
            duration: 1.0,
            resources: &[0],
            out_device: 0,
            out_bytes: 0.0,
            priority: p,
            label: 0,
        };
        let early = g.add_task(spec(prio_early));
        let late = g.add_task(spec(prio_late));
        g.add_dep(pre, late);
        (g, blocker, early, late)
    };
    let (mut g, _, early, late) = build(0.0, 0.0);
    let r = Simulator::new().run(&mut g, Order::Fifo).unwrap().clone();
    assert!(close(r.start[early as usize], 4.0) && close(r.start[late as usize], 5.0));
    let (mut g, _, early, late) = build(2.0, 1.0);
    let r = Simulator::new()
        .run(&mut g, Order::Priority)
        .unwrap()
        .clone();
    // `blocker` has priority 0 and ran first; then `late` (1.0) before `early` (2.0).
    assert!(close(r.start[late as usize], 4.0) && close(r.start[early as usize], 5.0));
}

#[test]
fn transfers_on_one_link_serialise_and_on_two_links_overlap() {
    let mut shared = ExecGraph::new(vec![f64::INFINITY; 2], 2);
    transfer(&mut shared, &[0], 1, 10.0, 0.0);
    transfer(&mut shared, &[0], 1, 10.0, 0.0);
    let r = Simulator::new()
        .run(&mut shared, Order::Fifo)
        .unwrap()
        .clone();
    assert!(close(r.makespan, 20.0));
    let mut separate = ExecGraph::new(vec![f64::INFINITY; 2], 2);
    transfer(&mut separate, &[0], 1, 10.0, 0.0);
    transfer(&mut separate, &[1], 1, 10.0, 0.0);
    let r = Simulator::new()
        .run(&mut separate, Order::Fifo)
        .unwrap()
        .clone();
    assert!(close(r.makespan, 10.0));
}

#[test]
fn multi_link_transfer_waits_for_every_link() {
    // NIC-out of machine A (link 0) and NIC-in of machine B (link 1): a transfer needing both
    // waits for an earlier transfer holding link 1 only.
    let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 2);
    let first = transfer(&mut g, &[1], 1, 7.0, 0.0);
    let both = transfer(&mut g, &[0, 1], 1, 3.0, 0.0);
    let r = Simulator::new().run(&mut g, Order::Fifo).unwrap().clone();
    assert!(close(r.start[first as usize], 0.0));
    assert!(close(r.start[both as usize], 7.0));
    assert!(close(r.makespan, 10.0));
}

#[test]
fn runtime_memory_is_charged_on_top_of_the_tensors_peak() {
    // Tensors peak at 1110 (as below); a context of 500 and 10% headroom make 1721 > 1700.
    let mut g = ExecGraph::new(vec![1700.0], 0);
    g.add_resident(0, 1000.0);
    g.set_runtime_memory(500.0, 0.1);
    let a = compute(&mut g, 0, 1.0, 100.0);
    let b = compute(&mut g, 0, 1.0, 10.0);
    g.add_dep(a, b);
    let r = Simulator::new().run(&mut g, Order::Fifo).unwrap().clone();
    assert!(close(r.peak_allocated[0], 1110.0));
    assert!(close(r.peak_memory[0], 1110.0 * 1.1 + 500.0));
    assert_eq!(r.oom.len(), 1);
    assert!(close(r.oom[0].peak_bytes, r.peak_memory[0]));
}

#[test]
fn memory_is_reference_counted() {
    // a -> b -> c on one device; outputs 100, 10, 1; resident 1000.
    // b runs while a's output is alive: peak = 1000 + 100 + 10.
    let mut g = ExecGraph::new(vec![2000.0], 0);
    g.add_resident(0, 1000.0);
    let a = compute(&mut g, 0, 1.0, 100.0);
    let b = compute(&mut g, 0, 1.0, 10.0);
    let c = compute(&mut g, 0, 1.0, 1.0);
    g.add_dep(a, b);
    g.add_dep(b, c);
    let r = Simulator::new().run(&mut g, Order::Fifo).unwrap().clone();
    assert!(close(r.peak_memory[0], 1110.0));
    assert!(close(r.final_memory[0], 1000.0));
    assert!(r.oom.is_empty());
}

#[test]
fn oom_names_the_device_and_the_excess() {
    let mut g = ExecGraph::new(vec![1e9, 500.0], 0);
    g.add_resident(1, 400.0);
    compute(&mut g, 1, 1.0, 150.0);
    compute(&mut g, 0, 1.0, 150.0);
    let r = Simulator::new().run(&mut g, Order::Fifo).unwrap().clone();
    assert_eq!(r.oom.len(), 1);
    assert_eq!(r.oom[0].device, 1);
    assert!(close(r.oom[0].excess_bytes(), 50.0));
}

/// Three 1 µs tasks on one GPU: the first, then two that wait on each other.
fn one_task_then_a_cycle() -> ExecGraph {
    let mut g = ExecGraph::new(vec![f64::INFINITY], 0);
    let a = compute(&mut g, 0, 1.0, 0.0);
    let b = compute(&mut g, 0, 1.0, 0.0);
    let c = compute(&mut g, 0, 1.0, 0.0);
    g.add_dep(a, b);
    g.add_dep(b, c);
    g.add_dep(c, b);
    g
}

#[test]
fn a_cycle_is_an_error_not_a_hang() {
    let mut g = one_task_then_a_cycle();
    let err = Simulator::new().run(&mut g, Order::Fifo).unwrap_err();
    assert_eq!(
        err,
        SimError::Stuck {
            finished: 1,
            total: 3
        }
    );
}

/// Under a limit too: a simulator that last ran another graph within a limit does not carry that
/// graph's bound into the cycle (the bound has none to give on a cycle).
#[test]
fn a_cycle_under_a_limit_is_an_error_after_another_graph() {
    let mut simulator = Simulator::new();
    let mut one = ExecGraph::new(vec![f64::INFINITY], 0);
    compute(&mut one, 0, 50.0, 0.0);
    one.seal();
    let ran = simulator
        .run_sealed_within(&one, Order::Fifo, 100.0)
        .unwrap();
    assert_eq!(ran.map(|r| r.makespan), Some(50.0));
    let mut g = one_task_then_a_cycle();
    g.seal();
    let err = simulator
        .run_sealed_within(&g, Order::Fifo, 30.0)
        .unwrap_err();
    assert_eq!(
        err,
        SimError::Stuck {
            finished: 1,
            total: 3
        }
    );
}

#[test]
fn the_simulator_is_reusable() {
    let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 1);
    let a = compute(&mut g, 0, 3.0, 10.0);
    let x = transfer(&mut g, &[0], 1, 2.0, 10.0);
    g.add_dep(a, x);
    let mut sim = Simulator::new();
    let first = sim.run(&mut g, Order::Fifo).unwrap().clone();
    let second = sim.run(&mut g, Order::Fifo).unwrap().clone();
    assert_eq!(first, second);
}

/// A random DAG of tasks over 3 devices and 3 links; each task takes 1 or 2 resources.
fn random_exec(n: usize, picks: &[(u8, u8, u8, u16, bool)], dep_bits: &[bool]) -> ExecGraph {
    let (devices, links) = (3usize, 3usize);
    let mut g = ExecGraph::new(vec![f64::INFINITY; devices], links);
    for d in 0..devices {
        g.add_resident(d, 100.0 * (d + 1) as f64);
    }
    for (i, &(a, b, dev, dur, two)) in picks.iter().cycle().take(n).enumerate() {
        let r1 = a as u32 % (devices + links) as u32;
        let r2 = b as u32 % (devices + links) as u32;
        let resources: Vec<u32> = if two && r1 != r2 {
            vec![r1, r2]
        } else {
            vec![r1]
        };
        g.add_task(TaskSpec {
            kind: TaskKind::Compute,
            duration: f64::from(dur % 50) + 0.5,
            resources: &resources,
            out_device: u32::from(dev) % devices as u32,
            out_bytes: f64::from(dur % 7) * 10.0,
            priority: ((i * 7919) % 13) as f64,
            label: i as u32,
        });
    }
    let mut k = 0;
    for j in 0..n {
        for i in j.saturating_sub(6)..j {
            if dep_bits[k % dep_bits.len()] {
                g.add_dep(i as TaskId, j as TaskId);
            }
            k += 1;
        }
    }
    g
}

/// Every task of `r` runs for its duration after its inputs end, the makespan is the last end,
/// no two tasks overlap on a resource, and each resource's busy time is its tasks' sum.
fn check_schedule(g: &ExecGraph, r: &SimResult) -> Result<(), TestCaseError> {
    let n = g.len() as TaskId;
    let mut latest_end: f64 = 0.0;
    for t in 0..n {
        let (s, e) = (r.start[t as usize], r.end[t as usize]);
        prop_assert!(close(e - s, g.duration(t)));
        latest_end = latest_end.max(e);
        for &p in g.predecessors(t) {
            prop_assert!(
                s >= r.end[p as usize] - 1e-9,
                "task {} starts before input {} ends",
                t,
                p
            );
        }
    }
    prop_assert!(close(r.makespan, latest_end));
    for res in 0..g.resource_count() as u32 {
        let mut spans: Vec<(f64, f64)> = (0..n)
            .filter(|&t| g.task_resources(t).contains(&res))
            .map(|t| (r.start[t as usize], r.end[t as usize]))
            .collect();
        spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
        for w in spans.windows(2) {
            prop_assert!(w[1].0 >= w[0].1 - 1e-9, "overlap on resource {}", res);
        }
        let busy: f64 = spans.iter().map(|s| s.1 - s.0).sum();
        prop_assert!(close(r.busy[res as usize], busy));
    }
    Ok(())
}

proptest! {
    #[test]
    fn schedules_respect_dependencies_resources_and_memory(
        n in 1usize..60,
        picks in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), any::<u16>(), any::<bool>()), 1..60),
        dep_bits in prop::collection::vec(prop::bool::weighted(0.3), 1..200),
        by_priority in any::<bool>(),
    ) {
        let mut g = random_exec(n, &picks, &dep_bits);
        let order = if by_priority { Order::Priority } else { Order::Fifo };
        let r = Simulator::new().run(&mut g, order).unwrap().clone();
        prop_assert_eq!(r.events, 2 * n as u64);
        check_schedule(&g, &r)?;
        // Memory returns to the resident total and never dips below it.
        for d in 0..g.devices() {
            prop_assert!(close(r.final_memory[d], g.resident()[d]));
            prop_assert!(r.peak_memory[d] >= g.resident()[d]);
        }
    }
}

proptest! {
    /// With host times on some compute tasks the schedule still respects every dependency and
    /// resource, each kernel runs for its duration, and the iteration lasts at least as long as
    /// any device's host takes to issue its tasks (plus the shortest of them).
    #[test]
    fn host_time_delays_kernels_but_keeps_every_rule(
        n in 1usize..60,
        picks in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), any::<u16>(), any::<bool>()), 1..60),
        dep_bits in prop::collection::vec(prop::bool::weighted(0.3), 1..200),
        hosts in prop::collection::vec(0u8..30, 1..60),
    ) {
        let mut g = random_exec(n, &picks, &dep_bits);
        let mut issued = vec![0.0; g.devices()];
        for t in 0..n as TaskId {
            let host = f64::from(hosts[t as usize % hosts.len()]);
            g.set_host_us(t, host);
            issued[g.out_device(t) as usize] += host;
        }
        let r = Simulator::new().run(&mut g, Order::Fifo).unwrap().clone();
        check_schedule(&g, &r)?;
        let host_bound = issued.iter().copied().fold(0.0, f64::max);
        prop_assert!(r.makespan >= host_bound - 1e-9, "{} < {}", r.makespan, host_bound);
    }
}

proptest! {
    /// A simulation given a time limit finishes, with the unlimited result, exactly when the
    /// makespan is within the limit, and is given up otherwise; a reused simulator that gave up
    /// simulates the next graph as a fresh one does.
    #[test]
    fn a_time_limit_gives_up_exactly_past_the_makespan(
        n in 1usize..40,
        picks in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), any::<u16>(), any::<bool>()), 1..40),
        dep_bits in prop::collection::vec(prop::bool::weighted(0.3), 1..120),
        fraction in 0.0f64..1.5,
    ) {
        let mut g = random_exec(n, &picks, &dep_bits);
        g.seal();
        let full = Simulator::new().run_sealed(&g, Order::Fifo).unwrap().clone();
        let limit = full.makespan * fraction;
        let mut reused = Simulator::new();
        let within = reused.run_sealed_within(&g, Order::Fifo, limit).unwrap().cloned();
        match within {
            Some(r) => {
                prop_assert!(full.makespan <= limit);
                prop_assert_eq!(r, full.clone());
            }
            None => prop_assert!(full.makespan > limit),
        }
        prop_assert_eq!(reused.run_sealed(&g, Order::Fifo).unwrap(), &full);
        prop_assert!(reused.run_sealed_within(&g, Order::Fifo, full.makespan).unwrap().is_some());
    }
}

/// Every event of the trace has the fields the Trace Event Format requires, with the right types,
/// and complete events match the simulated start and duration.
#[test]
fn chrome_trace_is_valid_trace_event_json() {
    let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 1);
    let a = compute(&mut g, 0, 3.0, 10.0);
    let x = transfer(&mut g, &[0], 1, 2.0, 10.0);
    let b = compute(&mut g, 1, 1.0, 0.0);
    g.add_dep(a, x);
    g.add_dep(x, b);
    let r = Simulator::new().run(&mut g, Order::Fifo).unwrap().clone();
    let trace = crate::sim::chrome_trace(&g, &r, |res| format!("res{res}"), |t| format!("task{t}"));
    let text = serde_json::to_string(&trace).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = doc["traceEvents"].as_array().expect("traceEvents array");
    let mut complete = 0;
    for e in events {
        assert!(
            e["name"].is_string() && e["pid"].is_u64() && e["tid"].is_u64(),
            "{e}"
        );
        match e["ph"].as_str().unwrap() {
            "X" => {
                complete += 1;
                let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
                let t = e["args"]["task"].as_u64().unwrap() as usize;
                assert!(close(ts, r.start[t]) && close(ts + dur, r.end[t]));
                assert!(
                    ["compute", "transfer", "collective"].contains(&e["cat"].as_str().unwrap())
                );
            }
            "M" => assert!(e["args"]["name"].is_string()),
            other => panic!("unexpected phase {other}"),
        }
    }
    assert_eq!(complete, 3);
    assert_eq!(doc["displayTimeUnit"], "ms");
    // The count a trace is refused by before it is built is the count it is built with.
    assert_eq!(crate::sim::trace_events(&g), events.len());
}

/// A port with three lanes carries three transfers at once and queues the fourth; busy time is
/// lane-weighted, so it never exceeds the makespan.
#[test]
fn multi_lane_links_run_transfers_side_by_side() {
    let mut g = ExecGraph::new(vec![f64::INFINITY; 5], 1);
    g.set_link_lanes(0, 3);
    for _ in 0..4 {
        transfer(&mut g, &[0], 4, 10.0, 0.0);
    }
    let mut sim = Simulator::new();
    let r = sim.run(&mut g, Order::Fifo).unwrap().clone();
    assert!(close(r.makespan, 20.0), "{}", r.makespan);
    let starts: Vec<f64> = r.start.clone();
    assert_eq!(starts.iter().filter(|&&s| s == 0.0).count(), 3);
    let link = g.link_resource(0) as usize;
    assert!(close(r.busy[link], 40.0 / 3.0), "{}", r.busy[link]);
}

/// A task blocked at a single-lane link does not hold back a later task on a shared multi-lane
/// port (no head-of-line blocking at lanes), and a collective taking all lanes waits for them.
#[test]
fn lanes_do_not_block_behind_a_stalled_task() {
    // Links: 0 a busy pair link, 1 a 2-lane port, 2 another pair link.
    let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 3);
    g.set_link_lanes(1, 2);
    let hog = transfer(&mut g, &[0], 1, 50.0, 0.0);
    let stalled = transfer(&mut g, &[0, 1], 1, 5.0, 0.0);
    let free = transfer(&mut g, &[2, 1], 1, 5.0, 0.0);
    let mut sim = Simulator::new();
    let r = sim.run(&mut g, Order::Fifo).unwrap().clone();
    assert_eq!(r.start[hog as usize], 0.0);
    assert_eq!(
        r.start[free as usize], 0.0,
        "not blocked behind the stalled task"
    );
    assert_eq!(r.start[stalled as usize], 50.0);

    let mut g = ExecGraph::new(vec![f64::INFINITY; 2], 1);
    g.set_link_lanes(0, 2);
    let one = transfer(&mut g, &[0], 1, 10.0, 0.0);
    let port = g.link_resource(0);
    let all = g.add_task_with_lanes(
        TaskSpec {
            kind: TaskKind::Collective,
            duration: 4.0,
            resources: &[port],
            out_device: 0,
            out_bytes: 0.0,
            priority: 0.0,
            label: 0,
        },
        &[2],
    );
    let mut sim = Simulator::new();
    let r = sim.run(&mut g, Order::Fifo).unwrap().clone();
    assert_eq!(r.start[one as usize], 0.0);
    assert_eq!(r.start[all as usize], 10.0, "both lanes are needed");
    assert!(close(r.makespan, 14.0));
}

/// Past this thread's wall-clock deadline a run is given up like one past its limit, and the
/// same simulator then runs the graph in full outside the deadline: a search's abandoned leaf
/// leaves nothing behind.
#[test]
fn a_run_past_its_deadline_is_given_up() {
    use crate::sim::deadline;
    let mut g = ExecGraph::new(vec![f64::INFINITY], 0);
    let tasks = 4 * deadline::ASK_EVERY;
    for _ in 0..tasks {
        compute(&mut g, 0, 1.0, 0.0);
    }
    g.seal();
    let mut simulator = Simulator::new();
    let passed = Some(std::time::Instant::now());
    let late = deadline::during(passed, || {
        simulator
            .run_sealed_within(&g, Order::Fifo, f64::INFINITY)
            .unwrap()
            .is_none()
    });
    assert!(late);
    let full = simulator.run_sealed(&g, Order::Fifo).unwrap();
    assert!(close(full.makespan, tasks as f64));
}
