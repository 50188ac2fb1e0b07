//! The placers that need no search (no budget): data parallelism in its forms, `dp-subset`
//! among them, the balanced pipeline (`pipeline-dp`) and the list schedulers. TAG's search starts from their placements
//! ([`crate::mcts::Mcts::with_starts`]), and `place` reports the fastest of them as the best
//! other method.

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use super::{Budget, pipeline, placer};
use crate::error::{Error, Result, SearchError};
use crate::evaluate::{Placement, evaluate, until};
use crate::pipeline_plan::{PipelineFrames, REFINE_SIMULATIONS, best_pipeline_with_frames};
use crate::problem::Problem;
use crate::sim::deadline;

/// Placers that need no search, cheapest and strongest first (so a deadline that cuts the list
/// short keeps the ones that matter).
pub const HEURISTICS: &[&str] = &[
    "dp-subset",
    "pipeline-dp",
    "single",
    "dp-nccl",
    "dp-nccl-p",
    "horovod",
    "metis",
    "m-topo",
    "m-etf",
    "m-sct",
    "heft",
    "dpos",
    "os-dpos",
    "order-place",
    "adjusting",
    "quickp",
];

/// One heuristic's placement, simulated.
#[derive(Debug, Clone)]
pub struct Heuristic {
    /// The placer's registered name, one of [`HEURISTICS`].
    pub name: &'static str,
    /// What the placer answered.
    pub placement: Placement,
    /// The placement's simulated iteration time, µs.
    pub time_us: f64,
    /// Whether the placement fit in every GPU's memory.
    pub fits: bool,
    /// `pipeline-dp`'s frames, the pipelines TAG's tree searches (none for the others).
    pub frames: Option<Arc<PipelineFrames>>,
}

/// Every heuristic's placement in [`HEURISTICS`] order, those started before `deadline` (the
/// first one, `dp-subset`, always runs, and tries no further GPU subset past the deadline; a
/// list scheduler still running at the deadline gives up), `pipeline-dp` with `pipeline_deadline` instead. They run side by side; the list keeps its
/// order whichever finished first.
pub(crate) fn heuristics(
    p: &Problem,
    deadline: Option<Instant>,
    pipeline_deadline: Option<Instant>,
) -> Result<Vec<Heuristic>> {
    // The caller's own deadline (a `place --time` past which no plan is given) holds on the
    // pool's threads too, where what each heuristic does not bound by its own runs.
    let hard = deadline::current();
    let found: Vec<Option<Heuristic>> = HEURISTICS
        .par_iter()
        .map(|&name| {
            let deadline = match name {
                "pipeline-dp" => pipeline_deadline,
                _ => deadline,
            };
            deadline::during(hard, || heuristic(p, name, deadline))
        })
        .collect::<Result<_>>()?;
    Ok(found.into_iter().flatten().collect())
}

/// One heuristic's placement, simulated; none when it is out of time or has nothing to offer.
/// `dp-subset`, the bar every method is measured against, always answers: past the deadline
/// with the fastest GPU alone.
fn heuristic(
    p: &Problem,
    name: &'static str,
    deadline: Option<Instant>,
) -> Result<Option<Heuristic>> {
    if name != "dp-subset" && crate::interrupt::past(deadline) {
        return Ok(None);
    }
    let placed = if name == "pipeline-dp" {
        pipeline_with_frames(p, deadline)
    } else {
        let budget = Budget {
            deadline,
            ..Budget::default()
        };
        placer(name)?
            .place(p, &budget)
            .map(|placement| Some((placement, None)))
    };
    let (placement, frames) = match placed {
        Ok(Some(placed)) => placed,
        // Out of time, or (one GPU, a batch no micro-batch count cuts) no pipeline to compare.
        Ok(None) | Err(Error::Search(SearchError::OutOfTime | SearchError::NoPipeline { .. })) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let (time_us, fits) = match placement.simulated_us {
        // Simulated as it was found (dp-subset's winner, pipeline-dp's pipeline): simulating it
        // again cost a second run of the slowest start on 10⁵ ops, past a `--time` with none left.
        Some(time_us) => (time_us, placement.fits.unwrap_or(true)),
        // Simulated within the deadline too: one simulation of a large graph on many GPUs takes
        // seconds, and a placement found just before the deadline carried `place --time` past it.
        None => match until(deadline, || evaluate(p, &placement))? {
            Some(e) => (e.report.iteration_us, e.result.oom.is_empty()),
            None => return Ok(None),
        },
    };
    Ok(Some(Heuristic {
        name,
        placement,
        time_us,
        fits,
        frames,
    }))
}

/// `pipeline-dp`'s placement (as its placer places it) with the frames it leaves for the tree;
/// none when there is no pipeline to cut.
fn pipeline_with_frames(
    p: &Problem,
    deadline: Option<Instant>,
) -> Result<Option<(Placement, Option<Arc<PipelineFrames>>)>> {
    let found = best_pipeline_with_frames(p, deadline, REFINE_SIMULATIONS)?;
    Ok(found.map(|(best, frames)| (pipeline::placement(best), Some(Arc::new(frames)))))
}

/// The fastest heuristic that fits, as (name, µs); `("none", ∞)` when none does.
pub fn best_heuristic(heuristics: &[Heuristic]) -> (String, f64) {
    heuristics
        .iter()
        .filter(|h| h.fits)
        .min_by(|a, b| a.time_us.total_cmp(&b.time_us))
        .map_or(("none".to_string(), f64::INFINITY), |h| {
            (h.name.to_string(), h.time_us)
        })
}
