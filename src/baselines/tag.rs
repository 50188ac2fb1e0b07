//! TAG's search as placers: METIS op groups and MCTS. `tag` takes its priors from the shipped
//! GNN policy (models/tag-default.gnn, embedded in the binary), `tag-pure`
//! searches with uniform priors (TAG's "pure MCTS"). The budget's steps are MCTS iterations.

use super::{Budget, Placer};
use crate::error::Result;
use crate::evaluate::{Placement, Problem};
use crate::gnn::GnnPolicy;
use crate::mcts::{DEFAULT_GROUPS, MctsConfig, search_with};

pub enum Tag {
    /// Priors from the shipped policy.
    Shipped,
    /// Uniform priors.
    Pure,
}

impl Placer for Tag {
    fn name(&self) -> &'static str {
        match self {
            Tag::Shipped => "tag",
            Tag::Pure => "tag-pure",
        }
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let config = MctsConfig {
            iterations: budget.steps,
            seconds: budget.seconds,
            seed: budget.seed,
            ..MctsConfig::default()
        };
        let policy = match self {
            Tag::Shipped => Some(GnnPolicy::shipped()?),
            Tag::Pure => None,
        };
        let found = search_with(p, DEFAULT_GROUPS, config, policy.as_ref(), |_| {})?;
        let priors = match &policy {
            Some(_) => "GNN priors (models/tag-default.gnn)",
            None => "uniform priors",
        };
        let mut placement = Placement::plain(
            found.strategy,
            format!(
                "tag: MCTS, {priors}, {} op groups, {} iterations",
                found.group_ops.len(),
                found.iterations
            ),
        );
        placement.fits = Some(found.fits);
        Ok(placement)
    }
}
