//! The computation-graph IR: one training iteration of a model as a DAG of ops.
//!
//! Ops carry what the cost model and the simulator need (FLOPs and bytes at the graph's batch size,
//! output and resident bytes, splittability as TAG §4.1.1), edges carry tensor bytes, and every
//! optimizer op is linked to the op that produces its gradient. Ops are addressed by their index
//! in `Graph::ops` ([`OpIdx`]); the `id` each op had in its file is kept for round trips and for
//! error messages.

mod io;
mod rebatch;
mod simplify;
pub(crate) mod topo;
pub(crate) mod validate;

pub use io::GraphFile;
pub use io::load_graph;
pub use io::parse_graph;
pub use io::save_graph;
pub use rebatch::rebatch;
pub use simplify::simplify;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::InputError;
pub(crate) use simplify::SimplifyStats;

/// Index of an op in [`Graph::ops`].
pub type OpIdx = usize;

/// Where an op sits in a training iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Training data fed into the iteration (placeholders, data loaders).
    Input,
    /// Trainable variables: their resident bytes are the parameters.
    Parameter,
    /// The forward pass: activations from inputs and parameters, up to the loss.
    Forward,
    /// The backward pass: activation and weight gradients.
    Backward,
    /// Parameter updates (Adam, SGD); resident bytes are the optimizer state.
    Optimizer,
}

impl Phase {
    pub(crate) const ALL: [Phase; 5] = [
        Phase::Input,
        Phase::Parameter,
        Phase::Forward,
        Phase::Backward,
        Phase::Optimizer,
    ];

    /// The lowercase name used in graph JSON and reports (`"forward"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Input => "input",
            Phase::Parameter => "parameter",
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Optimizer => "optimizer",
        }
    }

    /// Whether an op of this phase does work proportional to the batch unless told otherwise.
    pub(crate) fn scales_with_batch_by_default(self) -> bool {
        matches!(self, Phase::Input | Phase::Forward | Phase::Backward)
    }
}

/// How an op's output can be rebuilt when the op runs on batch slices (TAG §4.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Splittability {
    /// Accepts batch-split inputs; slices of the output concatenate into the full output.
    Concat,
    /// Accepts batch-split inputs; partial outputs sum into the full output (weight gradients).
    Sum,
    /// Needs whole inputs (optimizer ops, anything reducing over the batch).
    #[default]
    None,
}

/// One operation of the training graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Op {
    /// Identifier in the file; unique within a graph.
    pub id: u64,
    /// Human-readable op name from the framework, e.g. `model/h0/attn/c_attn`.
    pub name: String,
    /// Framework op type, e.g. `Conv2D`, `MatMul`, `Conv2DBackpropFilter`, `ApplyAdam`.
    pub op_type: String,
    /// Where the op sits in the iteration: input, parameter, forward, backward or optimizer.
    pub phase: Phase,
    /// Floating-point operations at the graph's batch size.
    #[serde(default)]
    pub flops: f64,
    /// Bytes read and written from device memory at the graph's batch size.
    #[serde(default)]
    pub bytes_accessed: f64,
    /// Whether compute time scales linearly with the batch share; defaults by phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_scaled: Option<bool>,
    /// Bytes of the op's output tensor at the graph's batch size.
    #[serde(default)]
    pub output_bytes: f64,
    /// Bytes that stay in device memory for the whole iteration (parameters, optimizer state).
    #[serde(default)]
    pub resident_bytes: f64,
    /// Trainable parameter elements this op holds (non-zero on parameter ops only).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub params: u64,
    /// How the op can run on batch slices (TAG §4.1.1); `none` when absent.
    #[serde(default)]
    pub split: Splittability,
    /// Measured time in microseconds at the graph's batch size, per device type name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profiled_us: BTreeMap<String, f64>,
    /// The window of a convolution (forward, input gradient or filter gradient): lets the cost
    /// model tell which convolutions cuDNN runs with a fast algorithm (Winograd for 3x3, stride 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conv_window: Option<ConvWindow>,
    /// The shape of a fused attention kernel (forward or backward): lets the cost model run it at
    /// the speed the published kernel benchmarks measured for that sequence length and head size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<AttentionShape>,
    /// The element type the op computes in: FP32 unless autocast lowered it
    /// ([`crate::autocast`]).
    #[serde(default, skip_serializing_if = "Dtype::is_f32")]
    pub dtype: Dtype,
}

/// The element type an op computes and writes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// 4-byte floats.
    #[default]
    F32,
    /// 2-byte floats: bf16 or fp16, whichever the step's precision autocasts to.
    Half,
}

impl Dtype {
    fn is_f32(&self) -> bool {
        *self == Dtype::F32
    }
}

