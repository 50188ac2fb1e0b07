//! Graph IR: JSON round trip, every bad-input case named in the message, and simplification
//! preserving reachability (property test on random DAGs).

use proptest::prelude::*;
use topoplace::graph::{Graph, GraphBuilder, Op, Phase, parse_graph, simplify};

const GOOD: &str = r#"{
  "name": "tiny", "batch_size": 4,
  "ops": [
    {"id": 1, "name": "x", "op_type": "Placeholder", "phase": "input", "output_bytes": 64, "split": "concat"},
    {"id": 2, "name": "w", "op_type": "VariableV2", "phase": "parameter", "resident_bytes": 32, "params": 8},
    {"id": 3, "name": "mm", "op_type": "MatMul", "phase": "forward", "flops": 256, "bytes_accessed": 160, "output_bytes": 64, "split": "concat", "profiled_us": {"V100-SXM2-32GB": 3.5}},
    {"id": 4, "name": "mm_grad_w", "op_type": "MatMul", "phase": "backward", "flops": 256, "split": "sum", "output_bytes": 32},
    {"id": 5, "name": "adam", "op_type": "ApplyAdam", "phase": "optimizer", "resident_bytes": 64}
  ],
  "edges": [
    {"src": 1, "dst": 3, "bytes": 64}, {"src": 2, "dst": 3, "bytes": 32},
    {"src": 3, "dst": 4, "bytes": 64}, {"src": 1, "dst": 4, "bytes": 64},
    {"src": 2, "dst": 5, "bytes": 32}, {"src": 4, "dst": 5, "bytes": 32}
  ],
  "gradients": [{"grad": 4, "optimizer": 5}]
}"#;

fn error_of(text: &str) -> String {
    parse_graph(text, "bad.json").unwrap_err().to_string()
}

/// Replace the first occurrence of `from` in the good graph.
fn broken(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "test fixture lacks {from}");
    GOOD.replacen(from, to, 1)
}

#[test]
fn good_file_loads_and_round_trips() {
    let g = parse_graph(GOOD, "good.json").unwrap();
    assert_eq!(g.len(), 5);
    assert_eq!(g.summary().params, 8);
    assert_eq!(g.op(2).profiled_us["V100-SXM2-32GB"], 3.5);
    let text = serde_json::to_string(&topoplace::graph::GraphFile::from_graph(&g)).unwrap();
    let again = parse_graph(&text, "again.json").unwrap();
    assert_eq!(again.ops(), g.ops());
    assert_eq!(again.edges(), g.edges());
    assert_eq!(again.gradients(), g.gradients());
}

#[test]
fn malformed_json_names_the_file() {
    let msg = error_of("{\"name\": \"x\", ");
    assert!(msg.starts_with("bad.json"), "{msg}");
    assert!(msg.contains("EOF") || msg.contains("end of"), "{msg}");
}

#[test]
fn missing_field_is_named() {
    let msg = error_of(&broken("\"batch_size\": 4,", ""));
    assert!(msg.contains("batch_size"), "{msg}");
}

#[test]
fn unknown_field_is_named() {
    let msg = error_of(&broken("\"flops\": 256,", "\"flopz\": 256,"));
    assert!(msg.contains("ops[2]") && msg.contains("flopz"), "{msg}");
}

#[test]
fn cycle_is_printed() {
    let msg = error_of(&broken(
        r#"{"src": 3, "dst": 4, "bytes": 64}"#,
        r#"{"src": 3, "dst": 4, "bytes": 64}, {"src": 4, "dst": 3, "bytes": 1}"#,
    ));
    assert!(msg.contains("cycle"), "{msg}");
    assert!(
        msg.contains("\"mm\"") && msg.contains("\"mm_grad_w\""),
        "{msg}"
    );
}

