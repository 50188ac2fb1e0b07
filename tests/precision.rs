//! Precision and framework: the peaks each GPU offers in each precision (datasheets), PyTorch's
//! refusals, the cost model's roofline against closed forms, FP32 unchanged; PyTorch's fused
//! graphs against TensorFlow 1's (same parameters and products, no score matrices kept),
//! GPT-2 XL's memory and BERT-large's published speed; both flags on the command line.

mod common;

use common::{run, run_json, shipped_cluster, zoo_model};
use topoplace::autocast::autocast;
use topoplace::cluster::{Cluster, find_gpu, parse_cluster};
use topoplace::cost::CostModel;
use topoplace::evaluate::evaluate_strategy;
use topoplace::fidelity::{fidelity_table, scenarios};
use topoplace::graph::{Dtype, Graph, Op, Phase};
use topoplace::precision::Precision;
use topoplace::problem::Problem;
use topoplace::sim::Order;
use topoplace::strategy::Reference;
use topoplace::zoo::{self, Framework, GptConfig, ZooOptions};

#[test]
fn names_parse_and_amp_is_fp16() {
    let all = [
        Precision::Fp32,
        Precision::Tf32,
        Precision::Bf16,
        Precision::Fp16,
    ];
    for p in all {
        assert_eq!(p.to_string().parse::<Precision>(), Ok(p));
        assert_eq!(p.to_string().to_uppercase().parse::<Precision>(), Ok(p));
    }
    assert_eq!("amp".parse::<Precision>(), Ok(Precision::Fp16));
    let err = "fp8".parse::<Precision>().unwrap_err();
    assert!(err.contains("fp32, tf32, bf16, fp16"), "{err}");
    assert_eq!("torch".parse::<Framework>(), Ok(Framework::Pytorch));
    assert_eq!(Framework::Tf1.to_string(), "tf1");
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
    let v100 = one_gpu("V100-SXM2-32GB");
    let why = Precision::Bf16
        .check_cluster(&v100, "<test>", "precision")
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("V100-SXM2-32GB") && why.contains("fp16"),
        "{why}"
    );
    for p in [Precision::Fp32, Precision::Tf32, Precision::Fp16] {
        assert!(p.check_cluster(&v100, "<test>", "precision").is_ok());
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
    // The peaks' ratio, times the fitted shares of the tensor-core and FP32 peaks.
    let e = *CostModel::default().kernels.get(a100.arch);
    let expected = 156.0 / 19.5 * e.tensor / e.gemm;
    assert!((fp32 / tf32 - expected).abs() < 1e-9, "{}", fp32 / tf32);
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

/// `simulate` of bert-small on its fastest GPU of TAG's cloud, with `extra` arguments, as JSON.
fn simulate_args(extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "simulate",
        "--model",
        "bert-small",
        "--cluster",
        "tag-cloud",
        "--strategy",
        "single",
        "--json",
    ];
    args.extend_from_slice(extra);
    args.into_iter().map(String::from).collect()
}

#[test]
fn cli_precision_is_a_flag_and_bf16_on_volta_is_one_clear_error() {
    let args = |p: &str| simulate_args(&["--precision", p]);
    let fp32 = run_json(&args("fp32"));
    let default = run_json(&simulate_args(&[]));
    assert_eq!(fp32["iteration_us"], default["iteration_us"]);
    let amp = run_json(&args("amp"));
    assert!(amp["iteration_us"].as_f64().unwrap() < fp32["iteration_us"].as_f64().unwrap());
    // bf16 on Volta: a usage error (exit 2), as autocast refuses it.
    let refused = run(&args("bf16"));
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.starts_with("error:") && err.contains("--precision"),
        "{err}"
    );
    let unknown = run(&args("fp8"));
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("fp32, tf32, bf16, fp16"));
}

/// A zoo model built from `framework`'s ops at `batch`.
fn built(model: &str, batch: u32, framework: Framework, gpt: GptConfig) -> Graph {
    let opts = ZooOptions {
        batch_size: Some(batch),
        framework,
        gpt,
        ..ZooOptions::default()
    };
    zoo::build(model, &opts).unwrap()
}

