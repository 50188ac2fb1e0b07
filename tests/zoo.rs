//! The model zoo: parameter counts and MACs against published figures, and the structure of the
//! generated training graphs (backward pass, gradient links, optimizer ops, batch scaling).

use topoplace::graph::{AttentionShape, Graph, Phase, Splittability};
use topoplace::zoo::{self, Framework, GptConfig, Optimizer, ZooOptions};

const CNNS: &[&str] = &["inception-v3", "resnet101", "vgg19", "alexnet", "vgg16"];
const BIG: &[&str] = &[
    "inception-v3",
    "resnet101",
    "transformer",
    "bert-small",
    "bert-large",
];

fn build(name: &str) -> Graph {
    zoo::build(name, &ZooOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn build_with(name: &str, opts: &ZooOptions) -> Graph {
    zoo::build(name, opts).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn params(g: &Graph) -> u64 {
    g.ops().iter().map(|o| o.params).sum()
}

fn phase_flops(g: &Graph, phase: Phase) -> f64 {
    g.ops()
        .iter()
        .filter(|o| o.phase == phase)
        .map(|o| o.flops)
        .sum()
}

/// Forward multiply-adds per sample (2 FLOPs per MAC).
fn fwd_macs_per_sample(g: &Graph) -> f64 {
    phase_flops(g, Phase::Forward) / f64::from(g.batch_size) / 2.0
}

fn count_type(g: &Graph, ty: &str) -> usize {
    g.ops().iter().filter(|o| o.op_type == ty).count()
}

fn rel_err(got: f64, want: f64) -> f64 {
    (got / want - 1.0).abs()
}

#[test]
fn parameter_counts_match_published_figures() {
    for name in zoo::NAMES {
        let g = build(name);
        let card = zoo::card(name).unwrap();
        assert_eq!(params(&g), card.reference_params, "{name}");
        assert_eq!(g.summary().params, card.reference_params, "{name}");
    }
}

#[test]
fn cnn_forward_macs_match_published_figures() {
    for name in CNNS {
        let g = build(name);
        let want = zoo::card(name).unwrap().reference_fwd_macs_per_sample;
        assert!(want > 0.0, "{name} has a published MAC figure");
        let got = fwd_macs_per_sample(&g);
        assert!(
            rel_err(got, want) < 0.05,
            "{name}: {got:.4e} MACs vs published {want:.4e}"
        );
    }
}

/// Matmul weights times the tokens they see, plus QK^T and AV (2·seq_q·seq_k·hidden) per
/// attention; element-wise ops must stay within the 5% tolerance.
#[test]
fn transformer_forward_macs_match_closed_form() {
    let sq = |x: usize| (x * x) as f64;
    // BERT: per layer 4H² attention + 2HF FFN over S tokens; MLM transform H²; tied decoder VH.
    let bert = |l: usize, h: usize, f: usize, s: usize, v: usize| {
        let lf = l as f64;
        let (hf, sf) = (h as f64, s as f64);
        lf * (4.0 * sq(h) + 2.0 * hf * f as f64) * sf
            + sq(h) * sf
            + v as f64 * hf * sf
            + lf * 2.0 * sq(s) * hf
    };
    // Transformer-base: 6 encoder layers (4d² + 2dF), 6 decoder layers (8d² + 2dF, self and cross
    // attention), tied output projection, 32 source and 32 target tokens.
    let (d, f, t, v) = (512.0, 2048.0, 32.0, 37000.0);
    let transformer = 6.0 * (4.0 * d * d + 2.0 * d * f) * t
        + 6.0 * (8.0 * d * d + 2.0 * d * f) * t
        + v * d * t
        + 6.0 * 2.0 * t * t * d
        + 6.0 * 2.0 * (2.0 * t * t * d);
    // GPT-2: 12H² per layer over S tokens, tied LM head, causal attention computed in full.
    let c = GptConfig::default();
    let (l, h, s) = (c.layers as f64, c.hidden as f64, c.seq as f64);
    let gpt = l * 12.0 * h * h * s + c.vocab as f64 * h * s + l * 2.0 * s * s * h;
    let cases = [
        ("bert-small", bert(4, 512, 2048, 128, 30522)),
        ("bert-large", bert(24, 1024, 4096, 128, 30522)),
        ("transformer", transformer),
        ("gpt", gpt),
    ];
    for (name, want) in cases {
        let got = fwd_macs_per_sample(&build(name));
        assert!(
            rel_err(got, want) < 0.05,
            "{name}: {got:.4e} MACs vs closed form {want:.4e}"
        );
    }
}

#[test]
fn every_parameter_has_one_adam_and_one_gradient() {
    for name in zoo::NAMES {
        let g = build(name);
        let param_ops: Vec<usize> = (0..g.len())
            .filter(|&i| g.op(i).phase == Phase::Parameter)
            .collect();
        assert_eq!(
            g.gradients().len(),
            param_ops.len(),
            "{name}: one gradient link per parameter"
        );
        for &p in &param_ops {
            let op = g.op(p);
            assert_eq!(
                op.resident_bytes,
                4.0 * op.params as f64,
                "{name}: {}",
                op.name
            );
            assert_eq!(op.split, Splittability::None, "{name}: {}", op.name);
            assert!(!op.scales_with_batch(), "{name}: {}", op.name);
            let adams: Vec<usize> = g
                .successors(p)
                .filter(|&s| g.op(s).op_type == "ApplyAdam")
                .collect();
            assert_eq!(
                adams.len(),
                1,
                "{name}: {} has {} ApplyAdam consumers",
                op.name,
                adams.len()
            );
            let adam = g.op(adams[0]);
            assert_eq!(adam.phase, Phase::Optimizer);
            assert_eq!(
                adam.resident_bytes,
                2.0 * op.resident_bytes,
                "{name}: {}",
                adam.name
            );
            assert_eq!(adam.flops, 10.0 * op.params as f64);
            assert_eq!(adam.split, Splittability::None);
            assert!(!adam.scales_with_batch());
            let links: Vec<_> = g
                .gradients()
                .iter()
                .filter(|l| l.optimizer == adams[0])
                .collect();
            assert_eq!(links.len(), 1, "{name}: {}", adam.name);
            let grad = g.op(links[0].grad);
            assert_eq!(
                grad.phase,
                Phase::Backward,
                "{name}: {} grad {}",
                adam.name,
                grad.name
            );
            assert_eq!(
                grad.output_bytes, op.resident_bytes,
                "{name}: gradient {} has the parameter's size",
                grad.name
            );
        }
        let optimizers = g
            .ops()
            .iter()
            .filter(|o| o.phase == Phase::Optimizer)
            .count();
        assert_eq!(optimizers, param_ops.len(), "{name}");
    }
}

#[test]
fn edges_carry_the_source_tensor() {
    for name in ["resnet101", "bert-small", "gpt", "mlp"] {
        let g = build(name);
        for e in g.edges() {
            assert_eq!(
                e.bytes,
                g.op(e.src).output_bytes,
                "{name}: {} -> {}",
                g.op(e.src).name,
                g.op(e.dst).name
            );
        }
    }
}

#[test]
fn cnn_backward_costs_about_twice_the_forward() {
    for name in CNNS {
        let g = build(name);
        let ratio = phase_flops(&g, Phase::Backward) / phase_flops(&g, Phase::Forward);
        assert!(
            (1.5..=2.5).contains(&ratio),
            "{name}: backward/forward FLOPs {ratio:.3}"
        );
    }
}

#[test]
fn convolutions_get_separate_input_and_filter_gradients() {
    for name in CNNS {
        let g = build(name);
        let convs = count_type(&g, "Conv2D");
        assert_eq!(count_type(&g, "Conv2DBackpropFilter"), convs, "{name}");
        // The first convolution reads the images, which need no gradient.
        assert_eq!(count_type(&g, "Conv2DBackpropInput"), convs - 1, "{name}");
        for o in g.ops() {
            let want = match o.op_type.as_str() {
                "Conv2DBackpropFilter"
                | "BiasAddGrad"
                | "FusedBatchNormGradGamma"
                | "FusedBatchNormGradBeta" => Splittability::Sum,
                "Conv2D"
                | "Conv2DBackpropInput"
                | "ReluGrad"
                | "MaxPoolGrad"
                | "FusedBatchNormGrad" => Splittability::Concat,
                _ => continue,
            };
            assert_eq!(o.split, want, "{name}: {}", o.name);
        }
    }
}

#[test]
fn branching_tensors_accumulate_gradients_with_addn() {
    // Residual shortcuts, inception branches and attention's q/k/v projections all read one
    // tensor several times.
    for (name, at_least) in [
        ("resnet101", 33),
        ("inception-v3", 11),
        ("bert-small", 8),
        ("transformer", 24),
    ] {
        let g = build(name);
        let addn = count_type(&g, "AddN");
        assert!(addn >= at_least, "{name}: {addn} AddN ops");
    }
    // The transformer's shared embedding gets source, target and output-projection gradients.
    let g = build("transformer");
    let link = g
        .gradients()
        .iter()
        .find(|l| g.op(l.optimizer).name == "shared_embedding/ApplyAdam")
        .unwrap();
    assert_eq!(g.op(link.grad).op_type, "AddN");
    assert_eq!(g.predecessors(link.grad).count(), 3);
}

#[test]
fn attention_keeps_reshapes_and_transposes() {
    let g = build("bert-small");
    for phase in [Phase::Forward, Phase::Backward] {
        for ty in ["Reshape", "Transpose", "BatchMatMulV2"] {
            let n = g
                .ops()
                .iter()
                .filter(|o| o.phase == phase && o.op_type == ty)
                .count();
            assert!(n >= 4 * 2, "bert-small: {n} {ty} ops in {}", phase.name());
        }
    }
    let transposes = g.ops().iter().filter(|o| o.op_type == "Transpose");
    for o in transposes {
        assert_eq!(o.flops, 0.0, "{}", o.name);
        assert!(o.bytes_accessed > 0.0, "{}", o.name);
    }
}

#[test]
fn loss_is_a_sum_over_the_batch() {
    let g = build("bert-large");
    let means: Vec<_> = g
        .ops()
        .iter()
        .filter(|o| o.phase == Phase::Forward && o.op_type == "Mean" && o.name.contains("loss"))
        .collect();
    assert_eq!(means.len(), 2, "MLM and NSP losses");
    assert!(means.iter().all(|o| o.split == Splittability::Sum));
}

#[test]
fn big_models_have_thousands_of_ops() {
    for name in BIG {
        let n = build(name).len();
        assert!(n >= 1000, "{name}: only {n} ops");
    }
    let mlp = build("mlp").len();
    assert!((20..100).contains(&mlp), "mlp: {mlp} ops");
}

#[test]
fn inference_variants_are_forward_only_with_the_same_parameters() {
    for name in zoo::NAMES {
        let train = build(name);
        let suffixed = build(&format!("{name}-inference"));
        let flagged = build_with(
            name,
            &ZooOptions {
                inference: true,
                ..ZooOptions::default()
            },
        );
        for g in [&suffixed, &flagged] {
            assert_eq!(g.name, format!("{name}-inference"));
            assert!(
                g.ops()
                    .iter()
                    .all(|o| !matches!(o.phase, Phase::Backward | Phase::Optimizer)),
                "{name}: forward-only graph has backward or optimizer ops"
            );
            assert!(g.gradients().is_empty());
            assert_eq!(params(g), params(&train), "{name}");
            assert!(
                g.len() < train.len() / 2,
                "{name}: {} vs {} ops",
                g.len(),
                train.len()
            );
        }
        assert_eq!(suffixed.len(), flagged.len());
        assert_eq!(train.name, *name);
    }
}

#[test]
fn batch_override_scales_batch_dependent_flops_linearly() {
    for name in ["resnet101", "bert-small", "gpt", "mlp"] {
        let card = zoo::card(name).unwrap();
        let base = build(name);
        assert_eq!(base.batch_size, card.default_batch);
        let doubled = build_with(
            name,
            &ZooOptions {
                batch_size: Some(2 * card.default_batch),
                ..ZooOptions::default()
            },
        );
        assert_eq!(doubled.batch_size, 2 * card.default_batch);
        assert_eq!(doubled.len(), base.len(), "{name}");
        assert_eq!(params(&doubled), params(&base), "{name}");
        for (a, b) in base.ops().iter().zip(doubled.ops()) {
            let factor = if a.scales_with_batch() { 2.0 } else { 1.0 };
            assert!(
                (b.flops - factor * a.flops).abs() <= 1e-9 * b.flops.max(1.0),
                "{name}: {}",
                a.name
            );
            assert_eq!(b.resident_bytes, a.resident_bytes, "{name}: {}", a.name);
        }
        assert!(
            base.ops()
                .iter()
                .any(|o| o.scales_with_batch() && o.flops > 0.0)
        );
    }
}

/// GPT-2 layout: per layer QKV 3H²+3H, projection H²+H, MLP 8H²+5H, two LNs 4H; embeddings
/// (V+S)·H; final LN 2H; tied head adds nothing.
fn gpt_closed_form(c: &GptConfig) -> u64 {
    let (l, h, s, v) = (
        c.layers as u64,
        c.hidden as u64,
        c.seq as u64,
        c.vocab as u64,
    );
    12 * l * h * h + 13 * l * h + (v + s) * h + 2 * h
}

#[test]
fn gpt_honours_its_config() {
    assert_eq!(gpt_closed_form(&GptConfig::default()), 124_439_808);
    let configs = [
        GptConfig::default(),
        GptConfig {
            layers: 2,
            hidden: 128,
            heads: 4,
            seq: 64,
            vocab: 1000,
        },
        GptConfig {
            layers: 5,
            hidden: 96,
            heads: 3,
            seq: 33,
            vocab: 517,
        },
    ];
    for c in configs {
        let opts = ZooOptions {
            gpt: c.clone(),
            ..ZooOptions::default()
        };
        let g = build_with("gpt", &opts);
        assert_eq!(params(&g), gpt_closed_form(&c), "{c:?}");
        // One ApplyAdam per tensor: 12 per layer (2 LNs x 2, 4 dense x 2), 2 embeddings, final LN.
        assert_eq!(count_type(&g, "ApplyAdam"), 12 * c.layers + 4, "{c:?}");
    }
}

#[test]
fn gpt_rejects_heads_that_do_not_divide_hidden() {
    let opts = ZooOptions {
        gpt: GptConfig {
            heads: 5,
            ..GptConfig::default()
        },
        ..ZooOptions::default()
    };
    let err = zoo::build("gpt", &opts).unwrap_err();
    assert_eq!(err.field, "gpt.heads");
}

#[test]
fn unknown_model_is_an_error_naming_it() {
    let err = zoo::build("resnet-7", &ZooOptions::default()).unwrap_err();
    assert_eq!(err.field, "model");
    assert!(err.message.contains("\"resnet-7\""), "{err}");
    assert!(
        err.message.contains("resnet101"),
        "lists known models: {err}"
    );
    assert!(zoo::card("resnet-7").is_none());
    assert!(zoo::build("resnet-7-inference", &ZooOptions::default()).is_err());
}

#[test]
fn every_name_has_a_card() {
    for name in zoo::NAMES {
        let card = zoo::card(name).unwrap();
        assert_eq!(card.name, *name);
        assert!(card.default_batch > 0 && !card.variant.is_empty());
        assert_eq!(zoo::card(&format!("{name}-inference")).unwrap().name, *name);
    }
    assert_eq!(zoo::card("inception-v3").unwrap().default_batch, 96);
    assert_eq!(zoo::card("bert-large").unwrap().default_batch, 16);
    assert_eq!(zoo::card("transformer").unwrap().default_batch, 480);
}

#[test]
fn tied_embedding_gradient_is_summed_as_partial_sums() {
    // BERT's word embeddings get the lookup's segment sum and the tied MLM decoder's weight
    // gradient; both are partial sums over batch slices, and so is their AddN.
    let g = build("bert-small");
    let link = g
        .gradients()
        .iter()
        .find(|l| g.op(l.optimizer).name == "bert/embeddings/word_embeddings/ApplyAdam")
        .unwrap();
    let addn = g.op(link.grad);
    assert_eq!(addn.op_type, "AddN");
    assert_eq!(addn.split, Splittability::Sum);
    assert!(!addn.scales_with_batch());
    let mut parts: Vec<&str> = g
        .predecessors(link.grad)
        .map(|p| g.op(p).op_type.as_str())
        .collect();
    parts.sort_unstable();
    assert_eq!(parts, ["MatMul", "UnsortedSegmentSum"]);
}

#[test]
fn named_gpt_sizes_have_their_published_parameter_counts() {
    // HF transformers GPT2LMHeadModel, the tied head counted once.
    for (name, published) in [
        ("gpt2-medium", 354_823_168u64),
        ("gpt2-large", 774_030_080),
        ("gpt2-xl", 1_557_611_200),
    ] {
        assert_eq!(build(name).summary().params, published, "{name}");
    }
    assert_eq!(zoo::gpt_params(&zoo::GptConfig::default()), 124_439_808);
    for (name, config) in zoo::LLAMA_SIZES {
        assert_eq!(
            build(name).summary().params,
            zoo::llama_params(config),
            "{name}"
        );
    }
    for (name, config) in zoo::GPT_SIZES {
        assert_eq!(
            build(name).summary().params,
            zoo::gpt_params(config),
            "{name}"
        );
    }
    // Brown et al. 2020, Table 2.1, in billions (rounded there; 13B at width 5,120 here).
    for (name, billions) in [
        ("gpt3-1.3b", 1.3),
        ("gpt3-2.7b", 2.7),
        ("gpt3-6.7b", 6.7),
        ("gpt3-13b", 13.0),
    ] {
        let params = build(name).summary().params as f64 / 1e9;
        assert!((params / billions - 1.0).abs() < 0.03, "{name}: {params} B");
    }
}

#[test]
fn named_gpt_sizes_load_by_name_and_unknown_names_list_them() {
    let g = topoplace::resolve::load_model("gpt3-6.7b", Some(2)).unwrap();
    assert_eq!((g.name.as_str(), g.batch_size), ("gpt3-6.7b", 2));
    let inference = build("gpt2-xl-inference");
    assert!(inference.ops().iter().all(|o| o.phase != Phase::Optimizer));
    let err = zoo::build("gpt3-175b", &ZooOptions::default()).unwrap_err();
    assert!(err.to_string().contains("gpt3-13b"), "{err}");
}

#[test]
fn bert_takes_a_sequence_length_within_its_positions() {
    let at = |seq| {
        zoo::build(
            "bert-small",
            &ZooOptions {
                seq: Some(seq),
                ..ZooOptions::default()
            },
        )
    };
    let (s128, s512) = (build("bert-small"), at(512).unwrap());
    assert_eq!(s128.summary().params, s512.summary().params);
    let flops = |g: &Graph| g.summary().flops;
    // Linear layers scale with the tokens, attention with their square: more than 4x.
    assert!(flops(&s512) > 4.0 * flops(&s128));
    let err = at(513).unwrap_err();
    assert_eq!(err.field, "seq");
    assert!(at(0).is_err());
}

#[test]
fn bert_squad_has_a_span_head_in_place_of_the_pre_training_heads() {
    for (name, base, h, v) in [
        ("bert-small-squad", "bert-small", 512.0, 30522.0),
        ("bert-large-squad", "bert-large", 1024.0, 30522.0),
    ] {
        let g = build(name);
        let card = zoo::card(name).unwrap();
        assert_eq!(g.summary().params, card.reference_params, "{name}");
        assert_eq!(params(&g), card.reference_params, "{name}");
        // No pooler, masked-LM or next-sentence ops: the span head and its one loss.
        assert!(
            g.ops()
                .iter()
                .all(|o| !o.name.starts_with("cls/") && !o.name.starts_with("bert/pooler")),
            "{name}"
        );
        assert_eq!(count_type(&g, "SoftmaxCrossEntropyWithLogits"), 1, "{name}");
        // Forward MACs: the pre-training graph's less the masked-LM head's (H² + VH per token),
        // the pooler's H² and NSP's 2H, plus the span head's 2H per token.
        let s = 128.0;
        let want =
            fwd_macs_per_sample(&build(base)) - (h * h + v * h) * s - h * h - 2.0 * h + 2.0 * h * s;
        let got = fwd_macs_per_sample(&g);
        assert!(rel_err(got, want) < 0.01, "{name}: {got:.4e} vs {want:.4e}");
        // It takes a sequence length as its base does, and a forward-only variant.
        let at_384 = build_with(
            name,
            &ZooOptions {
                seq: Some(384),
                ..ZooOptions::default()
            },
        );
        assert_eq!(at_384.summary().params, card.reference_params, "{name}");
        let inference = build(&format!("{name}-inference"));
        assert!(inference.ops().iter().all(|o| o.phase != Phase::Optimizer));
        assert!(topoplace::resolve::is_zoo_model(name));
    }
}

#[test]
fn the_masked_lm_head_runs_on_the_masked_positions_asked_for() {
    let at = |model: &str, k: Option<usize>| {
        zoo::build(
            model,
            &ZooOptions {
                masked_positions: k,
                ..ZooOptions::default()
            },
        )
    };
    let all = at("bert-large", None).unwrap();
    let twenty = at("bert-large", Some(20)).unwrap();
    assert_eq!(params(&all), params(&twenty));
    // The transform and the tied decoder run on 20 positions instead of 128: (H² + VH) each.
    let (h, v) = (1024.0, 30522.0);
    let want = (h * h + v * h) * (128.0 - 20.0);
    let got = fwd_macs_per_sample(&all) - fwd_macs_per_sample(&twenty);
    assert!(rel_err(got, want) < 0.02, "{got:.4e} vs {want:.4e}");
    // One gather forward, one scatter of its gradient back into the encoder's output.
    assert_eq!(count_type(&twenty, "IndexSelect"), 1);
    assert_eq!(count_type(&twenty, "IndexSelectBackward"), 1);
    // Every position is the default graph exactly.
    assert!(at("bert-large", Some(128)).unwrap().summary().flops > twenty.summary().flops);
    assert!(all.ops() == build("bert-large").ops());
    for (model, k) in [
        ("bert-large", Some(0)),
        ("bert-large", Some(129)),
        ("bert-large-squad", Some(20)),
        ("gpt", Some(20)),
        ("resnet50", Some(20)),
    ] {
        let err = at(model, k).unwrap_err();
        assert_eq!(err.field, "masked_positions", "{model} {k:?}");
    }
}

#[test]
fn gpts_take_a_sequence_length_and_their_position_table_follows() {
    let at = |seq| {
        zoo::build(
            "gpt2-medium",
            &ZooOptions {
                seq: Some(seq),
                ..ZooOptions::default()
            },
        )
    };
    let (full, short) = (build("gpt2-medium"), at(256).unwrap());
    // 768 fewer learned positions of width 1,024.
    assert_eq!(
        full.summary().params - short.summary().params,
        (1024 - 256) * 1024
    );
    assert_eq!(at(0).unwrap_err().field, "seq");
    // Every language model stops at zoo::MAX_SEQ; a Llama took 2³² tokens and wrapped.
    for model in ["gpt2-medium", "llama-8b"] {
        let long = ZooOptions {
            seq: Some(zoo::MAX_SEQ + 1),
            ..ZooOptions::default()
        };
        assert_eq!(
            zoo::build(model, &long).unwrap_err().field,
            "seq",
            "{model}"
        );
    }
    let cnn = zoo::build(
        "resnet50",
        &ZooOptions {
            seq: Some(128),
            ..ZooOptions::default()
        },
    );
    assert_eq!(cnn.unwrap_err().field, "seq");
}

#[test]
fn the_optimizer_decides_the_state_each_parameter_keeps() {
    let resident_per_param = |optimizer| {
        let g = zoo::build(
            "bert-small",
            &ZooOptions {
                optimizer,
                ..ZooOptions::default()
            },
        )
        .unwrap();
        let s = g.summary();
        s.resident_bytes / s.params as f64
    };
    // The FP32 parameter, plus Adam's two moments, SGD's momentum, or nothing.
    assert_eq!(resident_per_param(Optimizer::Adam), 12.0);
    assert_eq!(resident_per_param(Optimizer::SgdMomentum), 8.0);
    assert_eq!(resident_per_param(Optimizer::Sgd), 4.0);
    // Two 1-byte moments (small tensors keep FP32 ones); a factored second moment.
    let adam8 = resident_per_param(Optimizer::Adam8bit);
    assert!((6.0..6.1).contains(&adam8), "{adam8}");
    let adafactor = resident_per_param(Optimizer::Adafactor);
    assert!((4.0..4.1).contains(&adafactor), "{adafactor}");
    assert_eq!(resident_per_param(Optimizer::AdamFused), 12.0);
    assert_eq!("adamw".parse::<Optimizer>(), Ok(Optimizer::Adam));
    assert_eq!("adamw-fused".parse::<Optimizer>(), Ok(Optimizer::AdamFused));
    let err = "lion".parse::<Optimizer>().unwrap_err();
    assert!(
        err.contains("adam, adam-fused, sgd-momentum, sgd, adafactor, adam8bit"),
        "{err}"
    );
}

/// Adam's update traffic per parameter value: one fused pass (28 bytes: parameter, gradient and
/// both moments read, three written) for TensorFlow's `ApplyAdam` and every fused Adam, and the
/// seven passes of `torch.optim.Adam`'s default `foreach` update under PyTorch (72 bytes).
#[test]
fn adam_moves_the_bytes_of_its_implementation() {
    let update_bytes_per_param = |framework, optimizer| {
        let g = zoo::build(
            "bert-small",
            &ZooOptions {
                framework,
                optimizer,
                ..ZooOptions::default()
            },
        )
        .unwrap();
        let updates = g.ops().iter().filter(|op| op.op_type == "ApplyAdam");
        let bytes: f64 = updates.map(|op| op.bytes_accessed).sum();
        bytes / g.summary().params as f64
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(
        update_bytes_per_param(Framework::Tf1, Optimizer::Adam),
        28.0
    ));
    for framework in [Framework::Pytorch, Framework::PytorchEager] {
        assert!(close(
            update_bytes_per_param(framework, Optimizer::Adam),
            72.0
        ));
        assert!(close(
            update_bytes_per_param(framework, Optimizer::AdamFused),
            28.0
        ));
    }
    assert!(close(
        update_bytes_per_param(Framework::Tf1, Optimizer::AdamFused),
        28.0
    ));
}

#[test]
fn llama_sizes_have_the_published_parameter_counts() {
    // Hugging Face's counts of each checkpoint (`num_parameters()` of its config).
    let published = [
        ("llama-1b", 1_235_814_400u64),
        ("llama-3b", 3_212_749_824),
        ("llama-7b", 6_738_415_616),
        ("llama-8b", 8_030_261_248),
        ("llama-13b", 13_015_864_320),
        ("llama-70b", 68_976_648_192),
        ("llama3-70b", 70_553_706_496),
    ];
    assert_eq!(published.len(), zoo::LLAMA_SIZES.len());
    for (name, params) in published {
        let g = zoo::build(
            name,
            &ZooOptions {
                batch_size: Some(1),
                seq: Some(128),
                ..ZooOptions::default()
            },
        )
        .unwrap();
        assert_eq!(g.summary().params, params, "{name} graph");
    }
}

#[test]
fn llama_attention_shares_its_key_value_heads() {
    let opts = |framework| ZooOptions {
        batch_size: Some(1),
        seq: Some(256),
        framework,
        ..ZooOptions::default()
    };
    let g = zoo::build("llama-8b", &opts(Framework::Pytorch)).unwrap();
    let projection = |name: &str| {
        g.ops()
            .iter()
            .find(|o| o.name == format!("model/layers_0/self_attn/{name}/kernel"))
            .unwrap()
            .params
    };
    // 8 key/value heads of 128 against 32 query heads: a quarter of the width.
    assert_eq!(projection("q_proj"), 4096 * 4096);
    assert_eq!(projection("k_proj"), 4096 * 1024);
    assert_eq!(projection("v_proj"), 4096 * 1024);
    let sdpa = g
        .ops()
        .iter()
        .filter(|o| o.op_type == "ScaledDotProductAttention")
        .count();
    assert_eq!(sdpa, 32);
    // Unfused, every layer keeps its causal softmax.
    let eager = zoo::build("llama-8b", &opts(Framework::PytorchEager)).unwrap();
    let softmax = eager
        .ops()
        .iter()
        .filter(|o| o.op_type == "Softmax")
        .count();
    assert_eq!(softmax, 32);
    assert!(topoplace::resolve::load_model("llama-70b", Some(1)).is_ok());
}

#[test]
fn fused_attention_carries_its_shape_forward_and_backward() {
    let opts = ZooOptions {
        batch_size: Some(2),
        seq: Some(512),
        framework: Framework::Pytorch,
        ..ZooOptions::default()
    };
    // Llama 3 8B: 32 query heads of 128 over 8 key/value heads, causal.
    let llama = AttentionShape {
        seq_q: 512,
        seq_k: 512,
        head_dim: 128,
        causal: true,
    };
    // BERT-large: 16 heads of 64 under a padding mask, not causal.
    let bert = AttentionShape {
        head_dim: 64,
        causal: false,
        ..llama
    };
    for (model, shape, layers) in [("llama-8b", llama, 32), ("bert-large", bert, 24)] {
        let g = zoo::build(model, &opts).unwrap();
        let attention: Vec<_> = g
            .ops()
            .iter()
            .filter(|o| o.op_type.starts_with("ScaledDotProductAttention"))
            .collect();
        let forward = attention
            .iter()
            .filter(|o| o.phase == Phase::Forward)
            .count();
        assert_eq!(forward, layers, "{model}");
        // One backward op per distinct input (query, key, value) in every layer.
        assert_eq!(attention.len(), 4 * layers, "{model}");
        for op in &attention {
            assert_eq!(op.attention, Some(shape), "{model}: {}", op.name);
        }
        // No other op has one.
        let shaped = g.ops().iter().filter(|o| o.attention.is_some()).count();
        assert_eq!(shaped, attention.len(), "{model}");
    }
    // TensorFlow's graphs decompose attention: nothing fused, nothing shaped.
    let tf1 = zoo::build("bert-large", &ZooOptions::default()).unwrap();
    assert!(tf1.ops().iter().all(|o| o.attention.is_none()));
}

#[test]
fn a_model_spec_builds_the_model_it_describes() {
    let opts = ZooOptions {
        batch_size: Some(1),
        seq: Some(128),
        ..ZooOptions::default()
    };
    let params = |g: &Graph| g.summary().params;
    // A base with nothing changed is the named size.
    let spec = zoo::parse_spec("base = \"llama-13b\"", "s.toml", "s").unwrap();
    assert_eq!(
        spec.model,
        zoo::LanguageModel::Llama(named_llama("llama-13b"))
    );
    // Every size given: the Llama builder's closed form, 2·V·h + L·(2h² + 2h·kv + 3h·f + 2h) + h.
    let text = "family = \"llama\"\nlayers = 3\nhidden = 256\nheads = 8\nkv_heads = 2\nffn = 640\n\
                vocab = 1000\nseq = 64";
    let path = std::env::temp_dir().join(format!("topoplace-spec-{}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let g = zoo::build(&path.display().to_string(), &opts).unwrap();
    let _ = std::fs::remove_file(&path);
    let (v, h, kv, f, l) = (1000u64, 256u64, 64u64, 640u64, 3u64);
    let closed = 2 * v * h + l * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) + h;
    assert_eq!(params(&g), closed);
    assert!(g.name.starts_with("topoplace-spec-"), "{}", g.name);
    // A GPT size with fewer layers loses exactly 12h² + 13h per layer.
    let gpt = |text: &str| {
        let spec = zoo::parse_spec(text, "g.toml", "g").unwrap();
        let zoo::LanguageModel::Gpt(c) = spec.model else {
            panic!("a GPT base gives a GPT")
        };
        zoo::gpt_params(&c)
    };
    let h = 2048u64;
    assert_eq!(
        gpt("base = \"gpt3-1.3b\"") - gpt("base = \"gpt3-1.3b\"\nlayers = 20"),
        4 * (12 * h * h + 13 * h)
    );
}

fn named_llama(name: &str) -> zoo::LlamaConfig {
    zoo::LLAMA_SIZES
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
        .clone()
}
