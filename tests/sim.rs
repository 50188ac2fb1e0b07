//! Compile + simulate: closed forms exactly, invariants over random training graphs and random
//! strategies, OOM, and the direction of TAG's published results on its testbed.

use proptest::prelude::*;
use topoplace::cluster::{Cluster, parse_cluster};
use topoplace::compile::{CompileOptions, TaskRole, compile};
use topoplace::cost::{CommModel, CostModel, ring_allreduce_time_us, tree_allreduce_time_us};
use topoplace::evaluate::{Evaluation, evaluate_strategy};
use topoplace::graph::{Graph, GraphBuilder, Op, OpIdx, Phase, Splittability};
use topoplace::problem::Problem;
use topoplace::sim::{Order, Simulator};
use topoplace::strategy::{
    AllReducePacking, BatchSplit, GroupDecision, Reference, ReplicationOption, Strategy,
};

const GPU: &str = "V100-SXM2-32GB";

/// `n` identical V100s on one machine (intra 100 GB/s, 5 µs) or on `n` machines (NIC 10 GB/s).
fn cluster(n: usize, one_machine: bool) -> Cluster {
    let text = if one_machine {
        format!(
            "name = \"t\"\n[[machine]]\nname = \"m\"\ngpu = \"{GPU}\"\ngpus = {n}\nintra_bandwidth = \"100 GB/s\"\nintra_latency = \"5 us\"\nnic = \"80 Gbps\"\n"
        )
    } else {
        format!(
            "name = \"t\"\ninter_latency = \"20 us\"\n[[machine]]\nname = \"m\"\ngpu = \"{GPU}\"\ngpus = 1\nintra_bandwidth = \"100 GB/s\"\nnic = \"80 Gbps\"\ncount = {n}\n"
        )
    };
    parse_cluster(&text, "<test>").unwrap()
}

/// An op whose time on the test GPU is exactly `us` at the full batch.
fn timed(name: &str, op_type: &str, phase: Phase, us: f64, out: f64, split: Splittability) -> Op {
    let mut op = Op::new(0, name, op_type, phase);
    op.profiled_us.insert(GPU.to_string(), us);
    op.output_bytes = out;
    op.split = split;
    op
}

fn single(g: &Graph, device: usize) -> Strategy {
    Strategy::uniform(
        g.len(),
        GroupDecision {
            devices: vec![device],
            option: ReplicationOption::AllReduce,
        },
        BatchSplit::Even,
    )
}

