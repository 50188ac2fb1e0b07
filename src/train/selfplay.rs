//! Self-play games (TAG §4.2.2, "training"): a game draws a (model, topology) pair from the
//! recipe's training set, runs the MCTS with a policy snapshot's priors, and keeps the visit
//! distributions of the well-visited vertices as targets for the priors.
//!
//! A game is named by its step and its worker index within the step; everything random in it
//! (the draw, METIS, the search's tie-breaks) flows from [`step_seed`]`(seed, step, worker)`, so
//! a game played in this process, in a resumed run or by a shard on another machine is the same
//! game. Games are files (`game-<step>-<worker>.msgpack.gz`, MessagePack, gzipped, written
//! atomically) that in-process training and `topoplace selfplay` shards both write and
//! `train` reads.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, TopologyDistribution, random_cluster_within};
use crate::error::{Error, InputError, Result, TrainError};
use crate::gnn::{GnnPolicy, HeteroGraph, Slice, features};
use crate::graph::Graph;
use crate::io::write_atomic;
use crate::mcts::{Mcts, MctsConfig};
use crate::problem::Problem;
use crate::resolve::load_named_cluster;

use super::checkpoint::step_seed;
use super::recipe::{Recipe, TrainingSet};

/// Where a game's cluster comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClusterSource {
    /// A random topology with this seed, drawn like TAG's with these bandwidth ranges.
    Random(u64, TopologyDistribution),
    /// One of the recipe's cluster configs.
    Config(String),
}

impl ClusterSource {
    /// Build the cluster: generate the random topology, or read the named cluster config.
    pub fn load(&self) -> Result<Cluster> {
        match self {
            ClusterSource::Random(seed, b) => Ok(random_cluster_within(*seed, *b)),
            ClusterSource::Config(name) => load_named_cluster(name, "training_set.clusters"),
        }
    }

    /// The cluster's name: the random topology's (from its seed) or the config's.
    pub fn name(&self) -> String {
        match self {
            ClusterSource::Random(seed, b) => b.cluster_name(*seed),
            ClusterSource::Config(name) => name.clone(),
        }
    }
}

/// What one game is played on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GameSetup {
    /// The training step the game belongs to.
    pub step: u64,
    /// The game's index among its step's games (`0..search.games_per_step`).
    pub worker: u64,
    /// The seed of everything random in the game.
    pub seed: u64,
    /// The model drawn: a zoo name or graph file from the training set.
    pub model: String,
    /// The cluster drawn: a random topology or one of the recipe's cluster configs.
    pub cluster: ClusterSource,
}

/// One training target: the GNN input of a vertex, the op group it decides, and the visit
/// distribution over that group's actions (sparse: visited actions only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The GNN input of the vertex.
    pub graph: HeteroGraph,
    /// The op group the vertex decides next (its depth in search order).
    pub group: u32,
    /// `(action, share of visits)` of every visited action; the shares sum to 1.
    pub target: Vec<(u16, f32)>,
}

impl Sample {
    /// The dense target over `actions` actions.
    pub(crate) fn dense_target(&self, actions: usize) -> Vec<f32> {
        let mut t = vec![0.0; actions];
        for &(a, p) in &self.target {
            t[a as usize] = p;
        }
        t
    }
}

/// A played game: its setup, how the search did, and its targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GameRecord {
    /// The step, worker, seed, model and cluster of the game.
    pub setup: GameSetup,
    /// DP-NCCL's and the search's best iteration time, µs.
    pub dp_us: f64,
    /// The search's best iteration time, µs.
    pub best_us: f64,
    /// Whether the search's best strategy fits in every GPU's memory.
    pub fits: bool,
    /// The slices (device groups, option) of the cluster's actions, shared by the samples.
    pub slices: Vec<Slice>,
    /// The training targets: one per vertex visited often enough (`search.min_visits`).
    pub samples: Vec<Sample>,
}

impl GameRecord {
    /// The first value of a read game that no game could have played, as (field, why): a
    /// non-finite time, feature or target share. A game file with a NaN trained the policy into
    /// NaN weights with a NaN loss (a file is another machine's shard, or edited).
    fn problem(&self) -> Option<(String, String)> {
        fn not_finite(values: &[f32]) -> Option<usize> {
            values.iter().position(|v| !v.is_finite())
        }
        for (field, us) in [("dp_us", self.dp_us), ("best_us", self.best_us)] {
            if !(us.is_finite() && us >= 0.0) {
                return Some((
                    field.into(),
                    format!("{us}: expected a finite time of at least 0"),
                ));
            }
        }
        for (i, slice) in self.slices.iter().enumerate() {
            if let Some(j) = not_finite(&slice.placement) {
                let field = format!("slices[{i}].placement[{j}]");
                return Some((field, format!("{}: not finite", slice.placement[j])));
            }
        }
        for (i, sample) in self.samples.iter().enumerate() {
            let g = &sample.graph;
            for (name, values) in [
                ("op_features", &g.op_features),
                ("dev_features", &g.dev_features),
                ("op_op.features", &g.op_op.features),
                ("dev_dev.features", &g.dev_dev.features),
                ("op_dev.features", &g.op_dev.features),
            ] {
                if let Some(j) = not_finite(values) {
                    let field = format!("samples[{i}].graph.{name}[{j}]");
                    return Some((field, format!("{}: not finite", values[j])));
                }
            }
            for (j, &(_, share)) in sample.target.iter().enumerate() {
                if !(0.0..=1.0).contains(&share) {
                    let field = format!("samples[{i}].target[{j}]");
                    return Some((field, format!("{share}: a share of visits lies in [0, 1]")));
                }
            }
        }
        None
    }

