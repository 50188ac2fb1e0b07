//! The self-play training loop (TAG §4.2.2): play games with the current policy, keep their
//! visit distributions in a replay buffer, and minimise the cross-entropy between the GNN's
//! priors and those distributions with Adam.
//!
//! The run is cut into *generations* of `search.generation` steps. At a generation's first step
//! the weights are written as a snapshot (`<run>/generations/gen-<g>.gnn`); every game of the
//! generation's steps is played with that snapshot, so the games can be played together (in
//! parallel here, or as `topoplace selfplay` shards elsewhere) before the generation's Adam steps
//! consume them one step's games at a time. Step `s` adds the games of step `s` to the replay
//! buffer, then takes one Adam step on `optimizer.batch` targets drawn uniformly from it (a
//! share of them from the warm start's teacher games with `optimizer.teacher_share`).
//!
//! Durability: checkpoints ([`Checkpoints`]) hold the weights, Adam's state, the replay buffer
//! and the metrics so far; randomness is re-derived per step from the seed; game files are
//! written atomically and reused. A resumed run therefore repeats the uninterrupted one exactly
//! (same weights, same metrics), whatever moment the earlier process died at.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use burn::optim::{AdamConfig, ModuleOptimizer};
use burn::prelude::*;
use burn::tensor::Bytes;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::cluster::random_cluster_within;
use crate::error::{Error, GnnError, Result, TrainError};
use crate::gnn::{self, GnnConfig, GnnModel, GnnPolicy};
use crate::io::{read_file, write_atomic};
use crate::mcts::search_with;
use crate::problem::Problem;
use crate::render::mean;

use super::batch;
use super::checkpoint::{Checkpoints, RunLock, step_seed};
pub use super::generation::generation_policy;
pub use super::generation::next_generation;
use super::generation::snapshot_path;
use super::imitation;
pub(crate) use super::metrics::StepMetrics;
use super::metrics::write_metrics;
use super::recipe::{Recipe, WarmStart};
use super::selfplay::{self, GameRecord, Models};

/// The worker index whose step seed draws the training batch (games use 0, 1, …).
const BATCH_STREAM: u64 = u64::MAX;
/// … and the warm start's batches (the teacher's games use `u64::MAX − 1`) …
const WARM_BATCH_STREAM: u64 = u64::MAX - 2;
/// … and the teacher's share of a self-play step's batch.
const TEACHER_BATCH_STREAM: u64 = u64::MAX - 3;

/// How `train` runs.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    /// The run's directory: checkpoints, snapshots, games, metrics.
    pub run_dir: PathBuf,
    /// Continue from the run's latest checkpoint (an error when there is none is not raised:
    /// a run without checkpoints starts from step 0).
    pub resume: bool,
    /// Read every game from this directory (written by `topoplace selfplay` shards) instead of
    /// playing it; training stops at the first generation whose games are not all there.
    pub samples: Option<PathBuf>,
    /// The device the Adam steps run on, by `gnn::device_named`'s names (`cpu`, `wgpu`).
    pub gnn_device: String,
}

/// What happens during training, for progress display.
#[derive(Debug)]
pub enum Event<'a> {
    /// The games of a generation are being played (`count` of them, `cached` found on disk).
    Playing {
        /// The policy generation whose games these are.
        generation: u64,
        /// Games in the generation.
        count: usize,
        /// Games already on disk, read instead of played.
        cached: usize,
    },
    /// One game finished.
    Played(&'a GameRecord),
    /// The warm start's teacher games are being played (`count`, `cached` found on disk).
    Teaching {
        /// Teacher games in the warm start.
        count: usize,
        /// Teacher games already on disk, read instead of played.
        cached: usize,
    },
    /// A warm-start Adam step finished: its number (1-based), of `steps`, and its loss.
    WarmStep {
        /// The step just finished, 1-based.
        step: u64,
        /// Warm-start steps in all.
        steps: u64,
        /// The step's mean cross-entropy between priors and the teacher's targets.
        loss: f64,
    },
    /// An Adam step finished.
    Step(&'a StepMetrics),
    /// A checkpoint was written after this many training steps.
    Checkpoint(u64),
}

/// The part of a checkpoint that is not weights.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RunState {
    recipe: String,
    step: u64,
    metrics: Vec<StepMetrics>,
    /// The held-out evaluation with uniform priors (it never changes, so it runs once).
    eval_uniform: Option<f64>,
    /// The warm start, once done (absent in runs without one and in older checkpoints).
    #[serde(default)]
    warm_start: Option<WarmStartRecord>,
}

