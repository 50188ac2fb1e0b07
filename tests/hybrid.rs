//! Hybrid plans (tensor × pipeline × data parallelism with ZeRO and recomputation) against the
//! published LLM-scale runs of Megatron-LM, torchtitan and DeepSpeed. Each of those runs steps a
//! fused Adam (Megatron's and DeepSpeed's `FusedAdam`, torchtitan's `implementation = "fused"`),
//! so their graphs are built with `Optimizer::AdamFused`.

use topoplace::autocast::half_parameters as autocast;
use topoplace::cluster::{Cluster, parse_cluster};
use topoplace::cost::CostModel;
use topoplace::hybrid::{
    HybridModel, HybridPlan, HybridReport, Recompute, Stage, ZeroStage, estimate,
};
use topoplace::precision::Precision;
use topoplace::strategy::Schedule;
use topoplace::zoo::{self, Framework, GptConfig, Optimizer, ZooOptions};

/// `machines` DGX A100 80GB nodes as Selene's: NVSwitch inside, eight 200 Gbps HDR NICs each.
fn dgx_a100(machines: usize) -> Cluster {
    let toml = format!(
        "name = \"selene\"\n[[machine]]\nname = \"dgx\"\ngpu = \"A100-80GB\"\ngpus = 8\n\
         intra_bandwidth = \"300 GB/s\"\ninterconnect = \"nvswitch\"\nnic = \"1600 Gbps\"\n\
         count = {machines}\n"
    );
    parse_cluster(&toml, "<test>").unwrap()
}

fn cost(precision: Precision) -> CostModel {
    CostModel {
        precision,
        runtime: Framework::Pytorch.runtime_memory(),
        ..CostModel::default()
    }
}

/// A plan of `pp` equal stages of `tp`-way groups, data-parallel over the rest of `gpus`, with
/// devices in Megatron's rank order (TP fastest, then DP, then PP).
fn megatron_layout(
    gpus: usize,
    tp: usize,
    pp: usize,
    layers: usize,
    global_batch: u32,
    micro_batches: u32,
    recompute: Recompute,
) -> HybridPlan {
    let dp = gpus / tp / pp;
    let per_stage = layers / pp;
    let stages = (0..pp)
        .map(|s| Stage {
            layers: [s * per_stage, (s + 1) * per_stage],
            replicas: (0..dp)
                .map(|r| (0..tp).map(|k| s * dp * tp + r * tp + k).collect())
                .collect(),
            shares: None,
            sequence_parallel: false,
            zero: ZeroStage::None,
            recompute,
        })
        .collect();
    HybridPlan {
        model: None,
        cluster: None,
        global_batch,
        micro_batches,
        schedule: Schedule::OneFOneB,
        overlap_grad_reduce: false,
        tp_comm_overlap: false,
        stages,
    }
}

struct MegatronRow {
    layers: usize,
    hidden: usize,
    heads: usize,
    tp: usize,
    pp: usize,
    gpus: usize,
    batch: u32,
    tflops: f64,
}

/// Narayanan et al. SC'21, Table 1 (GPT, seq 2,048, vocabulary 51,200, full recomputation,
/// mixed precision, A100 80GB): model FLOPs per GPU per second.
const MEGATRON_A100: &[MegatronRow] = &[
    MegatronRow {
        layers: 24,
        hidden: 2304,
        heads: 24,
        tp: 1,
        pp: 1,
        gpus: 32,
        batch: 512,
        tflops: 137.0,
    },
    MegatronRow {
        layers: 30,
        hidden: 3072,
        heads: 32,
        tp: 2,
        pp: 1,
        gpus: 64,
        batch: 512,
        tflops: 138.0,
    },
    MegatronRow {
        layers: 36,
        hidden: 4096,
        heads: 32,
        tp: 4,
        pp: 1,
        gpus: 128,
        batch: 512,
        tflops: 142.0,
    },
    MegatronRow {
        layers: 40,
        hidden: 6144,
        heads: 48,
        tp: 8,
        pp: 1,
        gpus: 256,
        batch: 1024,
        tflops: 135.0,
    },
    MegatronRow {
        layers: 48,
        hidden: 8192,
        heads: 64,
        tp: 8,
        pp: 2,
        gpus: 512,
        batch: 1536,
        tflops: 138.0,
    },
    MegatronRow {
        layers: 60,
        hidden: 10240,
        heads: 80,
        tp: 8,
        pp: 4,
        gpus: 1024,
        batch: 1792,
        tflops: 140.0,
    },
];