    /// The search's speed-up over DP-NCCL, `T_DP / T − 1` (−1 when nothing fits).
    pub fn speedup(&self) -> f64 {
        if self.fits && self.best_us > 0.0 {
            self.dp_us / self.best_us - 1.0
        } else {
            -1.0
        }
    }
}

/// The game `worker` of step `step`: model and cluster drawn uniformly from the training set
/// (the recipe's models × its random topologies and cluster configs).
pub fn draw(recipe: &Recipe, step: u64, worker: u64) -> GameSetup {
    let seed = step_seed(recipe.seed, step, worker);
    draw_from(recipe, &recipe.training_set.models, seed, step, worker)
}

/// A game on one of `models` and one of the training set's clusters, drawn with `seed`.
pub(crate) fn draw_from(
    recipe: &Recipe,
    models: &[String],
    seed: u64,
    step: u64,
    worker: u64,
) -> GameSetup {
    let mut rng = StdRng::seed_from_u64(seed);
    let set = &recipe.training_set;
    let model = models[rng.random_range(0..models.len())].clone();
    let choices = set.topologies + set.clusters.len() as u64;
    let pick = rng.random_range(0..choices);
    let cluster = if pick < set.topologies {
        ClusterSource::Random(set.topology_seed + pick, set.distribution())
    } else {
        ClusterSource::Config(set.clusters[(pick - set.topologies) as usize].clone())
    };
    GameSetup {
        step,
        worker,
        seed,
        model,
        cluster,
    }
}

/// The steps of generation `generation`: `g·G .. min((g+1)·G, steps)` with `G` the recipe's
/// `search.generation`.
pub fn generation_steps(recipe: &Recipe, generation: u64) -> std::ops::Range<u64> {
    let g = recipe.search.generation;
    generation * g..((generation + 1) * g).min(recipe.steps)
}

/// `(step, worker)` of every game of `steps`, by step then worker: the order shards count in.
pub fn games_of(recipe: &Recipe, steps: std::ops::Range<u64>) -> Vec<(u64, u64)> {
    let workers = recipe.search.games_per_step as u64;
    steps
        .flat_map(|s| (0..workers).map(move |w| (s, w)))
        .collect()
}

/// The recipe's graphs, loaded once per run.
pub struct Models {
    graphs: BTreeMap<String, Graph>,
}

impl Models {
    /// Load every distinct model of `names` (zoo names or graph files) once, as they train
    /// under `set`'s framework and precision.
    pub fn load(set: &TrainingSet, names: &[String]) -> Result<Models> {
        let mut graphs = BTreeMap::new();
        for name in names {
            if !graphs.contains_key(name) {
                graphs.insert(name.clone(), set.model(name)?);
            }
        }
        Ok(Models { graphs })
    }

    pub(crate) fn get(&self, name: &str) -> Result<&Graph> {
        self.graphs
            .get(name)
            .ok_or_else(|| TrainError::UnknownModel(name.to_string()).into())
    }
}

/// The search settings of evaluation, of the teacher and (with [`self_play_config`]'s additions)
/// of self-play: the recipe's budget, groups and exploration, TAG's compute order and even
/// split, no SFB double check and no polish (neither changes the visits the policy learns from),
/// and TAG's tree from its first leaf (no device-group seeds: the recipes' games, targets and
/// so the shipped weights stay what they were trained with).
pub(crate) fn search_config(recipe: &Recipe, seed: u64) -> MctsConfig {
    MctsConfig {
        iterations: recipe.search.budget,
        seed,
        exploration: recipe.search.exploration,
        sfb_check: false,
        polish: 0,
        seed_device_groups: false,
        ..MctsConfig::default()
    }
}

/// [`search_config`] with the recipe's expert-iteration settings: its root noise, and its polish
/// when the polished strategy gives targets.
pub(crate) fn self_play_config(recipe: &Recipe, seed: u64) -> MctsConfig {
    MctsConfig {
        root_noise: recipe.search.root_noise,
        polish: recipe.search.polished_targets.unwrap_or(0),
        ..search_config(recipe, seed)
    }
}

