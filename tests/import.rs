//! Importers: QuickP acceptance on the real files, CSV round trips and errors, torch exports.

mod common;
use common::{TORCH_ZOO_TWINS, scratch};

use std::path::{Path, PathBuf};

use topoplace::graph::{Graph, Phase, Splittability};
use topoplace::import::{self, Format, QUICKP_DEVICE};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn profiled_total(g: &Graph, device: &str) -> f64 {
    g.ops()
        .iter()
        .filter_map(|o| o.profiled_us.get(device))
        .sum()
}

/// The facts `datasets/quickp/README.md` lists for each file.
struct QuickpFacts {
    file: &'static str,
    ops: usize,
    edges: usize,
    compute_us: f64,
    mem_bytes: f64,
    link_bits: f64,
}

const QUICKP: [QuickpFacts; 2] = [
    QuickpFacts {
        file: "datasets/quickp/comp_graph_vgg.json.gz",
        ops: 3704,
        edges: 4426,
        compute_us: 122_337.0,
        mem_bytes: 1_445_306_112.0,
        link_bits: 155_400_808_288.0,
    },
    QuickpFacts {
        file: "datasets/quickp/comp_graph_alexnet.json.gz",
        ops: 1695,
        edges: 2006,
        compute_us: 102_814.0,
        mem_bytes: 1_447_694_336.0,
        link_bits: 134_931_685_312.0,
    },
];

#[test]
fn quickp_files_import_with_exact_counts_and_sums() {
    for f in &QUICKP {
        let path = repo(f.file);
        assert_eq!(import::detect(&path).unwrap(), Format::Quickp, "{}", f.file);
        let g = import::import(&path, None).unwrap();
        assert_eq!(g.len(), f.ops, "{}", f.file);
        assert_eq!(g.edges().len(), f.edges, "{}", f.file);
        assert_eq!(
            profiled_total(&g, QUICKP_DEVICE),
            f.compute_us,
            "{}",
            f.file
        );
        let out: f64 = g.ops().iter().map(|o| o.output_bytes).sum();
        assert_eq!(out, f.mem_bytes, "{}", f.file);
        let edge_bytes: f64 = g.edges().iter().map(|e| e.bytes).sum();
        assert_eq!(edge_bytes, f.link_bits / 8.0, "{}", f.file);
        assert_eq!(g.batch_size, 128, "{}", f.file);
        // No mock device names leak into the profile keys.
        assert!(
            g.ops()
                .iter()
                .all(|o| o.profiled_us.keys().all(|k| k == QUICKP_DEVICE))
        );
    }
}

#[test]
fn quickp_phases_links_and_splits_follow_the_tf_graph() {
    let g = import::import(&repo(QUICKP[1].file), Some(Format::Quickp)).unwrap();
    let by_name = |n: &str| {
        g.ops()
            .iter()
            .position(|o| o.name == n)
            .unwrap_or_else(|| panic!("{n}"))
    };
    let phase = |n: &str| g.op(by_name(n)).phase;
    assert_eq!(phase("input"), Phase::Input);
    assert_eq!(
        phase("sequential_1/conv2d_1/convolution/ReadVariableOp/resource"),
        Phase::Parameter
    );
    assert_eq!(phase("sequential_1/conv2d_1/convolution"), Phase::Forward);
    let filter = by_name("gradient_tape/sequential_1/conv2d_1/convolution/Conv2DBackpropFilter");
    assert_eq!(g.op(filter).phase, Phase::Backward);
    assert_eq!(g.op(filter).split, Splittability::Sum);
    assert_eq!(
        g.op(by_name("sequential_1/conv2d_1/convolution")).split,
        Splittability::Concat
    );
    // adam/Identity takes the first conv's kernel gradient straight from Conv2DBackpropFilter.
    let ident = by_name("adam/Identity");
    assert_eq!(g.op(ident).phase, Phase::Optimizer);
    assert!(
        g.gradients()
            .iter()
            .any(|l| l.grad == filter && l.optimizer == ident)
    );
    // Moment writes consume gradient data; the weight update only has a control dependency.
    assert_eq!(phase("adam/AssignAddVariableOp"), Phase::Optimizer);
    assert_eq!(phase("adam/AssignSubVariableOp"), Phase::Forward);
    assert_eq!(
        g.op(by_name("adam/AssignSubVariableOp")).batch_scaled,
        Some(false)
    );
    let s = g.summary();
    assert!(s.per_phase["optimizer"].ops > 100, "{:?}", s.per_phase);
    assert!(s.per_phase["backward"].ops > 200, "{:?}", s.per_phase);
    for l in g.gradients() {
        assert!(matches!(
            g.op(l.grad).phase,
            Phase::Backward | Phase::Optimizer
        ));
        assert_eq!(g.op(l.optimizer).split, Splittability::None);
    }
}

