//! `pipeline-dp`: [`crate::pipeline_plan`]'s balanced pipeline over the device groups, as AMP
//! and Metis plan one for a heterogeneous cluster.

use super::{Budget, Placer};
use crate::error::{Result, SearchError};
use crate::evaluate::Placement;
use crate::pipeline_plan::{BestPipeline, best_pipeline};
use crate::problem::Problem;

pub(crate) struct PipelineDp;

impl Placer for PipelineDp {
    fn name(&self) -> &'static str {
        "pipeline-dp"
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let best = best_pipeline(p, budget.deadline)?.ok_or_else(|| SearchError::NoPipeline {
            model: p.graph.name.clone(),
            cluster: p.cluster.name.clone(),
        })?;
        Ok(placement(best))
    }
}

/// `pipeline-dp`'s pipeline as its placement, with the memory verdict it simulated.
pub(super) fn placement(best: BestPipeline) -> Placement {
    let mut placement = Placement::plain(best.strategy, best.note);
    placement.fits = Some(best.fits);
    placement.simulated_us = Some(best.time_us);
    placement
}
