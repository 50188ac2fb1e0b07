//! A training recipe (`training/<name>.toml`): what the policy trains on, how long, and with which
//! search and optimiser settings. Every field has a default except the training set, so a recipe
//! states only what it changes; unknown keys are refused to catch typos.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cost::{CostModel, MemoryFormat};
use crate::error::{Error, InputError, Result, check_positive};
use crate::graph::Graph;
use crate::io::parse_toml;
use crate::precision::Precision;
use crate::resolve::load_trained;
use crate::zoo::{Framework, ZooOptions};

/// One training recipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// Names the run and its output directory.
    pub name: String,
    /// Seed of every random choice of the run: draws, search, weight initialisation.
    #[serde(default)]
    pub seed: u64,
    /// Optimiser steps.
    #[serde(default = "defaults::steps")]
    pub steps: u64,
    /// The models and random topologies self-play draws its games from (the one required table).
    pub training_set: TrainingSet,
    /// The MCTS of each self-play game: budget, op groups, exploration, games per step.
    #[serde(default)]
    pub search: SearchSettings,
    /// Sizes of the GNN being trained (width, attention heads).
    #[serde(default)]
    pub model: ModelSettings,
    /// Adam's learning rate, batch and replay buffer.
    #[serde(default)]
    pub optimizer: OptimizerSettings,
    /// Periodic evaluation on held-out random topologies.
    #[serde(default)]
    pub evaluation: EvaluationSettings,
    /// How often (in steps) the run writes a checkpoint.
    #[serde(default)]
    pub checkpoint: CheckpointSettings,
    /// Imitation of a long search before self-play (beyond TAG); none when absent.
    #[serde(default)]
    pub warm_start: Option<WarmStart>,
}

/// The (model, topology) pairs self-play draws from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingSet {
    /// Zoo names or graph files (any importable format), relative to the recipe's directory.
    pub models: Vec<String>,
    /// Random topologies of TAG's distribution (§5.2): seeds `topology_seed ..
    /// topology_seed + topologies`.
    #[serde(default = "defaults::topologies")]
    pub topologies: u64,
    #[serde(default)]
    pub topology_seed: u64,
    /// The random topologies' intra-machine bandwidth range, Gbps (TAG: [64, 160]).
    #[serde(default = "defaults::intra_gbps")]
    pub intra_gbps: [u32; 2],
    /// The random topologies' inter-machine (NIC) bandwidth range, Gbps (TAG: [20, 50]).
    #[serde(default = "defaults::inter_gbps")]
    pub inter_gbps: [u32; 2],
    /// The random topologies' GPU types: `"tag"` (TAG's three, the default) or `"wide"` (with
    /// T4, A100 and H100).
    #[serde(default, skip_serializing_if = "is_tag_mix")]
    pub gpus: crate::cluster::GpuMix,
    /// NVLink in half the random machines whose GPU type has it (src/cluster/random.rs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nvlink: bool,
    /// Cluster configs drawn from besides the random topologies.
    #[serde(default)]
    pub clusters: Vec<String>,
    /// The precision the models train in (`fp32`, TAG's and the default; `tf32`, `bf16`,
    /// `fp16`): the simulator's peaks and the policy's device features follow it.
    #[serde(default, with = "by_name", skip_serializing_if = "is_default")]
    pub precision: Precision,
    /// Whose kernels the zoo models are built from (`tf1`, TAG's and the default; `pytorch`,
    /// `pytorch-eager`).
    #[serde(default, with = "by_name", skip_serializing_if = "is_default")]
    pub framework: Framework,
    /// The layout of convolution activations (`nchw`, `channels-last`); the framework's when
    /// left out (docs/modelling.md).
    #[serde(
        default,
        with = "by_name_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_format: Option<MemoryFormat>,
}

fn is_default<T: Default + PartialEq>(x: &T) -> bool {
    *x == T::default()
}

/// A field written as its name (a precision, a framework): parsed with `FromStr`, written with
/// `Display`.
pub(crate) mod by_name {
    use std::fmt::Display;
    use std::str::FromStr;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<T: Display, S: Serializer>(x: &T, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(x)
    }