#[test]
fn pytorch_graphs_have_the_same_parameters_and_products_in_fewer_ops() {
    for model in ["bert-large", "gpt", "transformer"] {
        let tf1 = built(model, 8, Framework::Tf1, GptConfig::default());
        let torch = built(model, 8, Framework::Pytorch, GptConfig::default());
        let (a, b) = (tf1.summary(), torch.summary());
        assert_eq!(a.params, b.params, "{model}");
        assert!(
            torch.len() * 2 < tf1.len(),
            "{model}: {} vs {}",
            torch.len(),
            tf1.len()
        );
        // The fused ops do the same matrix products (causal attention skips half its blocks).
        let ratio = b.flops / a.flops;
        assert!((0.8..1.05).contains(&ratio), "{model}: FLOPs ratio {ratio}");
    }
}

#[test]
fn causal_fused_attention_does_half_the_score_products() {
    let g = built("gpt", 2, Framework::Pytorch, GptConfig::default());
    let c = GptConfig::default();
    let sdpa: Vec<&Op> = g
        .ops()
        .iter()
        .filter(|o| o.op_type == "ScaledDotProductAttention")
        .collect();
    assert_eq!(sdpa.len(), c.layers);
    let full = 4.0 * (c.seq * c.seq * c.hidden) as f64 * 2.0;
    for op in sdpa {
        assert_eq!(op.flops, full / 2.0);
    }
}

fn one_gpu(gpu: &str) -> Cluster {
    parse_cluster(
        &format!(
            "name = \"one\"\n[[machine]]\nname = \"m\"\ngpu = \"{gpu}\"\ngpus = 1\n\
             intra_bandwidth = \"12 GB/s\"\nnic = \"10 Gbps\"\n"
        ),
        "<test>",
    )
    .unwrap()
}

/// Iteration µs and peak device bytes of `graph` on one GPU in `precision`, with `framework`'s
/// runtime memory.
fn single(
    graph: &Graph,
    cluster: &Cluster,
    precision: Precision,
    framework: Framework,
) -> (f64, f64, bool) {
    let graph = autocast(graph, precision, "<test>").unwrap();
    let cost = CostModel {
        precision,
        runtime: framework.runtime_memory(),
        ..CostModel::default()
    };
    let p = Problem::new(&graph, cluster, &cost);
    let strategy = Reference::Single.strategy(&graph, cluster);
    let report = evaluate_strategy(&p, &strategy, Order::Fifo)
        .unwrap()
        .report;
    (
        report.iteration_us,
        report.devices[0].peak_memory_bytes,
        report.is_oom(),
    )
}

#[test]
fn fused_attention_keeps_no_score_matrices() {
    let a100 = one_gpu("A100-80GB");
    let tf1 = built("bert-large", 32, Framework::Tf1, GptConfig::default());
    let torch = built("bert-large", 32, Framework::Pytorch, GptConfig::default());
    // The tensors only, less what stays resident (PyTorch also keeps the `.grad` buffers).
    let activations = |g: &Graph| {
        let (_, peak, _) = single(g, &a100, Precision::Fp32, Framework::Tf1);
        peak - g.summary().resident_bytes
    };
    let (tf1_peak, torch_peak) = (activations(&tf1), activations(&torch));
    // Per layer TF1 keeps the scores, mask, softmax and dropout (4 × heads × s² floats a
    // sample) that SDPA recomputes: 24 layers × 4 × 16 × 128² × 4 B × 32 ≈ 3.2 GB at least.
    let scores = 24.0 * 4.0 * 16.0 * 128.0 * 128.0 * 4.0 * 32.0;
    assert!(tf1_peak - torch_peak > scores, "{tf1_peak} vs {torch_peak}");
}