/// What the warm start did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WarmStartRecord {
    pub games: usize,
    pub samples: usize,
    /// Mean `T_DP / T − 1` of the teacher's strategies.
    pub teacher_speedup: f64,
    /// The loss of each Adam step.
    pub losses: Vec<f64>,
}

/// How a `train` call ended.
#[derive(Debug, Clone)]
pub struct TrainOutcome {
    /// Adam steps taken by the run so far.
    pub step: u64,
    /// Whether the recipe's steps are all done.
    pub finished: bool,
    /// With `samples`: the generation whose games are missing there.
    pub waiting_for: Option<u64>,
    /// The newest weights (`<run>/policy.gnn`).
    pub policy: PathBuf,
}

/// The training state in memory.
struct Trainer<'r> {
    recipe: &'r Recipe,
    opts: &'r TrainOptions,
    models: Models,
    config: GnnConfig,
    device: Device,
    model: GnnModel,
    optimizer: ModuleOptimizer,
    replay: VecDeque<GameRecord>,
    /// The warm start's teacher games, kept when self-play batches draw from them too.
    teacher: VecDeque<GameRecord>,
    state: RunState,
    checkpoints: Checkpoints,
    /// Held until the run returns.
    _lock: RunLock,
}

/// Train the policy of `recipe` as `opts` says; `on_event` sees progress.
pub fn train(
    recipe: &Recipe,
    opts: &TrainOptions,
    mut on_event: impl FnMut(Event),
) -> Result<TrainOutcome> {
    let mut t = Trainer::open(recipe, opts)?;
    if let Some(warm) = &recipe.warm_start
        && t.state.warm_start.is_none()
    {
        t.warm_start(warm, &mut on_event)?;
        t.checkpoint(&mut on_event)?;
    }
    while t.state.step < recipe.steps {
        let generation = t.state.step / recipe.search.generation;
        let snapshot = t.snapshot(generation)?;
        let steps = t.state.step..selfplay::generation_steps(recipe, generation).end;
        let Some(games) = t.games(generation, steps.clone(), &snapshot, &mut on_event)? else {
            t.checkpoint(&mut on_event)?;
            return Ok(t.outcome(Some(generation)));
        };
        for (step, step_games) in steps.zip(games) {
            let metrics = t.step(step_games)?;
            on_event(Event::Step(&metrics));
            let done = t.state.step;
            if done.is_multiple_of(recipe.checkpoint.every) || done == recipe.steps {
                t.checkpoint(&mut on_event)?;
            }
            debug_assert_eq!(done, step + 1);
        }
    }
    Ok(t.outcome(None))
}

