//! Every file loader against hostile bytes: random bytes, and valid graph, cluster, strategy,
//! hybrid-plan and model-spec files mutated by byte edits, inserted tokens and extreme numbers.
//! Each must give an error or a result that the next step uses without a panic: a graph that is
//! validated, a cluster with devices, a strategy checked against its graph, a plan the estimator
//! prices, a spec whose model builds.

mod common;

use proptest::prelude::*;

use topoplace::cluster::Cluster;
use topoplace::cluster::parse_cluster;
use topoplace::cost::CostModel;
use topoplace::evaluate::evaluate_strategy;
use topoplace::graph::{Graph, parse_graph, save_graph};
use topoplace::hybrid::{HybridModel, HybridPlan, estimate};
use topoplace::precision::Precision;
use topoplace::problem::Problem;
use topoplace::sim::Order;
use topoplace::strategy::Reference;
use topoplace::strategy::parse_strategy;
use topoplace::zoo::{GptConfig, LanguageModel, ZooOptions, build, build_llama, parse_spec};

/// Values that break assumptions when they land where a number, a string or a list was.
const TOKENS: [&str; 16] = [
    "0",
    "-1",
    "1e308",
    "-1e308",
    "1e-320",
    "18446744073709551615",
    "4294967296",
    "null",
    "\"\"",
    "[]",
    "{}",
    "[[]]",
    "NaN",
    "\"\u{0}\"",
    ",",
    "\"all-reduce\"",
];

/// The leading entries of [`TOKENS`] that are numbers.
const NUMBERS: u32 = 7;

/// One edit of a text: `kind` picks what, `at` where (scaled to the text), `pick` which token.
type Edit = (u8, u32, u32);

/// `text` with `edits` applied in turn: overwrite a byte, delete a run, insert a token, or
/// replace the number nearest `at` by a token. Works on bytes, so the result may not be UTF-8.
fn mutate(text: &str, edits: &[Edit]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for &(kind, at, pick) in edits {
        if bytes.is_empty() {
            break;
        }
        let at = at as usize % bytes.len();
        let token = TOKENS[pick as usize % TOKENS.len()].as_bytes();
        match kind % 4 {
            0 => bytes[at] = (pick % 95) as u8 + b' ',
            1 => {
                let end = (at + 1 + pick as usize % 16).min(bytes.len());
                bytes.drain(at..end);
            }
            2 => {
                bytes.splice(at..at, token.iter().copied());
            }
            _ => replace_number(&mut bytes, at, token),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Replace the first run of digits (with its sign, point and exponent) at or after `at`.
fn replace_number(bytes: &mut Vec<u8>, at: usize, token: &[u8]) {
    let Some(start) = (at..bytes.len()).find(|&i| bytes[i].is_ascii_digit()) else {
        return;
    };
    let start = if start > 0 && bytes[start - 1] == b'-' {
        start - 1
    } else {
        start
    };
    let numeric = |b: u8| b.is_ascii_digit() || b"+-.eE".contains(&b);
    let end = (start + 1..bytes.len())
        .find(|&i| !numeric(bytes[i]))
        .unwrap_or(bytes.len());
    bytes.splice(start..end, token.iter().copied());
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec((any::<u8>(), any::<u32>(), any::<u32>()), 1..6)
}

/// Edits that only swap numbers for other tokens: most keep the file well-formed, so they reach
/// the checks behind the parser.
fn number_edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec((Just(3u8), any::<u32>(), 0..NUMBERS), 1..4)
}

fn random_text() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<u8>(), 0..400)
        .prop_map(|b| String::from_utf8_lossy(&b).into_owned())
}

fn mlp() -> Graph {
    common::zoo_model("mlp", 32)
}

/// The MLP's graph file, as `zoo export` writes it (written once: the cases run on threads).
fn graph_text() -> String {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let dir = common::scratch("loaders-graph");
        let path = dir.join("mlp.json");
        save_graph(&mlp(), &path).unwrap();
        std::fs::read_to_string(&path).unwrap()
    })
    .clone()
}

fn cluster_text() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/configs/tag-testbed.toml"
    ))
    .unwrap()
}

