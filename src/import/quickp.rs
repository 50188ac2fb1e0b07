//! QuickP's profiled TensorFlow 2 training graphs (networkx node-link JSON).
//!
//! Layout: `{"nodes": [{"id", "op_type", "mem", "comp_cost": {device: µs}}],
//! "links": [{"source", "target", "tensor_size_in_bit"}]}`. What the fields mean and how they map:
//!
//! - `comp_cost` is the op's measured time in µs on an RTX 3070, copied once per *mock* device
//!   (all values equal). It becomes `profiled_us[QUICKP_DEVICE]`; the mock device names are
//!   dropped. A node whose mock devices disagree is refused, since one key could not hold it.
//! - `mem` is the memory TensorFlow's allocator handed the op for its outputs, in bytes (rounded
//!   up to the allocator's 256-byte granularity, 0 for ops whose outputs alias or live on the
//!   host). It becomes `output_bytes`.
//! - `tensor_size_in_bit` is in **bits**; edge bytes are bits / 8. If a file repeats a
//!   (source, target) pair (a multigraph), the repeats are merged into one edge carrying the sum
//!   of their bytes, since both tensors travel between the same two ops.
//! - The batch size is not in the file. It is inferred from the `target` label placeholder
//!   (int32 labels, 4 bytes each: QuickP's 512-byte label tensor means batch 128); a file without
//!   one gets batch 1.
//!
//! Phases come from TF name scopes and op types (first rule that matches):
//! 1. a `gradient_tape` scope component → Backward;
//! 2. `Placeholder` named `…/resource` (a variable handle passed into the function) → Parameter,
//!    any other `Placeholder` → Input; `VarHandleOp`/`VariableV2`/`ReadVariableOp` → Parameter;
//! 3. an op in an optimizer scope (`adam/`, `sgd/`, …) or a `(Resource)Apply*` op → Optimizer if
//!    it consumes gradient data (it is downstream of a backward op in the data-flow graph), with
//!    a gradient link from every such input. TF2's Adam is unfused: `adam/Identity*` takes the
//!    gradient, Mul/Sub/Square build the moment updates, AssignAddVariableOp writes m and v.
//!    The final weight update (`AssignSubVariableOp`) re-reads m and v through ReadVariableOp
//!    with only a control dependency on their writes, so it has no gradient input in the file:
//!    such optimizer-scope ops are classified Forward with `batch_scaled = false` (per-variable
//!    work) rather than refused;
//! 4. anything else downstream of the backward pass (top-level gradient `AddN`s) → Backward;
//! 5. everything else → Forward (`Const` with `batch_scaled = false`).
//!
//! Splittability, by op type since the file has no shapes:
//! | ops | split |
//! |---|---|
//! | Conv2DBackpropFilter, BiasAddGrad, and any backward op whose output feeds the optimizer (weight gradients) | Sum |
//! | optimizer, parameter, non-batch-scaled ops | None |
//! | the data placeholders (Input) | Concat |
//! | forward/backward element-wise, conv, matmul, pooling, activation and loss ops ([`CONCAT_TYPES`]) | Concat |
//! | reductions (Mean, Sum, …), shape ops and everything else | None |
//!
//! FLOPs and bytes accessed are unknown (0): QuickP provides measured times instead.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Deserialize;

use crate::error::{InputError, Result};
use crate::graph::topo;
use crate::graph::validate::{MAX_BYTES, MAX_OP_US, check_plausible};
use crate::graph::{Edge, GradientLink, Graph, Op, Phase, Splittability};
use crate::io::parse_json;

/// The `profiled_us` key for QuickP's measured times: they were profiled on an RTX 3070.
pub const QUICKP_DEVICE: &str = "RTX-3070";

/// Name scopes TF/Keras optimizers put their update ops under.
const OPTIMIZER_SCOPES: &[&str] = &[
    "adam",
    "adamw",
    "sgd",
    "rmsprop",
    "adagrad",
    "adadelta",
    "adamax",
    "nadam",
    "ftrl",
    "lamb",
    "lion",
    "optimizer",
];