impl<'r> Trainer<'r> {
    /// A fresh run, or the latest checkpoint of `opts.run_dir` when resuming.
    fn open(recipe: &'r Recipe, opts: &'r TrainOptions) -> Result<Trainer<'r>> {
        let config = recipe.model.gnn_config();
        config.check().map_err(GnnError::Config)?;
        let device = gnn::device_named(&opts.gnn_device)?.autodiff();
        let lock = RunLock::acquire(&opts.run_dir)?;
        let checkpoints = Checkpoints::new(&opts.run_dir);
        let latest = checkpoints.latest()?;
        if latest.is_some() && !opts.resume {
            return Err(TrainError::AlreadyStarted {
                path: opts.run_dir.display().to_string(),
            }
            .into());
        }
        let mut t = Trainer {
            recipe,
            opts,
            models: Models::load(&recipe.training_set, &recipe.all_models())?,
            config,
            model: GnnModel::new(&config, recipe.seed, &device),
            device,
            optimizer: adam(),
            replay: VecDeque::new(),
            teacher: VecDeque::new(),
            state: RunState {
                recipe: recipe.name.clone(),
                step: 0,
                metrics: Vec::new(),
                eval_uniform: None,
                warm_start: None,
            },
            checkpoints,
            _lock: lock,
        };
        if let Some((_, dir)) = latest {
            t.restore(&dir)?;
        }
        Ok(t)
    }

    fn restore(&mut self, dir: &Path) -> Result<()> {
        super::checkpoint::verify(dir)?;
        super::checkpoint::check_recipe(dir, self.recipe)?;
        let state_path = dir.join("state.json");
        let state: RunState =
            serde_json::from_slice(&read_file(&state_path)?).map_err(|e| TrainError::Corrupt {
                path: state_path.display().to_string(),
                message: e.to_string(),
            })?;
        if state.recipe != self.recipe.name {
            return Err(TrainError::OtherRecipe {
                path: state_path.display().to_string(),
                found: state.recipe,
                expected: self.recipe.name.clone(),
            }
            .into());
        }
        // Lowering `steps` below the run's step printed "step 2/1" and exited 0 as if it had
        // trained; equal steps is a finished run resumed, which has nothing left to do.
        if state.step > self.recipe.steps {
            return Err(TrainError::PastSteps {
                path: state_path.display().to_string(),
                step: state.step,
                steps: self.recipe.steps,
            }
            .into());
        }
        let policy = GnnPolicy::load_on(&dir.join("policy.gnn"), &self.device)?;
        if policy.config != self.config {
            return Err(TrainError::OtherGnn {
                path: dir.display().to_string(),
                found: format!("{:?}", policy.config),
                expected: format!("{:?}", self.config),
            }
            .into());
        }
        self.model = policy.model;
        let optimizer_path = dir.join("optimizer.bpk");
        self.optimizer = adam()
            .from_bytes(Bytes::from_bytes_vec(read_file(&optimizer_path)?))
            .map_err(|e| TrainError::Corrupt {
                path: optimizer_path.display().to_string(),
                message: e.to_string(),
            })?;
        let replay_path = dir.join("replay.msgpack.gz");
        let replay: Vec<GameRecord> = selfplay::decode(&read_file(&replay_path)?, &replay_path)?;
        self.replay = replay.into();
        self.state = state;
        if let Some(warm) = &self.recipe.warm_start
            && self.state.warm_start.is_some()
            && self.recipe.optimizer.teacher_share > 0.0
        {
            self.teacher = self.teacher_games(warm)?;
        }
        // The run's working copies (curves, newest weights) are rewritten from the checkpoint,
        // so they never run ahead of it.
        self.policy()?.save(&self.opts.run_dir.join("policy.gnn"))?;
        write_metrics(&self.opts.run_dir, &self.state.metrics)
    }

    /// The policy the games of `generation` are played with: written at the generation's first
    /// step, read back (exactly the same weights) when resuming inside it.
    fn snapshot(&self, generation: u64) -> Result<GnnPolicy> {
        let path = snapshot_path(&self.opts.run_dir, generation);
        if self.state.step == generation * self.recipe.search.generation {
            self.policy()?.save(&path)?;
        }
        GnnPolicy::load(&path)
    }

    /// The current weights as a CPU policy, wherever the steps run: the searches that read it
    /// run on the CPU's threads (an exact copy, through the weights' record).
    fn policy(&self) -> Result<GnnPolicy> {
        let policy = GnnPolicy {
            config: self.config,
            model: self.model.valid(),
        };
        policy.copied_to(&gnn::cpu())
    }

    /// The games of `steps` (all of generation `generation` from the current step on), by step
    /// and worker. Missing games are played in parallel and saved; with `samples`, `None` when
    /// any is missing there.
    fn games(
        &self,
        generation: u64,
        steps: std::ops::Range<u64>,
        snapshot: &GnnPolicy,
        on_event: &mut impl FnMut(Event),
    ) -> Result<Option<Vec<Vec<GameRecord>>>> {
        let dir = self.games_dir();
        let keys = selfplay::games_of(self.recipe, steps.clone());
        let mut found: Vec<Option<GameRecord>> = keys
            .iter()
            .map(|&(s, w)| selfplay::load_game(&dir, s, w))
            .collect::<Result<_>>()?;
        for game in found.iter().flatten() {
            selfplay::check_drawn_by(self.recipe, game, &dir)?;
        }
        let missing: Vec<usize> = (0..keys.len()).filter(|&i| found[i].is_none()).collect();
        if !missing.is_empty() && self.opts.samples.is_some() {
            return Ok(None);
        }
        on_event(Event::Playing {
            generation,
            count: keys.len(),
            cached: keys.len() - missing.len(),
        });
        let setups: Vec<_> = missing
            .iter()
            .map(|&i| selfplay::draw(self.recipe, keys[i].0, keys[i].1))
            .collect();
        let play = |setup: &selfplay::GameSetup| {
            selfplay::play(self.recipe, setup, &self.models, snapshot)
        };
        let played = play_all(play, &setups, &dir, on_event);
        for (&i, game) in missing.iter().zip(played) {
            found[i] = Some(game?);
        }
        let mut by_step = vec![Vec::new(); (steps.end - steps.start) as usize];
        for (&(s, _), game) in keys.iter().zip(found) {
            by_step[(s - steps.start) as usize].push(game.expect("filled above"));
        }
        Ok(Some(by_step))
    }

    fn games_dir(&self) -> PathBuf {
        self.opts
            .samples
            .clone()
            .unwrap_or_else(|| self.opts.run_dir.join("games"))
    }

    /// The warm start: play (or read back) the teacher's games, then `warm.steps` Adam steps on
    /// batches drawn from all their targets.
    fn warm_start(&mut self, warm: &WarmStart, on_event: &mut impl FnMut(Event)) -> Result<()> {
        let dir = self.opts.run_dir.join("teacher");
        let mut games: Vec<Option<GameRecord>> = (0..warm.games)
            .map(|i| selfplay::load_game(&dir, i, 0))
            .collect::<Result<_>>()?;
        let missing: Vec<usize> = (0..games.len()).filter(|&i| games[i].is_none()).collect();
        on_event(Event::Teaching {
            count: games.len(),
            cached: games.len() - missing.len(),
        });
        let setups: Vec<_> = missing
            .iter()
            .map(|&i| imitation::draw(self.recipe, i as u64))
            .collect();
        let policy = self.policy()?;
        let play = |setup: &selfplay::GameSetup| {
            imitation::play(self.recipe, setup, &self.models, &policy, warm.passes)
        };
        for (&i, game) in missing.iter().zip(play_all(play, &setups, &dir, on_event)) {
            games[i] = Some(game?);
        }
        let games: VecDeque<GameRecord> = games.into_iter().flatten().collect();
        let mut losses = Vec::new();
        for step in 0..warm.steps {
            let seed = step_seed(self.recipe.seed, step, WARM_BATCH_STREAM);
            let picked = batch::draw(&games, self.recipe.optimizer.batch, seed);
            let (loss, _) = batch::loss(&self.model, &picked).expect("teacher games have targets");
            let loss = self.adam_step(loss);
            losses.push(loss);
            on_event(Event::WarmStep {
                step: step + 1,
                steps: warm.steps,
                loss,
            });
        }
        self.state.warm_start = Some(WarmStartRecord {
            games: games.len(),
            samples: games.iter().map(|g| g.samples.len()).sum(),
            teacher_speedup: mean(&games.iter().map(|g| g.speedup()).collect::<Vec<_>>()),
            losses,
        });
        self.teacher = games;
        Ok(())
    }

    /// The warm start's teacher games as it left them (on disk, every one of them).
    fn teacher_games(&self, warm: &WarmStart) -> Result<VecDeque<GameRecord>> {
        let dir = self.opts.run_dir.join("teacher");
        (0..warm.games)
            .map(|i| {
                selfplay::load_game(&dir, i, 0)?.ok_or_else(|| {
                    TrainError::Corrupt {
                        path: selfplay::game_path(&dir, i, 0).display().to_string(),
                        message: "missing: optimizer.teacher_share needs the warm start's games"
                            .to_string(),
                    }
                    .into()
                })
            })
            .collect()
    }

    /// Add a step's games to the replay buffer and take one Adam step.
    fn step(&mut self, games: Vec<GameRecord>) -> Result<StepMetrics> {
        let step = self.state.step;
        let game_speedup = mean(&games.iter().map(|g| g.speedup()).collect::<Vec<_>>());
        for game in games {
            self.replay.push_back(game);
        }
        self.evict();
        let seeds = (
            step_seed(self.recipe.seed, step, BATCH_STREAM),
            step_seed(self.recipe.seed, step, TEACHER_BATCH_STREAM),
        );
        let optimizer = &self.recipe.optimizer;
        let picked = batch::mixed(
            &self.replay,
            &self.teacher,
            optimizer.batch,
            optimizer.teacher_share,
            seeds,
        );
        let (loss, target_entropy) = match batch::loss(&self.model, &picked) {
            Some((loss, entropy)) => (self.adam_step(loss), entropy),
            None => (f64::NAN, f64::NAN),
        };
        self.state.step += 1;
        let mut metrics = StepMetrics {
            step: self.state.step,
            generation: step / self.recipe.search.generation,
            loss,
            target_entropy,
            replay: self.replay.iter().map(|g| g.samples.len()).sum(),
            game_speedup,
            eval_policy: None,
            eval_uniform: None,
        };
        let every = self.recipe.evaluation.every;
        if every > 0
            && (self.state.step.is_multiple_of(every) || self.state.step == self.recipe.steps)
        {
            let uniform = match self.state.eval_uniform {
                Some(u) => u,
                None => evaluate(self.recipe, &self.models, None)?,
            };
            self.state.eval_uniform = Some(uniform);
            metrics.eval_policy = Some(evaluate(self.recipe, &self.models, Some(&self.policy()?))?);
            metrics.eval_uniform = Some(uniform);
        }
        self.state.metrics.push(metrics.clone());
        write_metrics(&self.opts.run_dir, &self.state.metrics)?;
        Ok(metrics)
    }

    /// Drop the oldest games while the buffer holds more than `optimizer.replay` targets.
    fn evict(&mut self) {
        let cap = self.recipe.optimizer.replay;
        let mut total: usize = self.replay.iter().map(|g| g.samples.len()).sum();
        while total > cap {
            let Some(old) = self.replay.pop_front() else {
                break;
            };
            total -= old.samples.len();
        }
    }

    /// One Adam step on `loss`; its value.
    fn adam_step(&mut self, loss: Tensor<1>) -> f64 {
        let value = loss.clone().into_scalar::<f32>() as f64;
        self.model = gnn::adam_step(
            self.model.clone(),
            &mut self.optimizer,
            loss,
            self.recipe.optimizer.learning_rate,
        );
        value
    }

    /// Write a checkpoint of the current step and the newest weights as `<run>/policy.gnn`.
    fn checkpoint(&self, on_event: &mut impl FnMut(Event)) -> Result<()> {
        let policy = self.policy()?;
        self.checkpoints.save(self.state.step, |dir| {
            policy.save(&dir.join("policy.gnn"))?;
            let bytes = self
                .optimizer
                .into_bytes()
                .map_err(|e| Error::serialise("Adam's state", e))?;
            write_atomic(&dir.join("optimizer.bpk"), &bytes)?;
            let replay: Vec<&GameRecord> = self.replay.iter().collect();
            let path = dir.join("replay.msgpack.gz");
            write_atomic(&path, &selfplay::encode(&replay, &path)?)?;
            let state = serde_json::to_string_pretty(&self.state)
                .map_err(|e| Error::serialise("the run state", e))?;
            write_atomic(&dir.join("state.json"), state.as_bytes())?;
            super::checkpoint::write_recipe(dir, self.recipe)
        })?;
        policy.save(&self.opts.run_dir.join("policy.gnn"))?;
        self.prune_snapshots()?;
        on_event(Event::Checkpoint(self.state.step));
        Ok(())
    }

    /// Snapshots of generations before the checkpointed one are never read again.
    fn prune_snapshots(&self) -> Result<()> {
        let current = self.state.step / self.recipe.search.generation;
        for g in 0..current {
            let path = snapshot_path(&self.opts.run_dir, g);
            if path.exists() {
                std::fs::remove_file(&path)
                    .map_err(|e| Error::io(path.display().to_string(), e))?;
            }
        }
        Ok(())
    }

    fn outcome(&self, waiting_for: Option<u64>) -> TrainOutcome {
        TrainOutcome {
            step: self.state.step,
            finished: self.state.step >= self.recipe.steps,
            waiting_for,
            policy: self.opts.run_dir.join("policy.gnn"),
        }
    }
}

