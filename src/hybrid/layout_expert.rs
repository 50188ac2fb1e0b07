//! What a layout policy is trained on: for one planning problem, the best layout the layout tree
//! (under the priors so far) and the joint search's descent find, and the tree's decisions on the
//! way to it — expert iteration, as TAG trains its GNN on the search's answers.

use crate::error::Result;

use super::layout_tree::{LayoutPriors, LayoutSample, LayoutSpace, complete, search_in};
use super::planner::{Planned, Planner};
use super::search::descents;

/// The expert's answer to one problem and the decisions that reach it.
#[derive(Debug, Clone)]
pub struct ExpertLayout {
    /// The best plan found.
    pub best: Option<Planned>,
    /// The decisions on the way to its layout, as far as the tree's actions reach it.
    pub samples: Vec<LayoutSample>,
    /// Layouts simulated by the tree and the descent together.
    pub simulated: usize,
}

/// The better of the layout tree (`budget` simulations under `priors`, ties broken by `seed`)
/// and the joint search's descent, with the tree's decisions that lead to it.
pub fn expert_layout(
    planner: &mut Planner,
    priors: &dyn LayoutPriors,
    budget: usize,
    seed: u64,
) -> Result<ExpertLayout> {
    let before = planner.judged();
    let space = LayoutSpace::new(planner)?;
    let tree = search_in(planner, &space, priors, budget, seed);
    let descent = descents(planner)?;
    let simulated = planner.judged() - before;
    let (best, layout) = match (tree.best, tree.layout, descent) {
        (Some(t), Some(l), Some((dl, d))) => {
            if d.beats(Some(&t)) {
                (Some(d), Some(dl))
            } else {
                (Some(t), Some(complete(&l)))
            }
        }
        (Some(t), Some(l), None) => (Some(t), Some(complete(&l))),
        (_, _, Some((dl, d))) => (Some(d), Some(dl)),
        _ => (None, None),
    };
    let samples = layout.map(|l| space.path_to(&l)).unwrap_or_default();
    Ok(ExpertLayout {
        best,
        samples,
        simulated,
    })
}
