//! Tests of the op-grouping module on hand-built, random and generated training graphs.
//!
//! Compute times: the cost model is written elsewhere, so every test uses the stand-in
//! `flops / 1e7 + 1.0` µs per op ([`stand_in_times`]).
//!
//! Zoo models: once the zoo lands, loop over its models and call
//! [`check_grouping_invariants`] (and [`check_acyclic_methods`]) on each; nothing else is needed.

use topoplace::graph::{Graph, GraphBuilder, Op, Phase};
use topoplace::group::{self, Grouping};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Stand-in for the cost model: 1 µs per 10 MFLOP plus 1 µs launch overhead.
fn stand_in_times(g: &Graph) -> Vec<f64> {
    g.ops().iter().map(|op| op.flops / 1e7 + 1.0).collect()
}

/// SplitMix64: a tiny seeded generator so the tests need no RNG crate API.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const TYPES: [&str; 8] = [
    "Conv2D",
    "FusedBatchNorm",
    "Relu",
    "MatMul",
    "BiasAdd",
    "AddV2",
    "Mul",
    "Softmax",
];

/// A random DAG: edges only from lower to higher index, mostly local (like layer graphs) with
/// some long skips; random op types, FLOPs and bytes.
fn random_dag(seed: u64, n: usize) -> Graph {
    let mut rng = Rng(seed);
    let mut b = GraphBuilder::new();
    for i in 0..n {
        let mut op = Op::new(
            0,
            format!("op{i}"),
            TYPES[rng.below(TYPES.len())],
            Phase::Forward,
        );
        // Heavy-tailed FLOPs: most ops cheap, a few expensive.
        op.flops = if rng.unit() < 0.15 {
            rng.unit() * 5e9
        } else {
            rng.unit() * 5e7
        };
        op.output_bytes = (rng.below(1 << 20) + 1) as f64;
        op.resident_bytes = if rng.unit() < 0.2 {
            (rng.below(1 << 22)) as f64
        } else {
            0.0
        };
        op.params = (op.resident_bytes / 4.0) as u64;
        b.add_op(op);
    }
    for j in 1..n {
        let fan_in = 1 + rng.below(3);
        let mut srcs: Vec<usize> = Vec::new();
        for _ in 0..fan_in {
            let back = if rng.unit() < 0.8 {
                1 + rng.below(4)
            } else {
                1 + rng.below(j)
            };
            let i = j.saturating_sub(back);
            if !srcs.contains(&i) {
                srcs.push(i);
            }
        }
        for i in srcs {
            let bytes = b.op(i).output_bytes;
            b.add_edge(i, j, bytes);
        }
    }
    b.finish("<test>", &format!("random{seed}"), 1).unwrap()
}

/// A ResNet-like training graph: `blocks` residual blocks of conv+bn+relu pairs, a dense head
/// with matmul+bias+relu, softmax loss, a backward pass mirroring every forward op, and one Adam
/// op per parameter fed by its gradient.
fn training_graph(blocks: usize) -> Graph {
    let mut t = Trainer::new();
    let mut x = t.fwd("IteratorGetNext", "input", &[], 0.0, 4e6, Phase::Input);
    for blk in 0..blocks {
        let skip = x;
        for half in 0..2 {
            let p = format!("b{blk}_{half}");
            let w = t.param(&format!("{p}/w"), 2.4e5);
            let c = t.fwd(
                "Conv2D",
                &format!("{p}/conv"),
                &[x, w],
                4e8,
                4e6,
                Phase::Forward,
            );
            let gamma = t.param(&format!("{p}/gamma"), 512.0);
            let bn = t.fwd(
                "FusedBatchNorm",
                &format!("{p}/bn"),
                &[c, gamma],
                8e6,
                4e6,
                Phase::Forward,
            );
            x = if half == 1 {
                t.fwd(
                    "AddV2",
                    &format!("{p}/add"),
                    &[bn, skip],
                    1e6,
                    4e6,
                    Phase::Forward,
                )
            } else {
                bn
            };
            x = t.fwd("Relu", &format!("{p}/relu"), &[x], 1e6, 4e6, Phase::Forward);
        }
    }
    let w = t.param("fc/w", 4e6);
    let mm = t.fwd("MatMul", "fc/mm", &[x, w], 2e8, 4e4, Phase::Forward);
    let bias = t.param("fc/b", 4e3);
    let ba = t.fwd("BiasAdd", "fc/bias", &[mm, bias], 1e4, 4e4, Phase::Forward);
    let r = t.fwd("Relu", "fc/relu", &[ba], 1e4, 4e4, Phase::Forward);
    let loss = t.fwd(
        "SoftmaxCrossEntropyWithLogits",
        "loss",
        &[r],
        1e5,
        4.0,
        Phase::Forward,
    );
    t.backward(loss);
    t.finish()
}