    pub(crate) fn deserialize<'de, T, D>(d: D) -> Result<T, D::Error>
    where
        T: FromStr<Err = String>,
        D: Deserializer<'de>,
    {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// An optional field written as its name, or left out.
mod by_name_or_none {
    use std::fmt::Display;
    use std::str::FromStr;

    use serde::{Deserializer, Serializer};

    pub(crate) fn serialize<T: Display, S: Serializer>(
        x: &Option<T>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match x {
            Some(x) => super::by_name::serialize(x, s),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, T, D>(d: D) -> Result<Option<T>, D::Error>
    where
        T: FromStr<Err = String>,
        D: Deserializer<'de>,
    {
        super::by_name::deserialize(d).map(Some)
    }
}

fn is_tag_mix(mix: &crate::cluster::GpuMix) -> bool {
    *mix == crate::cluster::GpuMix::Tag
}

impl TrainingSet {
    /// The cost model the games simulate with: the recipe's precision, its framework's runtime
    /// memory, and its convolutions' layout.
    pub fn cost(&self) -> CostModel {
        self.framework
            .cost_model(self.precision, self.memory_format)
    }

    /// `name` (a zoo model or a graph file) as it trains under the recipe: built from the
    /// framework's ops, then autocast to the precision.
    pub fn model(&self, name: &str) -> Result<Graph> {
        let opts = ZooOptions {
            framework: self.framework,
            ..ZooOptions::default()
        };
        load_trained(name, &opts, self.precision)
    }

    /// The distribution of the random topologies.
    pub fn distribution(&self) -> crate::cluster::TopologyDistribution {
        crate::cluster::TopologyDistribution {
            intra_gbps: self.intra_gbps,
            inter_gbps: self.inter_gbps,
            gpus: self.gpus,
            nvlink: self.nvlink,
        }
    }
}

/// The MCTS of each self-play game.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSettings {
    /// Leaf evaluations per game.
    #[serde(default = "defaults::budget")]
    pub budget: usize,
    /// METIS op groups.
    #[serde(default = "defaults::groups")]
    pub groups: usize,
    /// PUCT's exploration constant.
    #[serde(default = "defaults::exploration")]
    pub exploration: f64,
    /// A vertex becomes a training target once it has this many visits. TAG uses 800 of its
    /// much larger searches; at a few hundred leaves per game a vertex with 40 visits already
    /// has a visit distribution that differs from the priors.
    #[serde(default = "defaults::min_visits")]
    pub min_visits: u32,
    /// Games played per step (self-play workers).
    #[serde(default = "defaults::games")]
    pub games_per_step: usize,
    /// Steps per policy generation: the games of a generation's steps are all played with the
    /// policy as it was when the generation began (a snapshot), so they can be played in
    /// parallel, in this process or by `topoplace selfplay` shards on other machines. 1 is
    /// fully on-policy (every step's games use the latest weights).
    #[serde(default = "defaults::generation")]
    pub generation: u64,
    /// Expert iteration's root exploration in self-play games (beyond TAG): the policy's root
    /// priors tempered and mixed with Dirichlet noise (`{ alpha, fraction = 0.25, temperature
    /// = 1 }`); none when absent. Evaluation and the warm start's teacher search without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_noise: Option<crate::mcts::RootNoise>,
    /// Expert iteration's improved-result targets (beyond TAG): each self-play game's result is
    /// polished by local search with this many simulations per start, and its decisions become
    /// one-hot targets at every vertex on its path, beside the visit distributions; none when
    /// absent (the game's targets are the tree's, as TAG's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polished_targets: Option<usize>,
}

/// Sizes of the GNN.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    #[serde(default = "defaults::width")]
    pub width: usize,
    #[serde(default = "defaults::heads")]
    pub heads: usize,
}

impl ModelSettings {
    /// The GNN these settings describe (TAG's 4 layers).
    pub(crate) fn gnn_config(&self) -> crate::gnn::GnnConfig {
        crate::gnn::GnnConfig {
            width: self.width,
            heads: self.heads,
            ..crate::gnn::GnnConfig::default()
        }
    }
}

/// Adam on the cross-entropy between priors and visit distributions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptimizerSettings {
    #[serde(default = "defaults::learning_rate")]
    pub learning_rate: f64,
    /// Targets per Adam step, drawn from the replay buffer.
    #[serde(default = "defaults::batch")]
    pub batch: usize,
    /// Targets kept (the most recent).
    #[serde(default = "defaults::replay")]
    pub replay: usize,
    /// Expert iteration (beyond TAG): the share of each self-play batch drawn from the warm
    /// start's teacher targets, so the deep decisions the teacher showed are not washed out by
    /// visit targets; 0 (the default) draws every target from the replay buffer.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub teacher_share: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Periodic evaluation on held-out random topologies (never drawn for training).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluationSettings {
    /// Evaluate every this many steps (0: never).
    #[serde(default = "defaults::eval_every")]
    pub every: u64,
    #[serde(default = "defaults::heldout")]
    pub topologies: u64,
    /// Seeds of the held-out topologies start here; they must not overlap the training seeds.
    #[serde(default = "defaults::heldout_seed")]
    pub topology_seed: u64,
}

/// The solver-supervised warm start ([`crate::train::imitation`]): teacher games, then Adam steps
/// on their targets, before the first self-play step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarmStart {
    /// Teacher games (each a model and a cluster drawn from the training set).
    #[serde(default = "defaults::teacher_games")]
    pub games: u64,
    /// Adam steps on the teacher's targets (batches of `optimizer.batch`).
    #[serde(default = "defaults::warm_steps")]
    pub steps: u64,
    /// Coordinate-descent sweeps over the op groups per teacher game.
    #[serde(default = "defaults::passes")]
    pub passes: usize,
    /// The models the teacher plays (zoo names or graph files); the training set's when empty.
    /// Small ones keep the teacher cheap.
    #[serde(default)]
    pub models: Vec<String>,
}