#[test]
fn quickp_errors_name_the_field() {
    let bad_link = r#"{"directed": true, "nodes": [{"id": "a", "op_type": "X", "mem": 0, "comp_cost": {"d0": 1.0}}],
        "links": [{"source": "a", "target": "b", "tensor_size_in_bit": 8}]}"#;
    let e = import::parse_quickp(bad_link, "q.json", "q").unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.field.as_str()),
        ("q.json", "links[0].target"),
        "{e}"
    );
    let unequal = r#"{"nodes": [{"id": "a", "op_type": "X", "mem": 0, "comp_cost": {"d0": 1.0, "d1": 2.0}}], "links": []}"#;
    let e = import::parse_quickp(unequal, "q.json", "q").unwrap_err();
    assert_eq!(e.field, "nodes[0].comp_cost.d1", "{e}");
    let string_bits = r#"{"nodes": [{"id": 1, "op_type": "X"}, {"id": 2, "op_type": "Y"}],
        "links": [{"source": 1, "target": 2, "tensor_size_in_bit": "8"}]}"#;
    let e = import::parse_quickp(string_bits, "q.json", "q").unwrap_err();
    assert_eq!(e.field, "links[0].tensor_size_in_bit", "{e}");
    // A node without its measured time would cost nothing: refused.
    let untimed = r#"{"nodes": [{"id": "a", "op_type": "X", "mem": 0}], "links": []}"#;
    let e = import::parse_quickp(untimed, "q.json", "q").unwrap_err();
    assert_eq!(e.field, "nodes[0].comp_cost", "{e}");
}

/// What the graph's own checks refuse is named by the QuickP file's fields, not the graph's
/// (`ops[0].output_bytes`, `edges[0].bytes`, `ops`).
#[test]
fn quickp_errors_name_the_files_fields_not_the_graphs() {
    let two = |links: &str| {
        format!(
            r#"{{"nodes": [{{"id": "a", "op_type": "X", "comp_cost": {{"d0": 1}}}},
            {{"id": "b", "op_type": "Y", "comp_cost": {{"d0": 1}}}}], "links": [{links}]}}"#
        )
    };
    let link =
        |bits: &str| format!(r#"{{"source": "a", "target": "b", "tensor_size_in_bit": {bits}}}"#);
    let cases = [
        (
            r#"{"nodes": [{"id": "a", "op_type": "X", "mem": 1e300, "comp_cost": {"d0": 1}}], "links": []}"#.to_string(),
            "nodes[0].mem",
        ),
        (
            r#"{"nodes": [{"id": "a", "op_type": "X", "comp_cost": {"d0": 1e300}}], "links": []}"#.to_string(),
            "nodes[0].comp_cost",
        ),
        (two(&link("1e300")), "links[0].tensor_size_in_bit"),
        // Parallel links merge into one edge: the one that takes it past the bound is named.
        (two(&[link("8e18"), link("8e18")].join(",")), "links[1].tensor_size_in_bit"),
        (
            two(&[link("8"), r#"{"source": "b", "target": "a", "tensor_size_in_bit": 8}"#.to_string()].join(",")),
            "links",
        ),
        (r#"{"nodes": [], "links": []}"#.to_string(), "nodes"),
    ];
    for (text, field) in cases {
        let e = import::parse_quickp(&text, "q.json", "q").unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.field.as_str()),
            ("q.json", field),
            "{e}"
        );
    }
    // A cycle is shown by the file's node indices and ids, not the graph's op numbers.
    let cycle = two(&[
        link("8"),
        r#"{"source": "b", "target": "a", "tensor_size_in_bit": 8}"#.to_string(),
    ]
    .join(","));
    let e = import::parse_quickp(&cycle, "q.json", "q").unwrap_err();
    assert!(
        e.to_string().contains(r#"nodes[1] "b" -> nodes[0] "a""#),
        "{e}"
    );
}

#[test]
fn quickp_parallel_links_merge_by_summing_bytes() {
    let multi = r#"{"multigraph": true, "nodes": [{"id": 1, "op_type": "X", "comp_cost": {"d0": 1.0}}, {"id": 2, "op_type": "Y", "comp_cost": {"d0": 2.0}}],
        "links": [{"source": 1, "target": 2, "tensor_size_in_bit": 80}, {"source": 1, "target": 2, "tensor_size_in_bit": 16}]}"#;
    let g = import::parse_quickp(multi, "q.json", "q").unwrap();
    assert_eq!(g.edges().len(), 1);
    assert_eq!(g.edges()[0].bytes, 12.0);
}

#[test]
fn format_names_parse_and_unknown_ones_are_refused() {
    for f in Format::ALL {
        assert_eq!(import::parse_format(f.name()).unwrap(), f);
    }
    assert_eq!(import::parse_format("Torch").unwrap(), Format::Torch);
    let e = import::parse_format("onnx").unwrap_err();
    assert_eq!(e.field, "--format");
}

// ---------------------------------------------------------------- CSV

const CSV_DIR: &str = "datasets/csv_example";

#[test]
fn csv_example_imports_with_its_values() {
    let dir = repo(CSV_DIR);
    assert_eq!(import::detect(&dir).unwrap(), Format::Csv);
    assert_eq!(import::detect(&dir.join("ops.csv")).unwrap(), Format::Csv);
    let g = import::import(&dir, None).unwrap();
    let via_edges = import::import(&dir.join("edges.csv"), None).unwrap();
    assert_eq!(via_edges.ops(), g.ops());
    assert_eq!((g.name.as_str(), g.batch_size), ("tiny-mlp", 32));
    assert_eq!((g.len(), g.edges().len(), g.gradients().len()), (7, 8, 1));
    let fc1 = g.ops().iter().find(|o| o.name == "fc1").unwrap();
    assert_eq!(fc1.flops, 25_690_112.0);
    assert_eq!(fc1.split, Splittability::Concat);
    assert_eq!(fc1.profiled_us["V100"], 41.5);
    assert_eq!(fc1.profiled_us["A100"], 20.1);
    // "V100" names the family: its time is what every V100 board is charged.
    let cost = topoplace::cost::CostModel::default();
    for board in ["V100-SXM2-32GB", "V100-PCIe-32GB"] {
        let gpu = topoplace::cluster::find_gpu(board).unwrap();
        assert_eq!(cost.compute_time_us(fc1, gpu, 1.0), 41.5, "{board}");
    }
    let quoted = g.ops().iter().find(|o| o.id == 4).unwrap();
    assert_eq!(quoted.name, "relu_grad, fused");
    assert_eq!(quoted.profiled_us["A100"], 2.0);
    assert!(
        g.op(0).profiled_us.is_empty(),
        "empty time cells mean not measured"
    );
    let adam = g
        .ops()
        .iter()
        .find(|o| o.phase == Phase::Optimizer)
        .unwrap();
    assert_eq!(
        (adam.batch_scaled, adam.resident_bytes),
        (Some(false), 3_211_264.0)
    );
    assert_eq!(g.summary().params, 401_408);
    assert_eq!(g.edges().iter().map(|e| e.bytes).sum::<f64>(), 5_668_864.0);
    let link = g.gradients()[0];
    assert_eq!((g.op(link.grad).id, g.op(link.optimizer).id), (5, 6));
}

#[test]
fn csv_round_trips_through_graph_json() {
    let g = import::import(&repo(CSV_DIR), Some(Format::Csv)).unwrap();
    let dir = scratch("csv_round_trip");
    let out = dir.join("graph.json");
    topoplace::graph::save_graph(&g, &out).unwrap();
    let back = import::import(&out, None).unwrap();
    assert_eq!(back.ops(), g.ops());
    assert_eq!(back.edges(), g.edges());
    assert_eq!(back.gradients(), g.gradients());
    assert_eq!(
        (back.name.as_str(), back.batch_size),
        (g.name.as_str(), g.batch_size)
    );
}

/// The example files with one text replacement in one of them.
fn csv_variant(test: &str, file: &str, from: &str, to: &str) -> common::Scratch {
    let dir = scratch(test);
    for f in ["ops.csv", "edges.csv", "gradients.csv"] {
        let mut text = std::fs::read_to_string(repo(CSV_DIR).join(f)).unwrap();
        if f == file {
            assert!(text.contains(from), "{from} not in {f}");
            text = text.replacen(from, to, 1);
        }
        std::fs::write(dir.join(f), text).unwrap();
    }
    dir
}

/// Import a broken variant and return (file name, field, message).
fn csv_error(test: &str, file: &str, from: &str, to: &str) -> (String, String, String) {
    let dir = csv_variant(test, file, from, to);
    let err = import::import(&dir, Some(Format::Csv)).unwrap_err();
    match err {
        topoplace::Error::Input(e) => {
            let name = Path::new(&e.file)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .to_string();
            (name, e.field, e.message)
        }
        other => panic!("expected an input error, got {other}"),
    }
}

#[test]
fn csv_missing_column_names_the_header_line() {
    let (file, field, msg) = csv_error("csv_missing_col", "edges.csv", "src,dst,bytes", "src,dst");
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("edges.csv", "line 1, column \"bytes\""),
        "{msg}"
    );
    assert!(msg.contains("missing column"), "{msg}");
}