/// Model FLOPs of one iteration with full recomputation (Narayanan et al. SC'21, eq. 3):
/// 96·B·s·l·h²·(1 + s/6h + V/16lh).
fn megatron_flops(batch: f64, seq: f64, layers: f64, hidden: f64, vocab: f64) -> f64 {
    96.0 * batch
        * seq
        * layers
        * hidden
        * hidden
        * (1.0 + seq / (6.0 * hidden) + vocab / (16.0 * layers * hidden))
}

fn gpt_model(c: GptConfig, micro_batch: u32, precision: Precision) -> HybridModel {
    let heads = c.heads;
    let opts = ZooOptions {
        batch_size: Some(micro_batch),
        gpt: c,
        framework: Framework::PytorchEager,
        optimizer: Optimizer::AdamFused,
        ..ZooOptions::default()
    };
    let graph = zoo::build("gpt", &opts).unwrap();
    let graph = autocast(&graph, precision, "gpt").unwrap();
    HybridModel::new(graph, precision, [heads, heads, 2048], "gpt").unwrap()
}

#[test]
fn megatron_a100_table() {
    let precision = Precision::Fp16;
    let cost = cost(precision);
    for row in MEGATRON_A100 {
        let cluster = dgx_a100(row.gpus / 8);
        let dp = row.gpus / row.tp / row.pp;
        let per_replica = row.batch as usize / dp;
        let mut best: Option<(f64, u32)> = None;
        for mb in [1u32, 2, 4, 8] {
            if !per_replica.is_multiple_of(mb as usize) {
                continue;
            }
            let micro_batches = row.batch / (mb * dp as u32);
            let c = GptConfig {
                layers: row.layers,
                hidden: row.hidden,
                heads: row.heads,
                seq: 2048,
                vocab: 51200,
            };
            let model = gpt_model(c, mb * dp as u32, precision);
            let plan = megatron_layout(
                row.gpus,
                row.tp,
                row.pp,
                row.layers,
                row.batch,
                micro_batches,
                Recompute::Full,
            );
            model.check(&plan, cluster.devices.len(), "<test>").unwrap();
            let r = estimate(&model, &cluster, &cost, &plan);
            let flops = megatron_flops(
                row.batch as f64,
                2048.0,
                row.layers as f64,
                row.hidden as f64,
                51200.0,
            );
            let tflops = flops / (r.iteration_us * 1e-6) / row.gpus as f64 / 1e12;
            if r.fits() && best.is_none_or(|b| tflops > b.0) {
                best = Some((tflops, mb));
            }
        }
        let (tflops, mb) = best.expect("a micro-batch that fits");
        let ratio = tflops / row.tflops;
        eprintln!(
            "GPT {}L h{} TP{} PP{} on {}: {tflops:.1} TFLOP/s per GPU at micro-batch {mb}, \
             published {} (×{ratio:.3})",
            row.layers, row.hidden, row.tp, row.pp, row.gpus, row.tflops
        );
        assert!((ratio - 1.0).abs() <= 0.2, "{ratio}");
    }
}

/// `machines` nodes of `gpus` GPUs of `gpu` on NVSwitch, with `nic` per node.
fn nodes(gpu: &str, gpus: usize, intra: &str, nic: &str, machines: usize) -> Cluster {
    let toml = format!(
        "name = \"nodes\"\n[[machine]]\nname = \"node\"\ngpu = \"{gpu}\"\ngpus = {gpus}\n\
         intra_bandwidth = \"{intra}\"\ninterconnect = \"nvswitch\"\nnic = \"{nic}\"\n\
         count = {machines}\n"
    );
    parse_cluster(&toml, "<test>").unwrap()
}