/// How often the run is made durable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSettings {
    #[serde(default = "defaults::checkpoint_every")]
    pub every: u64,
}

/// The most optimiser steps a recipe, or `experiment --steps`, may ask for.
pub const MAX_STEPS: u64 = limits::STEPS;

/// The largest sizes a recipe may ask for: far above any shipped recipe (budget 200, 60 groups,
/// 300 steps), below where one game or one step would run for days or exhaust memory.
mod limits {
    /// Optimiser steps, generation lengths and warm-start steps.
    pub(crate) const STEPS: u64 = 1_000_000;
    /// Leaf evaluations of one game (as `policy train-layouts`' `expert_budget`), and local-search
    /// simulations per polish.
    pub(crate) const BUDGET: u64 = 100_000;
    /// METIS op groups: each is a level of the tree, so far more than a search can decide.
    pub(crate) const GROUPS: u64 = 10_000;
    /// Games played in parallel each step.
    pub(crate) const GAMES_PER_STEP: u64 = 1_024;
    /// Targets per Adam step.
    pub(crate) const BATCH: u64 = 65_536;
    /// Targets kept in the replay buffer.
    pub(crate) const REPLAY: u64 = 10_000_000;
    /// Held-out topologies evaluated, and warm-start teacher games.
    pub(crate) const TOPOLOGIES: u64 = 100_000;
    /// Coordinate-descent sweeps of a teacher game.
    pub(crate) const PASSES: u64 = 1_000;
}

mod defaults {
    pub(crate) fn steps() -> u64 {
        200
    }
    pub(crate) fn topologies() -> u64 {
        1000
    }
    pub(crate) fn intra_gbps() -> [u32; 2] {
        crate::cluster::TopologyDistribution::TAG.intra_gbps
    }
    pub(crate) fn inter_gbps() -> [u32; 2] {
        crate::cluster::TopologyDistribution::TAG.inter_gbps
    }
    pub(crate) fn budget() -> usize {
        200
    }
    pub(crate) fn groups() -> usize {
        20
    }
    pub(crate) fn exploration() -> f64 {
        10.0
    }
    pub(crate) fn min_visits() -> u32 {
        40
    }
    pub(crate) fn games() -> usize {
        2
    }
    pub(crate) fn generation() -> u64 {
        10
    }
    pub(crate) fn width() -> usize {
        64
    }
    pub(crate) fn heads() -> usize {
        4
    }
    pub(crate) fn learning_rate() -> f64 {
        1e-3
    }
    pub(crate) fn batch() -> usize {
        32
    }
    pub(crate) fn replay() -> usize {
        4096
    }
    pub(crate) fn eval_every() -> u64 {
        50
    }
    pub(crate) fn heldout() -> u64 {
        10
    }
    pub(crate) fn heldout_seed() -> u64 {
        1_000_000
    }
    pub(crate) fn checkpoint_every() -> u64 {
        10
    }
    pub(crate) fn teacher_games() -> u64 {
        64
    }
    pub(crate) fn warm_steps() -> u64 {
        200
    }
    pub(crate) fn passes() -> usize {
        1
    }
}