#[test]
fn csv_non_numeric_value_names_row_and_column() {
    let (file, field, msg) = csv_error(
        "csv_nan",
        "ops.csv",
        "2,fc1,MatMul,forward,25690112",
        "2,fc1,MatMul,forward,25M",
    );
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("ops.csv", "line 6, column \"flops\""),
        "{msg}"
    );
    assert!(msg.contains("not a number"), "{msg}");
}

/// A check the graph loader makes (a name's text-direction control) is said of the CSV file,
/// line and column, not of the graph's `ops[1].name`.
#[test]
fn csv_graph_checks_name_the_row_and_column() {
    let (file, field, msg) = csv_error(
        "csv_bidi",
        "ops.csv",
        "2,fc1,MatMul,forward,25690112",
        "2,fc\u{202e}1,MatMul,forward,25690112",
    );
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("ops.csv", "line 6, column \"name\""),
        "{msg}"
    );
    assert!(msg.contains("U+202E"), "{msg}");
}

#[test]
fn csv_negative_size_names_row_and_column() {
    let (file, field, msg) = csv_error("csv_negative", "edges.csv", "2,3,16384", "2,3,-16384");
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("edges.csv", "line 4, column \"bytes\""),
        "{msg}"
    );
    assert!(msg.contains("negative"), "{msg}");
}

#[test]
fn csv_edge_without_bytes_names_row_and_column() {
    let (file, field, msg) = csv_error("csv_empty_edge", "edges.csv", "2,3,16384", "2,3,");
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("edges.csv", "line 4, column \"bytes\""),
        "{msg}"
    );
    assert!(msg.contains("is empty"), "{msg}");
}