/// Op types whose work is independent per sample, so batch slices concatenate.
const CONCAT_TYPES: &[&str] = &[
    "Conv2D",
    "Conv2DBackpropInput",
    "DepthwiseConv2dNative",
    "MatMul",
    "BatchMatMulV2",
    "BiasAdd",
    "Relu",
    "ReluGrad",
    "Relu6",
    "Relu6Grad",
    "Elu",
    "EluGrad",
    "Sigmoid",
    "SigmoidGrad",
    "Tanh",
    "TanhGrad",
    "Softmax",
    "LogSoftmax",
    "MaxPool",
    "MaxPoolGrad",
    "AvgPool",
    "AvgPoolGrad",
    "AddV2",
    "Add",
    "Sub",
    "Mul",
    "RealDiv",
    "Neg",
    "Square",
    "Sqrt",
    "Rsqrt",
    "RsqrtGrad",
    "SquaredDifference",
    "Maximum",
    "Minimum",
    "SelectV2",
    "GreaterEqual",
    "Identity",
    "Cast",
    "StatelessRandomUniformV2",
    "SparseSoftmaxCrossEntropyWithLogits",
    "ArgMax",
    "Equal",
];

/// Op types that produce a weight gradient: partial results over batch slices add up.
const SUM_TYPES: &[&str] = &["Conv2DBackpropFilter", "BiasAddGrad"];

#[derive(Deserialize)]
struct NodeLinkFile {
    #[serde(default)]
    directed: Option<bool>,
    nodes: Vec<Node>,
    #[serde(alias = "edges")]
    links: Vec<Link>,
}

#[derive(Deserialize)]
struct Node {
    id: serde_json::Value,
    op_type: String,
    #[serde(default)]
    mem: f64,
    #[serde(default)]
    comp_cost: BTreeMap<String, f64>,
}

#[derive(Deserialize)]
struct Link {
    source: serde_json::Value,
    target: serde_json::Value,
    tensor_size_in_bit: f64,
}

/// Read a QuickP node-link file (optionally gzipped).
pub(crate) fn import_quickp(path: &Path) -> Result<Graph> {
    let source = path.display().to_string();
    let name = graph_name(path);
    Ok(parse_quickp(
        &crate::io::read_text_file(path)?,
        &source,
        &name,
    )?)
}

/// `comp_graph_vgg.json.gz` → `comp_graph_vgg`.
fn graph_name(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    let stem = file.strip_suffix(".gz").unwrap_or(&file);
    stem.strip_suffix(".json").unwrap_or(stem).to_string()
}

/// Parse QuickP node-link JSON text; `source` names it in errors.
pub fn parse_quickp(text: &str, source: &str, name: &str) -> Result<Graph, InputError> {
    let file: NodeLinkFile = parse_json(text, source)?;
    if file.directed == Some(false) {
        return Err(InputError::new(
            source,
            "directed",
            "a computation graph must be directed",
        ));
    }
    if file.nodes.is_empty() {
        return Err(InputError::new(source, "nodes", "the file has no nodes"));
    }
    // The graph loader refuses several ops with no edge (`edges`); say it in this file's terms.
    if file.links.is_empty() && file.nodes.len() >= 2 {
        return Err(InputError::new(
            source,
            "links",
            format!(
                "none: the graph's {} nodes would run unconnected (were the links left out?)",
                file.nodes.len()
            ),
        ));
    }
    let (mut ops, index) = read_nodes(&file.nodes, source)?;
    let edges = read_links(&file.links, &index, source)?;
    check_acyclic(&ops, &edges, source)?;
    let derived = downstream_of_backward(&ops, &edges);
    classify(&mut ops, &derived);
    let gradients = gradient_links(&ops, &edges, &derived);
    assign_splits(&mut ops, &gradients);
    let batch = infer_batch(&ops, &edges);
    // Each field, and the links' acyclicity, was checked above under its name in the file.
    Graph::new(source, name, batch, ops, edges, gradients)
}

/// A cycle among the links is named by the file's node indices and ids
/// (`nodes[0] "a" -> nodes[1] "b" -> nodes[0] "a"`), not by the graph's op numbers.
fn check_acyclic(ops: &[Op], edges: &[Edge], source: &str) -> Result<(), InputError> {
    let pairs = edges.iter().map(|e| (e.src, e.dst));
    let Err(cycle) = topo::topological_order(ops.len(), pairs.clone()) else {
        return Ok(());
    };
    let shown: Vec<String> = topo::cycle_from_first(ops.len(), pairs, cycle.node)
        .iter()
        .map(|&i| format!("nodes[{i}] \"{}\"", ops[i].name))
        .collect();
    Err(InputError::new(
        source,
        "links",
        format!("the links form a cycle: {}", shown.join(" -> ")),
    ))
}