macro_rules! default_from_serde {
    ($($t:ty),*) => {$(
        impl Default for $t {
            fn default() -> $t {
                toml::from_str("").expect("every field has a default")
            }
        }
    )*};
}
default_from_serde!(
    SearchSettings,
    ModelSettings,
    OptimizerSettings,
    EvaluationSettings,
    CheckpointSettings
);

impl Recipe {
    /// Parse and check a recipe; `source` names the file in errors.
    pub fn parse(text: &str, source: &str) -> Result<Recipe, InputError> {
        let recipe: Recipe = parse_toml(text, source)?;
        recipe.check(source)?;
        Ok(recipe)
    }

    /// Read a recipe file. Relative graph and cluster paths in it are resolved against the
    /// file's directory.
    pub fn load(path: &Path) -> Result<Recipe> {
        let shown = path.display().to_string();
        let text = crate::io::read_text_file(path)?;
        let mut recipe = Recipe::parse(&text, &shown)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        recipe.resolve_paths(dir);
        recipe.check_models_exist(&shown)?;
        recipe.check_clusters_load(&shown)?;
        Ok(recipe)
    }

    /// Every cluster of the training set is a shipped config or a file that loads, before the
    /// run writes anything (a bad one used to stop the run at the first game that drew it,
    /// checkpoints already written, naming the command line): loaded as the games load them, the
    /// error naming the recipe and the entry where it named `<cli>`.
    fn check_clusters_load(&self, source: &str) -> Result<()> {
        for (i, c) in self.training_set.clusters.iter().enumerate() {
            let field = format!("training_set.clusters[{i}]");
            crate::resolve::load_named_cluster(c, &field).map_err(|e| match e {
                Error::Input(inner) if inner.file == "<cli>" => {
                    InputError::new(source, field.clone(), inner.message).into()
                }
                other => other,
            })?;
        }
        Ok(())
    }

