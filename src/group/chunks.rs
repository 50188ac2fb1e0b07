//! The simple baseline grouping: ops in topological order cut into consecutive chunks of about
//! equal compute time (an op goes to the chunk its time midpoint falls in). The compiler cuts a
//! model-parallel op group the same way when METIS cannot.

use super::Grouping;
use crate::error::Result;
use crate::graph::{Graph, OpIdx};

/// `k` contiguous chunks of the graph's topological order (the `chunks` grouping method).
pub(crate) fn contiguous_chunks(graph: &Graph, weights: &[f64], k: usize) -> Result<Grouping> {
    let order = graph.topological_order();
    let chunk = balanced_chunks(&order, weights, k);
    let mut group = vec![0u32; graph.len()];
    for (&op, &c) in order.iter().zip(&chunk) {
        group[op] = c;
    }
    Grouping::from_assignment(graph, weights, "chunks", group)
}

/// `ops` (in topological order) cut into at most `parts` consecutive chunks of balanced
/// `weights` (indexed by op; missing weights count as zero); `result[i]` is the chunk of
/// `ops[i]`. Without any weight, the op counts are balanced instead.
pub(crate) fn balanced_chunks(ops: &[OpIdx], weights: &[f64], parts: usize) -> Vec<u32> {
    let parts = parts.clamp(1, ops.len().max(1));
    let weight = |op: OpIdx| weights.get(op).copied().unwrap_or(0.0);
    let total: f64 = ops.iter().map(|&op| weight(op)).sum();
    let mut before = 0.0;
    ops.iter()
        .enumerate()
        .map(|(pos, &op)| {
            let w = weight(op);
            let frac = if total > 0.0 {
                (before + w / 2.0) / total
            } else {
                (pos as f64 + 0.5) / ops.len() as f64
            };
            before += w;
            ((frac * parts as f64) as usize).min(parts - 1) as u32
        })
        .collect()
}