#[test]
fn gpt2_xl_at_batch_4_fits_one_h100_in_bf16_and_tf32() {
    let xl = GptConfig {
        layers: 48,
        hidden: 1600,
        heads: 25,
        seq: 1024,
        vocab: 50257,
    };
    let g = built("gpt", 4, Framework::Pytorch, xl);
    assert!((g.summary().params as f64 - 1.558e9).abs() < 0.01e9);
    let h100 = one_gpu("H100-SXM-80GB");
    for precision in [Precision::Bf16, Precision::Tf32] {
        let (_, peak, oom) = single(&g, &h100, precision, Framework::Pytorch);
        assert!(!oom, "{precision}: {:.1} GiB", peak / 2f64.powi(30));
    }
}

#[test]
fn a_small_eager_step_on_a_fast_gpu_takes_the_hosts_time() {
    // GPT (12 layers, width 768) at batch 1 in bf16 on an H100: its kernels are shorter than
    // eager PyTorch's host takes to issue them, so the step lasts at least the host's total,
    // and the GPU computes for less than that. TensorFlow 1's graph pays no host time.
    let g = built("gpt", 1, Framework::Pytorch, GptConfig::default());
    let h100 = one_gpu("H100-SXM-80GB");
    let cost = Framework::Pytorch.cost_model(Precision::Bf16, None);
    let mixed = autocast(&g, Precision::Bf16, "<test>").unwrap();
    let host_us: f64 = mixed
        .ops()
        .iter()
        .map(|op| match op.phase {
            Phase::Forward => cost.host.forward_us,
            Phase::Backward => cost.host.backward_us,
            _ => 0.0,
        })
        .sum();
    let p = Problem::new(&mixed, &h100, &cost);
    let strategy = Reference::Single.strategy(&mixed, &h100);
    let report = evaluate_strategy(&p, &strategy, Order::Fifo)
        .unwrap()
        .report;
    assert!(
        report.iteration_us >= host_us,
        "{} < {host_us}",
        report.iteration_us
    );
    assert!(
        report.max_device_busy_us < host_us,
        "{}",
        report.max_device_busy_us
    );
    // `info`'s estimate, the ops in program order behind the host, is the simulated step.
    let estimate = cost.single_gpu_us(&mixed, &h100.devices[0].gpu);
    let gap = (estimate / report.iteration_us - 1.0).abs();
    assert!(gap < 0.02, "{estimate} vs {}", report.iteration_us);
    let tf1 = Framework::Tf1.cost_model(Precision::Bf16, None);
    assert_eq!(tf1.host.forward_us + tf1.host.backward_us, 0.0);
}

#[test]
fn bert_large_on_one_a100_is_within_a_fifth_of_nvidias_runs() {
    for s in scenarios() {
        let seq_128 = s.seq.is_none();
        if s.model == "bert-large" && s.gpu == "A100-80GB" && s.gpus() == 1 && seq_128 {
            let row = &fidelity_table(std::slice::from_ref(&s), &CostModel::default()).unwrap()[0];
            assert!(
                (0.8..1.2).contains(&row.ratio),
                "{}: {}",
                row.scenario,
                row.ratio
            );
        }
    }
}

#[test]
fn cli_framework_is_a_flag() {
    let args = |f: &str| simulate_args(&["--framework", f]);
    let tf1 = run_json(&args("tf1"));
    let torch = run_json(&args("pytorch"));
    assert!(torch["iteration_us"].as_f64().unwrap() < tf1["iteration_us"].as_f64().unwrap());
    let unknown = run(&args("jax"));
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("tf1, pytorch"));
}