/// Builds forward ops and their mirrored backward ops.
struct Trainer {
    b: GraphBuilder,
    /// (op, inputs) of every forward op, in creation order.
    fwd_ops: Vec<(usize, Vec<usize>)>,
    params: Vec<usize>,
}

impl Trainer {
    fn new() -> Trainer {
        Trainer {
            b: GraphBuilder::new(),
            fwd_ops: Vec::new(),
            params: Vec::new(),
        }
    }

    fn param(&mut self, name: &str, bytes: f64) -> usize {
        let mut op = Op::new(0, name, "VariableV2", Phase::Parameter);
        op.output_bytes = bytes;
        op.resident_bytes = bytes;
        op.params = (bytes / 4.0) as u64;
        let i = self.b.add_op(op);
        self.params.push(i);
        i
    }

    fn fwd(
        &mut self,
        ty: &str,
        name: &str,
        inputs: &[usize],
        flops: f64,
        out: f64,
        phase: Phase,
    ) -> usize {
        let mut op = Op::new(0, name, ty, phase);
        op.flops = flops;
        op.output_bytes = out;
        op.bytes_accessed = out * 2.0;
        let i = self.b.add_op(op);
        for &src in inputs {
            let bytes = self.b.op(src).output_bytes;
            self.b.add_edge(src, i, bytes);
        }
        if phase != Phase::Input {
            self.fwd_ops.push((i, inputs.to_vec()));
        }
        i
    }

    /// Reverse-mode mirror: every forward op gets one gradient op per input, reading the
    /// gradient of its output (summed with AddN when the output fans out) and the op's inputs.
    fn backward(&mut self, loss: usize) {
        let mut grads: Vec<Vec<usize>> = vec![Vec::new(); self.b.len()];
        let mut seed = Op::new(0, "loss/grad", "OnesLike", Phase::Backward);
        seed.output_bytes = 4.0;
        let s = self.b.add_op(seed);
        self.b.add_edge(loss, s, 4.0);
        grads[loss].push(s);
        let fwd = std::mem::take(&mut self.fwd_ops);
        for (op, inputs) in fwd.iter().rev() {
            let gy = self.sum_grads(*op, &grads[*op]);
            let Some(gy) = gy else { continue };
            let ty = self.b.op(*op).op_type.clone();
            let flops = self.b.op(*op).flops;
            for (k, &x) in inputs.iter().enumerate() {
                let gname = format!("{}/grad{k}", self.b.op(*op).name);
                let mut g = Op::new(0, gname, format!("{ty}Grad"), Phase::Backward);
                g.flops = flops;
                g.output_bytes = self.b.op(x).output_bytes;
                let gi = self.b.add_op(g);
                let gy_bytes = self.b.op(gy).output_bytes;
                self.b.add_edge(gy, gi, gy_bytes);
                let x_bytes = self.b.op(x).output_bytes;
                self.b.add_edge(x, gi, x_bytes);
                grads[x].push(gi);
            }
        }
        for p in self.params.clone() {
            let Some(g) = self.sum_grads(p, &grads[p]) else {
                continue;
            };
            let mut adam = Op::new(
                0,
                format!("{}/adam", self.b.op(p).name),
                "ApplyAdam",
                Phase::Optimizer,
            );
            adam.flops = self.b.op(p).output_bytes * 2.0;
            adam.resident_bytes = self.b.op(p).output_bytes * 2.0;
            let a = self.b.add_op(adam);
            let bytes = self.b.op(g).output_bytes;
            self.b.add_gradient(g, a, bytes);
            let pb = self.b.op(p).output_bytes;
            self.b.add_edge(p, a, pb);
        }
    }

    fn sum_grads(&mut self, op: usize, gs: &[usize]) -> Option<usize> {
        match gs {
            [] => None,
            [one] => Some(*one),
            many => {
                let name = format!("{}/gradsum", self.b.op(op).name);
                let mut add = Op::new(0, name, "AddN", Phase::Backward);
                add.output_bytes = self.b.op(op).output_bytes;
                let a = self.b.add_op(add);
                for &g in many {
                    let bytes = self.b.op(g).output_bytes;
                    self.b.add_edge(g, a, bytes);
                }
                Some(a)
            }
        }
    }

    fn finish(self) -> Graph {
        self.b.finish("<test>", "resnet-like", 32).unwrap()
    }
}

// ---------------------------------------------------------------------------------------------
// Invariants for any graph (the integrator loops these over the zoo models)
// ---------------------------------------------------------------------------------------------