/// Compile and simulate `s` (no priorities) under `order`.
fn evaluate(
    g: &Graph,
    c: &Cluster,
    s: &Strategy,
    cost: &CostModel,
    order: Order,
) -> topoplace::Result<Evaluation> {
    let p = Problem {
        graph: g,
        cluster: c,
        cost,
    };
    evaluate_strategy(&p, s, order)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// The default kernels with the bare communication closed forms (links at full rate, no fixed
/// cost per collective, no interference with compute).
fn bare() -> CostModel {
    CostModel {
        comm: CommModel::ideal(),
        ..CostModel::default()
    }
}

fn simulate(g: &Graph, c: &Cluster, s: &Strategy) -> f64 {
    evaluate(g, c, s, &bare(), Order::Fifo)
        .unwrap()
        .report
        .iteration_us
}

#[test]
fn chain_on_one_gpu_is_the_sum_of_op_times() {
    let mut b = GraphBuilder::new();
    let times = [12.5, 3.25, 40.0, 7.0];
    let mut prev = None;
    for (i, &t) in times.iter().enumerate() {
        let op = b.add_op(timed(
            &format!("op{i}"),
            "X",
            Phase::Forward,
            t,
            1e6,
            Splittability::Concat,
        ));
        if let Some(p) = prev {
            b.add_edge(p, op, 1e6);
        }
        prev = Some(op);
    }
    let g = b.finish("<t>", "chain", 8).unwrap();
    let c = cluster(2, true);
    assert!(close(simulate(&g, &c, &single(&g, 1)), times.iter().sum()));
}

#[test]
fn two_independent_chains_on_two_gpus_take_the_max() {
    let mut b = GraphBuilder::new();
    let chains = [[5.0, 6.0, 7.0], [1.0, 30.0, 2.0]];
    let mut groups = Vec::new();
    for (k, chain) in chains.iter().enumerate() {
        let mut prev = None;
        for (i, &t) in chain.iter().enumerate() {
            let op = b.add_op(timed(
                &format!("c{k}o{i}"),
                "X",
                Phase::Forward,
                t,
                64.0,
                Splittability::Concat,
            ));
            groups.push(k as u32);
            if let Some(p) = prev {
                b.add_edge(p, op, 64.0);
            }
            prev = Some(op);
        }
    }
    let g = b.finish("<t>", "chains", 8).unwrap();
    let c = cluster(2, true);
    let decision = |d| GroupDecision {
        devices: vec![d],
        option: ReplicationOption::ModelParallel,
    };
    let s = Strategy::new(
        "<t>",
        groups,
        vec![decision(0), decision(1)],
        BatchSplit::Even,
        g.len(),
        2,
    )
    .unwrap();
    assert!(close(simulate(&g, &c, &s), 33.0));
}

#[test]
fn a_transfer_costs_latency_plus_bytes_over_bandwidth() {
    let mut b = GraphBuilder::new();
    let a = b.add_op(timed(
        "a",
        "X",
        Phase::Forward,
        10.0,
        4e6,
        Splittability::None,
    ));
    let z = b.add_op(timed(
        "z",
        "X",
        Phase::Forward,
        20.0,
        8.0,
        Splittability::None,
    ));
    b.add_edge(a, z, 4e6);
    let g = b.finish("<t>", "pair", 8).unwrap();
    let groups = vec![0, 1];
    for one_machine in [true, false] {
        let c = cluster(2, one_machine);
        let route = c.path(0, 1);
        let decision = |d| GroupDecision {
            devices: vec![d],
            option: ReplicationOption::ModelParallel,
        };
        let s = Strategy::new(
            "<t>",
            groups.clone(),
            vec![decision(0), decision(1)],
            BatchSplit::Even,
            2,
            2,
        )
        .unwrap();
        let expected = 10.0 + route.latency_us + 4e6 / route.bandwidth + 20.0;
        assert!(
            close(simulate(&g, &c, &s), expected),
            "one machine: {one_machine}"
        );
    }
}

/// One weight gradient (a `sum` op) feeding its optimizer, replicated on D GPUs.
fn gradient_graph(grad_us: f64, apply_us: f64, bytes: f64) -> Graph {
    let mut b = GraphBuilder::new();
    let w = b.add_op(timed(
        "w",
        "VariableV2",
        Phase::Parameter,
        0.0,
        0.0,
        Splittability::None,
    ));
    b.op_mut(w).resident_bytes = bytes;
    let grad = b.add_op(timed(
        "grad",
        "MatMul",
        Phase::Backward,
        grad_us,
        bytes,
        Splittability::Sum,
    ));
    let adam = b.add_op(timed(
        "adam",
        "ApplyAdam",
        Phase::Optimizer,
        apply_us,
        0.0,
        Splittability::None,
    ));
    b.add_edge(w, grad, bytes);
    b.add_edge(w, adam, bytes);
    b.add_gradient(grad, adam, bytes);
    b.finish("<t>", "grad", 8).unwrap()
}

#[test]
fn ring_allreduce_of_one_gradient_matches_the_formula() {
    let (grad_us, apply_us, bytes) = (80.0, 4.0, 64e6);
    let g = gradient_graph(grad_us, apply_us, bytes);
    let cost = bare();
    for d in [2usize, 4, 8] {
        let c = cluster(d, true);
        let route = c.path(0, 1);
        let s = Reference::Dp.strategy(&g, &c);
        let share_time = cost.compute_time_us(g.op(1), &c.devices[0].gpu, 1.0 / d as f64);
        let ring = 2.0 * (d - 1) as f64 / d as f64 * bytes / route.bandwidth
            + 2.0 * (d - 1) as f64 * route.latency_us;
        let expected = share_time + ring + apply_us;
        let got = simulate(&g, &c, &s);
        assert!(
            (got - expected).abs() <= 1e-9 * expected,
            "D={d}: {got} vs {expected}"
        );
        // With NCCL's knobs: a fixed cost, the ring at its efficiency; its interference with
        // compute overlaps the collective and delays nothing here.
        let comm = CommModel::default();
        let nccl = comm.collective_launch_us
            + 2.0 * (d - 1) as f64 / d as f64 * bytes / (route.bandwidth * comm.nccl_efficiency)
            + 2.0 * (d - 1) as f64 * route.latency_us;
        let got = evaluate(&g, &c, &s, &CostModel::default(), Order::Fifo)
            .unwrap()
            .report
            .iteration_us;
        assert!(
            close(got, share_time + nccl + apply_us),
            "D={d}: {got} vs {}",
            share_time + nccl + apply_us
        );
    }
}

/// `machines` machines of 8 GPUs (one PCIe lane each, 100 GB/s inside, 80 Gbps NICs).
fn machines_of_eight(machines: usize) -> Cluster {
    let text = format!(
        "name = \"t\"\ninter_latency = \"20 us\"\n[[machine]]\nname = \"m\"\ngpu = \"{GPU}\"\n\
         gpus = 8\nintra_bandwidth = \"100 GB/s\"\nintra_latency = \"5 us\"\nnic = \"80 Gbps\"\n\
         count = {machines}\n"
    );
    parse_cluster(&text, "<test>").unwrap()
}

/// At scale NCCL's flat topology-aware ring (each NIC crossed once) or its tree, whichever is
/// faster, over every GPU: the NIC is the slowest hop. With 64 MB the ring wins on 16 GPUs, the
/// tree's logarithmic latency from 128 on (1,024 GPUs compile as one class and agree).
#[test]
fn allreduce_across_machines_matches_the_ring_or_tree_closed_form() {
    let (grad_us, apply_us, bytes) = (80.0, 4.0, 64e6);
    let g = gradient_graph(grad_us, apply_us, bytes);
    let comm = CommModel::default();
    let mut winners = Vec::new();
    for machines in [2usize, 16, 128] {
        let c = machines_of_eight(machines);
        let d = c.devices.len();
        let nic_hop = c.path(7, 8);
        let slowest = (0..d)
            .map(|i| c.path(i, (i + 1) % d))
            .fold((f64::INFINITY, 0.0f64), |(b, l), r| {
                (b.min(r.bandwidth), l.max(r.latency_us))
            });
        assert_eq!(slowest.0, nic_hop.bandwidth, "the NIC bounds the ring");
        let b = slowest.0 * comm.nccl_efficiency;
        let ring = ring_allreduce_time_us(bytes, d, b, slowest.1);
        let tree = tree_allreduce_time_us(bytes, d, b, slowest.1);
        winners.push(if ring < tree { "ring" } else { "tree" });
        let share_time = bare().compute_time_us(g.op(1), &c.devices[0].gpu, 1.0 / d as f64);
        let expected = share_time + comm.collective_launch_us + ring.min(tree) + apply_us;
        let s = Reference::Dp.strategy(&g, &c);
        let got = evaluate(&g, &c, &s, &CostModel::default(), Order::Fifo)
            .unwrap()
            .report
            .iteration_us;
        assert!(close(got, expected), "{d} GPUs: {got} vs {expected}");
    }
    assert_eq!(winners, ["ring", "tree", "tree"]);
}

#[test]
fn parameter_server_sync_of_one_gradient_matches_the_formula() {
    let (grad_us, apply_us, bytes) = (80.0, 4.0, 64e6);
    let g = gradient_graph(grad_us, apply_us, bytes);
    let cost = CostModel::default();
    for d in [2usize, 4] {
        // One GPU per machine: pushes share the PS machine's NIC-in, pulls its NIC-out.
        let c = cluster(d, false);
        let route = c.path(1, 0);
        let all: Vec<usize> = (0..d).collect();
        let s = Strategy::uniform(
            g.len(),
            GroupDecision {
                devices: all,
                option: ReplicationOption::Ps,
            },
            BatchSplit::Even,
        );
        let ev = evaluate(&g, &c, &s, &cost, Order::Fifo).unwrap();
        let share_time = cost.compute_time_us(g.op(1), &c.devices[0].gpu, 1.0 / d as f64);
        let one = route.latency_us + bytes / route.bandwidth;
        // Pushes serialise on the PS's NIC-in, then AddN and the update on the PS, then pulls
        // serialise on its NIC-out.
        let addn = ev
            .compiled
            .roles
            .iter()
            .enumerate()
            .filter(|(_, r)| **r == TaskRole::AddN)
            .map(|(t, _)| ev.compiled.exec.duration(t as u32))
            .sum::<f64>();
        let expected = share_time + (d - 1) as f64 * one + addn + apply_us + (d - 1) as f64 * one;
        assert!(
            close(ev.report.iteration_us, expected),
            "D={d}: {} vs {expected}",
            ev.report.iteration_us
        );
    }
}

/// Inside one machine the pushes to a parameter server share its ingress port: on PCIe (one
/// lane) they queue, (d−1)·S/B; on an NVLink mesh whose port has a lane per peer they run side by
/// side, S/B. The pulls mirror them on the egress port.
#[test]
fn parameter_server_pushes_share_the_servers_port() {
    let (grad_us, apply_us, bytes) = (80.0, 4.0, 64e6);
    let g = gradient_graph(grad_us, apply_us, bytes);
    let cost = bare();
    let d = 4;
    let mesh = "interconnect = \"nvlink\"\nport_bandwidth = \"300 GB/s\"";
    for (fabric, parallel) in [("interconnect = \"pcie\"", 1.0), (mesh, 3.0)] {
        let text = format!(
            "name = \"t\"\n[[machine]]\nname = \"m\"\ngpu = \"{GPU}\"\ngpus = {d}\n\
             intra_bandwidth = \"100 GB/s\"\nintra_latency = \"5 us\"\nnic = \"80 Gbps\"\n\
             {fabric}\n"
        );
        let c = parse_cluster(&text, "<test>").unwrap();
        let s = Strategy::uniform(
            g.len(),
            GroupDecision {
                devices: (0..d).collect(),
                option: ReplicationOption::Ps,
            },
            BatchSplit::Even,
        );
        let ev = evaluate(&g, &c, &s, &cost, Order::Fifo).unwrap();
        let route = c.path(1, 0);
        let one = route.latency_us + bytes / route.bandwidth;
        let share_time = cost.compute_time_us(g.op(1), &c.devices[0].gpu, 1.0 / d as f64);
        let addn: f64 = (0..ev.compiled.roles.len())
            .filter(|&t| ev.compiled.roles[t] == TaskRole::AddN)
            .map(|t| ev.compiled.exec.duration(t as u32))
            .sum();
        let phase = (d - 1) as f64 / parallel * one;
        let expected = share_time + phase + addn + apply_us + phase;
        assert!(
            close(ev.report.iteration_us, expected),
            "{fabric}: {} vs {expected}",
            ev.report.iteration_us
        );
    }
}

/// A tiny MLP: x → fc1 → relu → fc2 → loss, backward with input and weight gradients, Adam.
fn mlp() -> (Graph, [OpIdx; 2]) {
    let mut b = GraphBuilder::new();
    let act = 4096.0;
    let wbytes = 1e6;
    let x = b.add_op(timed(
        "x",
        "Placeholder",
        Phase::Input,
        0.0,
        act,
        Splittability::Concat,
    ));
    let w1 = b.add_op(timed(
        "w1",
        "VariableV2",
        Phase::Parameter,
        0.0,
        0.0,
        Splittability::None,
    ));
    let w2 = b.add_op(timed(
        "w2",
        "VariableV2",
        Phase::Parameter,
        0.0,
        0.0,
        Splittability::None,
    ));
    let fc1 = b.add_op(timed(
        "fc1",
        "MatMul",
        Phase::Forward,
        30.0,
        act,
        Splittability::Concat,
    ));
    let fc2 = b.add_op(timed(
        "fc2",
        "MatMul",
        Phase::Forward,
        20.0,
        act,
        Splittability::Concat,
    ));
    let loss = b.add_op(timed(
        "loss",
        "Loss",
        Phase::Forward,
        2.0,
        act,
        Splittability::Concat,
    ));
    let d2 = b.add_op(timed(
        "fc2_grad_in",
        "MatMul",
        Phase::Backward,
        20.0,
        act,
        Splittability::Concat,
    ));
    let g2 = b.add_op(timed(
        "fc2_grad_w",
        "MatMul",
        Phase::Backward,
        20.0,
        wbytes,
        Splittability::Sum,
    ));
    let g1 = b.add_op(timed(
        "fc1_grad_w",
        "MatMul",
        Phase::Backward,
        30.0,
        wbytes,
        Splittability::Sum,
    ));
    let a1 = b.add_op(timed(
        "adam1",
        "ApplyAdam",
        Phase::Optimizer,
        5.0,
        0.0,
        Splittability::None,
    ));
    let a2 = b.add_op(timed(
        "adam2",
        "ApplyAdam",
        Phase::Optimizer,
        5.0,
        0.0,
        Splittability::None,
    ));
    for (s, d, bytes) in [
        (x, fc1, act),
        (w1, fc1, wbytes),
        (fc1, fc2, act),
        (w2, fc2, wbytes),
        (fc2, loss, act),
        (loss, d2, act),
        (w2, d2, wbytes),
        (loss, g2, act),
        (fc1, g2, act),
        (d2, g1, act),
        (x, g1, act),
        (w1, a1, wbytes),
        (w2, a2, wbytes),
    ] {
        b.add_edge(s, d, bytes);
    }
    b.add_gradient(g1, a1, wbytes);
    b.add_gradient(g2, a2, wbytes);
    (b.finish("<t>", "mlp", 8).unwrap(), [a1, a2])
}

/// The MLP simulated on `d` GPUs of one machine under the strategy `make` builds, with what a
/// hand computation needs: op times at a 1/d batch share and the ring AllReduce time.
struct MlpRun {
    iteration: f64,
    times: std::collections::HashMap<String, f64>,
    bandwidth: f64,
    latency: f64,
    d: usize,
}

impl MlpRun {
    fn new(d: usize, make: impl Fn(&Graph, &Cluster) -> Strategy) -> MlpRun {
        let (g, _) = mlp();
        let c = cluster(d, true);
        let cost = bare();
        let ev = evaluate(&g, &c, &make(&g, &c), &cost, Order::Fifo).unwrap();
        let times = g
            .ops()
            .iter()
            .map(|op| {
                (
                    op.name.clone(),
                    cost.compute_time_us(op, &c.devices[0].gpu, 1.0 / d as f64),
                )
            })
            .collect();
        let route = c.path(0, 1);
        MlpRun {
            iteration: ev.report.iteration_us,
            times,
            bandwidth: route.bandwidth,
            latency: route.latency_us,
            d,
        }
    }

    fn t(&self, op: &str) -> f64 {
        self.times[op]
    }

    /// NCCL's choice: the faster of ring and tree.
    fn ring(&self, bytes: f64) -> f64 {
        let d = self.d as f64;
        let ring = 2.0 * (d - 1.0) / d * bytes / self.bandwidth + 2.0 * (d - 1.0) * self.latency;
        ring.min(tree_allreduce_time_us(
            bytes,
            self.d,
            self.bandwidth,
            self.latency,
        ))
    }
}

#[test]
fn data_parallel_mlp_matches_a_hand_computation() {
    // DP-NCCL packs both gradients (1 MB each) into one AllReduce after the backward pass.
    for d in [2usize, 4] {
        let run = MlpRun::new(d, |g, c| Reference::Dp.strategy(g, c));
        // Every GPU runs its forward and backward share back to back (x, w1, w2 cost the launch
        // overhead), then the packed AllReduce, then both updates.
        let compute: f64 = [
            "x",
            "w1",
            "w2",
            "fc1",
            "fc2",
            "loss",
            "fc2_grad_in",
            "fc2_grad_w",
            "fc1_grad_w",
        ]
        .iter()
        .map(|n| run.t(n))
        .sum();
        let expected = compute + run.ring(2e6) + run.t("adam1") + run.t("adam2");
        assert!(
            close(run.iteration, expected),
            "D={d}: {} vs {expected}",
            run.iteration
        );
    }
}

#[test]
fn per_tensor_allreduce_overlaps_the_backward_pass() {
    for d in [2usize, 4] {
        let run = MlpRun::new(d, |g, _| {
            let all: Vec<usize> = (0..d).collect();
            let decision = GroupDecision {
                devices: all,
                option: ReplicationOption::AllReduce,
            };
            Strategy::uniform(g.len(), decision, BatchSplit::Even)
        });
        let t = |n: &str| run.t(n);
        let ring = run.ring(1e6);
        // Per GPU, FIFO: x, w1, w2, fc1, fc2, loss, then fc2_grad_in and fc2_grad_w (ready
        // together, id order), then fc1_grad_w. fc2's AllReduce starts after fc2_grad_w and
        // overlaps fc1_grad_w; fc1's waits for the ring; each update follows its AllReduce once
        // the GPU is free.
        let front = t("x")
            + t("w1")
            + t("w2")
            + t("fc1")
            + t("fc2")
            + t("loss")
            + t("fc2_grad_in")
            + t("fc2_grad_w");
        let ar2_end = front + ring;
        let g1_end = front + t("fc1_grad_w");
        let ar1_end = g1_end.max(ar2_end) + ring;
        let adam = t("adam1");
        let adam2_end = ar2_end.max(g1_end) + adam;
        let expected = (ar1_end.max(adam2_end) + adam).max(adam2_end);
        assert!(
            close(run.iteration, expected),
            "D={d}: {} vs {expected}",
            run.iteration
        );
    }
}

#[test]
fn single_gpu_ooms_where_model_parallel_fits() {
    // Four layers of 12 GiB parameters each: 48 GiB do not fit one 32 GiB V100; one layer per
    // GPU does.
    let mut b = GraphBuilder::new();
    let mut prev = None;
    let gib = (1u64 << 30) as f64;
    for i in 0..4 {
        let w = b.add_op(timed(
            &format!("w{i}"),
            "VariableV2",
            Phase::Parameter,
            0.0,
            0.0,
            Splittability::None,
        ));
        b.op_mut(w).resident_bytes = 12.0 * gib;
        let f = b.add_op(timed(
            &format!("f{i}"),
            "MatMul",
            Phase::Forward,
            10.0,
            1e6,
            Splittability::Concat,
        ));
        b.add_edge(w, f, 1e3);
        if let Some(p) = prev {
            b.add_edge(p, f, 1e6);
        }
        prev = Some(f);
    }
    let g = b.finish("<t>", "big", 8).unwrap();
    let c = cluster(4, true);
    let cost = CostModel::default();
    let one = evaluate(
        &g,
        &c,
        &Reference::Single.strategy(&g, &c),
        &cost,
        Order::Fifo,
    )
    .unwrap();
    assert_eq!(one.report.oom.len(), 1);
    assert!(one.report.oom[0].excess_bytes > 15.0 * gib);
    let mp = Strategy::uniform(
        g.len(),
        GroupDecision {
            devices: vec![0, 1, 2, 3],
            option: ReplicationOption::ModelParallel,
        },
        BatchSplit::Even,
    );
    let split = evaluate(&g, &c, &mp, &cost, Order::Fifo).unwrap();
    assert!(split.report.oom.is_empty(), "{:?}", split.report.oom);
}

/// A random training graph: forward DAG with parameters, mirrored backward pass with input and
/// weight gradients, one Adam op per parameter.
fn random_training_graph(n: usize, edge_bits: &[bool], params: &[bool]) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.add_op(timed(
        "x",
        "Placeholder",
        Phase::Input,
        1.0,
        512.0,
        Splittability::Concat,
    ));
    let fwd: Vec<OpIdx> = (0..n)
        .map(|i| {
            b.add_op(timed(
                &format!("f{i}"),
                "Conv2D",
                Phase::Forward,
                5.0 + i as f64,
                1024.0,
                Splittability::Concat,
            ))
        })
        .collect();
    b.add_edge(x, fwd[0], 512.0);
    let mut k = 0;
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for j in 1..n {
        let mut any = false;
        for i in 0..j {
            if edge_bits[k % edge_bits.len()] {
                b.add_edge(fwd[i], fwd[j], 1024.0);
                consumers[i].push(j);
                any = true;
            }
            k += 1;
        }
        if !any {
            b.add_edge(fwd[j - 1], fwd[j], 1024.0);
            consumers[j - 1].push(j);
        }
    }
    // Backward: dgrad[i] needs fwd[i] and the dgrads of its consumers.
    let mut dgrad = vec![0; n];
    for i in (0..n).rev() {
        let d = b.add_op(timed(
            &format!("d{i}"),
            "Conv2DBackpropInput",
            Phase::Backward,
            6.0,
            1024.0,
            Splittability::Concat,
        ));
        b.add_edge(fwd[i], d, 1024.0);
        for &c in &consumers[i] {
            b.add_edge(dgrad[c], d, 1024.0);
        }
        dgrad[i] = d;
        if params[i % params.len()] {
            let w = b.add_op(timed(
                &format!("w{i}"),
                "VariableV2",
                Phase::Parameter,
                0.0,
                0.0,
                Splittability::None,
            ));
            b.op_mut(w).resident_bytes = 4096.0;
            b.add_edge(w, fwd[i], 4096.0);
            let gw = b.add_op(timed(
                &format!("gw{i}"),
                "Conv2DBackpropFilter",
                Phase::Backward,
                7.0,
                4096.0,
                Splittability::Sum,
            ));
            b.add_edge(d, gw, 1024.0);
            let adam = b.add_op(timed(
                &format!("adam{i}"),
                "ApplyAdam",
                Phase::Optimizer,
                2.0,
                0.0,
                Splittability::None,
            ));
            b.op_mut(adam).resident_bytes = 8192.0;
            b.add_edge(w, adam, 4096.0);
            b.add_gradient(gw, adam, 4096.0);
        }
    }
    b.finish("<prop>", "random", 8).unwrap()
}