/// `--format csv` on a file that is no CSV names that file, not a guessed `edges.csv` beside it.
#[test]
fn csv_format_on_another_file_names_it() {
    let path = repo("datasets/torch/vgg19_b96.json.gz");
    let e = import::import(&path, Some(Format::Csv))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with(&*path.to_string_lossy()), "{e}");
    assert!(
        e.contains("--format csv") && !e.contains("edges.csv: "),
        "{e}"
    );
}

#[test]
fn csv_unknown_phase_names_row_and_column() {
    let (file, field, msg) = csv_error("csv_phase", "ops.csv", "Relu,forward", "Relu,fwd");
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("ops.csv", "line 7, column \"phase\""),
        "{msg}"
    );
    assert!(msg.contains("unknown phase \"fwd\""), "{msg}");
}

#[test]
fn csv_dangling_id_names_row_and_column() {
    let (file, field, msg) = csv_error("csv_dangling", "edges.csv", "4,5,16384", "4,55,16384");
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("edges.csv", "line 6, column \"dst\""),
        "{msg}"
    );
    assert!(msg.contains("55"), "{msg}");
    let (file, field, _) = csv_error("csv_dangling_grad", "gradients.csv", "5,6", "9,6");
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("gradients.csv", "line 2, column \"grad\"")
    );
}

#[test]
fn csv_other_mistakes_are_named_too() {
    let (file, field, _) = csv_error("csv_batch", "ops.csv", "# batch_size=32\n", "");
    assert_eq!((file.as_str(), field.as_str()), ("ops.csv", "batch_size"));
    let (_, field, msg) = csv_error("csv_unfed", "gradients.csv", "5,6\n", "");
    assert_eq!(field, "line 10, column \"phase\"", "{msg}");
    let (_, field, _) = csv_error(
        "csv_width",
        "ops.csv",
        "3,relu,Relu,forward,4096,",
        "3,relu,Relu,forward,",
    );
    assert_eq!(field, "line 7");
    let (_, field, _) = csv_error("csv_dup", "ops.csv", "3,relu,", "2,relu,");
    assert_eq!(field, "line 7, column \"id\"");
    let (_, field, _) = csv_error("csv_split", "ops.csv", "0,concat,,,", "0,halves,,,");
    assert_eq!(field, "line 4, column \"split\"");
}

/// Values past the graph loader's bounds are named where they are in the CSV files: the ops
/// file's line and column (a FLOPs count of 1e308 was reported against `edges.csv`, as
/// `ops[2].flops`).
#[test]
fn csv_implausible_values_name_their_file_line_and_column() {
    let fc1 = "2,fc1,MatMul,forward,25690112,2023424,16384,0,0,concat,,41.5";
    let cases = [
        (
            "ops.csv",
            fc1,
            "2,fc1,MatMul,forward,1e308,2023424,16384,0,0,concat,,41.5",
            "flops",
        ),
        (
            "ops.csv",
            fc1,
            "2,fc1,MatMul,forward,25690112,1e30,16384,0,0,concat,,41.5",
            "bytes_accessed",
        ),
        (
            "ops.csv",
            fc1,
            "2,fc1,MatMul,forward,25690112,2023424,16384,0,99999999999999,concat,,41.5",
            "params",
        ),
        (
            "ops.csv",
            fc1,
            "2,fc1,MatMul,forward,25690112,2023424,16384,0,0,concat,,1e300",
            "time_us:V100",
        ),
        ("edges.csv", "2,3,16384", "2,3,1e300", "bytes"),
    ];
    for (k, (file, from, to, column)) in cases.into_iter().enumerate() {
        let (named, field, msg) = csv_error(&format!("csv_implausible_{k}"), file, from, to);
        let line = if file == "ops.csv" { 6 } else { 4 };
        assert_eq!(
            (named.as_str(), field),
            (file, format!("line {line}, column \"{column}\"")),
            "{msg}"
        );
        assert!(msg.contains("implausibly large"), "{msg}");
    }
}

/// The CLI's import of such a file: one error line naming the ops file and the column, exit 1,
/// and no graph written.
#[test]
fn csv_import_of_an_implausible_op_names_the_ops_file() {
    let dir = csv_variant(
        "csv_import_flops",
        "ops.csv",
        "2,fc1,MatMul,forward,25690112",
        "2,fc1,MatMul,forward,1e308",
    );
    let out_file = dir.join("g.json");
    let out = common::binary()
        .args(["import", "--format", "csv"])
        .arg(&*dir)
        .arg("--out")
        .arg(&out_file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("ops.csv: line 6, column \"flops\"") && !err.contains("edges.csv"),
        "{err}"
    );
    assert!(!out_file.exists(), "no graph written");
}