fn llama_model(name: &str, micro_batch: u32, precision: Precision) -> HybridModel {
    let c = zoo::LLAMA_SIZES
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
        .clone();
    let opts = ZooOptions {
        batch_size: Some(micro_batch),
        framework: Framework::Pytorch,
        optimizer: Optimizer::AdamFused,
        ..ZooOptions::default()
    };
    let graph = zoo::build(name, &opts).unwrap();
    let graph = autocast(&graph, precision, name).unwrap();
    HybridModel::new(graph, precision, [c.heads, c.kv_heads, c.seq], name).unwrap()
}

/// FSDP (ZeRO-3) over every GPU, one micro-batch of `local` sequences each.
fn fsdp(gpus: usize, layers: usize, local: u32, recompute: Recompute) -> HybridPlan {
    HybridPlan {
        model: None,
        cluster: None,
        global_batch: local * gpus as u32,
        micro_batches: 1,
        schedule: Schedule::OneFOneB,
        overlap_grad_reduce: true,
        tp_comm_overlap: false,
        stages: vec![Stage {
            layers: [0, layers],
            replicas: (0..gpus).map(|d| vec![d]).collect(),
            shares: None,
            sequence_parallel: false,
            zero: ZeroStage::Parameters,
            recompute,
        }],
    }
}

/// torchtitan's FSDP2 runs on 64 A100 80GB in bf16 (docs/performance.md): tokens per second per
/// GPU. The nodes' network is not stated; eight 200 Gbps NICs a node (as DGX A100) is assumed.
#[test]
fn torchtitan_fsdp2_a100_table() {
    let precision = Precision::Bf16;
    let cost = cost(precision);
    let cluster = nodes("A100-80GB", 8, "300 GB/s", "1600 Gbps", 8);
    let rows = [
        ("llama-8b", 1u32, 8192.0, Recompute::SelectiveOp, 2973.0),
        ("llama-13b", 2, 4096.0, Recompute::None, 2162.0),
        ("llama-70b", 2, 4096.0, Recompute::Full, 353.0),
        ("llama3-70b", 1, 8192.0, Recompute::Full, 331.0),
    ];
    for (name, local, seq, recompute, published) in rows {
        let model = llama_model(name, local * 64, precision);
        let plan = fsdp(64, model.layers(), local, recompute);
        model.check(&plan, 64, "<test>").unwrap();
        let r = estimate(&model, &cluster, &cost, &plan);
        let tokens = f64::from(local) * 64.0 * seq / (r.iteration_us * 1e-6) / 64.0;
        let ratio = tokens / published;
        eprintln!(
            "{name} local batch {local} {recompute:?}: {tokens:.0} tokens/s per GPU, published \
             {published} (×{ratio:.3})"
        );
        // It ran: it must fit.
        assert!(r.fits(), "{name}: {:?}", r.tightest());
        // Llama 3 8B at 8,192 tokens was the miss (1.32×, then 1.21× with torchtitan's selective
        // op policy as written) until attention ran at FlashAttention-2's published speed.
        assert!((ratio - 1.0).abs() <= 0.2, "{name}: {ratio}");
    }
}

/// DeepSpeed's ZeRO tutorial: a 10 B GPT-2 (50 layers, width 4,096, 32 heads, 1,024 tokens) on
/// 32 V100-SXM3 32GB (two DGX-2: 16 GPUs on NVSwitch), micro-batch 1 per GPU, full
/// recomputation, fp16, ZeRO-2: about 4.6 s an iteration and 31.5 GiB a GPU. The tutorial does
/// not say what joined the two machines; `nic` is their link per machine (docs/hybrid.md).
fn deepspeed_zero2_10b_report(nic: &str) -> HybridReport {
    let precision = Precision::Fp16;
    let cost = cost(precision);
    let cluster = nodes("V100-SXM2-32GB", 16, "150 GB/s", nic, 2);
    let c = GptConfig {
        layers: 50,
        hidden: 4096,
        heads: 32,
        seq: 1024,
        vocab: 50257,
    };
    let opts = ZooOptions {
        batch_size: Some(32),
        gpt: c,
        framework: Framework::PytorchEager,
        optimizer: Optimizer::AdamFused,
        ..ZooOptions::default()
    };
    let graph = autocast(&zoo::build("gpt", &opts).unwrap(), precision, "gpt").unwrap();
    let model = HybridModel::new(graph, precision, [32, 32, 1024], "gpt").unwrap();
    let mut plan = fsdp(32, 50, 1, Recompute::Full);
    plan.stages[0].zero = ZeroStage::Gradients;
    estimate(&model, &cluster, &cost, &plan)
}