fn random_strategy(g: &Graph, devices: usize, picks: &[(u8, u8, u8)], groups: usize) -> Strategy {
    let op_group: Vec<u32> = (0..g.len())
        .map(|i| (picks[i % picks.len()].0 as usize % groups) as u32)
        .collect();
    let decisions = (0..groups)
        .map(|k| {
            let (_, mask, option) = picks[(k * 7) % picks.len()];
            let mut set: Vec<usize> = (0..devices).filter(|d| mask & (1 << d) != 0).collect();
            if set.is_empty() {
                set.push(mask as usize % devices);
            }
            GroupDecision {
                devices: set,
                option: ReplicationOption::ALL[option as usize % 4],
            }
        })
        .collect();
    Strategy::new(
        "<prop>",
        op_group,
        decisions,
        BatchSplit::Even,
        g.len(),
        devices,
    )
    .unwrap()
}

/// Whether `to` is reachable from `from` in the compiled graph.
fn reaches(exec: &topoplace::sim::ExecGraph, from: u32, to: u32) -> bool {
    let mut seen = vec![false; exec.len()];
    let mut stack = vec![from];
    while let Some(t) = stack.pop() {
        if t == to {
            return true;
        }
        for &s in exec.successors(t) {
            if !seen[s as usize] {
                seen[s as usize] = true;
                stack.push(s);
            }
        }
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn compiled_graphs_are_equivalent_and_schedules_valid(
        n in 2usize..10,
        edge_bits in prop::collection::vec(prop::bool::weighted(0.3), 1..60),
        params in prop::collection::vec(any::<bool>(), 1..10),
        picks in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 1..40),
        groups in 1usize..5,
        spread in any::<bool>(),
        packed in any::<bool>(),
    ) {
        let g = random_training_graph(n, &edge_bits, &params);
        let c = cluster(3, !spread);
        let mut s = random_strategy(&g, 3, &picks, groups);
        if packed {
            s.allreduce = AllReducePacking::Packed;
        }
        let cost = CostModel::default();
        // The compiler applies the model-parallel placement; it is decided above it.
        let s = topoplace::model_parallel::decided(&g, &c, &s, &cost).into_owned();
        let p = Problem::new(&g, &c, &cost);
        let mut compiled = compile(&p, &s, CompileOptions::FIFO_EVERY_REPLICA);
        compiled.exec.seal();
        let r = Simulator::new().run_sealed(&compiled.exec, Order::Fifo).unwrap().clone();
        let exec = &compiled.exec;
        // Every original op runs on the whole batch once per replica set (or on each copy).
        for op in 0..g.len() {
            let tasks = compiled.tasks_of_op(op);
            prop_assert!(!tasks.is_empty());
            let total: f64 = compiled.op_shares[op].iter().sum();
            let option = s.decision(s.group_of(op)).option;
            let batch_split = compiled.op_shares[op].iter().any(|&x| x < 1.0);
            if batch_split {
                prop_assert!(option.splits_batch());
                prop_assert!((total - 1.0).abs() < 1e-9, "op {} shares sum to {}", op, total);
            } else {
                prop_assert!(compiled.op_shares[op].iter().all(|&x| x == 1.0));
            }
        }
        // Every gradient is aggregated before each copy of its optimizer runs: with batch-split
        // replicas every partial gradient reaches every update; whole-batch copies each hold the
        // full gradient, and every update is fed by one of them.
        for link in g.gradients() {
            let partial = compiled.op_shares[link.grad].iter().any(|&x| x < 1.0);
            for o in compiled.tasks_of_op(link.optimizer) {
                let fed: Vec<bool> = compiled.tasks_of_op(link.grad).map(|gt| reaches(exec, gt, o)).collect();
                if partial {
                    prop_assert!(fed.iter().all(|&f| f), "a partial gradient misses update {}", o);
                } else {
                    prop_assert!(fed.iter().any(|&f| f), "no gradient copy reaches update {}", o);
                }
            }
        }
        // Tasks start after their inputs, never overlap on a resource, memory returns to resident.
        for t in 0..exec.len() as u32 {
            for &p in exec.predecessors(t) {
                prop_assert!(r.start[t as usize] >= r.end[p as usize] - 1e-9);
            }
        }
        for res in 0..exec.resource_count() as u32 {
            let mut spans: Vec<(f64, f64)> = (0..exec.len() as u32)
                .filter(|&t| exec.task_resources(t).contains(&res))
                .map(|t| (r.start[t as usize], r.end[t as usize]))
                .collect();
            spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
            for w in spans.windows(2) {
                prop_assert!(w[1].0 >= w[0].1 - 1e-9);
            }
        }
        for d in 0..exec.devices() {
            prop_assert!((r.final_memory[d] - exec.resident()[d]).abs() < 1e-6);
        }
    }
}

