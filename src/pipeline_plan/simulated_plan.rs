//! A plan as the strategy it stands for: one op group per stage, data-parallel on its unit,
//! simulated.

use std::time::Instant;

use rayon::prelude::*;

use super::chunks::Chunks;
use super::plan::{BestPipeline, Plan, stage_of_chunk};
use crate::error::Result;
use crate::evaluate::{Placement, beats, busy_within, limit_to_beat, until};
use crate::problem::Problem;
use crate::strategy::{
    AllReducePacking, BatchSplit, GroupDecision, Pipeline, ReplicationOption, Strategy,
};

/// A plan simulated: the pipeline it stands for, and each GPU's busy µs (what the refinement
/// finds the busiest stage by).
pub(super) struct Simulated {
    pub(super) pipeline: BestPipeline,
    pub(super) busy: Vec<f64>,
}

/// The plan as a strategy with its gradients packed by `packing`, simulated; `None` once its
/// iteration is past `limit_us`, or the wall clock past `deadline` (the simulation of a large
/// graph on many GPUs takes seconds: it is abandoned, not finished, once out of time).
fn score(
    p: &Problem,
    c: &Chunks,
    plan: &Plan,
    packing: AllReducePacking,
    limit_us: f64,
    deadline: Option<Instant>,
) -> Result<Option<Simulated>> {
    let strategy = strategy(p, c, plan, packing);
    let placement = Placement::plain(strategy.clone(), "");
    let simulated = until(deadline, || busy_within(p, &placement, limit_us))?;
    let Some((timing, busy)) = simulated.flatten() else {
        return Ok(None);
    };
    let stages: Vec<String> = plan.units.iter().map(|u| u.label.clone()).collect();
    let pipeline = BestPipeline {
        strategy,
        time_us: timing.iteration_us,
        fits: timing.fits,
        note: format!(
            "pipeline-dp: {} stages ({}), {} micro-batches, {}, data-parallel inside each",
            plan.units.len(),
            stages.join(" → "),
            plan.micro_batches,
            plan.schedule.name()
        ),
    };
    Ok(Some(Simulated { pipeline, busy }))
}

/// `candidates` (plans, each with its gradients' packing) simulated side by side, and the
/// fastest that beats `best` ([`beats`]; the fastest of all when there is none) with its index.
/// A candidate's simulation is given up once past `best`'s time ([`limit_to_beat`]) or past
/// `deadline`.
pub(super) fn fastest(
    p: &Problem,
    chunks: &Chunks,
    candidates: &[(&Plan, AllReducePacking)],
    best: Option<&BestPipeline>,
    deadline: Option<Instant>,
) -> Result<Option<(usize, Simulated)>> {
    fastest_noting(p, chunks, candidates, best, deadline, &mut Vec::new())
}

/// [`fastest`], also noting each candidate simulated to its end in `finished`: its index, time
/// (µs) and fit (the frames the tree searches are the fastest of them, [`super::frames`]).
pub(super) fn fastest_noting(
    p: &Problem,
    chunks: &Chunks,
    candidates: &[(&Plan, AllReducePacking)],
    best: Option<&BestPipeline>,
    deadline: Option<Instant>,
    finished: &mut Vec<(usize, f64, bool)>,
) -> Result<Option<(usize, Simulated)>> {
    let limit_us = best.map_or(f64::INFINITY, |b| limit_to_beat(b.time_us, b.fits));
    let scored: Vec<Result<Option<Simulated>>> = candidates
        .par_iter()
        .map(|&(plan, packing)| score(p, chunks, plan, packing, limit_us, deadline))
        .collect();
    let mut out: Option<(usize, Simulated)> = None;
    for (i, s) in scored.into_iter().enumerate() {
        let Some(s) = s? else { continue };
        finished.push((i, s.pipeline.time_us, s.pipeline.fits));
        let to_beat = out.as_ref().map(|(_, o)| &o.pipeline).or(best);
        let (t, f) = (s.pipeline.time_us, s.pipeline.fits);
        if to_beat.is_none_or(|b| beats(t, f, b.time_us, b.fits)) {
            out = Some((i, s));
        }
    }
    Ok(out)
}

/// The busiest of each stage's GPUs' busy time (`busy` per GPU), µs.
pub(super) fn stage_busy(plan: &Plan, busy: &[f64]) -> Vec<f64> {
    plan.units
        .iter()
        .map(|u| u.devices.iter().map(|&d| busy[d]).fold(0.0, f64::max))
        .collect()
}

/// One op group per stage, data-parallel (AllReduce, speed-proportional shares) on its unit, the
/// gradients packed by `packing`.
pub(super) fn strategy(
    p: &Problem,
    c: &Chunks,
    plan: &Plan,
    packing: AllReducePacking,
) -> Strategy {
    let g = p.graph;
    let op_group: Vec<u32> = c
        .of_op
        .iter()
        .map(|&k| stage_of_chunk(&plan.ends, k) as u32)
        .collect();
    let decisions = plan
        .units
        .iter()
        .map(|u| {
            let mut devices = u.devices.clone();
            devices.sort_unstable();
            GroupDecision {
                devices,
                option: ReplicationOption::AllReduce,
            }
        })
        .collect();
    let mut s = Strategy::new(
        "pipeline-dp",
        op_group,
        decisions,
        BatchSplit::Proportional,
        g.len(),
        p.cluster.num_devices(),
    )
    .expect("a plan's stages are valid groups");
    s.allreduce = packing;
    let stages: Vec<Vec<usize>> = (0..plan.units.len()).map(|s| vec![s]).collect();
    s.pipeline = Some(
        Pipeline::new(
            "pipeline-dp",
            &stages,
            plan.micro_batches,
            plan.schedule,
            plan.units.len(),
            g.batch_size,
        )
        .expect("a plan's micro-batch count divides the batch"),
    );
    s
}