/// Node ids may be strings or numbers in networkx output.
fn id_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn read_nodes(
    nodes: &[Node],
    source: &str,
) -> Result<(Vec<Op>, HashMap<String, usize>), InputError> {
    let mut ops = Vec::with_capacity(nodes.len());
    let mut index = HashMap::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        let field = |f: &str| format!("nodes[{i}].{f}");
        let id = id_text(&n.id)
            .ok_or_else(|| InputError::new(source, field("id"), "must be a string or a number"))?;
        // The id becomes the op's name: say a bad one here, under the file's own field.
        if crate::error::is_blank(&id) {
            return Err(InputError::new(source, field("id"), "is empty"));
        }
        crate::error::check_printable(source, &field("id"), &id)?;
        if let Some(first) = index.insert(id.clone(), i) {
            return Err(InputError::new(
                source,
                field("id"),
                format!("duplicate node id \"{id}\" (also nodes[{first}])"),
            ));
        }
        check_plausible(source, || field("mem"), n.mem, MAX_BYTES)?;
        // Provisional phase; `classify` decides once the whole graph is known.
        let mut op = Op::new(i as u64, id, n.op_type.clone(), Phase::Forward);
        op.output_bytes = n.mem;
        if let Some(us) = single_time(&n.comp_cost, source, &field("comp_cost"))? {
            op.profiled_us.insert(QUICKP_DEVICE.to_string(), us);
        }
        ops.push(op);
    }
    Ok((ops, index))
}

/// The one time all mock devices share. A node without measurements is an error: QuickP files
/// time every node, and a missing time would silently cost nothing.
fn single_time(
    costs: &BTreeMap<String, f64>,
    source: &str,
    field: &str,
) -> Result<Option<f64>, InputError> {
    let mut values = costs.iter();
    let Some((_, &first)) = values.next() else {
        return Err(InputError::new(
            source,
            field,
            "missing: every QuickP node carries its measured time per mock device",
        ));
    };
    check_plausible(source, || field.to_string(), first, MAX_OP_US)?;
    if let Some((device, v)) = values.find(|(_, v)| **v != first) {
        return Err(InputError::new(
            source,
            format!("{field}.{device}"),
            format!(
                "is {v} µs but another device has {first} µs; QuickP files profile one device type \
                 copied to every mock device, and per-device times are not supported"
            ),
        ));
    }
    Ok(Some(first))
}

fn read_links(
    links: &[Link],
    index: &HashMap<String, usize>,
    source: &str,
) -> Result<Vec<Edge>, InputError> {
    let mut edges: Vec<Edge> = Vec::with_capacity(links.len());
    let mut seen: HashMap<(usize, usize), usize> = HashMap::with_capacity(links.len());
    for (k, l) in links.iter().enumerate() {
        let end = |name: &str, v: &serde_json::Value| {
            let field = format!("links[{k}].{name}");
            let id =
                id_text(v).ok_or_else(|| InputError::new(source, &field, "must be a node id"))?;
            index
                .get(&id)
                .copied()
                .ok_or_else(|| InputError::new(source, &field, format!("no node has id \"{id}\"")))
        };
        let (src, dst) = (end("source", &l.source)?, end("target", &l.target)?);
        let field = || format!("links[{k}].tensor_size_in_bit");
        check_plausible(source, field, l.tensor_size_in_bit, MAX_BYTES * 8.0)?;
        let bytes = l.tensor_size_in_bit / 8.0;
        let e = match seen.get(&(src, dst)) {
            Some(&e) => {
                edges[e].bytes += bytes;
                e
            }
            None => {
                seen.insert((src, dst), edges.len());
                edges.push(Edge { src, dst, bytes });
                edges.len() - 1
            }
        };
        if edges[e].bytes > MAX_BYTES {
            return Err(InputError::new(
                source,
                field(),
                format!(
                    "the links from \"{}\" to \"{}\" add up to {:e} bytes, more than the {:e} \
                     accepted",
                    id_text(&l.source).unwrap_or_default(),
                    id_text(&l.target).unwrap_or_default(),
                    edges[e].bytes,
                    MAX_BYTES
                ),
            ));
        }
    }
    Ok(edges)
}

/// Whether the op name has `scope` as one of its `/`-separated components.
fn in_scope(name: &str, scope: &str) -> bool {
    name.split('/').any(|c| c == scope)
}

