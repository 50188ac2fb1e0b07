//! TAG's SFB ILP (§4.2.3): on a dense layer it reproduces the paper's trade-off — broadcasting
//! the sufficient factors beats AllReduce of the gradient at small batch, 2(H₂·B + B·H₁) < H₁·H₂,
//! and loses at large batch — and on a zoo model it reports what it duplicates (Table 6).

mod common;

use topoplace::cluster::{Cluster, parse_cluster};
use topoplace::cost::CostModel;
use topoplace::graph::{Graph, GraphBuilder, Op, Phase, Splittability};
use topoplace::sfb::{SfbOptions, check_strategy, duplicated_op_types, question, solve_gradient};
use topoplace::strategy::Reference;
use topoplace::zoo;

const F32: f64 = 4.0;

/// Two single-GPU machines on a 10 Gbps network (TAG §5.6's set-up).
fn two_machines() -> Cluster {
    parse_cluster(
        "name = \"two\"\ninter_latency = \"0 us\"\n[[machine]]\nname = \"m\"\ngpu = \"V100-SXM2-32GB\"\n\
         gpus = 1\nintra_bandwidth = \"100 GB/s\"\nnic = \"10 Gbps\"\ncount = 2\n",
        "<test>",
    )
    .unwrap()
}

/// One dense layer y = x·W trained by Adam: x (B×H₁), W (H₁×H₂), dY (B×H₂), ∇W = xᵀ·dY.
fn dense(batch: usize, h1: usize, h2: usize) -> Graph {
    let (b, h1, h2) = (batch as f64, h1 as f64, h2 as f64);
    let mut g = GraphBuilder::new();
    let mut x = Op::new(0, "x", "Placeholder", Phase::Input);
    x.output_bytes = b * h1 * F32;
    x.split = Splittability::Concat;
    let x = g.add_op(x);
    let mut w = Op::new(1, "w", "VariableV2", Phase::Parameter);
    w.resident_bytes = h1 * h2 * F32;
    w.output_bytes = h1 * h2 * F32;
    w.params = (h1 * h2) as u64;
    let w = g.add_op(w);
    let mut y = Op::new(2, "y", "MatMul", Phase::Forward);
    y.flops = 2.0 * b * h1 * h2;
    y.bytes_accessed = (b * h1 + h1 * h2 + b * h2) * F32;
    y.output_bytes = b * h2 * F32;
    y.split = Splittability::Concat;
    let y = g.add_op(y);
    let mut dy = Op::new(3, "dy", "SoftmaxCrossEntropyGrad", Phase::Backward);
    dy.flops = 4.0 * b * h2;
    dy.bytes_accessed = 2.0 * b * h2 * F32;
    dy.output_bytes = b * h2 * F32;
    dy.split = Splittability::Concat;
    let dy = g.add_op(dy);
    let mut gw = Op::new(4, "grad_w", "MatMul", Phase::Backward);
    gw.flops = 2.0 * b * h1 * h2;
    gw.bytes_accessed = (b * h1 + h1 * h2 + b * h2) * F32;
    gw.output_bytes = h1 * h2 * F32;
    gw.split = Splittability::Sum;
    let gw = g.add_op(gw);
    let mut adam = Op::new(5, "adam", "ApplyAdam", Phase::Optimizer);
    adam.resident_bytes = 2.0 * h1 * h2 * F32;
    let adam = g.add_op(adam);
    g.add_edge(x, y, b * h1 * F32);
    g.add_edge(w, y, h1 * h2 * F32);
    g.add_edge(y, dy, b * h2 * F32);
    g.add_edge(x, gw, b * h1 * F32);
    g.add_edge(dy, gw, b * h2 * F32);
    g.add_edge(w, adam, h1 * h2 * F32);
    g.add_gradient(gw, adam, h1 * h2 * F32);
    g.finish("<test>", "dense", batch as u32).unwrap()
}