/// Every op in exactly one group, ids dense, per-group totals and cut bytes equal to what an
/// independent recomputation from the graph gives.
pub fn check_grouping_invariants(g: &Graph, weights: &[f64], grouping: &Grouping) {
    let n = g.len();
    assert_eq!(
        grouping.op_group.len(),
        n,
        "{}: one group id per op",
        grouping.method
    );
    let k = grouping.groups.len();
    assert_eq!(grouping.stats.groups, k);
    assert_eq!(grouping.stats.ops, n);
    let mut count = vec![0usize; k];
    for &gid in &grouping.op_group {
        assert!(
            (gid as usize) < k,
            "{}: group id {gid} out of 0..{k}",
            grouping.method
        );
        count[gid as usize] += 1;
    }
    assert!(
        count.iter().all(|&c| c > 0),
        "{}: an empty group",
        grouping.method
    );
    for (gid, info) in grouping.groups.iter().enumerate() {
        assert_eq!(info.ops, count[gid]);
    }
    let rel = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    let total_w: f64 = weights.iter().sum();
    let sum_w: f64 = grouping.groups.iter().map(|x| x.compute_us).sum();
    assert!(
        rel(total_w, sum_w),
        "{}: compute {sum_w} != {total_w}",
        grouping.method
    );
    let total_r: f64 = g.ops().iter().map(|o| o.resident_bytes).sum();
    let sum_r: f64 = grouping.groups.iter().map(|x| x.resident_bytes).sum();
    assert!(
        rel(total_r, sum_r),
        "{}: resident {sum_r} != {total_r}",
        grouping.method
    );
    let total_p: u64 = g.ops().iter().map(|o| o.params).sum();
    assert_eq!(
        total_p,
        grouping.groups.iter().map(|x| x.params).sum::<u64>()
    );
    let cut: f64 = g
        .edges()
        .iter()
        .filter(|e| grouping.op_group[e.src] != grouping.op_group[e.dst])
        .map(|e| e.bytes)
        .sum();
    assert!(
        rel(cut, grouping.stats.cut_bytes),
        "{}: cut {} != {cut}",
        grouping.method,
        grouping.stats.cut_bytes
    );
    let coarse_sum: f64 = grouping.coarse_edges.iter().map(|e| e.bytes).sum();
    assert!(rel(cut, coarse_sum));
    assert!(grouping.coarse_edges.iter().all(|e| e.src != e.dst));
    assert!(grouping.stats.ccr_after <= grouping.stats.ccr_before + 1e-12);
}