/// The link the tutorial's log implies: its phases (forward 0.5 s, backward 2.0 s, optimizer
/// step 2.1 s) are a backward and a step each carrying one pass of the 20 GB of fp16 gradients
/// or parameters between the machines, at about one 100 Gbps NIC's rate.
const DEEPSPEED_TUTORIAL_NIC: &str = "100 Gbps";

#[test]
fn deepspeed_zero2_10b() {
    let r = deepspeed_zero2_10b_report(DEEPSPEED_TUTORIAL_NIC);
    let gib = r.tightest().unwrap().total / 2f64.powi(30);
    let ms = r.iteration_us / 1e3;
    let s = &r.stages[0];
    let (fwd, bwd, step) = (
        s.forward_us / 1e6,
        (s.backward_us + s.dp_sync_us) / 1e6,
        s.optimizer_us / 1e6,
    );
    eprintln!(
        "GPT-2 10B ZeRO-2: {ms:.0} ms (published 4,556–4,638), forward {fwd:.2} s (0.5), \
         backward with its exposed reduce-scatter {bwd:.2} s (2.0), step with its all-gather \
         {step:.2} s (2.1), {gib:.1} GiB (published 31.5)"
    );
    assert!(r.fits());
    assert!((gib / 31.5 - 1.0).abs() <= 0.2, "{gib}");
    assert!((ms / 4597.0 - 1.0).abs() <= 0.2, "{ms}");
    assert!((bwd / 2.0 - 1.0).abs() <= 0.2, "backward {bwd}");
    assert!((step / 2.1 - 1.0).abs() <= 0.2, "step {step}");
    // With eight 100 Gbps NICs a machine (the ZeRO paper's DGX-2 cluster), the collectives hide
    // under the backward and the step takes a third of the log's time: the network is what the
    // log measures.
    let fast = deepspeed_zero2_10b_report("800 Gbps");
    assert!(
        fast.iteration_us < 0.4 * r.iteration_us,
        "{}",
        fast.iteration_us
    );
}

/// What the memory model promises: a run it calls fitting needs at most its prediction plus the
/// headroom it states, the caching allocator's reserve (11.75% of the tensors' peak, fitted on
/// one row). Checked on every published memory figure of a run that fitted: DeepSpeed's 10 B
/// step (hybrid plans) and Hugging Face's BERT-large rows (op-level simulator).
#[test]
fn published_memory_is_within_the_stated_headroom_of_a_fitting_prediction() {
    use topoplace::fidelity::{Metric, fidelity_table, scenarios};
    let headroom = Framework::Pytorch.runtime_memory().allocator_headroom;
    assert_eq!(headroom, 0.1175);
    let r = deepspeed_zero2_10b_report(DEEPSPEED_TUTORIAL_NIC);
    let predicted = r.tightest().unwrap().total / 2f64.powi(30);
    let mut rows = vec![(
        "DeepSpeed ZeRO-2 10B".to_string(),
        31.5,
        predicted,
        r.fits(),
    )];
    let memory: Vec<_> = scenarios()
        .into_iter()
        .filter(|s| s.metric == Metric::DeviceMemoryMib)
        .collect();
    let table = fidelity_table(&memory, &CostModel::default()).unwrap();
    assert!(table.len() >= 4, "{} memory rows", table.len());
    for row in table {
        rows.push((row.scenario, row.published, row.simulated, !row.oom));
    }
    for (name, published, predicted, fits) in rows {
        let over = published / predicted - 1.0;
        eprintln!("{name}: published {published:.1}, predicted {predicted:.1}, {over:+.3}");
        assert!(fits, "{name}: the run fitted");
        assert!(over <= headroom, "{name}: {over:.3} above the prediction");
    }
}

