//! Re-batching a graph: the same training iteration at another batch size, for graphs that cannot
//! be rebuilt from a model description (imports, exports from PyTorch).
//!
//! Everything that scales with the batch is scaled linearly by `new / old`:
//! - an op's FLOPs, memory traffic and profiled times, where the op's work scales with the batch
//!   ([`Op::scales_with_batch`]);
//! - an op's output bytes, and the bytes of every edge leaving it, where its output carries the
//!   batch ([`Op::carries_batch`]: slices of it concatenate into the whole).
//!
//! What that assumes: every batch-carrying tensor's size is proportional to the batch (true of
//! inputs, activations and their gradients), the compute of a batch-scaled op is linear in the
//! batch (the cost model still applies its own efficiency to the new sizes, but profiled times are
//! scaled as measured, so a kernel that under-fills a GPU at a small batch is not re-timed), and
//! what does not carry the batch (parameters, their gradients, optimizer state, reduced
//! statistics such as a loss) keeps its size.

use super::Graph;
use crate::error::InputError;

/// `graph` at `batch` samples per iteration; `source` names it in errors.
pub fn rebatch(graph: &Graph, batch: u32, source: &str) -> Result<Graph, InputError> {
    if batch == 0 {
        return Err(InputError::new(source, "--batch", "must be at least 1"));
    }
    let ratio = f64::from(batch) / f64::from(graph.batch_size);
    let mut ops = graph.ops().to_vec();
    for op in &mut ops {
        if op.scales_with_batch() {
            op.flops *= ratio;
            op.bytes_accessed *= ratio;
            op.profiled_us.values_mut().for_each(|us| *us *= ratio);
        }
        if op.carries_batch() {
            op.output_bytes *= ratio;
        }
    }
    let mut edges = graph.edges().to_vec();
    for edge in &mut edges {
        if graph.op(edge.src).carries_batch() {
            edge.bytes *= ratio;
        }
    }
    graph.with_numbers(source, batch, ops, edges)
}