/// Kernel size and stride of a 2-D convolution, (height, width).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvWindow {
    /// Kernel size, [height, width].
    pub kernel: [u32; 2],
    /// Stride, [height, width].
    pub stride: [u32; 2],
}

impl ConvWindow {
    /// Whether cuDNN can run the convolution with Winograd's minimal filtering: 3x3 kernels at
    /// stride 1 (cuDNN's WINOGRAD and WINOGRAD_NONFUSED algorithms, forward and both gradients).
    pub(crate) fn winograd_eligible(&self) -> bool {
        self.kernel == [3, 3] && self.stride == [1, 1]
    }
}

/// What a fused attention kernel's speed depends on beyond its FLOPs: the sequence lengths, the
/// size of a head, and whether a causal mask lets it skip the blocks above the diagonal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttentionShape {
    /// Query tokens.
    pub seq_q: u32,
    /// Key and value tokens.
    pub seq_k: u32,
    /// Elements per head.
    pub head_dim: u32,
    /// Whether a causal mask skips the score blocks above the diagonal.
    pub causal: bool,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Op {
    /// A zero-cost op; builders fill in what they know.
    pub fn new(id: u64, name: impl Into<String>, op_type: impl Into<String>, phase: Phase) -> Op {
        Op {
            id,
            name: name.into(),
            op_type: op_type.into(),
            phase,
            flops: 0.0,
            bytes_accessed: 0.0,
            batch_scaled: None,
            output_bytes: 0.0,
            resident_bytes: 0.0,
            params: 0,
            split: Splittability::None,
            profiled_us: BTreeMap::new(),
            conv_window: None,
            attention: None,
            dtype: Dtype::F32,
        }
    }

    /// Whether the compute time of this op scales with its batch share.
    pub fn scales_with_batch(&self) -> bool {
        self.batch_scaled
            .unwrap_or_else(|| self.phase.scales_with_batch_by_default())
    }

    /// Whether the output has a batch dimension (an input, an activation, its gradient): a
    /// batch-split consumer takes a slice of it, a pipeline sends it per micro-batch.
    pub(crate) fn carries_batch(&self) -> bool {
        self.scales_with_batch() && self.split == Splittability::Concat
    }
}

/// A tensor flowing from `src` to `dst`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Edge {
    /// The producing op.
    pub src: OpIdx,
    /// The consuming op.
    pub dst: OpIdx,
    /// Bytes of the tensor at the graph's batch size.
    pub bytes: f64,
}

/// The op `grad` produces the gradient that optimizer op `optimizer` applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GradientLink {
    /// The op producing the gradient.
    pub grad: OpIdx,
    /// The optimizer op applying it.
    pub optimizer: OpIdx,
}

/// A validated training graph: acyclic, ids unique, every edge between existing ops, every
/// optimizer op fed by a gradient. Build one with [`Graph::new`] or load one with [`load_graph`].
#[derive(Debug, Clone)]
pub struct Graph {
    /// The graph's name (the model, e.g. `vgg19`, `bert-large-inference`).
    pub name: String,
    /// Samples per iteration that the op costs refer to.
    pub batch_size: u32,
    ops: Vec<Op>,
    edges: Vec<Edge>,
    gradients: Vec<GradientLink>,
    adjacency: Adjacency,
    /// A topological order, computed once ([`topo::topological_order`]).
    order: Vec<OpIdx>,
    /// Unique to each graph built (a clone keeps it: the same ops and edges), so what is derived
    /// from a graph can be cached by it ([`Graph::identity`]).
    identity: u64,
}

/// The next [`Graph::identity`].
static NEXT_IDENTITY: AtomicU64 = AtomicU64::new(0);

/// Compressed in/out adjacency so the hot paths walk slices, not maps.
#[derive(Debug, Clone, Default)]
struct Adjacency {
    out_start: Vec<usize>,
    out_edges: Vec<usize>,
    in_start: Vec<usize>,
    in_edges: Vec<usize>,
}

impl Adjacency {
    fn build(n: usize, edges: &[Edge]) -> Adjacency {
        let (out_start, out_edges) = csr(n, edges.iter().map(|e| e.src));
        let (in_start, in_edges) = csr(n, edges.iter().map(|e| e.dst));
        Adjacency {
            out_start,
            out_edges,
            in_start,
            in_edges,
        }
    }
}

