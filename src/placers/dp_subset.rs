//! `dp-subset`: [`crate::data_parallel`]'s best data parallelism as a placer — the bar every
//! other method is measured against.

use super::{Budget, Placer};
use crate::data_parallel::{BestDataParallel, best_data_parallel_until};
use crate::error::Result;
use crate::evaluate::Placement;
use crate::problem::Problem;

pub(crate) struct DpSubset;

impl Placer for DpSubset {
    fn name(&self) -> &'static str {
        "dp-subset"
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        Ok(placement(best_data_parallel_until(p, budget.deadline)?))
    }
}

/// The placement of data parallelism `best`.
pub(crate) fn placement(best: BestDataParallel) -> Placement {
    let mut placement = Placement::plain(best.strategy, best.note);
    placement.fits = Some(best.fits);
    placement
}
