//! FastT's DPOS (Yi et al., 2020, Alg. 1): ops in decreasing upward rank, computed with each op's
//! *largest* compute time over the GPUs and each tensor's *largest* transfer time over GPU pairs;
//! the critical path (from the highest-ranked entry, always following the highest-ranked
//! successor) goes to a critical-path GPU — the one with the smallest mean compute time over as
//! many remaining critical-path ops as its memory holds, the next such GPU once it is full — and
//! every other op goes to the GPU with room where it finishes earliest, inserted into idle gaps.
//! The start times are the execution order FastT enforces.
//!
//! OS-DPOS (Alg. 2) then splits critical-path ops, longest first, keeping a split only while it
//! shortens the iteration and stopping at the first op no split helps. Stand-ins: a split is the
//! op's batch dimension over the n fastest GPUs (n = 2, 4, 8, …), expressed as a one-op
//! all-reduce group (the compiler adds the slicing, concatenation and, for weight gradients, the
//! reduction), and each candidate is judged by the simulator rather than by re-running DPOS on
//! the split graph; the start is DPOS's placement, not FastT's data-parallel graph.

use super::list::{Costs, Schedule};
use super::metis::devices_by_speed;
use super::{Budget, Placer};
use crate::error::Result;
use crate::evaluate::{Placement, evaluate};
use crate::graph::{Graph, OpIdx, Splittability};
use crate::problem::Problem;
use crate::strategy::{GroupDecision, ReplicationOption, Strategy};

pub(crate) struct Dpos;

impl Placer for Dpos {
    fn name(&self) -> &'static str {
        "dpos"
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let costs = Costs::new(p, budget);
        let g = p.graph;
        let rank = max_cost_ranks(g, &costs);
        let on_path = critical_path(g, &rank);
        let mut order = g.topological_order();
        // Stable: equal ranks keep topological order, so inputs are always placed first.
        order.sort_by(|&a, &b| rank[b].total_cmp(&rank[a]));
        let mut s = Schedule::new(*p, &costs);
        let mut cp_device: Option<usize> = None;
        let mut cp_used: Vec<bool> = vec![false; costs.devices];
        for op in order {
            let d = if on_path[op] {
                if cp_device.is_none_or(|d| !s.has_room(op, d)) {
                    cp_device = critical_path_device(&s, op, &on_path, &cp_used);
                    if let Some(d) = cp_device {
                        cp_used[d] = true;
                    }
                }
                cp_device
            } else {
                None
            };
            let d = match d {
                Some(d) if s.has_room(op, d) => d,
                _ => {
                    let candidates = s.candidates(op)?;
                    s.earliest_finish(op, &candidates, true)
                }
            };
            s.assign(op, d, true);
        }
        Ok(s.into_placement(
            "dpos: FastT Alg. 1 (critical-path GPU, insertion EFT); no operation splitting",
        ))
    }
}

/// Upward ranks with worst-case costs (FastT's w_i and c_ij are maxima over devices).
pub(crate) fn max_cost_ranks(g: &Graph, costs: &Costs) -> Vec<f64> {
    let mut rank = vec![0.0; g.len()];
    for &op in g.topological_order().iter().rev() {
        let tail = g
            .out_edges(op)
            .iter()
            .map(|&e| g.edges()[e])
            .map(|edge| costs.max_transfer(edge.bytes) + rank[edge.dst])
            .fold(0.0, f64::max);
        let w = costs.max_compute(op);
        rank[op] = w + tail;
    }
    rank
}

/// Ops on the critical path: the highest-ranked entry op, then repeatedly its highest-ranked
/// successor.
pub(crate) fn critical_path(g: &Graph, rank: &[f64]) -> Vec<bool> {
    let mut on = vec![false; g.len()];
    let best = |ops: &mut dyn Iterator<Item = OpIdx>| {
        ops.max_by(|&a, &b| rank[a].total_cmp(&rank[b]).then(b.cmp(&a)))
    };
    let mut current = best(&mut (0..g.len()).filter(|&op| g.in_edges(op).is_empty()));
    while let Some(op) = current {
        on[op] = true;
        current = best(&mut g.successors(op));
    }
    on
}

