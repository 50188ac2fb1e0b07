//! Tests of the op-grouping module on hand-built, random and generated training graphs.
//!
//! Compute times: the hand-built and random graphs use the stand-in `flops / 1e7 + 1.0` µs per
//! op ([`stand_in_times`]). The zoo models and QuickP's two profiled graphs (the "Real models"
//! section at the end) use TAG's vertex weights instead: each op's compute time on one
//! reference GPU at full batch, from the cost model ([`tag_weights`]).

use crate::graph::{Graph, GraphBuilder, Op, Phase};
use crate::group::{self, Grouping};

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

    /// A TensorFlow-style variable: `VariableV2` plus its `Identity` read op, which is what
    /// the forward ops consume. Returns the read op.
    fn param(&mut self, name: &str, bytes: f64) -> usize {
        let mut op = Op::new(0, name, "VariableV2", Phase::Parameter);
        op.output_bytes = bytes;
        op.resident_bytes = bytes;
        op.params = (bytes / 4.0) as u64;
        let var = self.b.add_op(op);
        let mut read = Op::new(0, format!("{name}/read"), "Identity", Phase::Forward);
        read.output_bytes = bytes;
        let r = self.b.add_op(read);
        self.b.add_edge(var, r, bytes);
        self.params.push(var);
        r
    }

    /// A scalar constant (learning rate, Adam betas, epsilon).
    fn scalar(&mut self, name: &str) -> usize {
        let mut op = Op::new(0, name, "Const", Phase::Input);
        op.output_bytes = 4.0;
        self.b.add_op(op)
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
        // TensorFlow's ApplyAdam reads the variable, its two slot variables (m, v), the beta
        // powers and four shared scalars (lr, beta1, beta2, epsilon) besides the gradient.
        let scalars: Vec<usize> = ["lr", "beta1", "beta2", "epsilon"]
            .iter()
            .map(|n| self.scalar(n))
            .collect();
        for p in self.params.clone() {
            let read = p + 1; // created right after its variable by `param`
            let Some(g) = self.sum_grads(read, &grads[read]) else {
                continue;
            };
            let mut adam = Op::new(
                0,
                format!("{}/adam", self.b.op(p).name),
                "ApplyAdam",
                Phase::Optimizer,
            );
            adam.flops = self.b.op(p).output_bytes * 2.0;
            let a = self.b.add_op(adam);
            let bytes = self.b.op(g).output_bytes;
            self.b.add_gradient(g, a, bytes);
            let pb = self.b.op(p).output_bytes;
            self.b.add_edge(p, a, pb);
            for slot in ["m", "v", "beta1_power", "beta2_power"] {
                let slot_bytes = if slot.len() == 1 { pb } else { 4.0 };
                let mut var = Op::new(
                    0,
                    format!("{}/{slot}", self.b.op(p).name),
                    "VariableV2",
                    Phase::Parameter,
                );
                var.output_bytes = slot_bytes;
                var.resident_bytes = slot_bytes;
                let s = self.b.add_op(var);
                self.b.add_edge(s, a, slot_bytes);
            }
            for &c in &scalars {
                self.b.add_edge(c, a, 4.0);
            }
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
pub(crate) fn check_grouping_invariants(g: &Graph, weights: &[f64], grouping: &Grouping) {
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
pub(crate) fn check_acyclic_methods(g: &Graph, weights: &[f64]) {
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

/// Everything to check on one model, with the stand-in times; used on generated graphs. The zoo
/// models and QuickP's graphs are checked with real weights in the "Real models" section.
pub(crate) fn check_zoo_model(g: &Graph) {
    let w = stand_in_times(g);
    for m in group::method_names() {
        let grouping = group::group_by_name(g, &w, m, 60).unwrap();
        check_grouping_invariants(g, &w, &grouping);
    }
    check_acyclic_methods(g, &w);
    let metis = group::metis(g, &w, 60, 0).unwrap();
    assert!(metis.num_groups() <= 60);
    if g.len() >= 600 {
        let ideal = w.iter().sum::<f64>() / 60.0;
        let max = metis
            .groups
            .iter()
            .map(|x| x.compute_us)
            .fold(0.0, f64::max);
        // Only meaningful when no single op outweighs the bound by itself.
        let heaviest = w.iter().copied().fold(0.0, f64::max);
        if heaviest <= ideal {
            assert!(
                max <= 2.0 * ideal * 1.01,
                "{}: METIS balance {max} > 2 × {ideal}",
                g.name
            );
        }
    }
    let q = group::quickp(g, &w, &group::QuickpOptions::default()).unwrap();
    assert!(q.fused.is_acyclic() && q.colocated.is_acyclic());
    assert!(q.fused.num_groups() <= g.len());
}

#[test]
fn zoo_style_check_on_generated_models() {
    // Stand-ins for the zoo until it is merged.
    check_zoo_model(&training_graph(12));
    check_zoo_model(&training_graph(40));
    check_zoo_model(&random_dag(31337, 1200));
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
    // +0, not -0: the JSON report must not say "-0.0".
    assert!(one.stats.cut_bytes.is_sign_positive() && one.stats.ccr_after.is_sign_positive());
    let json = serde_json::to_string(&one.stats).unwrap();
    assert!(!json.contains("-0.0"), "{json}");
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

// ---------------------------------------------------------------------------------------------
// Acyclicity on random and training graphs
// ---------------------------------------------------------------------------------------------

#[test]
fn quickp_celeritas_moirai_acyclic_on_200_random_dags() {
    for seed in 0..200u64 {
        let n = 20 + (seed as usize * 37) % 300;
        let g = random_dag(1000 + seed, n);
        let w = stand_in_times(&g);
        check_acyclic_methods(&g, &w);
        // QuickP's fusion stage on its own never closes a cycle either (Theorem 2).
        let q = group::quickp(&g, &w, &group::QuickpOptions::default()).unwrap();
        assert!(q.fused.is_acyclic(), "quickp fusion cyclic on seed {seed}");
        assert!(q.colocated.num_groups() <= q.fused.num_groups());
    }
}

/// The same random DAG with about a third of its ops marked backward, so that the MOIRAI
/// training variant meets producers whose consumers span phases.
fn random_dag_phased(seed: u64, n: usize) -> Graph {
    let base = random_dag(seed, n);
    let mut rng = Rng(seed ^ 0xABCD);
    let mut b = GraphBuilder::new();
    for op in base.ops() {
        let mut op = op.clone();
        if rng.below(3) == 0 {
            op.phase = Phase::Backward;
        }
        b.add_op(op);
    }
    for e in base.edges() {
        b.add_edge(e.src, e.dst, e.bytes);
    }
    b.finish("<test>", &format!("phased{seed}"), 1).unwrap()
}

#[test]
fn moirai_training_acyclic_on_200_random_phased_dags() {
    let opts = group::moirai::MoiraiOptions {
        same_phase_consumers_only: true,
    };
    let mut fused_ops = 0;
    for seed in 0..200u64 {
        let n = 20 + (seed as usize * 53) % 300;
        let g = random_dag_phased(3000 + seed, n);
        let w = stand_in_times(&g);
        let grouping = group::moirai::moirai_with(&g, &w, &group::default_rules(), &opts).unwrap();
        check_grouping_invariants(&g, &w, &grouping);
        assert!(
            grouping.is_acyclic(),
            "moirai-training cyclic on seed {seed}"
        );
        fused_ops += g.len() - grouping.num_groups();
    }
    // The rules must actually fire somewhere, or this test checks nothing.
    assert!(fused_ops > 100, "only {fused_ops} ops fused");
}

#[test]
fn methods_acyclic_on_training_graph() {
    let g = training_graph(30);
    check_acyclic_methods(&g, &stand_in_times(&g));
}

#[test]
fn method_names_all_run() {
    let g = random_dag(3, 100);
    let w = stand_in_times(&g);
    for m in group::method_names() {
        let grouping = group::group_by_name(&g, &w, m, 10).unwrap();
        assert_eq!(grouping.method, *m);
        check_grouping_invariants(&g, &w, &grouping);
    }
    assert!(group::group_by_name(&g, &w, "nope", 10).is_err());
}

// ---------------------------------------------------------------------------------------------
// QuickP
// ---------------------------------------------------------------------------------------------

#[test]
fn quickp_alpha_is_nearest_rank_90th_percentile_of_nonzero() {
    // Ten non-zero times 1..=10 among zeros: ⌈0.9·10⌉ = 9th smallest = 9.
    let mut w: Vec<f64> = (1..=10).map(|x| x as f64).rev().collect();
    w.extend([0.0, 0.0, 0.0]);
    assert_eq!(group::quickp::alpha_percentile(&w, 0.9), 9.0);
    // Eleven values: ⌈9.9⌉ = 10th smallest.
    let w11: Vec<f64> = (1..=11).map(|x| x as f64 * 2.0).collect();
    assert_eq!(group::quickp::alpha_percentile(&w11, 0.9), 20.0);
    assert_eq!(group::quickp::alpha_percentile(&[0.0, 0.0], 0.9), 0.0);
    assert_eq!(group::quickp::alpha_percentile(&[5.0], 0.9), 5.0);
}

/// u → v directly (`uv_bytes`) and u → w → v (10 bytes each): fusing v into u would make
/// {u,v} → w → {u,v}.
fn diamond_with_shortcut(uv_bytes: f64) -> Graph {
    let mut b = GraphBuilder::new();
    let u = b.add_op(Op::new(0, "u", "X", Phase::Forward));
    let w = b.add_op(Op::new(0, "w", "X", Phase::Forward));
    let v = b.add_op(Op::new(0, "v", "X", Phase::Forward));
    b.add_edge(u, v, uv_bytes);
    b.add_edge(u, w, 10.0);
    b.add_edge(w, v, 10.0);
    b.finish("<test>", "shortcut", 1).unwrap()
}

#[test]
fn quickp_does_not_fuse_across_a_second_path() {
    let (u, w, v) = (0, 1, 2);
    let g = diamond_with_shortcut(10.0);
    // w is expensive (above α = 10), u and v cheap. u→v: out(u) = 2, in(v) = 2 → refused
    // (naive fusion would close u,v → w → u,v). u→w: out(u) = 2 and p_w > α → no.
    // w→v: in(v) = 2 and p_w > α → no. Nothing fuses.
    let opts = group::QuickpOptions {
        alpha_us: Some(10.0),
        ..Default::default()
    };
    let r = group::quickp(&g, &[1.0, 100.0, 1.0], &opts).unwrap();
    assert_eq!(r.fused.num_groups(), 3);
    assert_ne!(r.fused.op_group[u], r.fused.op_group[v]);
    // With every time under α the same graph fuses completely, safely: u absorbs w first
    // (in(w) = 1), after which u→v is the only path left and v follows.
    let all = group::quickp(&g, &[1.0, 1.0, 1.0], &group::QuickpOptions::default()).unwrap();
    assert_eq!(all.fused.num_groups(), 1);
    let _ = w;
}

#[test]
fn quickp_colocation_skips_a_tie_that_would_close_a_cycle() {
    let (u, w, v) = (0, 1, 2);
    // The u→v tensor is huge, so eq. (7) ties u to v; tying them would close u,v → w → u,v.
    let g = diamond_with_shortcut(1e9);
    let opts = group::QuickpOptions {
        alpha_us: Some(10.0),
        ..Default::default()
    };
    let r = group::quickp(&g, &[1.0, 100.0, 1.0], &opts).unwrap();
    assert_eq!(r.fused.num_groups(), 3);
    assert_eq!((r.ties, r.skipped_ties), (1, 1));
    assert_eq!(r.colocated.num_groups(), 3);
    assert!(r.colocated.is_acyclic());
    // With a small u→v tensor the tie goes to w (longer path), which is safe.
    let g2 = diamond_with_shortcut(10.0);
    let r2 = group::quickp(&g2, &[1.0, 100.0, 1.0], &opts).unwrap();
    assert_eq!((r2.ties, r2.skipped_ties), (1, 0));
    assert_eq!(r2.colocated.op_group[u], r2.colocated.op_group[w]);
    assert_ne!(r2.colocated.op_group[u], r2.colocated.op_group[v]);
}

#[test]
fn quickp_algorithm1_cases() {
    use group::quickp::algorithm1;
    assert!(algorithm1(1, 1, 100.0, 100.0, 1.0)); // straight line, whatever the times
    assert!(algorithm1(1, 3, 0.5, 100.0, 1.0)); // cheap i with one consumer
    assert!(!algorithm1(1, 3, 5.0, 100.0, 1.0)); // expensive i
    assert!(algorithm1(3, 1, 100.0, 0.5, 1.0)); // cheap j with one producer
    assert!(!algorithm1(3, 1, 100.0, 5.0, 1.0));
    assert!(!algorithm1(2, 2, 0.0, 0.0, 1.0)); // Theorem 2: could close a cycle
}

/// Past this thread's deadline QuickP gives up with `OutOfTime` (a placer's or a solve's time
/// limit); before it, or without one, the grouping is the same.
#[test]
fn quickp_gives_up_past_its_deadline() {
    use crate::error::{Error, SearchError};
    use crate::sim::deadline;
    use std::time::{Duration, Instant};
    let g = training_graph(60);
    let w = stand_in_times(&g);
    let opts = group::QuickpOptions::default();
    let free = group::quickp(&g, &w, &opts).unwrap();
    let later = Some(Instant::now() + Duration::from_secs(600));
    let timed = deadline::during(later, || group::quickp(&g, &w, &opts)).unwrap();
    assert_eq!(timed.colocated.op_group, free.colocated.op_group);
    let late = deadline::during(Some(Instant::now()), || group::quickp(&g, &w, &opts));
    assert!(matches!(late, Err(Error::Search(SearchError::OutOfTime))));
}

#[test]
fn quickp_fusion_shrinks_training_graph() {
    let g = training_graph(60);
    let w = stand_in_times(&g);
    let r = group::quickp(&g, &w, &group::QuickpOptions::default()).unwrap();
    check_grouping_invariants(&g, &w, &r.fused);
    check_grouping_invariants(&g, &w, &r.colocated);
    assert!(r.fused.is_acyclic() && r.colocated.is_acyclic());
    let (n, f, c) = (g.len(), r.fused.num_groups(), r.colocated.num_groups());
    eprintln!(
        "quickp on {n}-op training graph: fused {f}, co-located {c}, alpha {:.2} us, ties {}, skipped {}",
        r.alpha_us, r.ties, r.skipped_ties
    );
    // QuickP Table I reduces 3–7×; demand at least 2× from fusion alone.
    assert!(f * 2 <= n, "fusion left {f} of {n} ops");
    assert!(c <= f);
}

// ---------------------------------------------------------------------------------------------
// MOIRAI
// ---------------------------------------------------------------------------------------------

fn op_named(g: &Graph, name: &str) -> usize {
    g.ops().iter().position(|o| o.name == name).unwrap()
}

#[test]
fn moirai_fuses_conv_bn_relu_and_matmul_bias_relu() {
    let mut t = Trainer::new();
    let x = t.fwd("IteratorGetNext", "input", &[], 0.0, 1e6, Phase::Input);
    let w1 = t.param("w1", 1e4);
    let c1 = t.fwd("Conv2D", "conv1", &[x, w1], 1e8, 1e6, Phase::Forward);
    let g1 = t.param("g1", 64.0);
    let bn1 = t.fwd("FusedBatchNorm", "bn1", &[c1, g1], 1e6, 1e6, Phase::Forward);
    let r1 = t.fwd("Relu", "relu1", &[bn1], 1e5, 1e6, Phase::Forward);
    let w2 = t.param("w2", 1e4);
    let m = t.fwd("MatMul", "mm", &[r1, w2], 1e7, 1e4, Phase::Forward);
    let bias = t.param("b", 64.0);
    let ba = t.fwd("BiasAdd", "bias", &[m, bias], 1e3, 1e4, Phase::Forward);
    let r2 = t.fwd("Relu", "relu2", &[ba], 1e3, 1e4, Phase::Forward);
    let _out = t.fwd("Identity", "out", &[r2], 0.0, 1e4, Phase::Forward);
    let g = t.finish();
    let w = stand_in_times(&g);
    let grouping = group::moirai(&g, &w, &group::default_rules()).unwrap();
    check_grouping_invariants(&g, &w, &grouping);
    let members = grouping.members();
    let mut fused: Vec<Vec<usize>> = members.into_iter().filter(|m| m.len() > 1).collect();
    fused.sort();
    assert_eq!(fused, vec![vec![c1, bn1, r1], vec![m, ba, r2]]);
    assert_eq!(grouping.num_groups(), g.len() - 4);
    assert!(grouping.is_acyclic());
}

#[test]
fn moirai_residual_rule_and_multi_output_rule() {
    // conv → bn → add → relu with the add's other input from a skip: conv∘bn∘add∘relu (Table I
    // rule 3, multi-input connection). A second conv whose output also feeds another op
    // (multi-output) must not fuse with its bn.
    let mut t = Trainer::new();
    let x = t.fwd("IteratorGetNext", "input", &[], 0.0, 1e6, Phase::Input);
    let skip = t.fwd("Relu", "skip", &[x], 1e5, 1e6, Phase::Forward);
    let w = t.param("w", 1e4);
    let c = t.fwd("Conv2D", "conv", &[skip, w], 1e8, 1e6, Phase::Forward);
    let bn = t.fwd("FusedBatchNorm", "bn", &[c], 1e6, 1e6, Phase::Forward);
    let add = t.fwd("AddV2", "add", &[bn, skip], 1e5, 1e6, Phase::Forward);
    let r = t.fwd("Relu", "relu", &[add], 1e5, 1e6, Phase::Forward);
    let w2 = t.param("w2", 1e4);
    let c2 = t.fwd("Conv2D", "conv2", &[r, w2], 1e8, 1e6, Phase::Forward);
    let bn2 = t.fwd("FusedBatchNorm", "bn2", &[c2], 1e6, 1e6, Phase::Forward);
    let _side = t.fwd("Identity", "side", &[c2], 0.0, 1e6, Phase::Forward);
    let _out = t.fwd("Identity", "out", &[bn2], 0.0, 1e6, Phase::Forward);
    let g = t.finish();
    let chains = group::moirai::fused_chains(&g, &group::default_rules());
    assert_eq!(chains, vec![vec![c, bn, add, r]]);
    let _ = (op_named(&g, "conv2"), bn2);
}

#[test]
fn moirai_releases_incomplete_matches() {
    // matmul → bias-less mul: [MatMul] starts rules but [MatMul, Mul] matches none, and
    // conv → bn → add with no relu after the add: only conv∘bn (rule 1) stays fused.
    let mut t = Trainer::new();
    let x = t.fwd("IteratorGetNext", "input", &[], 0.0, 1e6, Phase::Input);
    let c = t.fwd("Conv2D", "conv", &[x], 1e8, 1e6, Phase::Forward);
    let bn = t.fwd("FusedBatchNorm", "bn", &[c], 1e6, 1e6, Phase::Forward);
    let add = t.fwd("AddV2", "add", &[bn, x], 1e5, 1e6, Phase::Forward);
    let _tanh = t.fwd("Tanh", "tanh", &[add], 1e5, 1e6, Phase::Forward);
    let g = t.finish();
    let chains = group::moirai::fused_chains(&g, &group::default_rules());
    assert_eq!(chains, vec![vec![c, bn]]);
}

#[test]
fn moirai_on_training_graph() {
    let g = training_graph(30);
    let w = stand_in_times(&g);
    let grouping = group::moirai(&g, &w, &group::default_rules()).unwrap();
    check_grouping_invariants(&g, &w, &grouping);
    assert!(grouping.is_acyclic());
    eprintln!(
        "moirai on {}-op training graph: {} groups",
        g.len(),
        grouping.num_groups()
    );
    // The head's MatMul → BiasAdd → Relu is a direct chain (its activations feed only the
    // next op and their own gradient ops are fed by the inputs), but forward conv outputs also
    // feed gradient ops (multi-output), so fusion is modest; it must still never grow groups.
    assert!(grouping.num_groups() <= g.len());
}

#[test]
fn moirai_training_option_fuses_forward_chains_and_stays_acyclic() {
    let opts = group::moirai::MoiraiOptions {
        same_phase_consumers_only: true,
    };
    for blocks in [5usize, 30, 60] {
        let g = training_graph(blocks);
        let w = stand_in_times(&g);
        let paper = group::moirai(&g, &w, &group::default_rules()).unwrap();
        let train = group::moirai::moirai_with(&g, &w, &group::default_rules(), &opts).unwrap();
        check_grouping_invariants(&g, &w, &train);
        assert!(train.is_acyclic());
        assert_eq!(train.method, "moirai-training");
        // Every block has two conv∘bn(∘add)∘relu chains: at least 2 × 2 ops saved per block.
        assert!(
            train.num_groups() + 4 * blocks <= paper.num_groups(),
            "{blocks} blocks: {} vs {}",
            train.num_groups(),
            paper.num_groups()
        );
        let again = group::moirai::moirai_with(&g, &w, &group::default_rules(), &opts).unwrap();
        assert_eq!(train, again);
    }
}

#[test]
fn moirai_training_option_rejects_a_group_that_closes_a_cycle() {
    // conv → bn → relu is a rule, and conv's only forward consumer is bn, but conv also feeds a
    // backward op that feeds bn: fusing {conv, bn, relu} would close conv,bn,relu → x → itself.
    let mut t = Trainer::new();
    let x = t.fwd("IteratorGetNext", "input", &[], 0.0, 1e6, Phase::Input);
    let c = t.fwd("Conv2D", "conv", &[x], 1e8, 1e6, Phase::Forward);
    let back = t.fwd("Weird", "back", &[c], 1e6, 1e6, Phase::Backward);
    let bn = t.fwd("FusedBatchNorm", "bn", &[c, back], 1e6, 1e6, Phase::Forward);
    let _r = t.fwd("Relu", "relu", &[bn], 1e5, 1e6, Phase::Forward);
    let g = t.finish();
    let w = stand_in_times(&g);
    let opts = group::moirai::MoiraiOptions {
        same_phase_consumers_only: true,
    };
    let chains = group::moirai::fused_chains_with(&g, &group::default_rules(), &opts);
    assert_eq!(chains.len(), 1, "the rule matches");
    let grouping = group::moirai::moirai_with(&g, &w, &group::default_rules(), &opts).unwrap();
    assert_eq!(grouping.num_groups(), g.len(), "but the group is refused");
    assert!(grouping.is_acyclic());
}

// ---------------------------------------------------------------------------------------------
// Celeritas
// ---------------------------------------------------------------------------------------------

/// Cut communication of clusters given by starts, recomputed from scratch.
fn cut_cost(g: &Graph, order: &[usize], starts: &[usize], bw: f64) -> f64 {
    // Cluster of each position: how many starts (after the first) lie at or before it.
    let cluster_of_pos: Vec<usize> = (0..order.len())
        .map(|p| starts[1..].iter().filter(|&&s| s <= p).count())
        .collect();
    let mut pos = vec![0usize; g.len()];
    for (p, &op) in order.iter().enumerate() {
        pos[op] = p;
    }
    g.edges()
        .iter()
        .filter(|e| cluster_of_pos[pos[e.src]] != cluster_of_pos[pos[e.dst]])
        .map(|e| e.bytes / bw)
        .sum()
}

#[test]
fn celeritas_dp_is_optimal_on_tiny_instances() {
    use group::celeritas::{cpd_topo_order, op_memory, optimal_breakpoints};
    let bw = group::DEFAULT_BANDWIDTH_BYTES_PER_US;
    let mut checked = 0;
    for seed in 0..60u64 {
        let n = 3 + (seed as usize % 8); // 3..=10 ops
        let g = random_dag(500 + seed, n);
        let w = stand_in_times(&g);
        let order = cpd_topo_order(&g, &w, bw);
        let mem: Vec<f64> = g.ops().iter().map(op_memory).collect();
        let total_mem: f64 = mem.iter().sum();
        for (range, limit) in [
            (n, f64::INFINITY),
            (3, f64::INFINITY),
            (n, total_mem / 3.0),
            (2, total_mem / 2.0),
        ] {
            let bp = optimal_breakpoints(&g, &order, bw, range, &mem, limit);
            // Brute force over all 2^(n-1) sets of cluster starts.
            let mut best = f64::INFINITY;
            for mask in 0u32..(1 << (n - 1)) {
                let starts: Vec<usize> = std::iter::once(0)
                    .chain((1..n).filter(|p| mask >> (p - 1) & 1 == 1))
                    .collect();
                let feasible = starts.iter().enumerate().all(|(c, &s)| {
                    let e = starts.get(c + 1).copied().unwrap_or(n);
                    let m: f64 = order[s..e].iter().map(|&op| mem[op]).sum();
                    e - s <= range && (e - s == 1 || m <= limit)
                });
                if feasible {
                    best = best.min(cut_cost(&g, &order, &starts, bw));
                }
            }
            let got = cut_cost(&g, &order, &bp.starts, bw);
            assert!(
                (got - bp.cost_us).abs() <= 1e-9 * best.max(1.0),
                "DP cost disagrees with its own clusters"
            );
            assert!(
                (got - best).abs() <= 1e-9 * best.max(1.0),
                "seed {seed} R={range}: DP {got} vs optimum {best}"
            );
            // The DP's clusters respect the range.
            let mut ends = bp.starts[1..].to_vec();
            ends.push(n);
            assert!(bp.starts.iter().zip(&ends).all(|(s, e)| e - s <= range));
            checked += 1;
        }
    }
    assert_eq!(checked, 240);
}

#[test]
fn celeritas_cpd_topo_is_topological_and_follows_critical_path() {
    use group::celeritas::cpd_topo_order;
    let bw = group::DEFAULT_BANDWIDTH_BYTES_PER_US;
    for seed in 0..20 {
        let g = random_dag(700 + seed, 150);
        let w = stand_in_times(&g);
        let order = cpd_topo_order(&g, &w, bw);
        let mut pos = vec![usize::MAX; g.len()];
        for (p, &op) in order.iter().enumerate() {
            pos[op] = p;
        }
        assert!(pos.iter().all(|&p| p != usize::MAX));
        assert!(g.edges().iter().all(|e| pos[e.src] < pos[e.dst]));
    }
    // Fork a → {b (cheap), c (expensive)} → d: c is on the critical path, so it follows a.
    let mut b = GraphBuilder::new();
    let ids: Vec<usize> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| b.add_op(Op::new(0, *n, "X", Phase::Forward)))
        .collect();
    b.add_edge(ids[0], ids[1], 1.0);
    b.add_edge(ids[0], ids[2], 1.0);
    b.add_edge(ids[1], ids[3], 1.0);
    b.add_edge(ids[2], ids[3], 1.0);
    let g = b.finish("<test>", "fork", 1).unwrap();
    assert_eq!(
        cpd_topo_order(&g, &[1.0, 1.0, 50.0, 1.0], bw),
        vec![0, 2, 1, 3]
    );
    assert_eq!(
        cpd_topo_order(&g, &[1.0, 50.0, 1.0, 1.0], bw),
        vec![0, 1, 2, 3]
    );
}

#[test]
fn celeritas_levels_match_definition() {
    // a(2) -1e4 B-> b(3) -2e4 B-> c(5), bw 1e4 B/µs: c = 1 and 2 µs.
    let mut b = GraphBuilder::new();
    let ids: Vec<usize> = ["a", "b", "c"]
        .iter()
        .map(|n| b.add_op(Op::new(0, *n, "X", Phase::Forward)))
        .collect();
    b.add_edge(ids[0], ids[1], 1e4);
    b.add_edge(ids[1], ids[2], 2e4);
    let g = b.finish("<test>", "line", 1).unwrap();
    let (t, bl) = group::celeritas::levels(&g, &[2.0, 3.0, 5.0], 1e4);
    assert_eq!(t, vec![0.0, 3.0, 8.0]);
    assert_eq!(bl, vec![13.0, 10.0, 5.0]);
}

#[test]
fn celeritas_reduces_ccr_and_respects_range_and_memory() {
    let g = training_graph(60);
    let w = stand_in_times(&g);
    let opts = group::CeleritasOptions::default();
    let grouping = group::celeritas(&g, &w, &opts).unwrap();
    check_grouping_invariants(&g, &w, &grouping);
    assert!(grouping.is_acyclic());
    assert!(grouping.groups.iter().all(|x| x.ops <= opts.range));
    let s = &grouping.stats;
    eprintln!(
        "celeritas on {}-op training graph: {} groups, CCR {:.3} -> {:.3}",
        s.ops, s.groups, s.ccr_before, s.ccr_after
    );
    assert!(s.ccr_after < s.ccr_before / 2.0);
    // A memory limit splits clusters further, and every multi-op cluster fits in it.
    let limit = g.ops().iter().map(group::celeritas::op_memory).sum::<f64>() / 50.0;
    let tight = group::celeritas(
        &g,
        &w,
        &group::CeleritasOptions {
            memory_limit_bytes: limit,
            ..opts.clone()
        },
    )
    .unwrap();
    assert!(tight.num_groups() > grouping.num_groups());
    for members in tight.members() {
        let m: f64 = members
            .iter()
            .map(|&op| group::celeritas::op_memory(g.op(op)))
            .sum();
        assert!(members.len() == 1 || m <= limit);
    }
}

// ---------------------------------------------------------------------------------------------
// Determinism and figures
// ---------------------------------------------------------------------------------------------

#[test]
fn every_method_is_deterministic() {
    let g = random_dag(77, 1500);
    let w = stand_in_times(&g);
    for m in group::method_names() {
        let a = group::group_by_name(&g, &w, m, 60).unwrap();
        let b = group::group_by_name(&g, &w, m, 60).unwrap();
        assert_eq!(a, b, "{m} differs between two runs");
    }
}

#[test]
fn report_figures() {
    // Prints the reduction and cut figures (run with --nocapture); asserts only the invariants.
    let graphs = [
        training_graph(60),
        random_dag(2024, 2000),
        training_graph(200),
        random_dag(4242, 10_000),
    ];
    for g in &graphs {
        let w = stand_in_times(g);
        for m in group::method_names() {
            let t0 = std::time::Instant::now();
            let grouping = group::group_by_name(g, &w, m, 60).unwrap();
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            check_grouping_invariants(g, &w, &grouping);
            let s = &grouping.stats;
            eprintln!(
                "{:<12} {:<10} ops {:>5} -> groups {:>5}  cut {:>6.1}% of edge bytes  balance {:>7.2}  CCR {:.3} -> {:.3}  acyclic {}  {:.1} ms",
                g.name,
                m,
                s.ops,
                s.groups,
                100.0 * s.cut_bytes / s.total_edge_bytes,
                s.balance,
                s.ccr_before,
                s.ccr_after,
                grouping.is_acyclic(),
                ms
            );
        }
        let opts = group::moirai::MoiraiOptions {
            same_phase_consumers_only: true,
        };
        let mt = group::moirai::moirai_with(g, &w, &group::default_rules(), &opts).unwrap();
        eprintln!(
            "{:<12} moirai-training: {} groups, acyclic {}",
            g.name,
            mt.num_groups(),
            mt.is_acyclic()
        );
        let q = group::quickp(g, &w, &group::QuickpOptions::default()).unwrap();
        eprintln!(
            "{:<12} quickp: alpha {:.1} us, {} ties ({} skipped), {} WCC groups",
            g.name, q.alpha_us, q.ties, q.skipped_ties, q.wcc_groups
        );
        eprintln!(
            "{:<12} quickp fusion only: {} ops",
            g.name,
            q.fused.num_groups()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Real models: the zoo's training graphs and QuickP's profiled TensorFlow graphs
// ---------------------------------------------------------------------------------------------

/// A real graph with its TAG vertex weights.
struct RealModel {
    graph: Graph,
    weights: Vec<f64>,
}

/// The reference GPU for the zoo's weights. TAG weighs a vertex by its computation time; with a
/// heterogeneous cluster unknown at grouping time we take one device type, the V100-32GB of the
/// TAG and Celeritas testbeds. The zoo carries no profiles, so this is the cost model's roofline.
const ZOO_REFERENCE_GPU: &str = "V100-SXM2-32GB";
/// QuickP profiled its graphs on an RTX 3070; asking the cost model for that GPU returns the
/// measured times (`profiled_us["RTX-3070"]`) instead of a roofline estimate.
const QUICKP_PROFILE_GPU: &str = "RTX-3070";
/// TAG's number of groups.
const TAG_K: usize = 60;

/// Compute time of every op on `gpu` at full batch: TAG's vertex weights. The GPU is named here
/// rather than left to `group::reference_gpu` so that a change there cannot silently change
/// what these tests measure; `real_models_are_loaded_with_their_weights` checks they agree.
fn tag_weights(g: &Graph, gpu: &str) -> Vec<f64> {
    let gpu = crate::cluster::catalog::find_gpu(gpu).expect("GPU in the catalog");
    group::op_weights(g, gpu, &crate::cost::CostModel::default())
}

/// Every zoo model's training graph, built once for all the tests of this file.
fn zoo_models() -> &'static [RealModel] {
    static MODELS: std::sync::OnceLock<Vec<RealModel>> = std::sync::OnceLock::new();
    MODELS.get_or_init(|| {
        crate::zoo::NAMES
            .iter()
            .map(|name| {
                let graph = crate::zoo::build(name, &crate::zoo::ZooOptions::default())
                    .unwrap_or_else(|e| panic!("zoo model {name}: {e}"));
                let weights = tag_weights(&graph, ZOO_REFERENCE_GPU);
                RealModel { graph, weights }
            })
            .collect()
    })
}

/// QuickP's VGG and AlexNet training graphs with their measured times, loaded once.
fn quickp_models() -> &'static [RealModel] {
    static MODELS: std::sync::OnceLock<Vec<RealModel>> = std::sync::OnceLock::new();
    MODELS.get_or_init(|| {
        ["comp_graph_vgg.json.gz", "comp_graph_alexnet.json.gz"]
            .iter()
            .map(|file| {
                let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("datasets/quickp")
                    .join(file);
                let graph = crate::import::import(&path, None)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let weights = tag_weights(&graph, QUICKP_PROFILE_GPU);
                RealModel { graph, weights }
            })
            .collect()
    })
}

fn all_real_models() -> impl Iterator<Item = &'static RealModel> {
    zoo_models().iter().chain(quickp_models())
}

fn real_model(name: &str) -> &'static RealModel {
    all_real_models()
        .find(|m| m.graph.name == name)
        .unwrap_or_else(|| panic!("no real model named {name}"))
}

#[test]
fn real_models_are_loaded_with_their_weights() {
    assert_eq!(zoo_models().len(), crate::zoo::NAMES.len());
    let vgg = real_model("comp_graph_vgg");
    assert_eq!(vgg.graph.len(), 3_704);
    // The measured times are what the RTX-3070 weights pick up: QuickP's README total.
    let total: f64 = vgg.weights.iter().sum();
    assert!((total - 122_337.0).abs() < 1.0, "VGG total {total} µs");
    for m in all_real_models() {
        // The CLI's default weights are the ones tested here.
        let reference = group::reference_gpu(&m.graph).name;
        let expected = if m.graph.name.starts_with("comp_graph_") {
            QUICKP_PROFILE_GPU
        } else {
            ZOO_REFERENCE_GPU
        };
        assert_eq!(reference, expected, "{}", m.graph.name);
        assert_eq!(m.weights.len(), m.graph.len());
        assert!(m.weights.iter().all(|w| w.is_finite() && *w >= 0.0));
    }
}

#[test]
fn real_models_every_method_partitions_ops_and_keeps_totals() {
    for m in all_real_models() {
        for method in group::method_names() {
            let grouping = group::group_by_name(&m.graph, &m.weights, method, TAG_K)
                .unwrap_or_else(|e| panic!("{method} on {}: {e}", m.graph.name));
            check_grouping_invariants(&m.graph, &m.weights, &grouping);
        }
    }
}

#[test]
fn real_models_quickp_celeritas_moirai_are_acyclic() {
    for m in all_real_models() {
        check_acyclic_methods(&m.graph, &m.weights);
        // Fusion alone is acyclic by Theorem 2, before co-location's cycle check.
        let q = group::quickp(&m.graph, &m.weights, &group::QuickpOptions::default()).unwrap();
        assert!(q.fused.is_acyclic(), "quickp fusion on {}", m.graph.name);
        check_grouping_invariants(&m.graph, &m.weights, &q.fused);
    }
}

/// Checks METIS's balance on one model and returns whether factor 2 held outright.
///
/// The balance bound is relative to METIS's ideal part weight total / K. It cannot hold when a
/// single op outweighs 2 × ideal, and no choice of weights fixes that: TAG weighs by compute
/// time, and these ops really are that long. With V100 weights the vocabulary projections of
/// transformer, bert-small and gpt (and their two gradient MatMuls, 41–67 ms each), the large
/// convolutions of alexnet and vgg16 (and their gradients), and mlp's (39 ops, one per group)
/// largest layer are 2.2–7.8 × ideal, and an op cannot be split. What does hold on every model,
/// and is asserted: a group over the bound contains such an op, and the rest of the group
/// (without its heaviest op) is within the bound.
/// TAG's balance: no group over the factor times the mean group (1% slack for METIS's integer
/// weights). `metis` may use fewer than K groups to make that possible (`balanced_group_limit`).
fn check_metis_balance(m: &RealModel, grouping: &Grouping) {
    let mean = m.weights.iter().sum::<f64>() / grouping.num_groups() as f64;
    let bound = group::metis::BALANCE_FACTOR * mean * 1.01;
    for info in &grouping.groups {
        assert!(
            info.compute_us <= bound,
            "{}: group of {:.0} µs over {} × the mean {mean:.0} µs",
            m.graph.name,
            info.compute_us,
            group::metis::BALANCE_FACTOR
        );
    }
}

#[test]
fn real_models_metis_k60_groups_balance_and_cut() {
    for m in all_real_models() {
        let (g, w) = (&m.graph, &m.weights);
        let metis = group::metis(g, w, TAG_K, 0).unwrap();
        assert!(metis.num_groups() <= TAG_K, "{}", g.name);
        check_metis_balance(m, &metis);
        let chunks = group::contiguous_chunks(g, w, TAG_K).unwrap();
        // METIS is a heuristic: on the 39-op mlp it may lose to the chunks by a hair (0.5%).
        assert!(
            metis.stats.cut_bytes <= chunks.stats.cut_bytes * 1.01,
            "{}: METIS cut {:.4e} > chunks cut {:.4e}",
            g.name,
            metis.stats.cut_bytes,
            chunks.stats.cut_bytes
        );
    }
}

#[test]
fn real_models_grouping_is_deterministic_on_bert_large() {
    let m = real_model("bert-large");
    assert!(m.graph.len() > 5_000);
    for method in group::method_names() {
        let a = group::group_by_name(&m.graph, &m.weights, method, TAG_K).unwrap();
        let b = group::group_by_name(&m.graph, &m.weights, method, TAG_K).unwrap();
        assert_eq!(a, b, "{method} differs between two runs on bert-large");
    }
    // A fresh build of the same model (not the cached graph) gives the same METIS grouping.
    let rebuilt = crate::zoo::build("bert-large", &crate::zoo::ZooOptions::default()).unwrap();
    let w = tag_weights(&rebuilt, ZOO_REFERENCE_GPU);
    assert_eq!(
        group::metis(&rebuilt, &w, TAG_K, 0).unwrap(),
        group::metis(&m.graph, &m.weights, TAG_K, 0).unwrap()
    );
}

/// α recomputed from its definition, independently of `alpha_percentile`: the smallest time t
/// with at least 90% of the non-zero times ≤ t.
fn ninetieth_percentile_of_nonzero(weights: &[f64]) -> f64 {
    let mut nz: Vec<f64> = weights.iter().copied().filter(|&w| w > 0.0).collect();
    nz.sort_by(f64::total_cmp);
    let n = nz.len();
    *nz.iter()
        .find(|&&t| nz.iter().filter(|&&x| x <= t).count() * 10 >= n * 9)
        .expect("some non-zero time")
}

#[test]
fn quickp_fusion_on_quickp_vgg_is_in_table1_ballpark() {
    // QuickP Table I: VGG16, 3,598 ops → 509 after fusion (14.1% left, 7.1× fewer). Our graph
    // is QuickP's published profile, 3,704 ops; we measure 595 fused nodes (16.1%, 6.2×) and
    // 315 groups after co-location. The paper's exact edge order is not given (module docs),
    // so demand the same order of magnitude: 10–20% of the ops left.
    let m = real_model("comp_graph_vgg");
    let q = group::quickp(&m.graph, &m.weights, &group::QuickpOptions::default()).unwrap();
    let alpha = ninetieth_percentile_of_nonzero(&m.weights);
    assert_eq!(q.alpha_us, alpha);
    let (ops, fused, colocated) = (
        m.graph.len(),
        q.fused.num_groups(),
        q.colocated.num_groups(),
    );
    eprintln!("QuickP VGG: {ops} ops -> {fused} fused -> {colocated} co-located, α {alpha:.1} µs");
    let left = fused as f64 / ops as f64;
    assert!((0.10..=0.20).contains(&left), "{fused} of {ops} left");
    assert!(colocated <= fused && fused <= ops);
}

#[test]
fn quickp_fusion_never_grows_groups_and_alpha_is_the_90th_percentile() {
    for m in all_real_models() {
        let q = group::quickp(&m.graph, &m.weights, &group::QuickpOptions::default()).unwrap();
        assert_eq!(
            q.alpha_us,
            ninetieth_percentile_of_nonzero(&m.weights),
            "{}",
            m.graph.name
        );
        assert!(q.fused.num_groups() <= m.graph.len());
        assert!(q.colocated.num_groups() <= q.fused.num_groups());
        assert!(q.colocated.is_acyclic());
    }
}

#[test]
fn celeritas_reduces_ccr_on_zoo_models() {
    // Celeritas Table 2 reports CCR falling after fusion. With the V100 weights and 20 GB/s we
    // measure 2.8× (resnet101) to 20× and more on the zoo; small models (alexnet, mlp: fewer
    // ops than R = 200, no memory limit) become one cluster, CCR 0. Assert at least halving.
    for m in zoo_models() {
        let c =
            group::celeritas(&m.graph, &m.weights, &group::CeleritasOptions::default()).unwrap();
        let s = &c.stats;
        assert!(s.ccr_before > 0.0, "{}", m.graph.name);
        assert!(
            s.ccr_after <= s.ccr_before / 2.0,
            "{}: CCR {:.3} -> {:.3}",
            m.graph.name,
            s.ccr_before,
            s.ccr_after
        );
        assert!(c.groups.iter().all(|x| x.ops <= 200));
    }
}