/// Play (with `play`) and save `setups` in parallel, reporting each game as it ends; the
/// results in the order of `setups`.
pub fn play_all(
    play: impl Fn(&selfplay::GameSetup) -> Result<GameRecord> + Sync + Send,
    setups: &[selfplay::GameSetup],
    dir: &Path,
    on_event: &mut impl FnMut(Event),
) -> Vec<Result<GameRecord>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            setups
                .par_iter()
                .map_with(tx, |tx, setup| {
                    let game = play(setup)?;
                    selfplay::save_game(dir, &game)?;
                    let _ = tx.send(game.clone());
                    Ok(game)
                })
                .collect()
        });
        for game in rx.iter() {
            on_event(Event::Played(&game));
        }
        worker.join().expect("self-play does not panic")
    })
}

fn adam() -> ModuleOptimizer {
    AdamConfig::new().init()
}

/// Mean speed-up over DP-NCCL of the search on the recipe's held-out pairs: topology
/// `evaluation.topology_seed + i` with model `i mod models`, budget and groups as in self-play.
/// `policy: None` searches with uniform priors.
pub fn evaluate(recipe: &Recipe, models: &Models, policy: Option<&GnnPolicy>) -> Result<f64> {
    let eval = &recipe.evaluation;
    let names = &recipe.training_set.models;
    let speedups: Vec<f64> = (0..eval.topologies)
        .into_par_iter()
        .map(|i| {
            let seed = eval.topology_seed + i;
            let graph = models.get(&names[i as usize % names.len()])?;
            let cluster = random_cluster_within(seed, recipe.training_set.distribution());
            let cost = recipe.training_set.cost();
            let p = Problem {
                graph,
                cluster: &cluster,
                cost: &cost,
            };
            let config = selfplay::search_config(recipe, seed);
            let found = search_with(&p, recipe.search.groups, config, policy, |_| {})?;
            Ok(found.speedup_over_dp())
        })
        .collect::<Result<_>>()?;
    Ok(mean(&speedups))
}