/// The unused GPU with the smallest mean compute time over the critical-path ops it can hold,
/// taken in rank order from `from` on (memory estimated as in [`super::list`]); `None` when no
/// unused GPU has room for `from`.
fn critical_path_device(
    s: &Schedule,
    from: OpIdx,
    on_path: &[bool],
    used: &[bool],
) -> Option<usize> {
    let remaining: Vec<OpIdx> = (0..on_path.len())
        .filter(|&op| on_path[op] && s.device[op].is_none())
        .collect();
    let mut best = None;
    let mut best_mean = f64::INFINITY;
    for (d, &taken) in used.iter().enumerate() {
        if taken || !s.has_room(from, d) {
            continue;
        }
        let free = s.costs.capacity[d] - s.memory[d];
        let (mut held, mut time, mut count) = (0.0, 0.0, 0usize);
        for &op in &remaining {
            held += s.costs.own_bytes[op];
            if held > free {
                break;
            }
            time += s.costs.compute(op, d);
            count += 1;
        }
        let mean = time / count.max(1) as f64;
        if mean < best_mean {
            best_mean = mean;
            best = Some(d);
        }
    }
    best
}

pub(crate) struct OsDpos;

impl Placer for OsDpos {
    fn name(&self) -> &'static str {
        "os-dpos"
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let base = Dpos.place(p, budget)?;
        let costs = Costs::new(p, budget);
        let on_path = critical_path(p.graph, &max_cost_ranks(p.graph, &costs));
        let fastest = devices_by_speed(p);
        let device_of = |op: OpIdx| base.strategy.decision(base.strategy.group_of(op)).devices[0];
        let mut path: Vec<OpIdx> = (0..p.graph.len())
            .filter(|&op| on_path[op] && splittable(p, op))
            .collect();
        path.sort_by(|&a, &b| {
            let t = |op: OpIdx| costs.compute(op, device_of(op));
            t(b).total_cmp(&t(a)).then(a.cmp(&b))
        });
        let time = |s: &Strategy| -> Result<f64> {
            let candidate = Placement {
                strategy: s.clone(),
                simulated_us: None,
                ..base.clone()
            };
            let e = evaluate(p, &candidate)?;
            // An out-of-memory split is never an improvement.
            Ok(if e.result.oom.is_empty() {
                e.report.iteration_us
            } else {
                f64::INFINITY
            })
        };
        let mut current = base.strategy.clone();
        let mut current_time = time(&current)?;
        let mut trials = 0;
        let mut splits = 0;
        'ops: for op in path {
            let mut best: Option<(f64, Strategy)> = None;
            let mut n = 2;
            while n <= fastest.len() {
                if trials >= budget.steps {
                    break 'ops;
                }
                trials += 1;
                let mut devices = fastest[..n].to_vec();
                devices.sort_unstable();
                let candidate = split(&current, op, devices, fastest.len())?;
                let t = time(&candidate)?;
                if best.as_ref().is_none_or(|b| t < b.0) {
                    best = Some((t, candidate));
                }
                n *= 2;
            }
            match best {
                Some((t, s)) if t < current_time => {
                    current = s;
                    current_time = t;
                    splits += 1;
                }
                _ => break,
            }
        }
        Ok(Placement {
            strategy: current,
            order: base.order,
            note: format!(
                "os-dpos: {splits} critical-path ops batch-split after DPOS, judged by the \
                 simulator (stand-in for re-running DPOS on the split graph)"
            ),
            predicted_us: None,
            fits: None,
            simulated_us: None,
        })
    }
}

/// Whether `op` has a batch dimension to split along.
fn splittable(p: &Problem, op: OpIdx) -> bool {
    let o = p.graph.op(op);
    o.scales_with_batch() && o.split != Splittability::None
}

/// `s` with `op` moved to a group of its own, batch-split over `devices`.
fn split(s: &Strategy, op: OpIdx, devices: Vec<usize>, gpus: usize) -> Result<Strategy> {
    let mut op_group = s.op_groups().to_vec();
    let mut decisions = s.decisions().to_vec();
    op_group[op] = decisions.len() as u32;
    decisions.push(GroupDecision {
        devices,
        option: ReplicationOption::AllReduce,
    });
    let mut out = Strategy::new(
        "os-dpos",
        op_group,
        decisions,
        s.batch_split,
        s.op_groups().len(),
        gpus,
    )?;
    out.allreduce = s.allreduce;
    Ok(out)
}
