//! Generations of a run: the policy snapshot each generation of self-play plays with.

use std::path::{Path, PathBuf};

use super::checkpoint::Checkpoints;
use super::recipe::Recipe;
use crate::error::{Result, TrainError};
use crate::gnn::GnnPolicy;

/// `<run>/generations/gen-<g>.gnn`.
pub(crate) fn snapshot_path(run_dir: &Path, generation: u64) -> PathBuf {
    run_dir
        .join("generations")
        .join(format!("gen-{generation:05}.gnn"))
}

/// The policy that generation `generation` of a run plays with: its snapshot when the run has
/// written it, the recipe's initial weights for generation 0 of a run that has not started.
pub fn generation_policy(recipe: &Recipe, run_dir: &Path, generation: u64) -> Result<GnnPolicy> {
    let path = snapshot_path(run_dir, generation);
    if path.exists() {
        return GnnPolicy::load(&path);
    }
    if generation == 0 {
        if recipe.warm_start.is_some() {
            return Err(TrainError::WarmStartFirst {
                path: path.display().to_string(),
            }
            .into());
        }
        return GnnPolicy::init(recipe.model.gnn_config(), recipe.seed);
    }
    Err(TrainError::NoSnapshot {
        path: path.display().to_string(),
        generation,
    }
    .into())
}

/// The generation a run's next step belongs to (0 for a run without checkpoints). A run that
/// has checkpoints must be given its own recipe (anything but `steps` the same), as
/// `train --resume` requires: games played under another would feed the run's next step.
pub fn next_generation(recipe: &Recipe, run_dir: &Path) -> Result<u64> {
    let latest = Checkpoints::new(run_dir).latest()?;
    if let Some((_, checkpoint)) = &latest {
        super::checkpoint::check_recipe(checkpoint, recipe)?;
    }
    let step = latest.map(|(step, _)| step).unwrap_or(0);
    Ok(step / recipe.search.generation)
}