/// The search of game `setup` with `policy`'s priors: its model on its cluster, grouped by METIS
/// in TAG's order, run with `config`. `run` gets it with the cluster's action slices (the search
/// borrows the model and cluster this function owns).
pub(crate) fn game_search<T>(
    recipe: &Recipe,
    setup: &GameSetup,
    models: &Models,
    policy: &GnnPolicy,
    config: MctsConfig,
    run: impl FnOnce(Mcts, Vec<Slice>) -> Result<T>,
) -> Result<T> {
    let graph = models.get(&setup.model)?;
    let cluster = setup.cluster.load()?;
    let cost = recipe.training_set.cost();
    let p = Problem {
        graph,
        cluster: &cluster,
        cost: &cost,
    };
    let mcts = Mcts::grouped(p, recipe.search.groups, config)?.with_policy(policy)?;
    let slices = features::slices(&cluster, mcts.actions());
    run(mcts, slices)
}

/// Play one game with `policy`'s priors.
pub fn play(
    recipe: &Recipe,
    setup: &GameSetup,
    models: &Models,
    policy: &GnnPolicy,
) -> Result<GameRecord> {
    let config = self_play_config(recipe, setup.seed);
    game_search(recipe, setup, models, policy, config, |mut mcts, slices| {
        let (found, mut targets) = mcts.run_with_targets(recipe.search.min_visits, |_| {})?;
        let expert = recipe.search.polished_targets.is_some() && found.fits;
        if let Some(path) = mcts.result_path(&found).filter(|_| expert) {
            targets.extend(mcts.path_targets(&path)?);
        }
        let samples = targets
            .iter()
            .map(|t| Sample {
                graph: t.graph.clone(),
                group: t.group as u32,
                target: t.distribution(),
            })
            .collect();
        Ok(GameRecord {
            setup: setup.clone(),
            dp_us: found.dp_us,
            best_us: found.iteration_us(),
            fits: found.fits,
            slices,
            samples,
        })
    })
}

/// The file of game `worker` of step `step` in `dir`.
pub fn game_path(dir: &Path, step: u64, worker: u64) -> PathBuf {
    dir.join(format!("game-{step:06}-{worker:03}.msgpack.gz"))
}

/// Write a game atomically (a reader never sees half a game).
pub fn save_game(dir: &Path, game: &GameRecord) -> Result<()> {
    let path = game_path(dir, game.setup.step, game.setup.worker);
    write_atomic(&path, &encode(game, &path)?)
}

/// Read game `(step, worker)` from `dir`; `None` when it has not been played there.
pub fn load_game(dir: &Path, step: u64, worker: u64) -> Result<Option<GameRecord>> {
    let path = game_path(dir, step, worker);
    match std::fs::read(&path) {
        Ok(bytes) => {
            let game: GameRecord = decode(&bytes, &path)?;
            if let Some((field, message)) = game.problem() {
                return Err(InputError::new(path.display().to_string(), field, message).into());
            }
            if game.setup.step != step || game.setup.worker != worker {
                return Err(TrainError::WrongGame {
                    path: path.display().to_string(),
                    step: game.setup.step,
                    worker: game.setup.worker,
                }
                .into());
            }
            Ok(Some(game))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path.display().to_string(), e)),
    }
}

/// Refuses `game` (read from `dir`) unless `recipe` draws its setup for its step and worker: a
/// `--samples` folder of another run (another seed or training set) held games of the same
/// names, and training took their targets as its own.
pub fn check_drawn_by(recipe: &Recipe, game: &GameRecord, dir: &Path) -> Result<()> {
    let (step, worker) = (game.setup.step, game.setup.worker);
    let expected = draw(recipe, step, worker);
    if game.setup == expected {
        return Ok(());
    }
    let shown = |s: &GameSetup| format!("seed {}, {} on {}", s.seed, s.model, s.cluster.name());
    Err(TrainError::ForeignGame {
        path: game_path(dir, step, worker).display().to_string(),
        found: shown(&game.setup),
        expected: shown(&expected),
    }
    .into())
}

/// MessagePack, gzipped.
pub(crate) fn encode<T: Serialize>(value: &T, path: &Path) -> Result<Vec<u8>> {
    let packed = rmp_serde::to_vec(value).map_err(|e| TrainError::Corrupt {
        path: path.display().to_string(),
        message: format!("serialising: {e}"),
    })?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&packed)
        .and_then(|_| gz.finish())
        .map_err(|e| Error::io(path.display().to_string(), e))
}

/// The inverse of [`encode`]; a corrupt file is an error naming it.
pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8], path: &Path) -> Result<T> {
    let mut packed = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut packed)
        .map_err(|e| TrainError::Corrupt {
            path: path.display().to_string(),
            message: format!("not a gzipped file: {e}"),
        })?;
    rmp_serde::from_slice(&packed).map_err(|e| {
        TrainError::Corrupt {
            path: path.display().to_string(),
            message: format!("corrupt: {e}"),
        }
        .into()
    })
}