/// SFB decision for the dense layer's gradient on both GPUs; also TAG's closed form with the
/// per-replica batch.
fn decide(batch: usize) -> (bool, bool, Vec<String>) {
    let (h1, h2) = (1024, 1024);
    let g = dense(batch, h1, h2);
    let c = two_machines();
    let cost = CostModel::default();
    let q = question(&g, &c, &cost, 4, 5, &[0, 1], None);
    let d = solve_gradient(&g, &q, &SfbOptions::default()).unwrap();
    let per_replica = batch / 2;
    let closed_form = 2 * (h2 * per_replica + per_replica * h1) < h1 * h2;
    // The ILP's own accounting agrees with its decision.
    let net = d.allreduce_us - d.broadcast_us - d.extra_compute_us;
    assert_eq!(d.use_sfb, d.use_sfb && net > 0.0);
    let names = d
        .duplicated
        .iter()
        .map(|&op| g.op(op).name.clone())
        .collect();
    (d.use_sfb, closed_form, names)
}

#[test]
fn sfb_beats_allreduce_at_small_batch_only() {
    let (small_sfb, small_closed, dup) = decide(16);
    assert!(small_closed, "TAG's inequality holds at small batch");
    assert!(small_sfb, "the ILP chooses SFB at small batch");
    assert!(dup.contains(&"grad_w".to_string()), "{dup:?}");
    let (large_sfb, large_closed, _) = decide(4096);
    assert!(!large_closed, "TAG's inequality fails at large batch");
    assert!(!large_sfb, "the ILP keeps AllReduce at large batch");
}

#[test]
fn the_cut_is_the_sufficient_factors() {
    let g = dense(16, 1024, 1024);
    let c = two_machines();
    let cost = CostModel::default();
    let q = question(&g, &c, &cost, 4, 5, &[0, 1], None);
    let d = solve_gradient(&g, &q, &SfbOptions::default()).unwrap();
    assert!(d.use_sfb);
    // Whatever is duplicated, what crosses the cut is batch-sized, never the H₁×H₂ gradient.
    let grad_bytes = 1024.0 * 1024.0 * F32;
    for &(src, dst) in &d.cut {
        let e = g
            .edges()
            .iter()
            .find(|e| e.src == src && e.dst == dst)
            .unwrap();
        assert!(e.bytes < grad_bytes, "{src}->{dst}");
    }
    assert!(!d.cut.is_empty());
    assert!(d.broadcast_us < d.allreduce_us);
}

/// The zoo MLP at batch 2, data parallel on [`two_machines`]: small enough that SFB pays.
fn mlp_at_batch_2_under_dp() -> (Graph, Cluster, CostModel, topoplace::strategy::Strategy) {
    let g = zoo::build(
        "mlp",
        &zoo::ZooOptions {
            batch_size: Some(2),
            ..Default::default()
        },
    )
    .unwrap();
    let c = two_machines();
    let dp = Reference::Dp.strategy(&g, &c);
    (g, c, CostModel::default(), dp)
}

#[test]
fn replicated_zoo_model_reports_its_duplicated_op_types() {
    let (g, c, cost, dp) = mlp_at_batch_2_under_dp();
    let decisions = check_strategy(&g, &c, &cost, &dp, &SfbOptions::default()).unwrap();
    assert_eq!(decisions.len(), g.gradients().len());
    let types = duplicated_op_types(&g, &decisions);
    let used = decisions.iter().filter(|d| d.use_sfb).count();
    assert!(
        used > 0,
        "small batch on a 10 Gbps link: SFB pays somewhere"
    );
    assert_eq!(
        types.values().sum::<usize>(),
        decisions.iter().map(|d| d.duplicated.len()).sum::<usize>()
    );
    assert!(types.contains_key("MatMul"), "{types:?}");
    // A single-GPU strategy replicates nothing.
    let single = Reference::Single.strategy(&g, &c);
    assert!(
        check_strategy(&g, &c, &cost, &single, &SfbOptions::default())
            .unwrap()
            .is_empty()
    );
}