/// torchtitan's footnote: Llama 2 70B at local batch 2 with selective op recomputation runs out
/// of memory on 64 A100 80GB; at local batch 1 it runs (355 tokens/s per GPU).
#[test]
fn torchtitan_70b_selective_fits_at_batch_1_only() {
    let precision = Precision::Bf16;
    let cost = cost(precision);
    let cluster = nodes("A100-80GB", 8, "300 GB/s", "1600 Gbps", 8);
    for (local, fits) in [(1u32, true), (2, false)] {
        let model = llama_model("llama-70b", local * 64, precision);
        let plan = fsdp(64, model.layers(), local, Recompute::SelectiveOp);
        let r = estimate(&model, &cluster, &cost, &plan);
        let gib = r.tightest().unwrap().total / 2f64.powi(30);
        eprintln!("llama-70b local batch {local} selective op: {gib:.1} GiB");
        assert_eq!(r.fits(), fits, "local batch {local}: {gib:.1} GiB");
    }
}

/// The four language-model instances of the hybrid planner's acceptance: the search finds a plan
/// that fits and is never slower than Megatron's default layout or FSDP.
#[test]
fn search_fits_and_beats_megatron_and_fsdp() {
    use topoplace::gnn::LayoutPolicy;
    use topoplace::hybrid::{Planner, fsdp, megatron, search};
    let priors = LayoutPolicy::shipped().unwrap();
    use topoplace::resolve::load_named_cluster;
    let instances = [
        ("llama-7b", "hetero-a100-v100", 64u32, Precision::Fp16),
        ("llama-13b", "hetero-a100-40-v100", 64, Precision::Fp16),
        ("llama-70b", "hetero-h100-a100", 256, Precision::Bf16),
        ("llama-70b", "mixed-1024", 1024, Precision::Bf16),
    ];
    for (model, cluster, batch, precision) in instances {
        let cluster = load_named_cluster(cluster, "<test>").unwrap();
        let cost = cost(precision);
        let opts = ZooOptions {
            framework: Framework::Pytorch,
            ..ZooOptions::default()
        };
        let mut planner = Planner::new(model, &opts, precision, &cluster, &cost, batch).unwrap();
        let best = search(&mut planner, &priors).unwrap().expect("a plan");
        assert!(best.report.fits(), "{model} on {}", cluster.name);
        for (name, other) in [
            ("megatron", megatron(&mut planner).unwrap()),
            ("fsdp", fsdp(&mut planner).unwrap()),
        ] {
            let Some(other) = other.filter(|o| o.report.fits()) else {
                continue;
            };
            let speedup = other.report.iteration_us / best.report.iteration_us;
            eprintln!("{model} on {}: {speedup:.2}× {name}", cluster.name);
            assert!(
                speedup >= 1.0,
                "{model} on {}: slower than {name}",
                cluster.name
            );
        }
    }
}

/// Ten random clusters of TAG's distribution (1–6 machines of 1–8 GPUs of three 2017–2019 types):
/// wherever Llama 3.2 1B fits, `place`'s answer is never slower than any of the four baselines
/// (the joint search's own plan is printed beside them).
#[test]
fn placement_beats_the_baselines_on_random_topologies() {
    use topoplace::cluster::random_cluster;
    use topoplace::gnn::LayoutPolicy;
    use topoplace::hybrid::{Planner, plan_all};
    let priors = LayoutPolicy::shipped().unwrap();
    let precision = Precision::Fp16;
    let cost = cost(precision);
    let opts = ZooOptions {
        framework: Framework::Pytorch,
        seq: Some(2048),
        ..ZooOptions::default()
    };
    let mut placed = 0;
    for seed in 0..10 {
        let cluster = random_cluster(seed);
        let mut planner = Planner::new("llama-1b", &opts, precision, &cluster, &cost, 32).unwrap();
        let all = plan_all(&mut planner, None, &priors).unwrap();
        let Some(best) = all.best() else {
            continue;
        };
        placed += 1;
        let fastest_other = all.best_baseline_us().unwrap();
        let searched = all
            .methods
            .last()
            .unwrap()
            .planned
            .as_ref()
            .filter(|p| p.report.fits());
        eprintln!(
            "seed {seed} ({} GPUs): {:.2}× the best baseline; the joint search alone {}",
            cluster.devices.len(),
            fastest_other / best.report.iteration_us,
            searched.map_or("found nothing that fits".into(), |p| format!(
                "{:.2}×",
                fastest_other / p.report.iteration_us
            ))
        );
        for m in &all.methods {
            if let Some(p) = m.planned.as_ref().filter(|p| p.report.fits()) {
                let name = m.method;
                assert!(
                    best.report.iteration_us <= p.report.iteration_us,
                    "seed {seed}: {name}"
                );
            }
        }
    }
    assert!(
        placed >= 5,
        "only {placed} of 10 clusters hold Llama 3.2 1B"
    );
}