#[test]
fn info_and_compare_take_the_precision_and_framework() {
    let info = |extra: &[&str]| {
        let mut args = vec!["info", "bert-small", "--json"];
        args.extend_from_slice(extra);
        run_json(&args)
    };
    let fp32 = info(&[]);
    let amp = info(&["--precision", "amp", "--framework", "pytorch"]);
    assert_eq!(fp32["params"], amp["params"]);
    let bytes = |v: &serde_json::Value| v["activation_bytes"].as_f64().unwrap();
    assert!(
        bytes(&amp) < 0.6 * bytes(&fp32),
        "{} vs {}",
        bytes(&amp),
        bytes(&fp32)
    );
    let refused = run(&[
        "info",
        "bert-small",
        "--cluster",
        "tag-testbed",
        "--precision",
        "bf16",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--precision"));

    let dir = common::scratch("precision-compare");
    let out = dir.display().to_string();
    let rows = |p: &str| {
        run_json(&[
            "compare",
            "--models",
            "bert-small",
            "--clusters",
            "tag-cloud",
            "--methods",
            "single",
            "--precision",
            p,
            "--framework",
            "pytorch",
            "--out",
            &out,
            "--json",
        ])
    };
    let ms = |v: serde_json::Value| v[0]["iteration_ms"].as_f64().unwrap();
    assert!(ms(rows("amp")) < ms(rows("fp32")));
}

#[test]
fn pytorch_keeps_every_grad_buffer_for_the_step_and_tf1_does_not() {
    let tf1 = built("bert-small", 8, Framework::Tf1, GptConfig::default());
    let torch = built("bert-small", 8, Framework::Pytorch, GptConfig::default());
    let (a, b) = (tf1.summary(), torch.summary());
    // Parameters (4 B), Adam's moments (8 B), and under PyTorch the FP32 `.grad` (4 B).
    assert_eq!(a.resident_bytes, 12.0 * a.params as f64);
    assert_eq!(b.resident_bytes, 16.0 * b.params as f64);
}

#[test]
fn eager_attention_keeps_the_probabilities_that_sdpa_recomputes() {
    let opts = |framework| ZooOptions {
        batch_size: Some(4),
        framework,
        seq: Some(512),
        ..ZooOptions::default()
    };
    let a100 = one_gpu("A100-80GB");
    let peak = |framework| {
        let g = zoo::build("bert-small", &opts(framework)).unwrap();
        single(&g, &a100, Precision::Fp32, Framework::Tf1).1
    };
    let (eager, fused) = (peak(Framework::PytorchEager), peak(Framework::Pytorch));
    // At least the softmax output per head, FP32: 4 layers × 8 heads × 512² × 4 B × 4 samples.
    let probabilities = 4.0 * 8.0 * 512.0 * 512.0 * 4.0 * 4.0;
    assert!(eager - fused > probabilities, "{eager} vs {fused}");
    assert_eq!(
        "pytorch-eager".parse::<Framework>(),
        Ok(Framework::PytorchEager)
    );
}

#[test]
fn cli_seq_sets_a_transformers_tokens_and_is_refused_elsewhere() {
    let run_at = |model: &str, seq: &str| {
        run(&[
            "simulate",
            "--model",
            model,
            "--batch",
            "2",
            "--seq",
            seq,
            "--cluster",
            "tag-cloud",
            "--strategy",
            "single",
            "--json",
        ])
    };
    let ms = |o: std::process::Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["iteration_us"].as_f64().unwrap()
    };
    assert!(ms(run_at("gpt2-medium", "256")) < ms(run_at("gpt2-medium", "1024")));
    assert!(ms(run_at("bert-small", "64")) < ms(run_at("bert-small", "512")));
    // Past 1,048,576 tokens for every model: a Llama took 2³² and wrapped its attention FLOPs.
    let too_long = [
        ("vgg16", "128"),
        ("bert-small", "513"),
        ("gpt", "0"),
        ("llama-8b", "4294967296"),
        ("gpt2-xl", "1048577"),
    ];
    for (model, seq) in too_long {
        // A bad value of the flag: a usage error naming it.
        let refused = run_at(model, seq);
        assert_eq!(refused.status.code(), Some(2), "{model} --seq {seq}");
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(err.starts_with("error:") && err.contains("--seq"), "{err}");
    }
}

#[test]
fn cli_optimizer_is_a_flag_that_sets_the_state_in_memory() {
    let peak = |optimizer: &str| {
        let v = run_json(&simulate_args(&["--optimizer", optimizer]));
        v["devices"][0]["peak_memory_bytes"].as_f64().unwrap()
    };
    assert!(peak("sgd") < peak("adam8bit") && peak("adam8bit") < peak("adam"));
    let unknown = run(&simulate_args(&["--optimizer", "lion"]));
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("adafactor"));
}
