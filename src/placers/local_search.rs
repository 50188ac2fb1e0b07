//! `local-search`: the search's polishing step as a placer of its own — start from the best data
//! parallelism over device-group subsets (`dp-subset`) and move one METIS op group at a time to
//! the best of a few candidate actions while that is faster ([`crate::mcts::polish`]), for the
//! budget's simulations. No tree, no priors: the strongest simple search beside TAG's.

use super::{Budget, Placer};
use crate::error::Result;
use crate::evaluate::Placement;
use crate::mcts::{DEFAULT_GROUPS, MctsConfig, search};
use crate::problem::Problem;

pub(crate) struct LocalSearch;

impl Placer for LocalSearch {
    fn name(&self) -> &'static str {
        "local-search"
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let config = MctsConfig {
            iterations: 0,
            polish: budget.steps.max(1),
            seconds: budget.seconds,
            seed: budget.seed,
            ..MctsConfig::default()
        };
        let found = search(p, DEFAULT_GROUPS, config, |_| {})?;
        let mut placement = Placement::plain(
            found.strategy,
            format!(
                "local-search: from dp-subset, {} simulations over {} op groups",
                found.simulated,
                found.group_ops.len()
            ),
        );
        placement.fits = Some(found.fits);
        Ok(placement)
    }
}
