//! `dp-subset`: [`crate::data_parallel`]'s best data parallelism as a placer — the bar every
//! other method is measured against.

use super::{Budget, Placer};
use crate::data_parallel::best_data_parallel_until;
use crate::error::Result;
use crate::evaluate::Placement;
use crate::problem::Problem;

pub(crate) struct DpSubset;

impl Placer for DpSubset {
    fn name(&self) -> &'static str {
        "dp-subset"
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let best = best_data_parallel_until(p, budget.deadline)?;
        let mut placement = Placement::plain(best.strategy, best.note);
        placement.fits = Some(best.fits);
        placement.simulated_us = Some(best.time_us);
        Ok(placement)
    }
}
