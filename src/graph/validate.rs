//! Checks that make a set of ops and edges a usable training graph, each naming the field at fault.

use std::collections::HashMap;

use super::{Edge, GradientLink, Graph, Op, OpIdx, Phase};
use crate::error::{InputError, check_non_negative};

/// Field-level checks that need no adjacency: ids, numbers, edge and link endpoints.
pub(super) fn check_parts(
    source: &str,
    batch_size: u32,
    ops: &[Op],
    edges: &[Edge],
    gradients: &[GradientLink],
) -> Result<(), InputError> {
    if batch_size == 0 {
        return Err(InputError::new(source, "batch_size", "must be at least 1"));
    }
    if ops.is_empty() {
        return Err(InputError::new(source, "ops", "the graph has no ops"));
    }
    let mut seen: HashMap<u64, usize> = HashMap::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        if let Some(first) = seen.insert(op.id, i) {
            return Err(InputError::new(
                source,
                format!("ops[{i}].id"),
                format!("duplicate id {} (also used by ops[{first}])", op.id),
            ));
        }
        check_op_numbers(source, i, op)?;
    }
    let n = ops.len();
    let mut pairs: HashMap<(OpIdx, OpIdx), usize> = HashMap::with_capacity(edges.len());
    for (k, e) in edges.iter().enumerate() {
        for (end, idx) in [("src", e.src), ("dst", e.dst)] {
            if idx >= n {
                return Err(InputError::new(
                    source,
                    format!("edges[{k}].{end}"),
                    format!("refers to op index {idx}, but the graph has {n} ops"),
                ));
            }
        }
        check_non_negative(source, &format!("edges[{k}].bytes"), e.bytes)?;
        if let Some(first) = pairs.insert((e.src, e.dst), k) {
            return Err(InputError::new(
                source,
                format!("edges[{k}]"),
                format!(
                    "duplicate edge {} -> {} (also edges[{first}])",
                    describe(ops, e.src),
                    describe(ops, e.dst)
                ),
            ));
        }
    }
    for (k, g) in gradients.iter().enumerate() {
        for (end, idx) in [("grad", g.grad), ("optimizer", g.optimizer)] {
            if idx >= n {
                return Err(InputError::new(
                    source,
                    format!("gradients[{k}].{end}"),
                    format!("refers to op index {idx}, but the graph has {n} ops"),
                ));
            }
        }
        if ops[g.optimizer].phase != Phase::Optimizer {
            return Err(InputError::new(
                source,
                format!("gradients[{k}].optimizer"),
                format!("{} is not an optimizer op", describe(ops, g.optimizer)),
            ));
        }
        if !pairs.contains_key(&(g.grad, g.optimizer)) {
            return Err(InputError::new(
                source,
                format!("gradients[{k}]"),
                format!(
                    "no edge carries the gradient from {} to {}",
                    describe(ops, g.grad),
                    describe(ops, g.optimizer)
                ),
            ));
        }
    }
    Ok(())
}

fn check_op_numbers(source: &str, i: usize, op: &Op) -> Result<(), InputError> {
    let field = |f: &str| format!("ops[{i}].{f} (op {} \"{}\")", op.id, op.name);
    check_non_negative(source, &field("flops"), op.flops)?;
    check_non_negative(source, &field("bytes_accessed"), op.bytes_accessed)?;
    check_non_negative(source, &field("output_bytes"), op.output_bytes)?;
    check_non_negative(source, &field("resident_bytes"), op.resident_bytes)?;
    for (device, t) in &op.profiled_us {
        check_non_negative(source, &field(&format!("profiled_us.{device}")), *t)?;
    }
    Ok(())
}

/// `id 12 "conv1"`: how an op is named in messages.
pub(super) fn describe(ops: &[Op], i: OpIdx) -> String {
    format!("op {} \"{}\"", ops[i].id, ops[i].name)
}

/// Kahn's algorithm with a min-heap on the index, so equal inputs give equal orders. `None` when
/// the graph has a cycle.
pub(super) fn kahn_order(g: &Graph) -> Option<Vec<OpIdx>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = g.len();
    let mut indegree: Vec<usize> = (0..n).map(|i| g.in_edges(i).len()).collect();
    let mut ready: BinaryHeap<Reverse<OpIdx>> =
        (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for s in g.successors(i) {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.push(Reverse(s));
            }
        }
    }
    (order.len() == n).then_some(order)
}

pub(super) fn check_acyclic(source: &str, g: &Graph) -> Result<(), InputError> {
    if kahn_order(g).is_some() {
        return Ok(());
    }
    let cycle = find_cycle(g).expect("Kahn's algorithm found a cycle, so DFS finds one");
    let shown: Vec<String> = cycle.iter().map(|&i| describe(g.ops(), i)).collect();
    Err(InputError::new(
        source,
        "edges",
        format!("the graph has a cycle: {}", shown.join(" -> ")),
    ))
}

/// One cycle, first op repeated at the end, found by an iterative depth-first search.
fn find_cycle(g: &Graph) -> Option<Vec<OpIdx>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnStack,
        Done,
    }
    let n = g.len();
    let mut mark = vec![Mark::New; n];
    for root in 0..n {
        if mark[root] != Mark::New {
            continue;
        }
        // Stack of (op, next out-edge position).
        let mut stack: Vec<(OpIdx, usize)> = vec![(root, 0)];
        mark[root] = Mark::OnStack;
        while let Some(&mut (v, ref mut pos)) = stack.last_mut() {
            let outs = g.out_edges(v);
            if *pos < outs.len() {
                let w = g.edges()[outs[*pos]].dst;
                *pos += 1;
                match mark[w] {
                    Mark::New => {
                        mark[w] = Mark::OnStack;
                        stack.push((w, 0));
                    }
                    Mark::OnStack => {
                        let start = stack.iter().position(|&(u, _)| u == w).unwrap();
                        let mut cycle: Vec<OpIdx> = stack[start..].iter().map(|&(u, _)| u).collect();
                        cycle.push(w);
                        return Some(cycle);
                    }
                    Mark::Done => {}
                }
            } else {
                mark[v] = Mark::Done;
                stack.pop();
            }
        }
    }
    None
}

/// Every optimizer op must apply at least one gradient.
pub(super) fn check_optimizers_fed(source: &str, g: &Graph) -> Result<(), InputError> {
    let mut fed = vec![false; g.len()];
    for link in g.gradients() {
        fed[link.optimizer] = true;
    }
    for (i, op) in g.ops().iter().enumerate() {
        if op.phase == Phase::Optimizer && !fed[i] {
            return Err(InputError::new(
                source,
                format!("ops[{i}]"),
                format!(
                    "optimizer {} has no gradient input (no entry in \"gradients\" names it)",
                    describe(g.ops(), i)
                ),
            ));
        }
    }
    Ok(())
}