/// Megatron-Core r0.8.0's weak-scaling table on H100 (NVIDIA/Megatron-LM README,
/// `images/model_table.png`, added in f2e5db4): GPT with 4,096 tokens and a 131,072 vocabulary,
/// data parallelism 48, the rows up to 1,024 GPUs. MFU is the TFLOP/s over the 989 TFLOP/s of
/// bf16, so bf16; the table states no micro-batch, recomputation or interleaving.
const MEGATRON_CORE_H100: &[MegatronRow] = &[
    MegatronRow {
        layers: 24,
        hidden: 2048,
        heads: 16,
        tp: 1,
        pp: 1,
        gpus: 48,
        batch: 192,
        tflops: 408.8,
    },
    MegatronRow {
        layers: 30,
        hidden: 4096,
        heads: 32,
        tp: 2,
        pp: 1,
        gpus: 96,
        batch: 192,
        tflops: 465.9,
    },
    MegatronRow {
        layers: 32,
        hidden: 6144,
        heads: 48,
        tp: 4,
        pp: 1,
        gpus: 192,
        batch: 192,
        tflops: 489.1,
    },
    MegatronRow {
        layers: 48,
        hidden: 7168,
        heads: 56,
        tp: 8,
        pp: 1,
        gpus: 384,
        batch: 192,
        tflops: 459.6,
    },
    MegatronRow {
        layers: 84,
        hidden: 8192,
        heads: 64,
        tp: 8,
        pp: 2,
        gpus: 768,
        batch: 384,
        tflops: 419.7,
    },
];

/// Model FLOPs of one iteration without recomputation, as Megatron-Core r0.8.0 counts them for
/// a GPT with a 4h MLP (`num_floating_point_operations`): 72·B·s·l·h²·(1 + s/6h + V/12lh).
fn megatron_core_flops(batch: f64, seq: f64, layers: f64, hidden: f64, vocab: f64) -> f64 {
    72.0 * batch
        * seq
        * layers
        * hidden
        * hidden
        * (1.0 + seq / (6.0 * hidden) + vocab / (12.0 * layers * hidden))
}

