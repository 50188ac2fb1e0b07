//! Importers: QuickP acceptance on the real files, CSV round trips and errors, torch exports.

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
}

#[test]
fn quickp_parallel_links_merge_by_summing_bytes() {
    let multi = r#"{"multigraph": true, "nodes": [{"id": 1, "op_type": "X"}, {"id": 2, "op_type": "Y"}],
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
