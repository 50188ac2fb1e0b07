//! Baechi's memory-constrained placers (Jeon et al., SoCC 2020), as described in the TAG notes:
//! - `m-topo`: ops in topological order fill one GPU after another, each GPU taking about its
//!   share of the total memory (never more than it has);
//! - `m-etf`: earliest-task-first list scheduling — repeatedly start the ready op that can start
//!   earliest, on the GPU where it can, among GPUs with room for it;
//! - `m-sct`: ETF with favourite children — an op stays on its parent's GPU when waiting for that
//!   GPU costs less than receiving the parent's output. Stand-in: Baechi picks favourite children
//!   with an LP relaxation; here each op's favourite child is the child its largest output goes
//!   to (greedy).

use super::list::{Costs, Schedule};
use super::{Budget, Placer};
use crate::error::Result;
use crate::evaluate::Placement;
use crate::graph::{Graph, OpIdx};
use crate::problem::Problem;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Baechi {
    Topo,
    Etf,
    Sct,
}

impl Placer for Baechi {
    fn name(&self) -> &'static str {
        match self {
            Baechi::Topo => "m-topo",
            Baechi::Etf => "m-etf",
            Baechi::Sct => "m-sct",
        }
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let costs = Costs::new(p, budget);
        let mut s = Schedule::new(*p, &costs);
        let note = match self {
            Baechi::Topo => {
                topo(&mut s)?;
                "m-topo: topological order, GPUs filled to their memory share"
            }
            Baechi::Etf => {
                etf(&mut s, None)?;
                "m-etf: earliest task first with memory limits"
            }
            Baechi::Sct => {
                etf(&mut s, Some(&favourite_children(p.graph)))?;
                "m-sct: greedy favourite-child stand-in (largest output), not Baechi's LP"
            }
        };
        Ok(s.into_placement(note))
    }
}

/// m-TOPO: walk the topological order, moving to the next GPU once the current one holds its
/// share of the estimated total memory.
fn topo(s: &mut Schedule) -> Result<()> {
    let g = s.p.graph;
    let n = s.costs.devices;
    let total: f64 = (0..g.len()).map(|op| s.costs.own_bytes[op]).sum();
    let share = total / n as f64;
    let mut d = 0;
    for op in g.topological_order() {
        s.within_deadline()?;
        let limit = |s: &Schedule, d: usize| s.costs.capacity[d].min(share * 1.05);
        while d + 1 < n && s.memory[d] > 0.0 && s.memory[d] + s.memory_cost(op, d) > limit(s, d) {
            d += 1;
        }
        let target = if s.has_room(op, d) {
            d
        } else {
            // Best effort: the GPU with the most free memory (the placement is OOM if none has
            // room).
            let candidates = s.candidates(op)?;
            *candidates
                .iter()
                .max_by(|&&a, &&b| {
                    let free = |x: usize| s.costs.capacity[x] - s.memory[x];
                    free(a).total_cmp(&free(b))
                })
                .expect("there is a device")
        };
        s.assign(op, target, true);
    }
    Ok(())
}

/// Each op's favourite child: the successor its largest output edge feeds.
fn favourite_children(g: &Graph) -> Vec<Option<OpIdx>> {
    (0..g.len())
        .map(|op| {
            g.out_edges(op)
                .iter()
                .map(|&e| g.edges()[e])
                .max_by(|a, b| a.bytes.total_cmp(&b.bytes))
                .map(|edge| edge.dst)
        })
        .collect()
}

/// ETF list scheduling. With favourite children, a favourite child whose parent's GPU is within
/// one transfer time of its best start is kept on the parent's GPU.
fn etf(s: &mut Schedule, favourite: Option<&[Option<OpIdx>]>) -> Result<()> {
    let g = s.p.graph;
    let mut waiting: Vec<usize> = (0..g.len()).map(|op| g.in_edges(op).len()).collect();
    let mut ready: Vec<OpIdx> = (0..g.len()).filter(|&op| waiting[op] == 0).collect();
    // The parent whose favourite child each op is (the first one found).
    let mut favoured_by = vec![None; g.len()];
    if let Some(fav) = favourite {
        for (parent, child) in fav.iter().enumerate() {
            if let Some(c) = *child
                && favoured_by[c].is_none()
            {
                favoured_by[c] = Some(parent);
            }
        }
    }
    while !ready.is_empty() {
        let (i, d) = pick(s, &ready, &favoured_by)?;
        let op = ready.swap_remove(i);
        s.assign(op, d, false);
        for &e in g.out_edges(op) {
            let v = g.edges()[e].dst;
            waiting[v] -= 1;
            if waiting[v] == 0 {
                ready.push(v);
            }
        }
    }
    Ok(())
}

/// The ready op (index into `ready`) and GPU with the earliest start; ties go to the earlier
/// finish, then the lower op index.
fn pick(
    s: &mut Schedule,
    ready: &[OpIdx],
    favoured_by: &[Option<OpIdx>],
) -> Result<(usize, usize)> {
    let mut best = (0, 0);
    let mut best_key = (f64::INFINITY, f64::INFINITY, usize::MAX);
    for (i, &op) in ready.iter().enumerate() {
        let candidates = s.candidates(op)?;
        let mut choice = None;
        let mut start_finish = (f64::INFINITY, f64::INFINITY);
        for &d in &candidates {
            let t = s.times(op, d, false);
            if t < start_finish {
                start_finish = t;
                choice = Some(d);
            }
        }
        let mut d = choice.expect("there is a candidate");
        if let Some(parent) = favoured_by[op]
            && let Some(pd) = s.device[parent]
            && pd != d
            && candidates.contains(&pd)
        {
            let stay = s.times(op, pd, false);
            let bytes: f64 = g_edge_bytes(s, parent, op);
            if stay.0 <= start_finish.0 + s.costs.cluster.transfer_us(pd, d, bytes) {
                start_finish = stay;
                d = pd;
            }
        }
        let key = (start_finish.0, start_finish.1, op);
        if key < best_key {
            best_key = key;
            best = (i, d);
        }
    }
    Ok(best)
}

/// Bytes flowing from `u` to `v`.
fn g_edge_bytes(s: &Schedule, u: OpIdx, v: OpIdx) -> f64 {
    let g = s.p.graph;
    g.out_edges(u)
        .iter()
        .map(|&e| g.edges()[e])
        .filter(|edge| edge.dst == v)
        .map(|edge| edge.bytes)
        .sum()
}
