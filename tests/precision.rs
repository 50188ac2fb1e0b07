//! Precision: the peaks each GPU offers in it (datasheets), PyTorch's refusals, the cost model's
//! roofline in each precision against closed forms, FP32 unchanged, and `--precision` on the
//! command line.

mod common;

use common::{run, run_json, shipped_cluster, zoo_model};
use topoplace::autocast::autocast;
use topoplace::cluster::find_gpu;
use topoplace::cost::CostModel;
use topoplace::evaluate::evaluate_strategy;
use topoplace::graph::{Dtype, Op, Phase};
use topoplace::precision::Precision;
use topoplace::problem::Problem;
use topoplace::sim::Order;
use topoplace::strategy::Reference;

#[test]
fn names_parse_and_amp_is_fp16() {
    for p in Precision::ALL {
        assert_eq!(Precision::parse(p.name()), Some(p));
        assert_eq!(Precision::parse(&p.name().to_uppercase()), Some(p));
    }
    assert_eq!(Precision::parse("amp"), Some(Precision::Fp16));
    assert_eq!(Precision::parse("fp8"), None);
}

#[test]
fn peaks_are_the_datasheets() {
    let a100 = find_gpu("A100-80GB").unwrap();
    let h100 = find_gpu("H100-SXM-80GB").unwrap();
    let v100 = find_gpu("V100-SXM2-32GB").unwrap();
    let peak = |p: Precision, d: Dtype, g| Precision::matmul_tflops(p, d, g);
    // A100: FP32 19.5, TF32 156, bf16/fp16 312 (dense).
    assert_eq!(peak(Precision::Fp32, Dtype::F32, a100), 19.5);
    assert_eq!(peak(Precision::Tf32, Dtype::F32, a100), 156.0);
    assert_eq!(peak(Precision::Bf16, Dtype::Half, a100), 312.0);
    // H100 SXM: TF32 494.75 (half of 989.5), bf16 989.5.
    assert_eq!(peak(Precision::Tf32, Dtype::F32, h100), 989.5 / 2.0);
    assert_eq!(peak(Precision::Fp16, Dtype::Half, h100), 989.5);
    // V100: no TF32 (PyTorch ignores allow_tf32 there), fp16 tensor cores 125.
    assert_eq!(peak(Precision::Tf32, Dtype::F32, v100), 15.7);
    assert_eq!(peak(Precision::Fp16, Dtype::Half, v100), 125.0);
    // An FP32 op under autocast (softmax, norms) stays on the CUDA cores.
    assert_eq!(peak(Precision::Bf16, Dtype::F32, a100), 19.5);
}

#[test]
fn bf16_is_refused_before_ampere_as_autocast_refuses_it() {
    let v100 = find_gpu("V100-SXM2-32GB").unwrap();
    let why = Precision::Bf16.supported_on(v100).unwrap_err();
    assert!(
        why.contains("V100-SXM2-32GB") && why.contains("fp16"),
        "{why}"
    );
    for p in [Precision::Fp32, Precision::Tf32, Precision::Fp16] {
        assert!(p.supported_on(v100).is_ok());
    }
    let testbed = shipped_cluster("tag-testbed");
    let err = Precision::Bf16
        .check_cluster(&testbed, "<cli>", "--precision")
        .unwrap_err();
    assert_eq!(err.field, "--precision");
}

/// A GEMM big enough to be compute-bound on every GPU.
fn gemm(dtype: Dtype) -> Op {
    let mut op = Op::new(0, "mm", "MatMul", Phase::Forward);
    op.flops = 2.0 * 8192f64.powi(3);
    op.bytes_accessed = 3.0 * 8192f64.powi(2) * 4.0;
    op.dtype = dtype;
    op
}

