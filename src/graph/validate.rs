//! Checks that make a set of ops and edges a usable training graph, each naming the field at fault.

use std::collections::HashMap;

use super::{Edge, GradientLink, Graph, Op, OpIdx, Phase, topo};
use crate::error::{InputError, check_non_negative, check_printable, unprintable};

/// The numeric checks of [`check_parts`] alone: the batch, each op's numbers and each edge's
/// bytes (for new numbers on a graph whose structure was checked).
pub(super) fn check_numbers(
    source: &str,
    batch_size: u32,
    ops: &[Op],
    edges: &[Edge],
) -> Result<(), InputError> {
    if batch_size == 0 {
        return Err(InputError::new(source, "batch_size", "must be at least 1"));
    }
    for (i, op) in ops.iter().enumerate() {
        check_op_numbers(source, i, op)?;
    }
    for (k, e) in edges.iter().enumerate() {
        check_plausible(source, || format!("edges[{k}].bytes"), e.bytes, MAX_BYTES)?;
    }
    Ok(())
}

/// Field-level checks that need no adjacency: the numbers ([`check_numbers`]), then ids, edge and
/// link endpoints.
pub(super) fn check_parts(
    source: &str,
    batch_size: u32,
    ops: &[Op],
    edges: &[Edge],
    gradients: &[GradientLink],
) -> Result<(), InputError> {
    check_numbers(source, batch_size, ops, edges)?;
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
    let mut links: HashMap<(OpIdx, OpIdx), usize> = HashMap::with_capacity(gradients.len());
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
        // A gradient comes from the backward pass (or an optimizer-side op passing it on, as
        // TensorFlow's `IdentityN` before Adam): a link from a parameter, an input or a forward op
        // would synchronise a tensor that is none.
        if matches!(
            ops[g.grad].phase,
            Phase::Input | Phase::Parameter | Phase::Forward
        ) {
            return Err(InputError::new(
                source,
                format!("gradients[{k}].grad"),
                format!(
                    "{} is in the {} phase: a gradient comes from the backward pass",
                    describe(ops, g.grad),
                    ops[g.grad].phase.name()
                ),
            ));
        }
        // A repeated link would be synchronised, and counted by SFB, as two gradients.
        if let Some(first) = links.insert((g.grad, g.optimizer), k) {
            return Err(InputError::new(
                source,
                format!("gradients[{k}]"),
                format!(
                    "duplicate gradient link {} -> {} (also gradients[{first}])",
                    describe(ops, g.grad),
                    describe(ops, g.optimizer)
                ),
            ));
        }
    }
    Ok(())
}

/// The most FLOPs one op may take: a zettaFLOP, over a million times a 65,536-square matrix
/// product (5.6e14). Beyond it a value is a unit mistake, and sums of such values overflow.
pub(crate) const MAX_OP_FLOPS: f64 = 1e21;
/// The most bytes one tensor or op may hold: an exbibyte.
pub(crate) const MAX_BYTES: f64 = (1u64 << 60) as f64;
/// The most parameters one op may hold: 2⁴⁰ (1.1 trillion), above the whole of any model
/// trained today. Near 2⁶⁴ a value is a mistake, and the graph's total wrapped.
pub(crate) const MAX_OP_PARAMS: u64 = 1 << 40;
/// The longest an op may be profiled to take: a million seconds.
pub(crate) const MAX_OP_US: f64 = 1e12;

fn check_op_numbers(source: &str, i: usize, op: &Op) -> Result<(), InputError> {
    let field = |f: &str| format!("ops[{i}].{f} (op {} \"{}\")", op.id, op.name);
    let numbers = [
        ("flops", op.flops, MAX_OP_FLOPS),
        ("bytes_accessed", op.bytes_accessed, MAX_BYTES),
        ("output_bytes", op.output_bytes, MAX_BYTES),
        ("resident_bytes", op.resident_bytes, MAX_BYTES),
    ];
    for (name, value, limit) in numbers {
        check_plausible(source, || field(name), value, limit)?;
    }
    if op.params > MAX_OP_PARAMS {
        return Err(InputError::new(
            source,
            field("params"),
            format!(
                "is implausibly large ({}, the most accepted is {MAX_OP_PARAMS})",
                op.params
            ),
        ));
    }
    for (device, t) in &op.profiled_us {
        check_plausible(
            source,
            || field(&format!("profiled_us.{device}")),
            *t,
            MAX_OP_US,
        )?;
    }
    if let Some(w) = op.conv_window {
        let sizes = [("kernel", w.kernel), ("stride", w.stride)];
        if let Some((name, v)) = sizes.iter().find(|(_, v)| v.contains(&0)) {
            return Err(InputError::new(
                source,
                field(&format!("conv_window.{name}")),
                format!("is {v:?}: every size must be at least 1"),
            ));
        }
    }
    if let Some(a) = op.attention {
        let sizes = [
            ("seq_q", a.seq_q),
            ("seq_k", a.seq_k),
            ("head_dim", a.head_dim),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            let why = "must be at least 1";
            return Err(InputError::new(
                source,
                field(&format!("attention.{name}")),
                why,
            ));
        }
    }
    Ok(())
}