/// A strategy over the MLP's 39 ops on two GPUs: the first half replicated, the rest on one GPU,
/// AllReduce in buckets.
fn strategy_text() -> String {
    let ids = |r: std::ops::Range<u32>| r.map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    format!(
        r#"{{"allreduce": {{"buckets": 4194304}}, "groups": [
  {{"ops": [{}], "devices": [0, 1], "option": "all-reduce"}},
  {{"ops": [{}], "devices": [1], "option": "model-parallel"}}]}}"#,
        ids(0..20),
        ids(20..39)
    )
}

/// A two-stage plan for Llama 3.2 1B (16 layers) on the 16-GPU A100/V100 cluster.
const PLAN: &str = r#"{"global_batch": 16, "micro_batches": 4, "schedule": "1f1b",
  "stages": [
    {"layers": [0, 8], "replicas": [[0, 1], [2, 3]], "zero": "1", "recompute": "selective"},
    {"layers": [8, 16], "replicas": [[8, 9], [10, 11]], "shares": [0.75, 0.25],
     "sequence_parallel": true, "zero": "3", "recompute": "full"}]}"#;

/// Simulate `strategy` of `graph` on the two-GPU fat tree: any outcome but a panic will do.
fn simulate(graph: &Graph, cluster: &Cluster, strategy: &topoplace::strategy::Strategy) {
    let cost = CostModel::default();
    let p = Problem {
        graph,
        cluster,
        cost: &cost,
    };
    if let Ok(e) = evaluate_strategy(&p, strategy, Order::Fifo) {
        assert!(e.result.makespan >= 0.0, "{}", e.result.makespan);
    }
}

fn two_gpus() -> Cluster {
    common::shipped_cluster("quickp-fat-tree-2")
}

fn check_graph(text: &str) {
    if let Ok(g) = parse_graph(text, "g.json") {
        assert_eq!(g.topological_order().len(), g.len());
        let c = two_gpus();
        simulate(&g, &c, &Reference::Dp.strategy(&g, &c));
    }
}

fn check_cluster(text: &str) {
    if let Ok(c) = parse_cluster(text, "c.toml") {
        assert!(!c.devices.is_empty());
    }
}

fn check_strategy(text: &str, g: &Graph) {
    if let Ok(s) = parse_strategy(text, "s.json", g, 2) {
        simulate(g, &two_gpus(), &s.strategy);
    }
}

/// Load a plan as `simulate --plan` does and, once it passes every check, price it.
fn check_plan(text: &str) {
    let Ok(plan) = serde_json::from_str::<HybridPlan>(text) else {
        return;
    };
    if plan.check_micro_batches("p.json").is_err() {
        return;
    }
    let cluster = common::shipped_cluster("hetero-a100-v100");
    let micro = plan.global_batch / plan.micro_batches;
    let Ok(model) =
        HybridModel::from_zoo("llama-1b", micro, &ZooOptions::default(), Precision::Bf16)
    else {
        return;
    };
    if model.check(&plan, cluster.devices.len(), "p.json").is_ok() {
        let report = estimate(&model, &cluster, &CostModel::default(), &plan);
        assert!(report.iteration_us > 0.0, "{report:?}");
    }
}

/// Model-spec files (docs/zoo.md): a named size changed, and every size of a family given.
const SPECS: [&str; 2] = [
    "name = \"m\"\nbase = \"llama-8b\"\nlayers = 2\nhidden = 256\nheads = 8\nkv_heads = 2\n\
     ffn = 512\nvocab = 1000\nseq = 64\n",
    "family = \"gpt\"\nlayers = 2\nhidden = 128\nheads = 4\nvocab = 500\nseq = 32\n",
];

