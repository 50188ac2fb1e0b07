//! `topoplace train` and `topoplace selfplay`: argument handling and progress display around
//! [`topoplace::train`].

use std::path::{Path, PathBuf};

use indicatif::ProgressBar;
use serde::Serialize;

use topoplace::error::{Error, InputError, Result};
use topoplace::train::selfplay::{self, Models};
use topoplace::train::trainer::{self, Event, TrainOptions};
use topoplace::train::{Recipe, TrainOutcome};

use crate::{SelfplayArgs, TrainArgs, print_json, progress_bar};

/// `training/runs/<recipe name>` unless given.
fn run_dir(recipe: &Recipe, given: Option<PathBuf>) -> PathBuf {
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

pub fn train(args: TrainArgs) -> Result<()> {
    let recipe = Recipe::load(&args.config)?;
    let run = run_dir(&recipe, args.out.clone());
    let opts = TrainOptions {
        run_dir: run.clone(),
        resume: args.resume,
        samples: args.samples.clone(),
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
    println!(
        "{}: step {}/{} — weights in {}, metrics in {}",
        recipe.name,
        outcome.step,
        recipe.steps,
        outcome.policy.display(),
        run.join("metrics.csv").display()
    );
    if let Some(generation) = outcome.waiting_for {
        let samples = args.samples.as_deref().unwrap_or(Path::new("."));
        println!(
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
        );
    }
    Ok(())
}

#[derive(Serialize)]
struct SelfplayReport {
    generation: u64,
    shard: u64,
    of: u64,
    games: usize,
    already_there: usize,
    samples: usize,
    out: String,
}

pub fn selfplay(args: SelfplayArgs) -> Result<()> {
    if args.of == 0 || args.shard >= args.of {
        return Err(InputError::new(
            "<cli>",
            "--shard",
            format!("shard {} of {}: need 0 ≤ shard < of", args.shard, args.of),
        )
        .into());
    }
    let recipe = Recipe::load(&args.config)?;
    let run = run_dir(&recipe, args.run.clone());
    let generation = trainer::next_generation(&recipe, &run)?;
    let policy = trainer::generation_policy(&recipe, &run, generation)?;
    let steps = selfplay::generation_steps(&recipe, generation);
    let mine: Vec<(u64, u64)> = selfplay::games_of(&recipe, steps)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i as u64 % args.of == args.shard)
        .map(|(_, key)| key)
        .collect();
    let mut setups = Vec::new();
    for &(s, w) in &mine {
        if selfplay::load_game(&args.out, s, w)?.is_none() {
            setups.push(selfplay::draw(&recipe, s, w));
        }
    }
    let models = Models::load(&recipe.training_set.models)?;
    let progress = progress_bar(
        setups.len() as u64,
        "{bar:30} game {pos}/{len} {elapsed} {msg}",
    )?;
    let play = |setup: &selfplay::GameSetup| selfplay::play(&recipe, setup, &models, &policy);
    let played = trainer::play_all(play, &setups, &args.out, &mut |e| {
        if let Event::Played(game) = e {
            progress.inc(1);
            progress.set_message(format!(
                "{} on {}",
                game.setup.model,
                game.setup.cluster.name()
            ));
        }
    });
    progress.finish_and_clear();
    let mut samples = 0;
    for game in played {
        samples += game?.samples.len();
    }
    let report = SelfplayReport {
        generation,
        shard: args.shard,
        of: args.of,
        games: setups.len(),
        already_there: mine.len() - setups.len(),
        samples,
        out: args.out.display().to_string(),
    };
    if args.json {
        return print_json(&report);
    }
    println!(
        "generation {generation}, shard {}/{}: played {} games ({} already in {}), {} targets",
        args.shard, args.of, report.games, report.already_there, report.out, samples
    );
    Ok(())
}

/// `topoplace experiment NAME`: TAG §5's experiments with a policy file.
pub fn experiment(args: crate::ExperimentArgs) -> Result<()> {
    use topoplace::experiment::{self, Setup};
    let policy_path = args
        .policy
        .clone()
        .or_else(topoplace::gnn::shipped_policy_path)
        .ok_or_else(|| {
            Error::Other(format!(
                "no --policy given and no shipped policy ({}) in this checkout",
                topoplace::gnn::SHIPPED_POLICY
            ))
        })?;
    let policy = topoplace::gnn::GnnPolicy::load(&policy_path)?;
    let models = args
        .models
        .iter()
        .map(|m| Ok((m.clone(), topoplace::inputs::load_model(m, None)?)))
        .collect::<Result<Vec<_>>>()?;
    let cluster = topoplace::inputs::load_named_cluster(&args.cluster)?;
    let setup = Setup {
        models,
        cluster: &cluster,
        policy: &policy,
        budget: args.budget,
        groups: args.groups,
        seeds: args.seeds,
        topologies: args.topologies,
        topology_seed: args.topology_seed,
        bandwidths: args.bandwidths()?,
        headroom: args.headroom,
    };
    let spinner = ProgressBar::new_spinner();
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    spinner.set_message(format!("{} with {}", args.name, policy_path.display()));
    let output = match args.name.as_str() {
        "search-efficiency" => experiment::search_efficiency(&setup),
        "unseen-topologies" => experiment::unseen_topologies(&setup),
        "overhead" => experiment::overhead(&setup),
        "holdout-models" => {
            let recipe = Recipe::load(&args.recipe)?;
            experiment::holdout_models(&setup, &recipe, args.steps, &args.out, |m| {
                spinner.set_message(m.to_string())
            })
        }
        other => Err(Error::Other(format!(
            "unknown experiment \"{other}\" (known: {})",
            experiment::NAMES.join(", ")
        ))),
    };
    spinner.finish_and_clear();
    let output = output?;
    let files = output.write(&args.out)?;
    if args.json {
        let rows: Vec<serde_json::Map<String, serde_json::Value>> = csv_rows(&output.csv);
        return print_json(&rows);
    }
    print!("{}", output.table.render());
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(())
}

/// CSV text as JSON objects keyed by the header (numbers as numbers where they parse).
fn csv_rows(csv: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    lines
        .map(|l| {
            header
                .iter()
                .zip(l.split(','))
                .map(|(k, v)| {
                    let value = v
                        .parse::<f64>()
                        .ok()
                        .and_then(serde_json::Number::from_f64)
                        .map(serde_json::Value::Number)
                        .unwrap_or_else(|| serde_json::Value::String(v.to_string()));
                    (k.to_string(), value)
                })
                .collect()
        })
        .collect()
}