/// Group edge indices by a key op: `start[k]..start[k+1]` indexes the edges of op `k`.
fn csr(n: usize, keys: impl Iterator<Item = OpIdx> + Clone) -> (Vec<usize>, Vec<usize>) {
    let mut start = vec![0usize; n + 1];
    for k in keys.clone() {
        start[k + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut items = vec![0usize; start[n]];
    for (e, k) in keys.enumerate() {
        items[fill[k]] = e;
        fill[k] += 1;
    }
    (start, items)
}

impl Graph {
    /// Validate the parts and build a graph. `source` names where they came from (a file path,
    /// `<zoo:vgg19>`) for error messages.
    pub fn new(
        source: &str,
        name: impl Into<String>,
        batch_size: u32,
        ops: Vec<Op>,
        edges: Vec<Edge>,
        gradients: Vec<GradientLink>,
    ) -> Result<Graph, InputError> {
        validate::check_parts(source, batch_size, &ops, &edges, &gradients)?;
        let adjacency = Adjacency::build(ops.len(), &edges);
        let order = validate::acyclic_order(source, &ops, &edges)?;
        let graph = Graph {
            name: name.into(),
            batch_size,
            ops,
            edges,
            gradients,
            adjacency,
            order,
            identity: NEXT_IDENTITY.fetch_add(1, Ordering::Relaxed),
        };
        validate::check_optimizers_fed(source, &graph)?;
        Ok(graph)
    }

    /// This graph with the same ops and edges (same order, same ends) carrying new numbers:
    /// `ops` and `edges` replace its own, `batch_size` its batch. Only the numbers are checked;
    /// the structure is this graph's, already valid, so re-batching or autocasting a graph of
    /// 10⁶ ops does not hash and sort it again.
    pub(crate) fn with_numbers(
        &self,
        source: &str,
        batch_size: u32,
        ops: Vec<Op>,
        edges: Vec<Edge>,
    ) -> Result<Graph, InputError> {
        debug_assert!(ops.len() == self.ops.len() && edges.len() == self.edges.len());
        debug_assert!(
            (edges.iter().zip(&self.edges)).all(|(a, b)| (a.src, a.dst) == (b.src, b.dst))
        );
        validate::check_numbers(source, batch_size, &ops, &edges)?;
        Ok(Graph {
            name: self.name.clone(),
            batch_size,
            ops,
            edges,
            gradients: self.gradients.clone(),
            adjacency: self.adjacency.clone(),
            order: self.order.clone(),
            identity: NEXT_IDENTITY.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// All ops, indexed by [`OpIdx`].
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// Op `i`.
    pub fn op(&self, i: OpIdx) -> &Op {
        &self.ops[i]
    }

    /// This graph's identity: no other graph built in this process has it (its clones do). Its
    /// ops and edges never change, so a cache keyed by it (and the batch size) is never stale.
    pub(crate) fn identity(&self) -> u64 {
        self.identity
    }

    /// Number of ops.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether there is no op.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// All tensor edges; [`Graph::in_edges`] indexes into this.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// Every gradient-to-optimizer link.
    pub fn gradients(&self) -> &[GradientLink] {
        &self.gradients
    }

    /// Indices (into [`Graph::edges`]) of the edges leaving op `i`.
    pub(crate) fn out_edges(&self, i: OpIdx) -> &[usize] {
        let a = &self.adjacency;
        &a.out_edges[a.out_start[i]..a.out_start[i + 1]]
    }

    /// Indices (into [`Graph::edges`]) of the edges entering op `i`.
    pub fn in_edges(&self, i: OpIdx) -> &[usize] {
        let a = &self.adjacency;
        &a.in_edges[a.in_start[i]..a.in_start[i + 1]]
    }

    /// Ops consuming an output of op `i` (one per edge, so repeats are possible).
    pub fn successors(&self, i: OpIdx) -> impl Iterator<Item = OpIdx> + '_ {
        self.out_edges(i).iter().map(|&e| self.edges[e].dst)
    }

    /// Ops whose output op `i` consumes (one per edge, so repeats are possible).
    pub fn predecessors(&self, i: OpIdx) -> impl Iterator<Item = OpIdx> + '_ {
        self.in_edges(i).iter().map(|&e| self.edges[e].src)
    }

    /// Ops in a topological order: index order when every edge points forward (see
    /// [`topo::topological_order`]), so the order is deterministic.
    pub fn topological_order(&self) -> Vec<OpIdx> {
        self.order.clone()
    }

    /// Totals for `info` and for sanity checks.
    pub fn summary(&self) -> GraphSummary {
        let mut s = GraphSummary {
            name: self.name.clone(),
            batch_size: self.batch_size,
            ops: self.ops.len(),
            edges: self.edges.len(),
            gradients: self.gradients.len(),
            ..GraphSummary::default()
        };
        for op in &self.ops {
            let p = s.per_phase.entry(op.phase.name().to_string()).or_default();
            p.ops += 1;
            p.flops += op.flops;
            p.bytes_accessed += op.bytes_accessed;
            // Saturating: 2²⁴ ops at the per-op bound of validation would pass 2⁶⁴.
            s.params = s.params.saturating_add(op.params);
            s.flops += op.flops;
            s.resident_bytes += op.resident_bytes;
            if op.phase == Phase::Parameter {
                s.parameter_bytes += op.resident_bytes;
            }
        }
        s.edge_bytes = crate::units::total(self.edges.iter().map(|e| e.bytes));
        s
    }
}

/// Per-phase totals of a graph.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PhaseSummary {
    /// Number of ops in the phase.
    pub ops: usize,
    /// Floating-point operations of the phase at the graph's batch size.
    pub flops: f64,
    /// Device-memory bytes read and written by the phase at the graph's batch size.
    pub bytes_accessed: f64,
}

/// Totals of a graph, as `topoplace info` prints them.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct GraphSummary {
    /// The graph's name.
    pub name: String,
    /// Samples per iteration the totals refer to.
    pub batch_size: u32,
    /// Number of ops.
    pub ops: usize,
    /// Number of tensor edges.
    pub edges: usize,
    /// Number of gradient-to-optimizer links.
    pub gradients: usize,
    /// Trainable parameter elements.
    pub params: u64,
    /// Resident bytes of the parameter ops: the weights alone.
    pub parameter_bytes: f64,
    /// Parameters plus optimizer state: what every replica keeps in memory.
    pub resident_bytes: f64,
    /// Floating-point operations of one iteration at the batch size.
    pub flops: f64,
    /// Bytes summed over every edge's tensor.
    pub edge_bytes: f64,
    /// Totals per phase, keyed by [`Phase::name`].
    pub per_phase: BTreeMap<String, PhaseSummary>,
}

/// Builds a graph op by op; ids are assigned in insertion order. Used by the zoo and importers.
#[derive(Debug, Default)]
pub struct GraphBuilder {
    ops: Vec<Op>,
    edges: Vec<Edge>,
    gradients: Vec<GradientLink>,
}

impl GraphBuilder {
    /// An empty builder.
    pub fn new() -> GraphBuilder {
        GraphBuilder::default()
    }

    /// Add an op; its `id` is replaced by its index so ids stay unique.
    pub fn add_op(&mut self, mut op: Op) -> OpIdx {
        let idx = self.ops.len();
        op.id = idx as u64;
        self.ops.push(op);
        idx
    }

    /// Op `i`, to fill in costs after adding it.
    pub fn op_mut(&mut self, i: OpIdx) -> &mut Op {
        &mut self.ops[i]
    }

    /// Op `i` as added so far.
    pub fn op(&self, i: OpIdx) -> &Op {
        &self.ops[i]
    }

    pub(crate) fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether there is no op.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Add a tensor edge of `bytes` (at the graph's batch size) from `src` to `dst`.
    pub fn add_edge(&mut self, src: OpIdx, dst: OpIdx, bytes: f64) {
        self.edges.push(Edge { src, dst, bytes });
    }

    /// Record that `grad`'s output is the gradient `optimizer` applies, with its tensor edge.
    pub fn add_gradient(&mut self, grad: OpIdx, optimizer: OpIdx, bytes: f64) {
        self.add_edge(grad, optimizer, bytes);
        self.gradients.push(GradientLink { grad, optimizer });
    }

    /// Validate and build the graph; `source` names the origin in error messages.
    pub fn finish(self, source: &str, name: &str, batch_size: u32) -> Result<Graph, InputError> {
        Graph::new(
            source,
            name,
            batch_size,
            self.ops,
            self.edges,
            self.gradients,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, phase: Phase) -> Op {
        Op::new(0, name, "X", phase)
    }

    #[test]
    fn adjacency_lists_every_edge_once() {
        let mut b = GraphBuilder::new();
        let a = b.add_op(op("a", Phase::Forward));
        let c = b.add_op(op("c", Phase::Forward));
        let d = b.add_op(op("d", Phase::Forward));
        b.add_edge(a, c, 1.0);
        b.add_edge(a, d, 2.0);
        b.add_edge(c, d, 3.0);
        let g = b.finish("<test>", "t", 1).unwrap();
        assert_eq!(g.successors(a).collect::<Vec<_>>(), vec![c, d]);
        assert_eq!(g.predecessors(d).collect::<Vec<_>>(), vec![a, c]);
        assert_eq!(g.out_edges(d).len(), 0);
        assert_eq!(g.topological_order(), vec![a, c, d]);
    }

    #[test]
    fn batch_scaling_defaults_by_phase() {
        assert!(op("f", Phase::Forward).scales_with_batch());
        assert!(!op("o", Phase::Optimizer).scales_with_batch());
        let mut fixed = op("f", Phase::Forward);
        fixed.batch_scaled = Some(false);
        assert!(!fixed.scales_with_batch());
    }
}