#[test]
fn dangling_edge_is_named() {
    let msg = error_of(&broken(r#""src": 3, "dst": 4"#, r#""src": 3, "dst": 99"#));
    assert!(msg.contains("edges[2].dst") && msg.contains("99"), "{msg}");
}

#[test]
fn duplicate_id_is_named() {
    let msg = error_of(&broken(r#""id": 4,"#, r#""id": 3,"#));
    assert!(
        msg.contains("ops[3].id") && msg.contains("duplicate id 3"),
        "{msg}"
    );
}

#[test]
fn duplicate_edge_is_named() {
    let msg = error_of(&broken(
        r#"{"src": 3, "dst": 4, "bytes": 64}"#,
        r#"{"src": 3, "dst": 4, "bytes": 64}, {"src": 3, "dst": 4, "bytes": 64}"#,
    ));
    assert!(msg.contains("duplicate edge"), "{msg}");
}

/// Numbers no op has (a unit mistake) are refused before totals overflow to infinity.
#[test]
fn implausibly_large_numbers_are_named() {
    let msg = error_of(&broken(r#""flops": 256"#, r#""flops": 1e308"#));
    assert!(
        msg.contains("ops[") && msg.contains(".flops") && msg.contains("implausibly large"),
        "{msg}"
    );
    let msg = error_of(&broken(r#""bytes": 32}"#, r#""bytes": 1e30}"#));
    assert!(
        msg.contains("edges[1].bytes") && msg.contains("implausibly large"),
        "{msg}"
    );
    // u64::MAX parameters were taken, and `info`'s total wrapped to a small number.
    let msg = error_of(&broken(
        r#""params": 8"#,
        r#""params": 18446744073709551615"#,
    ));
    assert!(
        msg.contains("ops[1].params") && msg.contains("implausibly large"),
        "{msg}"
    );
    let at_bound = broken(r#""params": 8"#, r#""params": 1099511627776"#);
    let g = parse_graph(&at_bound, "g.json").unwrap();
    assert_eq!(g.summary().params, 1 << 40);
}

#[test]
fn negative_size_is_named() {
    let msg = error_of(&broken(
        r#""output_bytes": 64, "split""#,
        r#""output_bytes": -64, "split""#,
    ));
    assert!(
        msg.contains("ops[0].output_bytes") && msg.contains("negative"),
        "{msg}"
    );
    let msg = error_of(&broken(r#""bytes": 32}"#, r#""bytes": -1}"#));
    assert!(
        msg.contains("edges[1].bytes") && msg.contains("negative"),
        "{msg}"
    );
}

#[test]
fn out_of_range_number_is_refused() {
    let msg = error_of(&broken(r#""flops": 256,"#, r#""flops": 1e999,"#));
    assert!(
        msg.contains("ops[2].flops") || msg.contains("out of range"),
        "{msg}"
    );
}

#[test]
fn nan_and_infinity_are_refused() {
    for bad in [f64::NAN, f64::INFINITY] {
        let mut op = Op::new(0, "a", "X", Phase::Forward);
        op.flops = bad;
        let err = Graph::new("<api>", "t", 1, vec![op], vec![], vec![]).unwrap_err();
        assert!(err.field.contains("flops"), "{err}");
    }
}

#[test]
fn optimizer_without_gradient_is_named() {
    let text = broken(
        r#""gradients": [{"grad": 4, "optimizer": 5}]"#,
        r#""gradients": []"#,
    );
    let msg = error_of(&text);
    assert!(
        msg.contains("optimizer") && msg.contains("\"adam\"") && msg.contains("no gradient"),
        "{msg}"
    );
}

#[test]
fn gradient_link_without_edge_is_named() {
    let msg = error_of(&broken(
        r#""gradients": [{"grad": 4,"#,
        r#""gradients": [{"grad": 3,"#,
    ));
    assert!(
        msg.contains("gradients[0]") && msg.contains("no edge"),
        "{msg}"
    );
}

#[test]
fn zero_batch_and_empty_graph_are_refused() {
    assert!(error_of(&broken("\"batch_size\": 4", "\"batch_size\": 0")).contains("batch_size"));
    let msg = error_of(r#"{"name": "e", "batch_size": 1, "ops": []}"#);
    assert!(msg.contains("no ops"), "{msg}");
}

#[test]
fn wrong_format_tag_is_named() {
    let text = GOOD.replacen("{", "{\"format\": \"onnx\",", 1);
    let msg = error_of(&text);
    assert!(msg.contains("format") && msg.contains("onnx"), "{msg}");
}

/// A random DAG: edges only from lower to higher index; some ops are Identity/NoOp; the last op
/// is an optimizer fed by a gradient from the (backward) op before it.
fn random_graph(n: usize, edge_bits: &[bool], pass: &[bool]) -> Graph {
    let mut b = GraphBuilder::new();
    for (i, &pass_through) in pass.iter().enumerate().take(n) {
        let (op_type, phase) = if i == n - 1 {
            ("ApplyAdam", Phase::Optimizer)
        } else if i == n - 2 {
            ("Conv2DBackpropFilter", Phase::Backward)
        } else if pass_through && i != n - 2 {
            ("Identity", Phase::Forward)
        } else {
            ("Conv2D", Phase::Forward)
        };
        b.add_op(Op::new(0, format!("op{i}"), op_type, phase));
    }
    let mut k = 0;
    for i in 0..n {
        for j in i + 1..n {
            let wanted = edge_bits[k % edge_bits.len()];
            k += 1;
            if j == n - 1 {
                continue; // the optimizer is fed only by its gradient below
            }
            if wanted {
                b.add_edge(i, j, (i + j) as f64);
            }
        }
    }
    b.add_gradient(n - 2, n - 1, 4.0);
    b.finish("<prop>", "p", 1).unwrap()
}

fn reach(g: &Graph) -> Vec<Vec<bool>> {
    let n = g.len();
    let mut r = vec![vec![false; n]; n];
    for &v in g.topological_order().iter().rev() {
        for s in g.successors(v).collect::<Vec<_>>() {
            r[v][s] = true;
            let row = r[s].clone();
            for (t, &x) in row.iter().enumerate() {
                r[v][t] |= x;
            }
        }
    }
    r
}

proptest! {
    #[test]
    fn simplification_preserves_reachability(
        n in 3usize..14,
        edge_bits in prop::collection::vec(any::<bool>(), 1..100),
        pass in prop::collection::vec(prop::bool::weighted(0.3), 14),
    ) {
        let g = random_graph(n, &edge_bits, &pass);
        let (s, stats) = simplify(&g).unwrap();
        prop_assert_eq!(stats.ops_after, s.len());
        let before = reach(&g);
        let after = reach(&s);
        // Map surviving ops back to their original index by name.
        let orig: Vec<usize> = s.ops().iter().map(|o| o.name[2..].parse().unwrap()).collect();
        for (a, &oa) in orig.iter().enumerate() {
            for (b, &ob) in orig.iter().enumerate() {
                prop_assert_eq!(after[a][b], before[oa][ob], "{} -> {}", oa, ob);
            }
            // Survivors are real ops that reach the optimizer.
            prop_assert!(g.op(oa).op_type != "Identity");
            prop_assert!(oa == n - 1 || before[oa][n - 1]);
        }
        // Every real op that reached the optimizer survived.
        for (i, reach_row) in before.iter().enumerate() {
            if g.op(i).op_type != "Identity" && (i == n - 1 || reach_row[n - 1]) {
                prop_assert!(orig.contains(&i), "op{} was dropped", i);
            }
        }
    }
}

/// An attention shape reads back as written; a zero size or an unknown key is named.
#[test]
fn attention_shapes_round_trip_and_bad_ones_are_named() {
    let shaped = broken(
        r#""flops": 256, "bytes_accessed""#,
        r#""attention": {"seq_q": 128, "seq_k": 256, "head_dim": 64, "causal": true}, "flops": 256, "bytes_accessed""#,
    );
    let g = parse_graph(&shaped, "shaped.json").unwrap();
    let shape = g.op(2).attention.unwrap();
    assert_eq!((shape.seq_q, shape.seq_k, shape.head_dim), (128, 256, 64));
    assert!(shape.causal);
    let text = serde_json::to_string(&topoplace::graph::GraphFile::from_graph(&g)).unwrap();
    let again = parse_graph(&text, "again.json").unwrap();
    assert_eq!(again.op(2).attention, Some(shape));

    let zero = shaped.replace(r#""head_dim": 64"#, r#""head_dim": 0"#);
    let msg = error_of(&zero);
    assert!(
        msg.contains("ops[2].attention.head_dim") && msg.contains("at least 1"),
        "{msg}"
    );
    let unknown = shaped.replace(r#""causal": true"#, r#""causal": true, "heads": 4"#);
    let msg = error_of(&unknown);
    assert!(msg.contains("heads"), "{msg}");
}

/// A convolution window with a zero kernel or stride has no output: refused naming the op's field.
#[test]
fn zero_convolution_windows_are_named() {
    let window = |w: &str| {
        broken(
            r#""flops": 256, "bytes_accessed""#,
            &format!(r#""conv_window": {w}, "flops": 256, "bytes_accessed""#),
        )
    };
    let g = parse_graph(
        &window(r#"{"kernel": [3, 3], "stride": [1, 1]}"#),
        "ok.json",
    )
    .unwrap();
    assert!(g.op(2).conv_window.is_some());
    for (w, field) in [
        (
            r#"{"kernel": [0, 0], "stride": [1, 1]}"#,
            "ops[2].conv_window.kernel",
        ),
        (
            r#"{"kernel": [3, 3], "stride": [0, 0]}"#,
            "ops[2].conv_window.stride",
        ),
        (
            r#"{"kernel": [3, 0], "stride": [1, 1]}"#,
            "ops[2].conv_window.kernel",
        ),
    ] {
        let msg = error_of(&window(w));
        assert!(
            msg.starts_with("bad.json: ") && msg.contains(field) && msg.contains("at least 1"),
            "{msg}"
        );
    }
}

/// A gradient link given twice would be synchronised, and counted by SFB, as two gradients.
#[test]
fn repeated_gradient_link_is_named() {
    let msg = error_of(&broken(
        r#""gradients": [{"grad": 4, "optimizer": 5}]"#,
        r#""gradients": [{"grad": 4, "optimizer": 5}, {"grad": 4, "optimizer": 5}]"#,
    ));
    assert!(msg.contains("gradients[1]"), "{msg}");
    assert!(
        msg.contains("duplicate gradient link") && msg.contains("gradients[0]"),
        "{msg}"
    );
}

/// Only a backward op computes a gradient: a link from a parameter, a forward op or an update
/// would synchronise a tensor that is none.
#[test]
fn gradient_from_a_non_backward_op_is_named() {
    let from_param = broken(
        r#"{"src": 2, "dst": 5, "bytes": 32}, {"src": 4, "dst": 5, "bytes": 32}"#,
        r#"{"src": 2, "dst": 5, "bytes": 32}, {"src": 4, "dst": 5, "bytes": 32}, {"src": 3, "dst": 5, "bytes": 32}"#,
    )
    .replace(r#""gradients": [{"grad": 4, "optimizer": 5}]"#, r#""gradients": [{"grad": 3, "optimizer": 5}]"#);
    let msg = error_of(&from_param);
    assert!(msg.contains("gradients[0].grad"), "{msg}");
    assert!(
        msg.contains("forward phase") && msg.contains("backward pass"),
        "{msg}"
    );
}

/// Reports and strategy files name the model: an empty or blank name is refused, naming it.
#[test]
fn empty_or_blank_name_is_named() {
    for name in ["", "   ", "\u{200b}", " \u{200d}\u{feff} "] {
        let msg = error_of(&broken(
            r#""name": "tiny""#,
            &format!(r#""name": "{name}""#),
        ));
        assert!(msg.starts_with("bad.json: name"), "{msg}");
        assert!(msg.contains("empty"), "{msg}");
    }
}