/// Read a spec as `--model m.toml` does; one that passes its checks has sizes that form a model,
/// and a small one builds.
fn check_spec(text: &str) {
    let Ok(spec) = parse_spec(text, "m.toml", "m") else {
        return;
    };
    let (heads, kv_heads, seq) = spec.model.shape();
    assert!(
        heads >= 1 && kv_heads >= 1 && seq >= 1 && heads % kv_heads == 0,
        "{spec:?}"
    );
    let opts = ZooOptions {
        batch_size: Some(1),
        seq: Some(seq.min(64)),
        ..ZooOptions::default()
    };
    let small = |layers: usize, hidden: usize, vocab: usize| {
        layers <= 4 && hidden <= 1024 && vocab <= 100_000
    };
    match &spec.model {
        LanguageModel::Llama(c) if small(c.layers, c.hidden, c.vocab) && c.ffn <= 4096 => {
            let c = topoplace::zoo::LlamaConfig {
                seq: seq.min(64),
                ..c.clone()
            };
            build_llama(&spec.name, &c, &opts).expect("a checked spec builds");
        }
        LanguageModel::Gpt(c) if small(c.layers, c.hidden, c.vocab) => {
            let opts = ZooOptions {
                gpt: GptConfig {
                    seq: seq.min(64),
                    ..c.clone()
                },
                ..opts
            };
            build("gpt", &opts).expect("a checked spec builds");
        }
        _ => {}
    }
}

#[test]
fn the_unmutated_files_load() {
    for text in SPECS {
        parse_spec(text, "m.toml", "m").unwrap();
    }
    let g = parse_graph(&graph_text(), "g.json").unwrap();
    parse_cluster(&cluster_text(), "c.toml").unwrap();
    parse_strategy(&strategy_text(), "s.json", &g, 2).unwrap();
    let plan: HybridPlan = serde_json::from_str(PLAN).unwrap();
    let cluster = common::shipped_cluster("hetero-a100-v100");
    let model =
        HybridModel::from_zoo("llama-1b", 4, &ZooOptions::default(), Precision::Bf16).unwrap();
    model.check(&plan, cluster.devices.len(), "p.json").unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_are_errors_not_panics(text in random_text()) {
        check_graph(&text);
        check_cluster(&text);
        check_strategy(&text, &mlp());
        check_plan(&text);
        check_spec(&text);
    }

    #[test]
    fn mutated_graph_files_load_or_fail_cleanly(e in edits(), n in number_edits()) {
        check_graph(&mutate(&graph_text(), &e));
        check_graph(&mutate(&graph_text(), &n));
    }

    #[test]
    fn mutated_cluster_files_load_or_fail_cleanly(e in edits(), n in number_edits()) {
        check_cluster(&mutate(&cluster_text(), &e));
        check_cluster(&mutate(&cluster_text(), &n));
    }

    #[test]
    fn mutated_strategy_files_load_or_fail_cleanly(e in edits(), n in number_edits()) {
        let g = mlp();
        check_strategy(&mutate(&strategy_text(), &e), &g);
        check_strategy(&mutate(&strategy_text(), &n), &g);
    }

    #[test]
    fn mutated_plans_load_and_price_or_fail_cleanly(e in edits(), n in number_edits()) {
        check_plan(&mutate(PLAN, &e));
        check_plan(&mutate(PLAN, &n));
    }

    #[test]
    fn mutated_model_specs_load_or_fail_cleanly(e in edits(), n in number_edits()) {
        for text in SPECS {
            check_spec(&mutate(text, &e));
            check_spec(&mutate(text, &n));
        }
    }
}

// ---------------------------------------------------------------- strategy fields (sweep 2)

/// The MLP's 39 ops in one group: all-reduce on both GPUs, or model-parallel on GPU 0 alone, with
/// `extra` fields added to the file.
fn one_group(option: &str, extra: &str) -> String {
    let devices = if option == "all-reduce" {
        "[0, 1]"
    } else {
        "[0]"
    };
    let ids: Vec<String> = (0..39).map(|i| i.to_string()).collect();
    format!(
        r#"{{"groups": [{{"ops": [{}], "devices": {devices}, "option": "{option}"}}]{extra}}}"#,
        ids.join(", ")
    )
}

fn strategy_error(text: &str, g: &Graph) -> topoplace::InputError {
    parse_strategy(text, "s.json", g, 2).unwrap_err()
}

