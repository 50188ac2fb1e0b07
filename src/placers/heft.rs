//! HEFT (Topcuoglu et al., 2002): ops by decreasing upward rank, computed with compute times
//! averaged over the GPUs and transfer times averaged over GPU pairs; each op goes to the GPU
//! where it finishes earliest, inserted into an idle gap when one is long enough. Memory: only
//! GPUs with room are candidates (see [`super::list`]).

use super::list::{Costs, Schedule};
use super::{Budget, Placer};
use crate::error::Result;
use crate::evaluate::Placement;
use crate::graph::{Graph, OpIdx};
use crate::problem::Problem;

pub(crate) struct Heft;

impl Placer for Heft {
    fn name(&self) -> &'static str {
        "heft"
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let costs = Costs::new(p, budget);
        let order = rank_order(p.graph, &costs);
        let mut s = Schedule::new(*p, &costs);
        for op in order {
            let candidates = s.candidates(op)?;
            let d = s.earliest_finish(op, &candidates, true);
            s.assign(op, d, true);
        }
        Ok(s.into_placement("heft: upward rank, insertion-based EFT"))
    }
}

/// Upward rank of every op: its mean compute time plus the longest mean-cost path to an exit.
pub(crate) fn upward_ranks(g: &Graph, costs: &Costs) -> Vec<f64> {
    let mut rank = vec![0.0; g.len()];
    for &op in g.topological_order().iter().rev() {
        let tail = g
            .out_edges(op)
            .iter()
            .map(|&e| g.edges()[e])
            .map(|edge| costs.mean_transfer(edge.bytes) + rank[edge.dst])
            .fold(0.0, f64::max);
        rank[op] = costs.mean_compute(op) + tail;
    }
    rank
}

/// Ops by decreasing rank; ties keep topological order, so every op follows its inputs even when
/// zero-cost ops give a parent and a child the same rank.
pub(crate) fn rank_order(g: &Graph, costs: &Costs) -> Vec<OpIdx> {
    let rank = upward_ranks(g, costs);
    let mut order = g.topological_order();
    // A stable sort keeps topological order among equal ranks.
    order.sort_by(|&a, &b| rank[b].total_cmp(&rank[a]));
    order
}
