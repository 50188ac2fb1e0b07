//! Solver-supervised warm start (beyond TAG): before self-play, the GNN learns to imitate the
//! strategies of a long, exhaustive search on the recipe's training set.
//!
//! Why: self-play targets are visit distributions of vertices with enough visits, and in a
//! search of a few hundred leaves over hundreds of actions per vertex only the root and a few
//! shallow vertices get them. The policy then learns the root's decision well and nothing about
//! the deeper op groups, which is where a placement beats data parallelism once the root has
//! chosen it. A teacher that decides every op group gives a target at every depth.
//!
//! The teacher is a coordinate descent in the tree's own terms, so every vertex on its path is
//! one the search can reach and complete exactly as the teacher scored it:
//! 1. the root decision: every action tried as the decision of all op groups (the completion
//!    rule of TAG's footnote 2), the fastest kept (ties: the lower action, DP first);
//! 2. op groups 1, 2, … in search order: every action tried for that group with the others as
//!    they are, the fastest kept when strictly faster; `passes` sweeps.
//!
//! Each game costs `groups × actions` simulations per pass (a few thousand on TAG's random
//! topologies, run in parallel), a long search next to self-play's few hundred leaves; a game's
//! targets are one-hot: at vertex `path[..i]` the teacher's decision `path[i]`.

use rayon::prelude::*;

use crate::error::Result;
use crate::gnn::GnnPolicy;
use crate::mcts::Mcts;

use super::recipe::Recipe;
use super::selfplay::{self, GameRecord, GameSetup, Models, Sample};
use super::step_seed;

/// The worker index whose step seeds draw the teacher's games (self-play uses 0, 1, …; the
/// training batches `u64::MAX`).
const TEACHER_STREAM: u64 = u64::MAX - 1;

/// Teacher game `index`: a (model, topology) pair drawn like self-play's, from the warm start's
/// models (the training set's when it names none).
pub fn draw(recipe: &Recipe, index: u64) -> GameSetup {
    let seed = step_seed(recipe.seed, index, TEACHER_STREAM);
    let models = match &recipe.warm_start {
        Some(w) if !w.models.is_empty() => &w.models,
        _ => &recipe.training_set.models,
    };
    selfplay::draw_from(recipe, models, seed, index, 0)
}

/// The teacher's decisions (one action per op group, in search order) and their simulated
/// iteration time, µs.
pub fn descend(mcts: &Mcts, passes: usize) -> Result<(Vec<u16>, f64)> {
    let actions = mcts.actions().len() as u16;
    let groups = mcts.groups();
    let (root, mut best) = fastest(actions, |a| mcts.choice_time(&vec![a; groups]))?;
    let mut path = vec![root; groups];
    for _ in 0..passes {
        let mut improved = false;
        for g in 1..groups {
            let (a, t) = fastest(actions, |a| {
                let mut choice = path.clone();
                choice[g] = a;
                mcts.choice_time(&choice)
            })?;
            if t < best {
                (path[g], best, improved) = (a, t, true);
            }
        }
        if !improved {
            break;
        }
    }
    Ok((path, best))
}

/// The action of `0..actions` with the least `time` (ties: the lowest), scored in parallel.
fn fastest(actions: u16, time: impl Fn(u16) -> Result<f64> + Sync) -> Result<(u16, f64)> {
    let times: Vec<f64> = (0..actions)
        .into_par_iter()
        .map(&time)
        .collect::<Result<_>>()?;
    let mut best = (0, times[0]);
    for (a, &t) in times.iter().enumerate() {
        if t < best.1 {
            best = (a as u16, t);
        }
    }
    Ok(best)
}

/// Play teacher game `setup`: the descent's path, and a one-hot target at each of its vertices.
/// `policy` only shapes the GNN inputs (its weights do not matter).
pub fn play(
    recipe: &Recipe,
    setup: &GameSetup,
    models: &Models,
    policy: &GnnPolicy,
    passes: usize,
) -> Result<GameRecord> {
    let config = selfplay::search_config(recipe, setup.seed);
    selfplay::game_search(recipe, setup, models, policy, config, |mcts, slices| {
        let (path, best_us) = descend(&mcts, passes)?;
        let samples = (0..path.len())
            .into_par_iter()
            .map(|depth| {
                let target = mcts.vertex_target(&path[..depth], vec![(path[depth], 1)])?;
                Ok(Sample {
                    target: target.distribution(),
                    graph: target.graph,
                    group: depth as u32,
                })
            })
            .collect::<Result<_>>()?;
        Ok(GameRecord {
            setup: setup.clone(),
            dp_us: mcts.dp_us(),
            best_us,
            fits: best_us.is_finite(),
            slices,
            samples,
        })
    })
}
