//! The op groups a search decides, and the order it decides them in: METIS groups renumbered by
//! descending compute (TAG §4.2.2) or by compute plus AllReduce cost ([`GroupOrder::Impact`]).

use super::config::GroupOrder;
use crate::error::Result;
use crate::group::{metis::metis, op_weights, reference_gpu};
use crate::problem::Problem;

/// METIS op groups (at most `k`, fewer on small graphs), renumbered by descending compute.
pub fn metis_groups(p: &Problem, k: usize, seed: u64) -> Result<Vec<u32>> {
    ordered_groups(p, k, seed, GroupOrder::Compute)
}

/// METIS op groups (weighted by compute), renumbered in the search order `order`.
pub fn ordered_groups(p: &Problem, k: usize, seed: u64, order: GroupOrder) -> Result<Vec<u32>> {
    let weights = op_weights(p.graph, reference_gpu(p.graph), p.cost);
    // METIS refuses parts of a vertex or two, as in the MCMC baseline.
    let k = k.min(p.graph.len() / 4).max(1);
    let grouping = metis(p.graph, &weights, k, seed)?;
    let rank = match order {
        GroupOrder::Compute => weights,
        GroupOrder::Impact => impact_weights(p, weights),
    };
    Ok(order_by_compute(&grouping.op_group, &rank))
}

/// Compute weights plus, on parameter ops, a ring AllReduce of their bytes over every device of
/// the cluster (ring in device order, its slowest hop).
fn impact_weights(p: &Problem, mut weights: Vec<f64>) -> Vec<f64> {
    let all: Vec<usize> = (0..p.cluster.devices.len()).collect();
    for (w, op) in weights.iter_mut().zip(p.graph.ops()) {
        if op.phase == crate::graph::Phase::Parameter && op.resident_bytes > 0.0 {
            *w += crate::cost::ring_allreduce_us(p.cluster, &all, op.resident_bytes);
        }
    }
    weights
}

/// Renumber groups so group 0 has the most compute (ties: lower old id first).
pub(crate) fn order_by_compute(op_group: &[u32], weights: &[f64]) -> Vec<u32> {
    let n = op_group.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
    let mut compute = vec![0.0; n];
    for (op, &g) in op_group.iter().enumerate() {
        compute[g as usize] += weights[op];
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| compute[b].total_cmp(&compute[a]).then(a.cmp(&b)));
    let mut rank = vec![0u32; n];
    for (r, &g) in order.iter().enumerate() {
        rank[g] = r as u32;
    }
    op_group.iter().map(|&g| rank[g as usize]).collect()
}

/// For each op group, the op groups joined to it by a tensor or a gradient, and itself.
pub(super) fn group_neighbours(
    graph: &crate::graph::Graph,
    op_group: &[u32],
    groups: usize,
) -> Vec<Vec<usize>> {
    let mut sets = vec![std::collections::BTreeSet::new(); groups];
    for (g, set) in sets.iter_mut().enumerate() {
        set.insert(g);
    }
    let pairs = graph
        .edges()
        .iter()
        .map(|e| (e.src, e.dst))
        .chain(graph.gradients().iter().map(|l| (l.grad, l.optimizer)));
    for (a, b) in pairs {
        let (ga, gb) = (op_group[a] as usize, op_group[b] as usize);
        sets[ga].insert(gb);
        sets[gb].insert(ga);
    }
    sets.into_iter().map(|s| s.into_iter().collect()).collect()
}
