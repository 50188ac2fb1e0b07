//! Graph simplification as TAG §4.1.1: drop `Identity`/`NoOp` pass-throughs and the ops that feed
//! no optimizer op (summaries, metrics, dead branches), keeping the graph equivalent: for every
//! pair of remaining ops, one reaches the other afterwards exactly when it did before.

use std::collections::HashMap;

use serde::Serialize;

use super::{Edge, GradientLink, Graph, OpIdx, Phase};
use crate::error::InputError;

/// What [`simplify`] removed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SimplifyStats {
    pub ops_before: usize,
    pub ops_after: usize,
    pub edges_before: usize,
    pub edges_after: usize,
    /// `Identity`, `IdentityN` and `NoOp` ops bypassed.
    pub removed_pass_through: usize,
    /// Ops from which no optimizer op can be reached (none removed in a graph without optimizers).
    pub removed_dangling: usize,
}

/// Op types that only forward their input (or carry a control dependency) and cost nothing.
fn is_pass_through_type(op_type: &str) -> bool {
    ["identity", "identityn", "noop"]
        .iter()
        .any(|t| op_type.eq_ignore_ascii_case(t))
}

/// Simplify `g`; the result keeps the surviving ops' ids, names and order.
pub fn simplify(g: &Graph) -> Result<(Graph, SimplifyStats), InputError> {
    let pass_through: Vec<bool> = g
        .ops()
        .iter()
        .map(|op| {
            is_pass_through_type(&op.op_type)
                && op.resident_bytes == 0.0
                && op.phase != Phase::Optimizer
        })
        .collect();
    let (edges, gradients) = bypass(g, &pass_through);
    let keep = ops_reaching_an_optimizer(g.len(), &edges, &pass_through, g);

    let mut new_index = vec![usize::MAX; g.len()];
    let mut ops = Vec::new();
    for (i, op) in g.ops().iter().enumerate() {
        if keep[i] {
            new_index[i] = ops.len();
            ops.push(op.clone());
        }
    }
    let edges: Vec<Edge> = edges
        .into_iter()
        .filter(|e| keep[e.src] && keep[e.dst])
        .map(|e| Edge {
            src: new_index[e.src],
            dst: new_index[e.dst],
            bytes: e.bytes,
        })
        .collect();
    let gradients: Vec<GradientLink> = gradients
        .into_iter()
        .map(|l| GradientLink {
            grad: new_index[l.grad],
            optimizer: new_index[l.optimizer],
        })
        .collect();
    let stats = SimplifyStats {
        ops_before: g.len(),
        ops_after: ops.len(),
        edges_before: g.edges().len(),
        edges_after: edges.len(),
        removed_pass_through: pass_through.iter().filter(|&&p| p).count(),
        removed_dangling: g.len() - ops.len() - pass_through.iter().filter(|&&p| p).count(),
    };
    let source = format!("<simplified {}>", g.name);
    let simplified = Graph::new(&source, g.name.clone(), g.batch_size, ops, edges, gradients)?;
    Ok((simplified, stats))
}

/// Reconnect around pass-through ops: each consumer of a pass-through op gets an edge from every
/// real op the pass-through (transitively) forwards, carrying the consumer's tensor size.
/// Gradient links move to the op that really produces the gradient.
fn bypass(g: &Graph, pass_through: &[bool]) -> (Vec<Edge>, Vec<GradientLink>) {
    // Real ops each pass-through forwards, resolved in topological order so chains collapse.
    let mut forwarded: Vec<Vec<(OpIdx, f64)>> = vec![Vec::new(); g.len()];
    for v in g.topological_order() {
        if !pass_through[v] {
            continue;
        }
        let mut sources = Vec::new();
        for &e in g.in_edges(v) {
            let edge = g.edges()[e];
            if pass_through[edge.src] {
                sources.extend(forwarded[edge.src].iter().copied());
            } else {
                sources.push((edge.src, edge.bytes));
            }
        }
        sources.sort_by_key(|&(u, _)| u);
        sources.dedup_by_key(|&mut (u, _)| u);
        forwarded[v] = sources;
    }

    let mut merged: HashMap<(OpIdx, OpIdx), f64> = HashMap::new();
    let mut order: Vec<(OpIdx, OpIdx)> = Vec::new();
    let mut add = |src: OpIdx, dst: OpIdx, bytes: f64| {
        let slot = merged.entry((src, dst)).or_insert_with(|| {
            order.push((src, dst));
            0.0
        });
        *slot = slot.max(bytes);
    };
    for edge in g.edges() {
        if pass_through[edge.dst] {
            continue;
        }
        if pass_through[edge.src] {
            for &(u, _) in &forwarded[edge.src] {
                add(u, edge.dst, edge.bytes);
            }
        } else {
            add(edge.src, edge.dst, edge.bytes);
        }
    }
    let edges = order
        .iter()
        .map(|&(src, dst)| Edge {
            src,
            dst,
            bytes: merged[&(src, dst)],
        })
        .collect();

    let gradients = g
        .gradients()
        .iter()
        .filter_map(|l| {
            if !pass_through[l.grad] {
                return Some(*l);
            }
            // The biggest forwarded tensor is the gradient itself; others are control inputs.
            forwarded[l.grad]
                .iter()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|&(u, _)| GradientLink {
                    grad: u,
                    optimizer: l.optimizer,
                })
        })
        .collect();
    (edges, gradients)
}

