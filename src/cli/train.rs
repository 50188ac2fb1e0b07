//! `topoplace train`: self-play training of a GNN policy from a recipe, with progress and
//! resumable checkpoints.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use super::common::{GnnDeviceArg, print_json, progress_bar};
use topoplace::error::Result;
use topoplace::train::trainer::{self, Event, TrainOptions};
use topoplace::train::{Recipe, TrainOutcome};

#[derive(Args)]
pub struct TrainArgs {
    /// A training recipe (training/*.toml).
    #[arg(long)]
    config: PathBuf,
    /// The run's directory (checkpoints, metrics.csv, loss.svg, policy.gnn); default
    /// training/runs/<recipe name>.
    #[arg(long, value_parser = super::common::output_dir)]
    out: Option<PathBuf>,
    /// Continue from the run's latest checkpoint.
    #[arg(long)]
    resume: bool,
    /// Learn from the games `topoplace selfplay` shards wrote here instead of playing them;
    /// stops (after a checkpoint) at the first generation whose games are missing.
    #[arg(long)]
    samples: Option<PathBuf>,
    /// Where the Adam steps run (`wgpu` in builds with `--features wgpu`); the self-play games'
    /// searches read their priors on the CPU either way.
    #[arg(long, default_value = "cpu", value_parser = crate::cli::common::gnn_device)]
    gnn_device: GnnDeviceArg,
    /// Testing aid: die (abort, as a kill would) right after this step, before its checkpoint.
    #[arg(long, hide = true)]
    abort_after_step: Option<u64>,
    #[arg(long)]
    json: bool,
}

/// `training/runs/<recipe name>` unless given.
pub fn run_dir(recipe: &Recipe, given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| Path::new("training").join("runs").join(&recipe.name))
}

#[derive(Serialize)]
struct TrainReport {
    run: String,
    step: u64,
    steps: u64,
    finished: bool,
    waiting_for_generation: Option<u64>,
    policy: String,
    last_loss: Option<f64>,
    last_eval_policy: Option<f64>,
    last_eval_uniform: Option<f64>,
}

pub fn run(args: TrainArgs) -> Result<()> {
    let recipe = Recipe::load(&args.config)?;
    let run = run_dir(&recipe, args.out.clone());
    let opts = TrainOptions {
        run_dir: run.clone(),
        resume: args.resume,
        samples: args.samples.clone(),
        gnn_device: args.gnn_device.name().to_string(),
    };
    let steps = progress_bar(recipe.steps, "{bar:30} step {pos}/{len} {elapsed} {msg}")?;
    let (mut last_loss, mut eval) = (None, (None, None));
    let outcome = trainer::train(&recipe, &opts, |event| match event {
        Event::Playing {
            generation,
            count,
            cached,
        } => steps.set_message(format!(
            "generation {generation}: playing {} games ({cached} on disk)",
            count - cached
        )),
        Event::Teaching { count, cached } => steps.set_message(format!(
            "warm start: the teacher plays {} games ({cached} on disk)",
            count - cached
        )),
        Event::WarmStep {
            step,
            steps: total,
            loss,
        } => steps.set_message(format!("warm start: step {step}/{total}, loss {loss:.4}")),
        Event::Played(game) => steps.set_message(format!(
            "played step {} game {}: {} on {}, speed-up {:+.1}%",
            game.setup.step,
            game.setup.worker,
            game.setup.model,
            game.setup.cluster.name(),
            100.0 * game.speedup()
        )),
        Event::Step(m) => {
            steps.set_position(m.step);
            steps.set_message(format!(
                "loss {:.4} (floor {:.4})",
                m.loss, m.target_entropy
            ));
            last_loss = Some(m.loss);
            if m.eval_policy.is_some() {
                eval = (m.eval_policy, m.eval_uniform);
                steps.println(format!(
                    "step {}: held-out speed-up over DP-NCCL {:+.2}% with the policy, {:+.2}% \
                     with uniform priors",
                    m.step,
                    100.0 * m.eval_policy.unwrap_or(f64::NAN),
                    100.0 * m.eval_uniform.unwrap_or(f64::NAN)
                ));
            }
            if args.abort_after_step == Some(m.step) {
                std::process::abort();
            }
        }
        Event::Checkpoint(step) => steps.set_message(format!("checkpoint at step {step}")),
    });
    steps.finish_and_clear();
    let outcome = outcome?;
    report_train(&recipe, &run, &args, &outcome, last_loss, eval)
}

fn report_train(
    recipe: &Recipe,
    run: &Path,
    args: &TrainArgs,
    outcome: &TrainOutcome,
    last_loss: Option<f64>,
    eval: (Option<f64>, Option<f64>),
) -> Result<()> {
    let report = TrainReport {
        run: run.display().to_string(),
        step: outcome.step,
        steps: recipe.steps,
        finished: outcome.finished,
        waiting_for_generation: outcome.waiting_for,
        policy: outcome.policy.display().to_string(),
        last_loss,
        last_eval_policy: eval.0,
        last_eval_uniform: eval.1,
    };
    if args.json {
        return print_json(&report);
    }
    outln!(
        "{}: step {}/{} — weights in {}, metrics in {}",
        recipe.name,
        outcome.step,
        recipe.steps,
        outcome.policy.display(),
        run.join("metrics.csv").display()
    )?;
    if let Some(generation) = outcome.waiting_for {
        let samples = args.samples.as_deref().unwrap_or(Path::new("."));
        outln!(
            "generation {generation}'s games are not all in {}: run `topoplace selfplay --config \
             {} --run {} --shard I --of N --out {}` for every shard I, then `topoplace train \
             --config {} --out {} --resume --samples {}`",
            samples.display(),
            args.config.display(),
            run.display(),
            samples.display(),
            args.config.display(),
            run.display(),
            samples.display()
        )?;
    }
    Ok(())
}