/// A `# batch_size` line given twice (which one was meant?) is refused, naming both lines.
#[test]
fn csv_duplicated_batch_size_is_refused() {
    let (file, field, msg) = csv_error(
        "csv_batch_twice",
        "ops.csv",
        "# batch_size=32\n",
        "# batch_size=32\n# batch_size=64\n",
    );
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("ops.csv", "line 2, batch_size")
    );
    assert!(msg.contains("twice") && msg.contains("line 1"), "{msg}");
    // A comment holding "=" is not a directive, however often it appears.
    let dir = csv_variant(
        "csv_comment_twice",
        "ops.csv",
        "# batch_size=32\n",
        "# batch_size=32\n# note: a=b\n# note: a=b\n",
    );
    assert!(import::import(&dir, Some(Format::Csv)).is_ok());
}

// ---------------------------------------------------------------- torch exports

/// Committed exports and the exact parameter counts of the models (published figures for the
/// torchvision models, BERT-large and GPT-2 small; bert-small and the transformer are the counts of
/// their hand-written configs: nn.Transformer() 44,140,544 + 37000x512 shared embedding).
const TORCH: [(&str, u64); 9] = [
    ("datasets/torch/vgg19_b96.json.gz", 143_667_240),
    ("datasets/torch/resnet101_b96.json.gz", 44_549_160),
    ("datasets/torch/inception_v3_b96.json.gz", 27_161_264),
    ("datasets/torch/alexnet_b128.json.gz", 61_100_840),
    ("datasets/torch/vgg16_b96.json.gz", 138_357_544),
    ("datasets/torch/bert_large_b16_s128.json.gz", 336_226_108),
    (
        "datasets/torch/bert_small_b96_s128.json.gz",
        BERT_SMALL_PARAMS,
    ),
    ("datasets/torch/transformer_b480_s32.json.gz", 63_084_544),
    ("datasets/torch/gpt2_b8_s1024.json.gz", 124_439_808),
];

const BERT_SMALL_PARAMS: u64 = 29_058_876;

#[test]
fn torch_exports_load_with_exact_parameter_counts() {
    for (file, params) in TORCH {
        let path = repo(file);
        assert_eq!(import::detect(&path).unwrap(), Format::Torch, "{file}");
        let ex = import::import_torch(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        let s = ex.graph.summary();
        assert_eq!(ex.meta.params_total, params, "{file}");
        assert_eq!(s.params, params, "{file}");
        let optimizers = ex
            .graph
            .ops()
            .iter()
            .filter(|o| o.phase == Phase::Optimizer)
            .count();
        assert_eq!(
            s.gradients, optimizers,
            "{file}: one gradient link per parameter tensor"
        );
        // Weight gradients reduce over the batch: partial results of batch slices add up
        // (through tied-weight adds and the cat of a packed cross-attention in_proj too).
        for l in ex.graph.gradients() {
            let op = ex.graph.op(l.grad);
            assert_eq!(op.split, Splittability::Sum, "{file}: gradient {}", op.name);
        }
        assert!(s.flops > 0.0 && s.edge_bytes > 0.0, "{file}");
        for phase in ["input", "parameter", "forward", "backward", "optimizer"] {
            assert!(s.per_phase.contains_key(phase), "{file}: no {phase} ops");
        }
        // The generic entry point gives the same graph.
        assert_eq!(
            import::import(&path, None).unwrap().len(),
            ex.graph.len(),
            "{file}"
        );
    }
}

fn tiny_torch() -> serde_json::Value {
    serde_json::json!({
        "format": "topoplace-graph", "version": 1, "name": "tiny", "batch_size": 2,
        "ops": [
            {"id": 0, "name": "w", "op_type": "parameter", "phase": "parameter", "params": 6, "output_bytes": 24.0, "resident_bytes": 24.0},
            {"id": 1, "name": "input0", "op_type": "input", "phase": "input", "output_bytes": 16.0, "split": "concat"},
            {"id": 2, "name": "mm", "op_type": "aten.mm", "phase": "forward", "flops": 48.0, "output_bytes": 24.0, "split": "concat"},
            {"id": 3, "name": "mm_1", "op_type": "aten.mm", "phase": "backward", "flops": 48.0, "output_bytes": 24.0, "split": "sum"},
            {"id": 4, "name": "adam:w", "op_type": "adam", "phase": "optimizer", "resident_bytes": 48.0, "batch_scaled": false}
        ],
        "edges": [
            {"src": 0, "dst": 2, "bytes": 24.0}, {"src": 1, "dst": 2, "bytes": 16.0},
            {"src": 2, "dst": 3, "bytes": 24.0}, {"src": 1, "dst": 3, "bytes": 16.0},
            {"src": 3, "dst": 4, "bytes": 24.0}, {"src": 0, "dst": 4, "bytes": 24.0}
        ],
        "gradients": [{"grad": 3, "optimizer": 4}],
        "torch": {"model": "module:tiny", "params_total": 6, "trace_seconds": 0.1}
    })
}

/// Write a broken variant of the tiny export to a file and import it as torch.
fn torch_error(test: &str, edit: impl FnOnce(&mut serde_json::Value)) -> topoplace::InputError {
    let mut doc = tiny_torch();
    edit(&mut doc);
    let dir = scratch(test);
    let path = dir.join("export.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    match import::import(&path, Some(Format::Torch)).unwrap_err() {
        topoplace::Error::Input(e) => {
            assert_eq!(
                e.file,
                path.display().to_string(),
                "the error names the file"
            );
            e
        }
        other => panic!("expected an input error, got {other}"),
    }
}

#[test]
fn torch_tiny_export_parses_and_keeps_metadata() {
    let ex = import::parse_torch(&tiny_torch().to_string(), "tiny.json").unwrap();
    assert_eq!((ex.graph.len(), ex.graph.gradients().len()), (5, 1));
    assert_eq!(ex.meta.model, "module:tiny");
    assert_eq!(ex.meta.extra["trace_seconds"], serde_json::json!(0.1));
}

#[test]
fn torch_missing_fields_are_named() {
    let e = torch_error("torch_no_params", |d| {
        d["torch"].as_object_mut().unwrap().remove("params_total");
    });
    assert_eq!(e.field, "torch", "{e}");
    assert!(e.message.contains("params_total"), "{e}");
    let e = torch_error("torch_no_phase", |d| {
        d["ops"][2].as_object_mut().unwrap().remove("phase");
    });
    assert_eq!(e.field, "ops[2]", "{e}");
    assert!(e.message.contains("phase"), "{e}");
    let e = torch_error("torch_no_meta", |d| {
        d.as_object_mut().unwrap().remove("torch");
    });
    assert_eq!(e.field, "torch", "{e}");
}

#[test]
fn torch_cycle_is_refused() {
    let e = torch_error("torch_cycle", |d| {
        d["edges"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"src": 3, "dst": 2, "bytes": 1.0}));
    });
    assert_eq!(e.field, "edges", "{e}");
    assert!(e.message.contains("cycle"), "{e}");
}

