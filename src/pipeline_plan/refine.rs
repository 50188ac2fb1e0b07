//! The best plan's stage boundaries and micro-batch count moved on the simulator (beyond AMP and
//! Metis, whose cuts come from their cost models alone): the estimate sees each stage alone, so
//! it cannot price what the simulator does — a folded twin's end stages sharing one machine, the
//! gradient AllReduce overlapping the last micro-batch's backward, sends contending for one NIC.

use std::time::Instant;

use super::chunks::Chunks;
use super::plan::{Plan, Tried, micro_batch_counts};
use super::simulated_plan::{Simulated, fastest_noting, stage_busy};
use crate::error::Result;
use crate::evaluate::limit_to_beat;
use crate::problem::Problem;

/// Most simulations the refinement runs (of its moves: the plan it starts from was simulated
/// before). Counted, not timed, so a plan is refined the same on any machine; a round that would
/// pass it is not started.
pub(crate) const REFINE_SIMULATIONS: usize = 23;

/// The moves looked at since the last move kept: each stage's (it one chunk shorter at either
/// end; a round takes the busiest stages not yet looked at) and the micro-batch count's (one step
/// either way among the counts that divide the batch; the first round after each move kept).
struct Looked {
    stages: Vec<bool>,
    micro_batches: bool,
}

/// `best` (simulated from `plan`) after single moves, a round of them side by side at a time,
/// the fastest strictly faster one kept, until every stage's moves have failed since the last
/// one kept, `simulations` ([`REFINE_SIMULATIONS`] by default) are spent or the deadline passes
/// (between rounds). Returns the pipeline reached, its plan, the moves kept and every move
/// simulated with its time and fit ([`Tried`]; a move given up past the best's time at that
/// time, a lower bound: TAG's tree takes them as known and does not simulate them again).
pub(super) fn refined(
    p: &Problem,
    chunks: &Chunks,
    mut best: Simulated,
    mut plan: Plan,
    simulations: usize,
    deadline: Option<Instant>,
) -> Result<(Simulated, Plan, usize, Vec<Tried>)> {
    let packing = best.pipeline.strategy.allreduce;
    let stages = plan.ends.len();
    let fresh = || Looked {
        stages: vec![false; stages],
        micro_batches: false,
    };
    let (mut looked, mut kept, mut simulated) = (fresh(), 0, 0);
    let mut tried = Vec::new();
    let mut busy = stage_busy(&plan, &best.busy);
    while let Some(moves) = round(&plan, &busy, &mut looked, p.graph.batch_size) {
        let out_of_time = crate::interrupt::past(deadline);
        if out_of_time || simulated + moves.len() > simulations {
            break;
        }
        simulated += moves.len();
        let candidates: Vec<_> = moves.iter().map(|m| (m, packing)).collect();
        let mut finished = Vec::new();
        let to_beat = Some(&best.pipeline);
        let faster = fastest_noting(p, chunks, &candidates, to_beat, deadline, &mut finished)?;
        let limit_us = limit_to_beat(best.pipeline.time_us, best.pipeline.fits);
        // A move not finished past the deadline may have been abandoned, not found slower: it
        // is no bound, so only the finished ones are noted.
        let abandoned = crate::interrupt::past(deadline);
        for (i, plan) in moves.iter().enumerate() {
            let done = finished.iter().find(|f| f.0 == i);
            if done.is_none() && abandoned {
                continue;
            }
            let (time_us, fits) = done.map_or((limit_us, true), |f| (f.1, f.2));
            tried.push((plan.clone(), time_us, fits));
        }
        if let Some((i, s)) = faster {
            plan = moves[i].clone();
            busy = stage_busy(&plan, &s.busy);
            best = s;
            kept += 1;
            looked = fresh();
        }
    }
    Ok((best, plan, kept, tried))
}

/// The next round's moves from `plan` (stages' busy µs `busy`), marking what it looks at; `None`
/// when every stage has been looked at. A stage of one chunk, or of one chunk besides its
/// neighbours', has fewer moves, maybe none (then the round is the micro-batch count's alone,
/// or the next stage's).
fn round(plan: &Plan, busy: &[f64], looked: &mut Looked, batch: u32) -> Option<Vec<Plan>> {
    let mut out = Vec::new();
    if !looked.micro_batches {
        looked.micro_batches = true;
        out.extend(micro_batch_moves(plan, batch));
    }
    // Stages busiest first until the round has a move, then one more while it is small (two
    // cores run a round of four in two turns).
    let mut one_more = true;
    while let Some(s) = busiest_not_looked_at(busy, looked) {
        if !out.is_empty() {
            if !one_more || out.len() > 2 {
                break;
            }
            one_more = false;
        }
        looked.stages[s] = true;
        out.extend(shrinking(plan, s));
    }
    (!out.is_empty()).then_some(out)
}

/// The busiest stage not looked at yet (the first of equals).
fn busiest_not_looked_at(busy: &[f64], looked: &Looked) -> Option<usize> {
    (0..busy.len())
        .filter(|&s| !looked.stages[s])
        .max_by(|&a, &b| busy[a].total_cmp(&busy[b]).then(b.cmp(&a)))
}

/// `plan` with stage `s` one chunk shorter at its start and at its end (where it has a
/// neighbour and keeps a chunk).
fn shrinking(plan: &Plan, s: usize) -> Vec<Plan> {
    let start = if s == 0 { 0 } else { plan.ends[s - 1] };
    let end = plan.ends[s];
    let mut out = Vec::new();
    if s > 0 && start + 1 < end {
        let mut moved = plan.clone();
        moved.ends[s - 1] = start + 1;
        out.push(moved);
    }
    if s + 1 < plan.ends.len() && end - 1 > start {
        let mut moved = plan.clone();
        moved.ends[s] = end - 1;
        out.push(moved);
    }
    out
}

/// `plan` with the micro-batch counts either side of its own among those dividing `batch`.
fn micro_batch_moves(plan: &Plan, batch: u32) -> Vec<Plan> {
    let counts = micro_batch_counts(batch, 1);
    let Some(i) = counts.iter().position(|&m| m == plan.micro_batches) else {
        return Vec::new();
    };
    let fewer = i.checked_sub(1).map(|j| counts[j]);
    let more = counts.get(i + 1).copied();
    [fewer, more]
        .into_iter()
        .flatten()
        .map(|m| {
            let mut moved = plan.clone();
            moved.micro_batches = m;
            moved
        })
        .collect()
}