    /// Every model named is a zoo model or a file (paths already resolved against the recipe's
    /// folder): a typo is an error naming the recipe and the entry, not the command line.
    fn check_models_exist(&self, source: &str) -> Result<(), InputError> {
        let warm = self.warm_start.iter().flat_map(|w| w.models.iter());
        let fields = self
            .training_set
            .models
            .iter()
            .enumerate()
            .map(|(i, m)| (format!("training_set.models[{i}]"), m))
            .chain(
                warm.enumerate()
                    .map(|(i, m)| (format!("warm_start.models[{i}]"), m)),
            );
        for (field, model) in fields {
            if !crate::resolve::is_zoo_model(model) && !Path::new(model).exists() {
                return Err(InputError::new(
                    source,
                    field,
                    format!(
                        "\"{model}\" is neither a zoo model nor a file (paths are relative to the \
                         recipe's folder)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Every model the run plays: the training set's and the warm start's.
    pub fn all_models(&self) -> Vec<String> {
        let mut names = self.training_set.models.clone();
        if let Some(w) = &self.warm_start {
            names.extend(w.models.iter().cloned());
        }
        names
    }

    /// This recipe without `model` anywhere it is trained on (the training set and the warm
    /// start's teacher), for held-out-model experiments.
    pub fn without_model(&self, model: &str) -> Recipe {
        let mut held = self.clone();
        held.training_set.models.retain(|m| m != model);
        if let Some(w) = &mut held.warm_start {
            w.models.retain(|m| m != model);
        }
        held
    }

    fn check(&self, source: &str) -> Result<(), InputError> {
        let at = |field: &str, message: &str| InputError::new(source, field, message);
        // The name is the run's folder under training/runs/: a blank one, `.` or `..` wrote the
        // run into an unnamed folder or outside training/runs/.
        let name = self.name.trim();
        let blank = crate::error::is_blank(name);
        if blank || name == "." || name == ".." || self.name.contains(['/', '\\']) {
            return Err(at(
                "name",
                "must be a non-blank name without slashes, not . or ..",
            ));
        }
        // It names a folder and is printed in the progress lines.
        crate::error::check_printable(source, "name", &self.name)?;
        let set = &self.training_set;
        if set.models.is_empty() {
            return Err(at("training_set.models", "lists no model"));
        }
        if set.topologies == 0 && set.clusters.is_empty() {
            return Err(at(
                "training_set.topologies",
                "0 random topologies and no clusters: nothing to train on",
            ));
        }
        if let Some((field, problem)) = set.distribution().problem() {
            return Err(at(&format!("training_set.{field}"), &problem));
        }
        if set.topologies > 0
            && let Err(why) = set.precision.supported_by_mix(set.gpus)
        {
            return Err(at("training_set.precision", &why));
        }
        let positive = [
            ("steps", self.steps as f64),
            ("search.budget", self.search.budget as f64),
            ("search.groups", self.search.groups as f64),
            ("search.exploration", self.search.exploration),
            ("search.min_visits", f64::from(self.search.min_visits)),
            ("search.games_per_step", self.search.games_per_step as f64),
            ("search.generation", self.search.generation as f64),
            ("model.width", self.model.width as f64),
            ("model.heads", self.model.heads as f64),
            ("optimizer.learning_rate", self.optimizer.learning_rate),
            ("optimizer.batch", self.optimizer.batch as f64),
            ("optimizer.replay", self.optimizer.replay as f64),
            ("checkpoint.every", self.checkpoint.every as f64),
        ];
        for (field, value) in positive {
            check_positive(source, field, value)?;
        }
        self.check_bounds(source)?;
        self.model
            .gnn_config()
            .check()
            .map_err(|problem| at("model", &problem))?;
        self.check_expert_iteration(source)?;
        if let Some(w) = &self.warm_start {
            for (field, value) in [
                ("warm_start.games", w.games as f64),
                ("warm_start.steps", w.steps as f64),
                ("warm_start.passes", w.passes as f64),
            ] {
                check_positive(source, field, value)?;
            }
        }
        let train = set.topology_seed..set.topology_seed.saturating_add(set.topologies);
        let eval = &self.evaluation;
        let held = eval.topology_seed..eval.topology_seed.saturating_add(eval.topologies);
        if train.start < held.end && held.start < train.end {
            return Err(at(
                "evaluation.topology_seed",
                &format!(
                    "held-out seeds {held:?} overlap the training seeds {train:?}: the evaluation \
                     would not be on unseen topologies"
                ),
            ));
        }
        Ok(())
    }

    /// The sizes whose time or memory grow with them stay within [`limits`], and the ones that
    /// depend on each other agree: a budget of 2⁶⁴−1 leaves played one game for ever, a
    /// `min_visits` above the budget made no vertex a target, a replay buffer smaller than a
    /// batch could not fill one, and no held-out topology gave a NaN evaluation.
    fn check_bounds(&self, source: &str) -> Result<(), InputError> {
        let at = |field: &str, message: String| InputError::new(source, field, message);
        let mut bounded = vec![
            ("steps", self.steps, limits::STEPS),
            ("search.budget", self.search.budget as u64, limits::BUDGET),
            ("search.groups", self.search.groups as u64, limits::GROUPS),
            (
                "search.games_per_step",
                self.search.games_per_step as u64,
                limits::GAMES_PER_STEP,
            ),
            ("search.generation", self.search.generation, limits::STEPS),
            (
                "optimizer.batch",
                self.optimizer.batch as u64,
                limits::BATCH,
            ),
            (
                "optimizer.replay",
                self.optimizer.replay as u64,
                limits::REPLAY,
            ),
            (
                "evaluation.topologies",
                self.evaluation.topologies,
                limits::TOPOLOGIES,
            ),
        ];
        if let Some(polish) = self.search.polished_targets {
            bounded.push(("search.polished_targets", polish as u64, limits::BUDGET));
        }
        if let Some(w) = &self.warm_start {
            bounded.extend([
                ("warm_start.games", w.games, limits::TOPOLOGIES),
                ("warm_start.steps", w.steps, limits::STEPS),
                ("warm_start.passes", w.passes as u64, limits::PASSES),
            ]);
        }
        for (field, value, most) in bounded {
            if value > most {
                return Err(at(field, format!("{value}: expected at most {most}")));
            }
        }
        let rate = self.optimizer.learning_rate;
        // As `policy train-layouts` requires: a rate of 1 or more makes Adam's steps diverge
        // (1e300 wrote a policy of NaN weights).
        if !(rate > 0.0 && rate < 1.0) {
            // 1e300 written out is three hundred digits.
            let shown = match rate.abs() {
                x if (1e-4..1e6).contains(&x) => format!("{rate}"),
                _ => format!("{rate:e}"),
            };
            return Err(at(
                "optimizer.learning_rate",
                format!("{shown}: expected in (0, 1)"),
            ));
        }
        if u64::from(self.search.min_visits) > self.search.budget as u64 {
            return Err(at(
                "search.min_visits",
                format!(
                    "{}: more than search.budget ({}), so no vertex of a game would be visited \
                     enough to be a target",
                    self.search.min_visits, self.search.budget
                ),
            ));
        }
        if self.optimizer.replay < self.optimizer.batch {
            return Err(at(
                "optimizer.replay",
                format!(
                    "{}: fewer targets than optimizer.batch ({}), so no batch could be drawn \
                     from the buffer",
                    self.optimizer.replay, self.optimizer.batch
                ),
            ));
        }
        if self.evaluation.every > 0 && self.evaluation.topologies == 0 {
            return Err(at(
                "evaluation.topologies",
                "0 held-out topologies: the evaluation would have no mean; set evaluation.every \
                 = 0 to skip it"
                    .to_string(),
            ));
        }
        Ok(())
    }

    /// Expert iteration's settings: a teacher share in [0, 1) with a warm start to draw from, a
    /// polish of at least one simulation, usable root noise.
    fn check_expert_iteration(&self, source: &str) -> Result<(), InputError> {
        let at = |field: &str, message: &str| InputError::new(source, field, message);
        let share = self.optimizer.teacher_share;
        if !(0.0..1.0).contains(&share) {
            return Err(at(
                "optimizer.teacher_share",
                &format!("{share}: must lie in [0, 1) (self-play targets need a place)"),
            ));
        }
        if share > 0.0 && self.warm_start.is_none() {
            return Err(at(
                "optimizer.teacher_share",
                "needs a [warm_start]: its games are the teacher's targets",
            ));
        }
        if self.search.polished_targets == Some(0) {
            return Err(at(
                "search.polished_targets",
                "0 simulations: leave it out for the tree's targets only",
            ));
        }
        match self.search.root_noise.as_ref().and_then(|n| n.problem()) {
            Some((field, problem)) => Err(at(&format!("search.root_noise.{field}"), &problem)),
            None => Ok(()),
        }
    }
}

impl Recipe {
    /// Graph files (of the training set and the warm start) and cluster files relative to `dir`;
    /// zoo names and config names stay as they are.
    fn resolve_paths(&mut self, dir: &Path) {
        let resolve = |p: &mut String| {
            let path = PathBuf::from(&*p);
            if !path.is_absolute() {
                *p = dir.join(path).display().to_string();
            }
        };
        let warm_models = self.warm_start.iter_mut().flat_map(|w| w.models.iter_mut());
        for m in self.training_set.models.iter_mut().chain(warm_models) {
            if !crate::resolve::is_zoo_model(m) {
                resolve(m);
            }
        }
        for c in self.training_set.clusters.iter_mut() {
            if c.ends_with(".toml") {
                resolve(c);
            }
        }
    }
}

/// The dotted keys (`search.budget`, `training_set.models`, …) in which two recipes differ, but
/// `steps`, which a resumed run may raise.
pub(crate) fn differing_keys(a: &Recipe, b: &Recipe) -> Vec<String> {
    let (Ok(a), Ok(b)) = (serde_json::to_value(a), serde_json::to_value(b)) else {
        return vec!["<unreadable>".to_string()];
    };
    let mut keys = Vec::new();
    diff("", &a, &b, &mut keys);
    keys.retain(|k| k != "steps");
    keys
}

fn diff(prefix: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    match (a, b) {
        (serde_json::Value::Object(x), serde_json::Value::Object(y)) => {
            let mut names: Vec<&String> = x.keys().chain(y.keys()).collect();
            names.sort();
            names.dedup();
            for n in names {
                let key = if prefix.is_empty() {
                    n.clone()
                } else {
                    format!("{prefix}.{n}")
                };
                let null = serde_json::Value::Null;
                diff(
                    &key,
                    x.get(n).unwrap_or(&null),
                    y.get(n).unwrap_or(&null),
                    out,
                );
            }
        }
        _ if a != b => out.push(prefix.to_string()),
        _ => {}
    }
}