/// The methods that promise an acyclic coarse graph keep that promise on `g`.
pub fn check_acyclic_methods(g: &Graph, weights: &[f64]) {
    for method in ["quickp", "celeritas", "moirai"] {
        if !group::method_names().contains(&method) {
            continue;
        }
        let grouping = group::group_by_name(g, weights, method, 60).unwrap();
        check_grouping_invariants(g, weights, &grouping);
        assert!(
            grouping.is_acyclic(),
            "{method} made a cyclic coarse graph on {}",
            g.name
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Grouping type
// ---------------------------------------------------------------------------------------------

#[test]
fn from_assignment_densifies_and_totals() {
    let g = random_dag(7, 30);
    let w = stand_in_times(&g);
    // Sparse ids 10, 20, 30 must come out as 0, 1, 2 in the same order.
    let ids: Vec<u32> = (0..g.len()).map(|i| [10, 20, 30][i % 3]).collect();
    let grouping = Grouping::from_assignment(&g, &w, "test", ids).unwrap();
    assert_eq!(grouping.num_groups(), 3);
    assert_eq!(grouping.op_group[0..3], [0, 1, 2]);
    check_grouping_invariants(&g, &w, &grouping);
    let dot = grouping.to_dot();
    assert!(dot.starts_with("digraph") && dot.contains("g0 ->"));
    let json = serde_json::to_string(&grouping.stats).unwrap();
    assert!(json.contains("\"ccr_before\""));
}

#[test]
fn from_assignment_rejects_bad_input() {
    let g = random_dag(1, 10);
    let w = stand_in_times(&g);
    assert!(Grouping::from_assignment(&g, &w, "t", vec![0; 9]).is_err());
    assert!(Grouping::from_assignment(&g, &w[..9], "t", vec![0; 10]).is_err());
    let mut bad = w.clone();
    bad[3] = f64::NAN;
    assert!(Grouping::from_assignment(&g, &bad, "t", vec![0; 10]).is_err());
}

#[test]
fn ccr_matches_celeritas_definition() {
    // a -> b -> c, 1e6 bytes each; times 1, 2, 3 µs; default bandwidth 2e4 B/µs.
    let mut b = GraphBuilder::new();
    let ops: Vec<usize> = (0..3)
        .map(|i| b.add_op(Op::new(0, format!("o{i}"), "X", Phase::Forward)))
        .collect();
    b.add_edge(ops[0], ops[1], 1e6);
    b.add_edge(ops[1], ops[2], 1e6);
    let g = b.finish("<test>", "line", 1).unwrap();
    let w = [1.0, 2.0, 3.0];
    let grouping = Grouping::from_assignment(&g, &w, "t", vec![0, 0, 1]).unwrap();
    let bw = group::DEFAULT_BANDWIDTH_BYTES_PER_US;
    assert!((grouping.stats.ccr_before - 2e6 / bw / 6.0).abs() < 1e-12);
    assert!((grouping.stats.ccr_after - 1e6 / bw / 6.0).abs() < 1e-12);
    assert!((grouping.stats.balance - 3.0 / 3.0).abs() < 1e-12);
    // A cyclic coarse graph is detected: {a, c} and {b}.
    let cyclic = Grouping::from_assignment(&g, &w, "t", vec![0, 1, 0]).unwrap();
    assert!(!cyclic.is_acyclic());
    assert!(grouping.is_acyclic());
}

// ---------------------------------------------------------------------------------------------
// METIS and chunks
// ---------------------------------------------------------------------------------------------

#[test]
fn metis_respects_k_and_balance() {
    for (seed, n, k) in [(1u64, 2000usize, 60usize), (2, 1000, 20), (3, 500, 60)] {
        let g = random_dag(seed, n);
        let w = stand_in_times(&g);
        let grouping = group::metis(&g, &w, k, 0).unwrap();
        check_grouping_invariants(&g, &w, &grouping);
        assert!(grouping.num_groups() <= k);
        assert!(
            grouping.num_groups() >= k / 2,
            "{} groups of {k}",
            grouping.num_groups()
        );
        // Balance factor 2 relative to the ideal mean total/k (METIS's definition) — the stat
        // uses the mean over non-empty groups, which can only be larger.
        let ideal = w.iter().sum::<f64>() / k as f64;
        let max = grouping
            .groups
            .iter()
            .map(|x| x.compute_us)
            .fold(0.0, f64::max);
        assert!(
            max <= 2.0 * ideal * 1.01,
            "seed {seed}: max {max} > 2 × {ideal}"
        );
        assert!(grouping.stats.balance <= 2.0 * 1.01);
    }
}

#[test]
fn metis_cuts_no_more_than_topological_chunks() {
    let graphs = [
        random_dag(11, 2000),
        random_dag(12, 800),
        training_graph(40),
    ];
    for g in &graphs {
        let w = stand_in_times(g);
        for k in [8usize, 60] {
            let m = group::metis(g, &w, k, 0).unwrap();
            let c = group::contiguous_chunks(g, &w, k).unwrap();
            check_grouping_invariants(g, &w, &c);
            assert!(c.num_groups() <= k);
            assert!(
                m.stats.cut_bytes <= c.stats.cut_bytes,
                "{} k={k}: metis cut {} > chunks cut {}",
                g.name,
                m.stats.cut_bytes,
                c.stats.cut_bytes
            );
        }
    }
}

#[test]
fn metis_small_and_degenerate_k() {
    let g = random_dag(5, 12);
    let w = stand_in_times(&g);
    let one = group::metis(&g, &w, 1, 0).unwrap();
    assert_eq!(one.num_groups(), 1);
    assert_eq!(one.stats.cut_bytes, 0.0);
    // k larger than the op count is clamped.
    let many = group::metis(&g, &w, 1000, 0).unwrap();
    assert!(many.num_groups() <= g.len());
    check_grouping_invariants(&g, &w, &many);
}

#[test]
fn chunks_are_contiguous_and_balanced() {
    let g = random_dag(9, 600);
    let w = stand_in_times(&g);
    let c = group::contiguous_chunks(&g, &w, 10).unwrap();
    assert_eq!(c.num_groups(), 10);
    // Group ids never decrease along the topological order, so the coarse graph is a chain.
    let order = g.topological_order();
    assert!(
        order
            .windows(2)
            .all(|p| c.op_group[p[0]] <= c.op_group[p[1]])
    );
    assert!(c.is_acyclic());
}

#[test]
fn metis_partition_splits_a_subset() {
    let g = training_graph(6);
    let w = stand_in_times(&g);
    let subset: Vec<usize> = (0..g.len()).filter(|i| i % 2 == 0).collect();
    let parts = group::metis::partition_ops(&g, &w, &subset, 4, 0).unwrap();
    assert_eq!(parts.len(), subset.len());
    assert!(parts.iter().all(|&p| p < 4));
}