#[test]
fn torch_bytes_of_the_wrong_type_or_sign_are_refused() {
    let e = torch_error("torch_bytes_string", |d| {
        d["edges"][0]["bytes"] = serde_json::json!("24 B")
    });
    assert_eq!(e.field, "edges[0].bytes", "{e}");
    assert!(e.message.contains("invalid type: string"), "{e}");
    let e = torch_error("torch_bytes_negative", |d| {
        d["ops"][2]["output_bytes"] = serde_json::json!(-24.0)
    });
    assert!(e.field.starts_with("ops[2].output_bytes"), "{e}");
    let e = torch_error("torch_params_float", |d| {
        d["ops"][0]["params"] = serde_json::json!(6.5)
    });
    assert_eq!(e.field, "ops[0].params", "{e}");
}

#[test]
fn torch_parameter_count_must_match_the_model() {
    let e = torch_error("torch_params_mismatch", |d| {
        d["torch"]["params_total"] = serde_json::json!(7)
    });
    assert_eq!(e.field, "torch.params_total", "{e}");
    assert!(e.message.contains("hold 6"), "{e}");
}

// ---------------------------------------------------------------- torch exports vs the zoo

/// Matrix products and convolutions: the ops both sides count with the same formula
/// (2 x multiply-adds). Exporter: ATen names; zoo: TensorFlow names.
const DENSE_TORCH: [&str; 5] = [
    "aten.mm",
    "aten.addmm",
    "aten.bmm",
    "aten.convolution",
    "aten.convolution_backward",
];
const DENSE_ZOO: [&str; 5] = [
    "MatMul",
    "BatchMatMulV2",
    "Conv2D",
    "Conv2DBackpropFilter",
    "Conv2DBackpropInput",
];

/// FLOPs of the forward and backward phases: (all ops, dense ops only).
fn fwd_bwd_flops(g: &Graph, dense: &[&str]) -> [(f64, f64); 2] {
    let mut out = [(0.0, 0.0); 2];
    for op in g.ops() {
        let k = match op.phase {
            Phase::Forward => 0,
            Phase::Backward => 1,
            _ => continue,
        };
        out[k].0 += op.flops;
        if dense.contains(&op.op_type.as_str()) {
            out[k].1 += op.flops;
        }
    }
    out
}

fn pct(a: f64, b: f64) -> f64 {
    100.0 * (a / b - 1.0)
}