/// Non-negative, finite and at most `limit`. The field is named only for an error: graphs of
/// tens of thousands of ops are validated on every pipeline expansion.
pub(crate) fn check_plausible(
    source: &str,
    field: impl Fn() -> String,
    value: f64,
    limit: f64,
) -> Result<(), InputError> {
    if (0.0..=limit).contains(&value) {
        return Ok(());
    }
    let field = field();
    check_non_negative(source, &field, value)?;
    Err(InputError::new(
        source,
        field,
        format!("is implausibly large ({value:e}, the most accepted is {limit:e})"),
    ))
}

/// `id 12 "conv1"`: how an op is named in messages.
pub(super) fn describe(ops: &[Op], i: OpIdx) -> String {
    format!("op {} \"{}\"", ops[i].id, ops[i].name)
}

/// A topological order of the ops, or an error listing a cycle (`op 1 "a" -> op 2 "b" -> op 1
/// "a"`).
pub(super) fn acyclic_order(
    source: &str,
    ops: &[Op],
    edges: &[Edge],
) -> Result<Vec<OpIdx>, InputError> {
    let pairs = edges.iter().map(|e| (e.src, e.dst));
    topo::topological_order(ops.len(), pairs.clone()).map_err(|cycle| {
        let path = topo::cycle_from_first(ops.len(), pairs, cycle.node);
        let shown: Vec<String> = path.iter().map(|&i| describe(ops, i)).collect();
        InputError::new(
            source,
            "edges",
            format!("the graph has a cycle: {}", shown.join(" -> ")),
        )
    })
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

/// The checks for graphs read from files, which graphs built in code need not pass: every file
/// reader and importer runs them, so `import` refuses what loading its output would refuse.
///
/// A blank name is refused: reports and strategy files name the model by it, and a strategy
/// made for an unnamed graph would match any other unnamed one. A graph of several ops with no
/// edge at all is a file whose edges were left out: every op would run as if it needed no input
/// and fed no one. Single unconnected ops are accepted: TensorFlow's graphs keep some (`Shape`
/// ops whose readers were pruned).
pub(crate) fn check_file_graph(source: &str, g: &Graph) -> Result<(), InputError> {
    if crate::error::is_blank(&g.name) {
        return Err(InputError::new(
            source,
            "name",
            "is empty: give the model's name (reports and strategy files refer to it)",
        ));
    }
    check_printable(source, "name", &g.name)?;
    for (i, op) in g.ops().iter().enumerate() {
        for (field, text) in [("name", &op.name), ("op_type", &op.op_type)] {
            if let Some(why) = unprintable(text) {
                return Err(InputError::new(source, format!("ops[{i}].{field}"), why));
            }
        }
    }
    check_some_edges(source, g.len(), g.edges().len())?;
    check_edges_kept(source, g)
}

/// Refuses `ops` ops (two or more) with no edge at all: a file whose edges were left out. Asked
/// before the gradient links too, which would otherwise be named as carried by no edge.
pub(crate) fn check_some_edges(source: &str, ops: usize, edges: usize) -> Result<(), InputError> {
    if ops >= 2 && edges == 0 {
        return Err(InputError::new(
            source,
            "edges",
            format!("none: the graph's {ops} ops would run unconnected (were the edges left out?)"),
        ));
    }
    Ok(())
}

/// Refuses a file that lost many of its edges: more than one forward or backward op, and over a
/// tenth of them, with no edge at all. A computing op reads something and feeds something; real
/// exports leave at most a few loose (pruned `Shape` ops), and only buffers among parameters.
fn check_edges_kept(source: &str, g: &Graph) -> Result<(), InputError> {
    let mut connected = vec![false; g.len()];
    for e in g.edges() {
        connected[e.src] = true;
        connected[e.dst] = true;
    }
    let computing = |op: &Op| matches!(op.phase, Phase::Forward | Phase::Backward);
    let total = g.ops().iter().filter(|op| computing(op)).count();
    let loose: Vec<usize> = (0..g.len())
        .filter(|&i| computing(g.op(i)) && !connected[i])
        .collect();
    if loose.len() < 2 || loose.len() * 10 <= total {
        return Ok(());
    }
    Err(InputError::new(
        source,
        "edges",
        format!(
            "{} of the {total} forward and backward ops have no edge, e.g. ops[{}] {}: were \
             edges left out?",
            loose.len(),
            loose[0],
            describe(g.ops(), loose[0])
        ),
    ))
}
