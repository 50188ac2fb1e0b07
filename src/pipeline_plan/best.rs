//! The best pipeline: the candidates estimated, the best few simulated a round at a time, the
//! fastest tried under the other schedule and the other packings, its cut refined on the
//! simulator, and the frames the tree searches ([`super`]'s docs).

use std::time::Instant;

use rayon::prelude::*;

use super::candidates::{
    best_of_each_schedule, gpu_types, orders, other_schedule, same_units, units, with_folded_twins,
};
use super::chunks::{Chunks, chunk};
use super::frames::{FRAMES, Frame, PipelineFrames};
use super::plan::{BestPipeline, Plan, Tried, balanced, micro_batch_counts};
use super::refine::{REFINE_SIMULATIONS, refined};
use super::simulated_plan::{Simulated, fastest, fastest_noting};
use crate::data_parallel::PACKINGS;
use crate::error::{Result, SearchError};
use crate::problem::Problem;
use crate::strategy::{AllReducePacking, Schedule};

/// Candidates simulated side by side, a round at a time: a round's simulations are given up past
/// the best of the rounds before it, so the plans the tree gets as frames (those simulated to
/// their end) depend on the round's size. A count, not the machine's threads, so the frames do
/// not depend on the thread count (with one round per thread, 1 and 3 threads gave GPT other
/// frames: `tests/pipeline_tree.rs`). Two is the round two cores had.
pub(crate) const SIMULATED_PER_ROUND: usize = 2;

/// The best pipeline over the candidates (module docs); `None` on fewer than two GPUs or when
/// the batch has no micro-batch count to cut.
pub(crate) fn best_pipeline(
    p: &Problem,
    deadline: Option<Instant>,
) -> Result<Option<BestPipeline>> {
    best_pipeline_refined_by(p, deadline, REFINE_SIMULATIONS)
}

/// [`best_pipeline`] with at most `refine_simulations` simulations refining its cut (none: the
/// dynamic programme's cut as it is).
pub(crate) fn best_pipeline_refined_by(
    p: &Problem,
    deadline: Option<Instant>,
    refine_simulations: usize,
) -> Result<Option<BestPipeline>> {
    let found = best_pipeline_with_frames(p, deadline, refine_simulations)?;
    Ok(found.map(|(best, _)| best))
}

/// [`best_pipeline_refined_by`] and the frames TAG's tree searches from it ([`PipelineFrames`]):
/// the best plan as refined, then the fastest simulated plan of each other stage placement
/// (units and schedule), [`FRAMES`] at most.
pub(crate) fn best_pipeline_with_frames(
    p: &Problem,
    deadline: Option<Instant>,
    refine_simulations: usize,
) -> Result<Option<(BestPipeline, PipelineFrames)>> {
    let units = units(p.cluster, &p.cost.runtime);
    if units.len() < 2 {
        return Ok(None);
    }
    if crate::interrupt::past(deadline) {
        return Err(SearchError::OutOfTime.into());
    }
    let counts = micro_batch_counts(p.graph.batch_size, 2);
    let chunks = chunk(p, &gpu_types(&units), &counts)?;
    let mut plans: Vec<Plan> = orders(&units)
        .into_par_iter()
        .flat_map_iter(|order| {
            let counts = micro_batch_counts(p.graph.batch_size, order.len());
            counts
                .into_iter()
                .flat_map(|m| Schedule::ALL.map(|schedule| (m, schedule)))
                .filter_map(|(m, schedule)| balanced(&chunks, &order, m, schedule, p.cluster))
                .collect::<Vec<_>>()
        })
        .collect();
    plans.sort_by(|a, b| a.estimate_us.total_cmp(&b.estimate_us));
    let plans = with_folded_twins(best_of_each_schedule(plans));
    let mut tried = Vec::new();
    let Some((best, plan)) = simulated(p, &chunks, &plans, None, deadline, &mut tried)? else {
        return Ok(None);
    };
    let (best, plan, moves, refining) = if crate::interrupt::past(deadline) {
        (best, plan, 0, Vec::new())
    } else {
        let near = other_schedule(&plan, &chunks, p.cluster);
        let kept = simulated(
            p,
            &chunks,
            near.as_slice(),
            Some((best, plan)),
            deadline,
            &mut tried,
        )?;
        let (best, plan) = kept.expect("the best so far is kept");
        let best = repacked(p, &chunks, best, &plan, deadline)?;
        refined(p, &chunks, best, plan, refine_simulations, deadline)?
    };
    let mut best = best.pipeline;
    best.note = format!(
        "{}{}, {}",
        best.note,
        match moves {
            0 => String::new(),
            1 => ", its cut moved once on the simulator".to_string(),
            n => format!(", its cut moved {n} times on the simulator"),
        },
        packing_words(best.strategy.allreduce),
    );
    let frames = frames(chunks, &best, plan, refining, tried, p.graph.batch_size);
    Ok(Some((best, frames)))
}