/// Each torch export against the zoo graph of the same model at the export's batch: exact
/// parameter counts; forward FLOPs and forward+backward FLOPs (optimizer excluded) within 5%.
/// The actual relation is tighter and is asserted too: the matmul/conv FLOPs agree within 0.01%
/// forward (same formula, same shapes; the only dense difference is BERT's token-type lookup, a
/// one-hot MatMul in the zoo as in the TF reference but a gather in PyTorch: 0.004%) and 0.05%
/// backward (the bias gradient inside the exporter's convolution backward). The rest of the
/// difference is element-wise: the exporter counts fused ATen ops by torch_export/flops.py's
/// per-element table (native_layer_norm 8 per element, gelu 5, _softmax 5, dropout 2), while the
/// zoo spells LayerNorm (10 ops), tanh-GELU (8 ops) and TF1 dropout (4 ops) as TensorFlow
/// primitives, each with its own per-element count.
#[test]
fn torch_exports_match_the_zoo_params_and_flops() {
    eprintln!(
        "| model | batch | fwd export | fwd zoo | diff | bwd export | bwd zoo | diff | fwd+bwd diff |"
    );
    for (file, zoo) in TORCH_ZOO_TWINS {
        let ex = import::import_torch(&repo(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let batch = ex.graph.batch_size;
        let opts = topoplace::zoo::ZooOptions {
            batch_size: Some(batch),
            ..Default::default()
        };
        let z = topoplace::zoo::build(zoo, &opts).unwrap();
        let card = topoplace::zoo::card(zoo).unwrap();
        // Parameters: the export, the zoo graph and the zoo card agree exactly.
        assert_eq!(
            ex.meta.params_total,
            z.summary().params,
            "{file} vs zoo {zoo}"
        );
        assert_eq!(ex.graph.summary().params, card.reference_params, "{file}");

        let [(ef, efd), (eb, ebd)] = fwd_bwd_flops(&ex.graph, &DENSE_TORCH);
        let [(zf, zfd), (zb, zbd)] = fwd_bwd_flops(&z, &DENSE_ZOO);
        eprintln!(
            "| {zoo} | {batch} | {:.4e} | {:.4e} | {:+.2}% | {:.4e} | {:.4e} | {:+.2}% | {:+.2}% | dense fwd {:+.3}% bwd {:+.3}%",
            ef,
            zf,
            pct(ef, zf),
            eb,
            zb,
            pct(eb, zb),
            pct(ef + eb, zf + zb),
            pct(efd, zfd),
            pct(ebd, zbd),
        );
        assert!(
            pct(ef, zf).abs() < 5.0,
            "{file}: forward {ef:e} vs zoo {zf:e}"
        );
        assert!(
            pct(efd, zfd).abs() < 0.01,
            "{file}: forward matmul/conv {efd:e} vs zoo {zfd:e}"
        );
        // The exporter's convolution backward also carries its bias gradient (a sum over the
        // output gradient), which the zoo counts in a separate BiasAddGrad: up to 0.02%.
        assert!(
            pct(ebd, zbd).abs() < 0.05,
            "{file}: backward matmul/conv {ebd:e} vs zoo {zbd:e}"
        );
        assert!(
            pct(ef + eb, zf + zb).abs() < 5.0,
            "{file}: forward+backward {:e} vs zoo {:e}",
            ef + eb,
            zf + zb
        );
    }
}

/// A torch export whose metadata is not an object says what it should be, naming the field.
#[test]
fn torch_metadata_of_the_wrong_type_is_named() {
    let dir = scratch("torch-meta");
    let path = dir.join("t.json");
    std::fs::write(&path, r#"{"torch": 5, "ops": []}"#).unwrap();
    let e = import::import(&path, Some(Format::Torch))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("torch") && e.contains("must be an object"),
        "{e}"
    );
}

/// A profiled time under a name no GPU matches would be ignored without a word: the model is
/// refused, naming the op's field; the exporter's `cpu` timings are accepted.
#[test]
fn a_profile_for_an_unknown_gpu_is_named() {
    let dir = scratch("unknown-gpu");
    let text = std::fs::read_to_string(repo(CSV_DIR).join("ops.csv")).unwrap();
    for (column, ok) in [("time_us:Z100", false), ("time_us:cpu", true)] {
        let out = dir.join(column.replace(':', "-"));
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("ops.csv"), text.replace("time_us:V100", column)).unwrap();
        for f in ["edges.csv", "gradients.csv"] {
            std::fs::copy(repo(CSV_DIR).join(f), out.join(f)).unwrap();
        }
        let loaded = topoplace::resolve::load_model(out.to_str().unwrap(), None);
        match (loaded, ok) {
            (Ok(_), true) => {}
            (Err(e), false) => {
                // Named as the user wrote it: the ops file's header, not `ops[2].profiled_us`.
                let msg = e.to_string();
                assert!(
                    msg.contains("ops.csv: line 3, column \"time_us:Z100\"")
                        && msg.contains("unknown GPU type"),
                    "{msg}"
                );
            }
            (r, _) => panic!("{column}: {:?}", r.map(|g| g.name)),
        }
    }
}

// ---------------------------------------------------------------- hostile inputs (sweep 2)

/// A gradients.csv row given twice would be synchronised, and counted by SFB, as two gradients.
#[test]
fn csv_repeated_gradient_row_is_refused() {
    let (file, field, msg) = csv_error("csv_grad_twice", "gradients.csv", "5,6\n", "5,6\n5,6\n");
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("gradients.csv", "line 3, column \"optimizer\""),
        "{msg}"
    );
    assert!(msg.contains("duplicate") && msg.contains("line 2"), "{msg}");
}

/// `# name=` with nothing after it would name the model "": refused, naming the line.
#[test]
fn csv_empty_name_is_refused() {
    for name in ["", "  "] {
        let (file, field, msg) = csv_error(
            "csv_name_empty",
            "ops.csv",
            "# name=tiny-mlp",
            &format!("# name={name}"),
        );
        assert_eq!(
            (file.as_str(), field.as_str()),
            ("ops.csv", "line 2, name"),
            "{msg}"
        );
        assert!(msg.contains("empty"), "{msg}");
    }
}