/// `sfb_duplicated` holds what SFB's ILP can duplicate: a replicated group's gradient producers
/// and the ops above them in the group. Optimizer updates, inputs, ops of a group with no
/// gradient synchronisation and repeated entries were applied as they were, without a word.
#[test]
fn sfb_duplicated_holds_only_what_sfb_can_duplicate() {
    let g = mlp();
    let id = |i: usize| g.op(i).id;
    let link = g.gradients()[0];
    let (grad, optimizer) = (id(link.grad), id(link.optimizer));
    let input = id((0..g.len())
        .find(|&i| g.op(i).phase == topoplace::graph::Phase::Input)
        .unwrap());
    let listing = |ids: &[u64]| format!(r#", "sfb_duplicated": {ids:?}"#);
    let ok = parse_strategy(&one_group("all-reduce", &listing(&[grad])), "s.json", &g, 2).unwrap();
    assert_eq!(ok.strategy.sfb_duplicated, vec![link.grad]);
    let cases = [
        (
            "all-reduce",
            vec![optimizer],
            "sfb_duplicated[0]",
            "optimizer op",
        ),
        (
            "all-reduce",
            vec![grad, input],
            "sfb_duplicated[1]",
            "input op",
        ),
        (
            "all-reduce",
            vec![grad, grad],
            "sfb_duplicated[1]",
            "listed twice",
        ),
        (
            "model-parallel",
            vec![grad],
            "sfb_duplicated[0]",
            "not replicated",
        ),
    ];
    for (option, ids, field, words) in cases {
        let e = strategy_error(&one_group(option, &listing(&ids)), &g);
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.contains(words), "{e}");
    }
    // `"sfb": true` asks for the ops to be decided on loading: with a list too, which one?
    let both = format!(r#"{}, "sfb": true"#, listing(&[grad]));
    let e = strategy_error(&one_group("all-reduce", &both), &g);
    assert_eq!(e.field, "sfb", "{e}");
    let asked = parse_strategy(
        &one_group("all-reduce", r#", "sfb": true"#),
        "s.json",
        &g,
        2,
    );
    assert!(asked.unwrap().sfb_requested);
}

/// Pipeline stages are listed in chain order: a backward half before its forward half, or ops
/// dealt alternately to two stages, sent activations back along the chain without a word.
#[test]
fn pipeline_stages_out_of_chain_order_are_named() {
    let g = mlp();
    let two_groups = |first: &dyn Fn(usize) -> bool, stages: &str| {
        let ids = |want: bool| {
            let ids: Vec<String> = (0..g.len())
                .filter(|&i| first(i) == want)
                .map(|i| g.op(i).id.to_string())
                .collect();
            ids.join(", ")
        };
        format!(
            r#"{{"groups": [{{"ops": [{}], "devices": [0], "option": "model-parallel"}},
              {{"ops": [{}], "devices": [1], "option": "model-parallel"}}],
              "pipeline": {{"stages": {stages}, "micro_batches": 4, "schedule": "gpipe"}}}}"#,
            ids(true),
            ids(false)
        )
    };
    use topoplace::graph::Phase;
    let late = |i: usize| matches!(g.op(i).phase, Phase::Backward | Phase::Optimizer);
    // Group 0 holds the backward pass and the updates, group 1 the forward pass.
    assert!(parse_strategy(&two_groups(&late, "[[1], [0]]"), "s.json", &g, 2).is_ok());
    let e = strategy_error(&two_groups(&late, "[[0], [1]]"), &g);
    assert_eq!(e.field, "pipeline.stages[0][0]", "{e}");
    assert!(e.message.contains("chain order"), "{e}");
    let even = |i: usize| i.is_multiple_of(2);
    let e = strategy_error(&two_groups(&even, "[[0], [1]]"), &g);
    assert!(e.field.starts_with("pipeline.stages["), "{e}");
    assert!(e.message.contains("of a later stage (1)"), "{e}");
}

/// A strategy file without `model` said it was for model "", not the one given.
#[test]
fn a_strategy_without_its_model_says_the_field_is_missing() {
    let g = mlp();
    let cluster = two_gpus();
    let dir = common::scratch("strategy-no-model");
    let path = dir.join("s.json");
    let text = one_group("all-reduce", &format!(r#", "cluster": "{}""#, cluster.name));
    std::fs::write(&path, text).unwrap();
    let name = path.display().to_string();
    let err = topoplace::api::strategy_named(&name, &g, &cluster, &CostModel::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains(": model: missing"), "{err}");
    assert!(!err.contains("\"\""), "{err}");
}
