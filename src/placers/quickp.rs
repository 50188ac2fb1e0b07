//! QuickP's placement units evaluated by list scheduling. QuickP (§IV-B/C) fuses operators
//! (Algorithm 1) and ties them into co-location groups by critical-path rank (eq. 7), then solves
//! a MILP over the groups and evaluates placements with HeteroG's list scheduling. Stand-in: no
//! MILP — the co-location groups ([`crate::group::quickp`]) are placed whole, highest upward rank
//! first among the groups whose inputs are placed, each on the GPU with room where it would
//! finish earliest; within a group, ops run in topological order in idle gaps.

use std::collections::BinaryHeap;

use super::heft::upward_ranks;
use super::list::{Costs, Schedule};
use super::{Budget, Placer};
use crate::error::Result;
use crate::evaluate::Placement;
use crate::graph::OpIdx;
use crate::group::quickp::{QuickpOptions, quickp};
use crate::group::{op_weights, reference_gpu};
use crate::problem::Problem;
use crate::sim::deadline;

pub(crate) struct Quickp;

impl Placer for Quickp {
    fn name(&self) -> &'static str {
        "quickp"
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let g = p.graph;
        let weights = op_weights(g, reference_gpu(g), p.cost);
        // Its coarsening takes seconds on a graph of 10⁵ ops: it gives up at the budget's
        // deadline, as the list scheduling below does.
        let grouping = deadline::during(budget.deadline, || {
            quickp(g, &weights, &QuickpOptions::default())
        })?
        .colocated;
        let k = grouping.num_groups();
        // Members of each group in topological order.
        let mut members: Vec<Vec<OpIdx>> = vec![Vec::new(); k];
        for op in g.topological_order() {
            members[grouping.op_group[op] as usize].push(op);
        }
        let costs = Costs::new(p, budget);
        let rank = upward_ranks(g, &costs);
        let group_rank: Vec<f64> = members
            .iter()
            .map(|m| m.iter().map(|&op| rank[op]).fold(0.0, f64::max))
            .collect();
        // Kahn over the (acyclic) coarse graph, most critical ready group first.
        let mut waiting = vec![0usize; k];
        let mut succ: Vec<Vec<usize>> = vec![Vec::new(); k];
        for e in grouping.coarse_edges.iter().filter(|e| e.src != e.dst) {
            waiting[e.dst as usize] += 1;
            succ[e.src as usize].push(e.dst as usize);
        }
        let key = |x: usize| (ordered(group_rank[x]), std::cmp::Reverse(x));
        let mut ready: BinaryHeap<_> = (0..k).filter(|&x| waiting[x] == 0).map(key).collect();
        let mut s = Schedule::new(*p, &costs);
        while let Some((_, std::cmp::Reverse(x))) = ready.pop() {
            let unit = &members[x];
            let d = best_device(&s, unit)?;
            s.place_unit(unit, d);
            for &y in &succ[x] {
                waiting[y] -= 1;
                if waiting[y] == 0 {
                    ready.push(key(y));
                }
            }
        }
        Ok(s.into_placement(
            "quickp: QuickP co-location groups by list scheduling (stand-in: no MILP)",
        ))
    }
}

/// The GPU with room where the unit would finish first; best effort when none has room.
fn best_device(s: &Schedule, unit: &[OpIdx]) -> Result<usize> {
    s.within_deadline()?;
    let mut best = None;
    let mut best_finish = f64::INFINITY;
    for d in 0..s.costs.devices {
        if !s.unit_has_room(unit, d) {
            continue;
        }
        let finish = s.unit_start(unit, d) + s.unit_compute(unit, d);
        if finish < best_finish {
            best_finish = finish;
            best = Some(d);
        }
    }
    Ok(best.unwrap_or_else(|| s.most_free()))
}

/// A total order on finite ranks for the heap.
fn ordered(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}