/// A misspelt directive, a directive after the header and one in edges.csv would each be
/// ignored without a word: refused, naming the file and line. A comment is still a comment.
#[test]
fn csv_stray_directives_are_refused() {
    let (file, field, msg) = csv_error("csv_typo", "ops.csv", "# name=", "# nmae=");
    assert_eq!((file.as_str(), field.as_str()), ("ops.csv", "line 2, nmae"));
    assert!(msg.contains("unknown directive"), "{msg}");
    let (file, field, msg) = csv_error(
        "csv_batch_late",
        "ops.csv",
        "3,relu,",
        "# batch_size=64\n3,relu,",
    );
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("ops.csv", "line 7, batch_size"),
        "{msg}"
    );
    assert!(msg.contains("after the header (line 3)"), "{msg}");
    let (file, field, msg) = csv_error(
        "csv_edges_directive",
        "edges.csv",
        "src,dst,bytes",
        "# batch_size=64\nsrc,dst,bytes",
    );
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("edges.csv", "line 1, batch_size")
    );
    assert!(msg.contains("ops.csv"), "{msg}");
    let dir = csv_variant(
        "csv_comment_late",
        "ops.csv",
        "3,relu,",
        "# relu follows: its x=y is a comment\n3,relu,",
    );
    assert!(import::import(&dir, Some(Format::Csv)).is_ok());
}

/// An edges.csv without rows, for several ops, is refused by import as loading would refuse
/// the graph it writes, in the CSV files' terms.
#[test]
fn csv_without_edges_is_refused() {
    let text = std::fs::read_to_string(repo(CSV_DIR).join("edges.csv")).unwrap();
    let header = text.lines().next().unwrap().to_string();
    let (file, field, msg) = csv_error("csv_no_edges", "edges.csv", &text, &(header + "\n"));
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("edges.csv", "rows"),
        "{msg}"
    );
}

/// A QuickP file of several nodes and no links imported without a word, to a graph that
/// loading then refused: import refuses it, naming `links` of the input file.
#[test]
fn quickp_without_links_is_refused() {
    let text = r#"{"nodes": [{"id": "a", "op_type": "X", "comp_cost": {"d0": 1}},
        {"id": "b", "op_type": "Y", "comp_cost": {"d0": 1}}], "links": []}"#;
    let dir = scratch("quickp_no_links");
    let path = dir.join("q.json");
    std::fs::write(&path, text).unwrap();
    for format in [None, Some(Format::Quickp)] {
        match import::import(&path, format).unwrap_err() {
            topoplace::Error::Input(e) => {
                assert_eq!(
                    (e.file.as_str(), e.field.as_str()),
                    (path.display().to_string().as_str(), "links"),
                    "{e}"
                );
                assert!(e.message.contains("unconnected"), "{e}");
            }
            other => panic!("expected an input error, got {other}"),
        }
    }
}

/// A torch export's repeated gradient link and empty name are the graph's: named as such.
#[test]
fn torch_repeated_gradient_and_empty_name_are_named() {
    let e = torch_error("torch_grad_twice", |d| {
        let link = d["gradients"][0].clone();
        d["gradients"].as_array_mut().unwrap().push(link);
    });
    assert_eq!(e.field, "gradients[1]", "{e}");
    assert!(e.message.contains("duplicate"), "{e}");
    let e = torch_error("torch_no_name", |d| d["name"] = serde_json::json!(""));
    assert_eq!(e.field, "name", "{e}");
}

/// A file whose JSON breaks part-way (a number out of range, a NaN) is told by the keys read
/// before the fault, so the error names the field as `--format` would, not "not valid JSON".
#[test]
fn detected_json_with_a_bad_number_names_the_field() {
    let dir = scratch("detect_bad_number");
    let cases = [
        // serde_json writes keys sorted: "edges" before "ops" and "torch". The key scan skips
        // an out-of-range number (it reads no values) and finds "torch"; it stops at a NaN,
        // before "torch", and a graph read as topoplace fails at the same fault with the same
        // field as read as torch.
        (
            tiny_torch().to_string().replacen("24.0", "1e999", 1),
            "torch",
            "edges[0].bytes",
        ),
        (
            tiny_torch().to_string().replacen("16.0", "NaN", 1),
            "topoplace",
            "edges[1].bytes",
        ),
        (
            r#"{"name": "g", "torch": {"model": "m", "params_total": 1e999}}"#.to_string(),
            "torch",
            "torch.params_total",
        ),
        (
            r#"{"nodes": [{"id": "a", "op_type": "X", "comp_cost": {"d0": 1e999}}], "links": []}"#
                .to_string(),
            "quickp",
            "nodes[0].comp_cost.d0",
        ),
    ];
    for (k, (text, format, field)) in cases.iter().enumerate() {
        let path = dir.join(format!("g{k}.json"));
        std::fs::write(&path, text).unwrap();
        assert_eq!(import::detect(&path).unwrap().name(), *format);
        let named = match import::import(&path, None).unwrap_err() {
            topoplace::Error::Input(e) => e,
            other => panic!("expected an input error, got {other}"),
        };
        assert_eq!(named.field, *field, "{named}");
        assert!(!named.message.contains("not CSV"), "{named}");
    }
    // Text that is no JSON object still says so.
    let path = dir.join("junk.json");
    std::fs::write(&path, "[1e999]").unwrap();
    let msg = import::detect(&path).unwrap_err().to_string();
    assert!(msg.contains("not CSV and not valid JSON"), "{msg}");
}
