//! `topoplace selfplay`: one shard of a training run's next generation of self-play games.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use super::common::{print_json, progress_bar};
use super::train::run_dir;
use topoplace::error::{InputError, Result};
use topoplace::train::Recipe;
use topoplace::train::selfplay::{self, Models};
use topoplace::train::trainer::{self, Event};

#[derive(Args)]
pub struct SelfplayArgs {
    /// The run's training recipe.
    #[arg(long)]
    config: PathBuf,
    /// The training run whose next generation is played (its snapshot gives the priors); a run
    /// that has not started plays generation 0 with the recipe's initial weights. Default
    /// training/runs/<recipe name>.
    #[arg(long)]
    run: Option<PathBuf>,
    /// This shard's index, 0-based.
    #[arg(long)]
    shard: u64,
    /// The number of shards; shard i plays every game whose index ≡ i (mod n).
    #[arg(long)]
    of: u64,
    /// Where the game files go (the directory given to `train --samples`).
    #[arg(long, value_parser = super::common::output_dir)]
    out: PathBuf,
    #[arg(long)]
    json: bool,
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

pub fn run(args: SelfplayArgs) -> Result<()> {
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
    let games = selfplay::games_of(&recipe, steps);
    if args.of > games.len() as u64 {
        errln!(
            "warning: --of {} shards for the generation's {} games: shards {} and up play none",
            args.of,
            games.len(),
            games.len()
        );
    }
    let mine: Vec<(u64, u64)> = games
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
    let models = Models::load(&recipe.training_set, &recipe.training_set.models)?;
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
    outln!(
        "generation {generation}, shard {}/{}: played {} games ({} already in {}), {} targets",
        args.shard,
        args.of,
        report.games,
        report.already_there,
        report.out,
        samples
    )?;
    Ok(())
}