fn in_optimizer_scope(name: &str) -> bool {
    let top = name.split('/').next().unwrap_or("").to_ascii_lowercase();
    name.contains('/') && OPTIMIZER_SCOPES.contains(&top.as_str())
}

fn is_apply(op_type: &str) -> bool {
    op_type.starts_with("ResourceApply") || op_type.starts_with("Apply")
}

/// Ops strictly downstream of a `gradient_tape` op: the ones that carry gradient data.
fn downstream_of_backward(ops: &[Op], edges: &[Edge]) -> Vec<bool> {
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); ops.len()];
    for e in edges {
        succ[e.src].push(e.dst);
    }
    let mut derived = vec![false; ops.len()];
    let mut stack: Vec<usize> = (0..ops.len())
        .filter(|&i| in_scope(&ops[i].name, "gradient_tape"))
        .collect();
    while let Some(v) = stack.pop() {
        for &w in &succ[v] {
            if !derived[w] {
                derived[w] = true;
                stack.push(w);
            }
        }
    }
    derived
}

/// Set phase and batch scaling by the rules in the module docs.
fn classify(ops: &mut [Op], derived: &[bool]) {
    for (op, &derived) in ops.iter_mut().zip(derived) {
        let (phase, batch_scaled) = phase_of(&op.name, &op.op_type, derived);
        op.phase = phase;
        op.batch_scaled = batch_scaled;
    }
}

fn phase_of(name: &str, op_type: &str, derived: bool) -> (Phase, Option<bool>) {
    if in_scope(name, "gradient_tape") {
        return (Phase::Backward, None);
    }
    match op_type {
        "Placeholder" if name.ends_with("/resource") => return (Phase::Parameter, None),
        "Placeholder" => return (Phase::Input, None),
        "VarHandleOp" | "VariableV2" | "Variable" | "ReadVariableOp" => {
            return (Phase::Parameter, None);
        }
        _ => {}
    }
    if in_optimizer_scope(name) || is_apply(op_type) {
        return if derived {
            (Phase::Optimizer, None)
        } else {
            (Phase::Forward, Some(false))
        };
    }
    if derived {
        (Phase::Backward, None)
    } else if op_type == "Const" {
        (Phase::Forward, Some(false))
    } else {
        (Phase::Forward, None)
    }
}

/// Every optimizer op gets a link from each input that carries gradient data.
fn gradient_links(ops: &[Op], edges: &[Edge], derived: &[bool]) -> Vec<GradientLink> {
    edges
        .iter()
        .filter(|e| ops[e.dst].phase == Phase::Optimizer)
        .filter(|e| derived[e.src] || ops[e.src].phase == Phase::Backward)
        .map(|e| GradientLink {
            grad: e.src,
            optimizer: e.dst,
        })
        .collect()
}

fn assign_splits(ops: &mut [Op], gradients: &[GradientLink]) {
    let mut feeds_optimizer = vec![false; ops.len()];
    for l in gradients {
        feeds_optimizer[l.grad] = true;
    }
    for (op, feeds) in ops.iter_mut().zip(feeds_optimizer) {
        op.split = split_of(op, feeds);
    }
}

fn split_of(op: &Op, feeds_optimizer: bool) -> Splittability {
    match op.phase {
        Phase::Optimizer | Phase::Parameter => Splittability::None,
        Phase::Input => Splittability::Concat,
        Phase::Forward | Phase::Backward => {
            let t = op.op_type.as_str();
            if SUM_TYPES.contains(&t) || (op.phase == Phase::Backward && feeds_optimizer) {
                Splittability::Sum
            } else if op.batch_scaled != Some(false) && CONCAT_TYPES.contains(&t) {
                Splittability::Concat
            } else {
                Splittability::None
            }
        }
    }
}

/// Batch from the int32 label placeholder `target`; 1 when there is none.
fn infer_batch(ops: &[Op], edges: &[Edge]) -> u32 {
    let Some(t) = ops
        .iter()
        .position(|o| o.name == "target" && o.op_type == "Placeholder")
    else {
        return 1;
    };
    let bytes = edges.iter().find(|e| e.src == t).map_or(0.0, |e| e.bytes);
    let batch = bytes / 4.0;
    if batch >= 1.0 && batch.fract() == 0.0 && batch <= u32::MAX as f64 {
        batch as u32
    } else {
        1
    }
}