#[test]
fn a_compute_bound_gemm_speeds_up_by_the_ratio_of_peaks() {
    let a100 = find_gpu("A100-80GB").unwrap();
    let at = |precision, dtype| {
        let cost = CostModel {
            precision,
            ..CostModel::default()
        };
        let launch = cost.compute_time_us(&Op::new(1, "nop", "NoOp", Phase::Forward), a100, 1.0);
        cost.compute_time_us(&gemm(dtype), a100, 1.0) - launch
    };
    let fp32 = at(Precision::Fp32, Dtype::F32);
    let tf32 = at(Precision::Tf32, Dtype::F32);
    let bf16 = at(Precision::Bf16, Dtype::Half);
    assert!((fp32 / tf32 - 156.0 / 19.5).abs() < 1e-9, "{}", fp32 / tf32);
    assert!((tf32 / bf16 - 2.0).abs() < 1e-9, "{}", tf32 / bf16);
}

#[test]
fn fp32_is_the_default_and_changes_nothing() {
    let g = zoo_model("bert-small", 32);
    let c = shipped_cluster("tag-testbed");
    let default = CostModel::default();
    let explicit = CostModel {
        precision: Precision::Fp32,
        ..CostModel::default()
    };
    assert_eq!(default, explicit);
    let same = autocast(&g, Precision::Fp32, "<test>").unwrap();
    let dp = Reference::Dp.strategy(&g, &c);
    let time = |g, cost| {
        let p = Problem::new(g, &c, cost);
        evaluate_strategy(&p, &dp, Order::Fifo)
            .unwrap()
            .report
            .iteration_us
    };
    assert_eq!(time(&g, &default), time(&same, &explicit));
}

#[test]
fn mixed_precision_is_faster_and_lighter_on_an_a100_and_tf32_is_free_on_a_v100() {
    let g = zoo_model("bert-small", 32);
    let one_gpu = |gpu: &str| {
        topoplace::cluster::parse_cluster(
            &format!(
                "name = \"one\"\n[[machine]]\nname = \"m\"\ngpu = \"{gpu}\"\ngpus = 1\n\
                 intra_bandwidth = \"12 GB/s\"\nnic = \"10 Gbps\"\n"
            ),
            "<test>",
        )
        .unwrap()
    };
    let step = |cluster: &topoplace::cluster::Cluster, precision| {
        let graph = autocast(&g, precision, "<test>").unwrap();
        let cost = CostModel {
            precision,
            ..CostModel::default()
        };
        let p = Problem::new(&graph, cluster, &cost);
        let single = Reference::Single.strategy(&graph, cluster);
        let report = evaluate_strategy(&p, &single, Order::Fifo).unwrap().report;
        (report.iteration_us, report.devices[0].peak_memory_bytes)
    };
    let a100 = one_gpu("A100-80GB");
    let (fp32, fp32_mem) = step(&a100, Precision::Fp32);
    let (tf32, tf32_mem) = step(&a100, Precision::Tf32);
    let (bf16, bf16_mem) = step(&a100, Precision::Bf16);
    assert!(tf32 < fp32 && bf16 < tf32, "{fp32} {tf32} {bf16}");
    assert_eq!(tf32_mem, fp32_mem);
    assert!(bf16_mem < fp32_mem, "{bf16_mem} vs {fp32_mem}");
    let v100 = one_gpu("V100-SXM2-32GB");
    assert_eq!(step(&v100, Precision::Tf32), step(&v100, Precision::Fp32));
}

#[test]
fn cli_precision_is_a_flag_and_bf16_on_volta_is_one_clear_error() {
    let args = |p: &str| {
        [
            "simulate",
            "--model",
            "bert-small",
            "--cluster",
            "tag-cloud",
            "--strategy",
            "single",
            "--precision",
            p,
            "--json",
        ]
        .map(String::from)
    };
    let fp32 = run_json(&args("fp32"));
    let default = run_json(&[
        "simulate",
        "--model",
        "bert-small",
        "--cluster",
        "tag-cloud",
        "--strategy",
        "single",
        "--json",
    ]);
    assert_eq!(fp32["iteration_us"], default["iteration_us"]);
    let amp = run_json(&args("amp"));
    assert!(amp["iteration_us"].as_f64().unwrap() < fp32["iteration_us"].as_f64().unwrap());
    let refused = run(&args("bf16"));
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.starts_with("error:") && err.contains("--precision"),
        "{err}"
    );
    let unknown = run(&args("fp8"));
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("fp32, tf32, bf16, fp16"));
}