/// TAG §5.3 on its testbed: DP-NCCL-P is never slower than DP-NCCL (it balances the batch to the
/// GPUs' speeds with the same communication); DP-NCCL of VGG19 (548 MiB of gradients for 19.6
/// GMAC per sample) is communication-bound: its gradient AllReduce takes longer than the slowest
/// GPU's compute; ResNet101 (170 MiB for 7.8 GMAC) is compute-bound: its slowest GPU computes for
/// longer than the AllReduce takes (with NCCL's efficiency and fixed cost, about 0.55 of it).
#[test]
fn testbed_dp_directions_follow_tag() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let c = topoplace::cluster::load_cluster(root.join("configs/tag-testbed.toml")).unwrap();
    let cost = CostModel::default();
    let mut sync_over_compute = std::collections::HashMap::new();
    for &name in topoplace::zoo::NAMES {
        let g = topoplace::zoo::build(name, &topoplace::zoo::ZooOptions::default()).unwrap();
        let dp = evaluate(&g, &c, &Reference::Dp.strategy(&g, &c), &cost, Order::Fifo).unwrap();
        let dpp = evaluate(&g, &c, &Reference::DpP.strategy(&g, &c), &cost, Order::Fifo).unwrap();
        assert!(
            dpp.report.iteration_us <= dp.report.iteration_us * (1.0 + 1e-9),
            "{name}: DP-P {} > DP {}",
            dpp.report.iteration_us,
            dp.report.iteration_us
        );
        let r = &dp.report;
        sync_over_compute.insert(name, r.sync_busy_us / r.max_device_busy_us);
    }
    let (vgg, resnet) = (sync_over_compute["vgg19"], sync_over_compute["resnet101"]);
    assert!(
        vgg > 1.0,
        "VGG19 sync / compute {vgg}: not communication-bound"
    );
    assert!(
        resnet < 0.75,
        "ResNet101 sync / compute {resnet}: not compute-bound"
    );
}