/// Compile DP-NCCL for the dense layer with and without the strategy's SFB flag.
fn dp_with_and_without_sfb(batch: usize) -> (f64, f64, usize, usize) {
    use topoplace::compile::TaskRole;
    use topoplace::evaluate::{Evaluation, evaluate_strategy};
    use topoplace::problem::Problem;
    use topoplace::sfb::duplicated_ops;
    use topoplace::sim::Order;
    let g = dense(batch, 1024, 1024);
    let c = two_machines();
    let cost = CostModel::default();
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let plain = Reference::Dp.strategy(&g, &c);
    let mut with_sfb = plain.clone();
    with_sfb.sfb_duplicated =
        duplicated_ops(&g, &c, &cost, &plain, &SfbOptions::default()).unwrap();
    let a = evaluate_strategy(&p, &plain, Order::Fifo).unwrap();
    let b = evaluate_strategy(&p, &with_sfb, Order::Fifo).unwrap();
    let all_reduces = |e: &Evaluation| {
        e.compiled
            .roles
            .iter()
            .filter(|&&r| r == TaskRole::AllReduce)
            .count()
    };
    (
        a.report.iteration_us,
        b.report.iteration_us,
        all_reduces(&a),
        all_reduces(&b),
    )
}

#[test]
fn the_compiler_applies_sfb_when_the_strategy_asks() {
    // Small batch: the gradient's AllReduce is replaced by broadcasting the factors, faster.
    let (plain, sfb, ar_plain, ar_sfb) = dp_with_and_without_sfb(16);
    assert_eq!(ar_plain, 1);
    assert_eq!(ar_sfb, 0);
    assert!(sfb < plain, "SFB {sfb} µs vs AllReduce {plain} µs");
    // Large batch: the ILP keeps AllReduce, so the flag changes nothing.
    let (plain, sfb, ar_plain, ar_sfb) = dp_with_and_without_sfb(4096);
    assert_eq!((ar_plain, ar_sfb), (1, 1));
    assert!((plain - sfb).abs() < 1e-9);
}

#[test]
fn cli_sfb_reports_decisions_and_op_types() {
    let dir = common::scratch("sfb");
    let cfg = dir.join("two.toml");
    std::fs::write(&cfg, two_machines().to_toml()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_topoplace"))
        .args(["sfb", "--model", "mlp", "--cluster"])
        .arg(&cfg)
        .arg("--json")
        .output()
        .unwrap();
    let v = common::json_of(out);
    let g = zoo::build("mlp", &zoo::ZooOptions::default()).unwrap();
    assert_eq!(v["gradients"], g.gradients().len());
    for key in [
        "sfb_gradients",
        "saving_us",
        "duplicated_op_types",
        "decisions",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
}

/// A check whose deadline has passed decides nothing: every gradient keeps its AllReduce, is
/// counted as unsolved, and the report says so.
#[test]
fn past_the_deadline_every_gradient_keeps_its_allreduce() {
    let (g, c, cost, dp) = mlp_at_batch_2_under_dp();
    let opts = SfbOptions {
        deadline: Some(std::time::Instant::now()),
        ..SfbOptions::default()
    };
    let decisions = check_strategy(&g, &c, &cost, &dp, &opts).unwrap();
    assert_eq!(decisions.len(), g.gradients().len());
    assert!(decisions.iter().all(|d| !d.solved && !d.use_sfb));
    assert!(decisions.iter().all(|d| d.allreduce_us > 0.0));
    let report = topoplace::sfb::SfbReport::new(&g, &decisions);
    assert_eq!(report.unsolved, decisions.len());
    assert!(report.render_text().contains("keep their AllReduce"));
}

/// `--depth 64` on GPT took 27 s with no limit; the whole check now ends by `--time-limit`.
#[test]
fn sfb_holds_its_time_limit() {
    let limit = 2.0;
    let (out, took) = common::run_timed_alone(&[
        "sfb",
        "--model",
        "gpt",
        "--cluster",
        "tag-testbed",
        "--depth",
        "64",
        "--time-limit",
        "2",
    ]);
    common::succeeded(out);
    assert!(
        took <= 1.1 * limit + 1.0,
        "{took:.1} s for --time-limit {limit}"
    );
}