/// Megatron-Core on DGX H100 nodes (NVLink 4, eight 400 Gbps NICs): each row set up as its README
/// says — bf16, fused attention, the distributed optimizer (ZeRO-1, which its parameter-gather
/// overlap needs), sequence parallelism with the tensor-parallel communication overlapped (which
/// needs it), gradient reduction overlapped — and, for what it does not say, the fastest
/// micro-batch of 1, 2 and 4 with the least recomputation that fits, as a user tunes a run.
#[test]
fn megatron_core_h100_table() {
    let precision = Precision::Bf16;
    let cost = cost(precision);
    let (seq, vocab) = (4096usize, 131_072usize);
    for row in MEGATRON_CORE_H100 {
        let cluster = nodes("H100-SXM-80GB", 8, "450 GB/s", "3200 Gbps", row.gpus / 8);
        let dp = row.gpus / row.tp / row.pp;
        let mut best: Option<(f64, u32, Recompute)> = None;
        for mb in [1u32, 2, 4] {
            let per_replica = row.batch / dp as u32;
            if !per_replica.is_multiple_of(mb) {
                continue;
            }
            let c = GptConfig {
                layers: row.layers,
                hidden: row.hidden,
                heads: row.heads,
                seq,
                vocab,
            };
            let opts = ZooOptions {
                batch_size: Some(mb * dp as u32),
                gpt: c,
                framework: Framework::Pytorch,
                optimizer: Optimizer::AdamFused,
                ..ZooOptions::default()
            };
            let graph = autocast(&zoo::build("gpt", &opts).unwrap(), precision, "gpt").unwrap();
            let model =
                HybridModel::new(graph, precision, [row.heads, row.heads, seq], "gpt").unwrap();
            let fitting = [Recompute::None, Recompute::Selective, Recompute::Full]
                .into_iter()
                .find_map(|recompute| {
                    let mut plan = megatron_layout(
                        row.gpus,
                        row.tp,
                        row.pp,
                        row.layers,
                        row.batch,
                        row.batch / (mb * dp as u32),
                        recompute,
                    );
                    plan.overlap_grad_reduce = true;
                    plan.tp_comm_overlap = row.tp > 1;
                    for stage in &mut plan.stages {
                        stage.zero = ZeroStage::Optimizer;
                        stage.sequence_parallel = row.tp > 1;
                    }
                    model.check(&plan, cluster.devices.len(), "<test>").unwrap();
                    let r = estimate(&model, &cluster, &cost, &plan);
                    r.fits().then_some((r, recompute))
                });
            let Some((r, recompute)) = fitting else {
                continue;
            };
            let flops = megatron_core_flops(
                row.batch as f64,
                seq as f64,
                row.layers as f64,
                row.hidden as f64,
                vocab as f64,
            );
            let tflops = flops / (r.iteration_us * 1e-6) / row.gpus as f64 / 1e12;
            if best.is_none_or(|b| tflops > b.0) {
                best = Some((tflops, mb, recompute));
            }
        }
        let (tflops, mb, recompute) = best.expect("a micro-batch that fits");
        let ratio = tflops / row.tflops;
        eprintln!(
            "H100 GPT {}L h{} TP{} PP{} on {}: {tflops:.1} TFLOP/s per GPU at micro-batch {mb}, \
             recompute {recompute:?}, published {} (×{ratio:.3})",
            row.layers, row.hidden, row.tp, row.pp, row.gpus, row.tflops
        );
        assert!((ratio - 1.0).abs() <= 0.2, "{ratio}");
    }
}

/// The layout policy's acceptance (models/README.md): on 40 unseen random topologies of today's
/// clusters, the layout tree under the shipped policy at 50 simulated layouts finds plans at
/// least as fast, in the paired mean, as uniform priors at 300, for at least three of the four
/// Llama sizes; and at equal budget it is ahead on every one.
#[test]
fn layout_policy_at_50_matches_uniform_priors_at_300() {
    use topoplace::cluster::TopologyDistribution;
    use topoplace::gnn::LayoutPolicy;
    use topoplace::layout_priors::{LayoutPriorsSetup, layout_priors};
    let policy = LayoutPolicy::shipped().unwrap();
    let models = ["llama-1b", "llama-3b", "llama-7b", "llama-13b"];
    let setup = LayoutPriorsSetup {
        policy: &policy,
        models: models.iter().map(|m| m.to_string()).collect(),
        batch: 64,
        topologies: 40,
        topology_seed: 3_000_000,
        distribution: TopologyDistribution::named("today").unwrap(),
        precision: Precision::Bf16,
        framework: Framework::Pytorch,
        budget: 50,
        uniform_budget: 300,
        instances: false,
    };
    let out = layout_priors(&setup, |_| {}).unwrap();
    eprintln!("{}", out.table.render());
    let rows: Vec<Vec<String>> = out
        .csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    let log_ratio = |r: &Vec<String>| r[6].parse::<f64>().unwrap();
    let unequal: Vec<f64> = rows
        .iter()
        .filter(|r| r[2] == "300")
        .map(log_ratio)
        .collect();
    let equal: Vec<f64> = rows
        .iter()
        .filter(|r| r[2] == "50")
        .map(log_ratio)
        .collect();
    assert_eq!((unequal.len(), equal.len()), (4, 4));
    assert!(
        unequal.iter().filter(|&&x| x >= 0.0).count() >= 3,
        "{unequal:?}"
    );
    assert!(equal.iter().all(|&x| x > 0.0), "{equal:?}");
}
