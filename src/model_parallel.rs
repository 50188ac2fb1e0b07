//! Model parallelism inside an op group: which of the group's devices runs each of its ops.
//! Decided here, above the compiler, and carried by the strategy
//! ([`Strategy::model_parallel_devices`]), as SFB's duplicated ops are.

use std::borrow::Cow;

use crate::cluster::Cluster;
use crate::cost::CostModel;
use crate::graph::{Graph, OpIdx};
use crate::group::chunks::balanced_chunks;
use crate::group::metis::partition_ops_with_memory;
use crate::strategy::{ReplicationOption, Strategy};

/// `strategy` with its model-parallel groups' ops placed ([`op_devices`]); itself when it has no
/// such group or they are placed already.
pub fn decided<'s>(
    graph: &Graph,
    cluster: &Cluster,
    strategy: &'s Strategy,
    cost: &CostModel,
) -> Cow<'s, Strategy> {
    let has_group = strategy
        .decisions()
        .iter()
        .any(|d| d.option == ReplicationOption::ModelParallel);
    if !has_group || strategy.model_parallel_devices.len() == graph.len() {
        return Cow::Borrowed(strategy);
    }
    let mut placed = strategy.clone();
    placed.model_parallel_devices = op_devices(graph, cluster, strategy, cost).into();
    Cow::Owned(placed)
}

/// For model-parallel groups: each op's device. TAG §4.2 divides the group with METIS; we
/// balance compute (mean time over the group's devices) and memory (resident plus output bytes)
/// as two METIS constraints, parts going to devices in order. Should METIS fail, the group's ops
/// are cut in topological order into chunks of balanced compute.
pub(crate) fn op_devices(
    graph: &Graph,
    cluster: &Cluster,
    strategy: &Strategy,
    cost: &CostModel,
) -> Vec<u32> {
    let mut device = vec![0u32; graph.len()];
    // Each group's ops in topological order, in one pass over the order.
    let mut in_order: Vec<Vec<OpIdx>> = vec![Vec::new(); strategy.group_count()];
    for op in graph.topological_order() {
        in_order[strategy.group_of(op)].push(op);
    }
    for (group, decision) in strategy.decisions().iter().enumerate() {
        if decision.option != ReplicationOption::ModelParallel {
            continue;
        }
        let members = std::mem::take(&mut in_order[group]);
        let parts = decision.devices.len();
        let mut weights = vec![0.0; graph.len()];
        let mut memory = vec![0.0; graph.len()];
        for &op in &members {
            let o = graph.op(op);
            weights[op] = decision
                .devices
                .iter()
                .map(|&d| cost.compute_time_us(o, &cluster.devices[d].gpu, 1.0))
                .sum::<f64>()
                / parts as f64;
            memory[op] = o.resident_bytes + o.output_bytes;
        }
        let chunks = if parts > 1 {
            partition_ops_with_memory(graph, &weights, &memory, &members, parts, 0).ok()
        } else {
            None
        }
        .unwrap_or_else(|| balanced_chunks(&members, &weights, parts));
        for (&op, &part) in members.iter().zip(&chunks) {
            device[op] = decision.devices[part as usize % parts] as u32;
        }
    }
    device
}