/// The frames: `plan` (simulated as `best`, `refining` the moves its refinement simulated) first,
/// then the fastest of `tried` of each other stage placement, [`FRAMES`] in all.
fn frames(
    chunks: Chunks,
    best: &BestPipeline,
    plan: Plan,
    refining: Vec<Tried>,
    mut tried: Vec<Tried>,
    batch: u32,
) -> PipelineFrames {
    tried.sort_by(|a, b| {
        let (a, b) = ((a.1, a.2), (b.1, b.2));
        // Fitting first, then faster.
        b.1.cmp(&a.1).then(a.0.total_cmp(&b.0))
    });
    let mut kept = vec![Frame {
        plan,
        packing: best.strategy.allreduce,
        time_us: best.time_us,
        fits: best.fits,
        known: refining,
    }];
    for (plan, time_us, fits) in tried {
        if kept.len() == FRAMES {
            break;
        }
        let placed_alike =
            |k: &Frame| same_units(&k.plan.units, &plan.units) && k.plan.schedule == plan.schedule;
        if !kept.iter().any(placed_alike) {
            kept.push(Frame {
                plan,
                packing: AllReducePacking::PerTensor,
                time_us,
                fits,
                known: Vec::new(),
            });
        }
    }
    PipelineFrames::new(chunks, kept, batch)
}

/// `plans` simulated a round ([`SIMULATED_PER_ROUND`]) at a time, in order, and the fastest
/// kept with its plan (`best` the fastest so far, if any); a deadline stops between rounds once
/// one has run (one already past when planning starts gives up). A plan is kept only when
/// strictly faster than the best so far, so past that time its simulation is given up.
fn simulated(
    p: &Problem,
    chunks: &Chunks,
    plans: &[Plan],
    mut best: Option<(Simulated, Plan)>,
    deadline: Option<Instant>,
    tried: &mut Vec<Tried>,
) -> Result<Option<(Simulated, Plan)>> {
    for round in plans.chunks(SIMULATED_PER_ROUND) {
        if best.is_some() && crate::interrupt::past(deadline) {
            break;
        }
        let candidates: Vec<_> = round
            .iter()
            .map(|plan| (plan, AllReducePacking::PerTensor))
            .collect();
        let to_beat = best.as_ref().map(|(b, _)| &b.pipeline);
        let mut finished = Vec::new();
        let faster = fastest_noting(p, chunks, &candidates, to_beat, deadline, &mut finished)?;
        tried.extend(
            finished
                .into_iter()
                .map(|(i, t, f)| (round[i].clone(), t, f)),
        );
        if let Some((i, s)) = faster {
            best = Some((s, round[i].clone()));
        }
    }
    Ok(best)
}

/// `best` (simulated from `plan`) with its stages' gradients packed each other way data
/// parallelism tries (one buffer per stage, Horovod's buckets), simulated side by side, the
/// fastest kept: they overlap the last micro-batch's backward differently from one ring per
/// tensor (bert-large at batch 32 on TAG's testbed: 221.08 ms per tensor, 213.27 ms packed).
fn repacked(
    p: &Problem,
    chunks: &Chunks,
    best: Simulated,
    plan: &Plan,
    deadline: Option<Instant>,
) -> Result<Simulated> {
    let candidates: Vec<_> = PACKINGS
        .iter()
        .filter(|&&k| k != best.pipeline.strategy.allreduce)
        .map(|&k| (plan, k))
        .collect();
    let faster = fastest(p, chunks, &candidates, Some(&best.pipeline), deadline)?;
    Ok(faster.map_or(best, |(_, s)| s))
}

/// How a pipeline's stages synchronise their gradients, in words.
fn packing_words(k: AllReducePacking) -> String {
    match k {
        AllReducePacking::PerTensor => "one AllReduce per gradient".to_string(),
        AllReducePacking::Packed => "each stage's gradients in one AllReduce".to_string(),
        AllReducePacking::Buckets(bytes) => {
            format!("gradients in {} MiB buckets", bytes >> 20)
        }
    }
}
