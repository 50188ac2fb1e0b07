//! TAG's search as a placer: METIS op groups and MCTS with uniform priors (the GNN policy is
//! not built yet). The budget's steps are MCTS iterations.

use super::{Budget, Placement, Placer, Problem};
use crate::error::Result;
use crate::mcts::{DEFAULT_GROUPS, MctsConfig, search};

pub struct Tag;

impl Placer for Tag {
    fn name(&self) -> &'static str {
        "tag"
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let config = MctsConfig {
            iterations: budget.steps,
            seconds: budget.seconds,
            seed: budget.seed,
            ..MctsConfig::default()
        };
        let found = search(p, DEFAULT_GROUPS, config, |_| {})?;
        let mut placement = Placement::plain(
            found.strategy,
            format!(
                "tag: MCTS, uniform priors (no GNN yet), {} op groups, {} iterations",
                found.group_ops.len(),
                found.iterations
            ),
        );
        placement.fits = Some(found.fits);
        Ok(placement)
    }
}