/// Which ops survive: not a pass-through, and (when the graph has optimizer ops) able to reach one.
fn ops_reaching_an_optimizer(
    n: usize,
    edges: &[Edge],
    pass_through: &[bool],
    g: &Graph,
) -> Vec<bool> {
    let has_optimizer = g.ops().iter().any(|op| op.phase == Phase::Optimizer);
    if !has_optimizer {
        return pass_through.iter().map(|&p| !p).collect();
    }
    let mut preds: Vec<Vec<OpIdx>> = vec![Vec::new(); n];
    for e in edges {
        preds[e.dst].push(e.src);
    }
    let mut reaches = vec![false; n];
    let mut stack: Vec<OpIdx> = (0..n)
        .filter(|&i| g.op(i).phase == Phase::Optimizer)
        .collect();
    for &i in &stack {
        reaches[i] = true;
    }
    while let Some(v) = stack.pop() {
        for &u in &preds[v] {
            if !reaches[u] {
                reaches[u] = true;
                stack.push(u);
            }
        }
    }
    (0..n).map(|i| reaches[i] && !pass_through[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{GraphBuilder, Op};

    #[test]
    fn identity_chain_and_dead_branch_are_removed() {
        let mut b = GraphBuilder::new();
        let w = b.add_op(Op::new(0, "w", "VariableV2", Phase::Parameter));
        let x = b.add_op(Op::new(0, "x", "MatMul", Phase::Forward));
        let dw = b.add_op(Op::new(0, "dw", "MatMulGrad", Phase::Backward));
        let id1 = b.add_op(Op::new(0, "id1", "Identity", Phase::Backward));
        let id2 = b.add_op(Op::new(0, "id2", "Identity", Phase::Backward));
        let summary = b.add_op(Op::new(0, "summary", "ScalarSummary", Phase::Forward));
        let adam = b.add_op(Op::new(0, "adam", "ApplyAdam", Phase::Optimizer));
        b.add_edge(w, x, 8.0);
        b.add_edge(x, dw, 8.0);
        b.add_edge(dw, id1, 8.0);
        b.add_edge(id1, id2, 8.0);
        b.add_edge(x, summary, 4.0);
        b.add_edge(w, adam, 8.0);
        b.add_gradient(id2, adam, 8.0);
        let g = b.finish("<test>", "t", 1).unwrap();
        let (s, stats) = simplify(&g).unwrap();
        let names: Vec<&str> = s.ops().iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, vec!["w", "x", "dw", "adam"]);
        assert_eq!(stats.removed_pass_through, 2);
        assert_eq!(stats.removed_dangling, 1);
        assert_eq!(s.gradients().len(), 1);
        assert_eq!(s.op(s.gradients()[0].grad).name, "dw");
        let e = s.edges().iter().find(|e| s.op(e.src).name == "dw").unwrap();
        assert_eq!((s.op(e.dst).name.as_str(), e.bytes), ("adam", 8.0));
    }

    #[test]
    fn inference_graphs_keep_every_real_op() {
        let mut b = GraphBuilder::new();
        let a = b.add_op(Op::new(0, "a", "Conv2D", Phase::Forward));
        let n = b.add_op(Op::new(0, "n", "NoOp", Phase::Forward));
        let c = b.add_op(Op::new(0, "c", "Relu", Phase::Forward));
        b.add_edge(a, n, 0.0);
        b.add_edge(n, c, 0.0);
        let g = b.finish("<test>", "t", 1).unwrap();
        let (s, stats) = simplify(&g).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(stats.removed_dangling, 0);
        assert_eq!(s.edges().len(), 1);
    }
}
