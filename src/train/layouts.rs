//! Training the layout policy (the hybrid layout tree's priors) by expert iteration: each
//! generation plans a set of language models on random topologies with the layout tree under the
//! priors so far and the joint search's descent, keeps the decisions that lead to the better
//! answer ([`crate::hybrid::expert_layout`]), and fits the network to every decision kept so far
//! (cross-entropy to the expert's action, Adam). The recipe is a TOML file
//! (`training/layouts.toml`); every draw flows from its seed.

use std::path::Path;

use burn::optim::{AdamConfig, GradientsParams};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;
use serde::Deserialize;

use crate::cluster::{TopologyDistribution, random_cluster_within};
use crate::error::{InputError, Result};
use crate::gnn::{LayoutPolicy, LayoutPolicyConfig, cpu};
use crate::hybrid::{LayoutPriors, LayoutSample, Planner, UniformPriors, expert_layout};
use crate::io::parse_toml;
use crate::precision::Precision;
use crate::zoo::{Framework, ZooOptions};

/// A layout-policy training recipe.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutRecipe {
    /// Seed of every draw: instances, tie-breaks, weights, batches.
    #[serde(default)]
    pub seed: u64,
    /// Random topologies' distribution (`tag` or `today`).
    pub distribution: String,
    /// First topology seed; generation `g` draws `topologies` seeds from
    /// `topology_seed + g · topologies`.
    pub topology_seed: u64,
    /// Problems a generation plans.
    pub topologies: usize,
    /// Zoo language models drawn from.
    pub models: Vec<String>,
    /// Global batches drawn from.
    pub batches: Vec<u32>,
    /// Tokens a sequence (the model's own when absent).
    #[serde(default)]
    pub seq: Option<usize>,
    /// The step's precision.
    #[serde(with = "super::recipe::by_name")]
    pub precision: Precision,
    /// Kernels the models are built from.
    #[serde(with = "super::recipe::by_name")]
    pub framework: Framework,
    /// Generations of expert iteration.
    pub generations: usize,
    /// Layouts the tree simulates per problem.
    pub expert_budget: usize,
    /// Passes over the decisions kept after each generation.
    pub epochs: usize,
    /// Adam's learning rate.
    pub learning_rate: f64,
    /// Hidden width of the network.
    #[serde(default = "default_width")]
    pub width: usize,
}

fn default_width() -> usize {
    LayoutPolicyConfig::default().width
}

/// The largest sizes a recipe may ask for.
const MAX_TOPOLOGIES: usize = 100_000;
const MAX_GENERATIONS: usize = 100;
const MAX_BUDGET: usize = 100_000;
const MAX_EPOCHS: usize = 10_000;

impl LayoutRecipe {
    /// Reads and checks the recipe at `path`; errors name the file and the field.
    pub fn load(path: &Path) -> Result<LayoutRecipe> {
        let shown = path.display().to_string();
        let text = crate::io::read_text_file(path)?;
        let recipe: LayoutRecipe = parse_toml(&text, &shown)?;
        recipe.check(&shown)?;
        Ok(recipe)
    }

    fn check(&self, shown: &str) -> std::result::Result<(), InputError> {
        let bad = |field: &str, why: String| InputError::new(shown, field, why);
        let distribution = TopologyDistribution::named(&self.distribution).ok_or_else(|| {
            bad(
                "distribution",
                format!("\"{}\": expected tag or today", self.distribution),
            )
        })?;
        // As `train` refuses: bf16 on TAG's pre-Ampere GPUs fits no problem, and the run wrote
        // an untrained policy after "0 of N problems fit".
        if let Err(why) = self.precision.supported_by_mix(distribution.gpus) {
            return Err(bad(
                "precision",
                format!("{why} (distribution \"{}\")", self.distribution),
            ));
        }
        let bounded = [
            ("topologies", self.topologies, MAX_TOPOLOGIES),
            ("generations", self.generations, MAX_GENERATIONS),
            ("expert_budget", self.expert_budget, MAX_BUDGET),
            ("epochs", self.epochs, MAX_EPOCHS),
            (
                "width",
                self.width,
                crate::gnn::layout_policy::MAX_LAYOUT_WIDTH,
            ),
        ];
        for (field, value, max) in bounded {
            if value == 0 || value > max {
                return Err(bad(field, format!("{value}: expected 1 to {max}")));
            }
        }
        // Generation g draws seeds from topology_seed + g · topologies: the last must not wrap
        // past 2^64 − 1 (it would draw the seeds of other runs from 0).
        let draws = (self.generations as u64).checked_mul(self.topologies as u64);
        if draws
            .and_then(|n| self.topology_seed.checked_add(n))
            .is_none()
        {
            return Err(bad(
                "topology_seed",
                format!(
                    "{}: its {} generations of {} topologies run past 2^64 - 1",
                    self.topology_seed, self.generations, self.topologies
                ),
            ));
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0 && self.learning_rate < 1.0)
        {
            return Err(bad(
                "learning_rate",
                format!("{}: expected in (0, 1)", self.learning_rate),
            ));
        }
        if self.models.is_empty() {
            return Err(bad("models", "no model named".into()));
        }
        if let Some(seq) = self.seq
            && !(1..=crate::zoo::MAX_SEQ).contains(&seq)
        {
            return Err(bad(
                "seq",
                format!("{seq} tokens: expected 1 to {}", crate::zoo::MAX_SEQ),
            ));
        }
        for (i, m) in self.models.iter().enumerate() {
            if crate::zoo::lm_shape(m).ok().flatten().is_none() {
                return Err(bad(
                    &format!("models[{i}]"),
                    format!("\"{m}\" is not a zoo language model (a gpt* or llama* size)"),
                ));
            }
        }
        if self.batches.is_empty() || self.batches.iter().any(|&b| b == 0 || b > 65_536) {
            return Err(bad(
                "batches",
                "expected one or more batches of 1 to 65,536".into(),
            ));
        }
        Ok(())
    }

    fn zoo_options(&self) -> ZooOptions {
        ZooOptions {
            framework: self.framework,
            seq: self.seq,
            ..ZooOptions::default()
        }
    }
}

/// One planning problem of a generation.
#[derive(Debug, Clone, PartialEq)]
struct Problem {
    topology_seed: u64,
    model: String,
    batch: u32,
}

/// What [`train_layouts`] reports after each generation.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationReport {
    /// The generation, from 0.
    pub generation: usize,
    /// Problems the expert found a fitting plan for.
    pub solved: usize,
    /// Decisions kept so far.
    pub samples: usize,
    /// Mean cross-entropy over the kept decisions after fitting.
    pub loss: f64,
}

/// Trains a layout policy as `recipe` says, calling `report` after each generation.
pub fn train_layouts(
    recipe: &LayoutRecipe,
    mut report: impl FnMut(&GenerationReport),
) -> Result<LayoutPolicy> {
    let config = LayoutPolicyConfig {
        width: recipe.width,
    };
    let device = cpu().autodiff();
    let mut policy = LayoutPolicy::init(config, recipe.seed, &device)?;
    let mut optimizer = AdamConfig::new().init();
    let mut samples: Vec<LayoutSample> = Vec::new();
    let mut rng = StdRng::seed_from_u64(recipe.seed);
    for generation in 0..recipe.generations {
        let problems = draw_problems(recipe, generation, &mut rng);
        let searcher = (generation > 0)
            .then(|| policy.copied_to(&cpu()))
            .transpose()?;
        let priors: &(dyn LayoutPriors + Sync) = match &searcher {
            Some(p) => p,
            None => &UniformPriors,
        };
        let answers: Vec<Result<(bool, Vec<LayoutSample>)>> = problems
            .par_iter()
            .enumerate()
            .map(|(i, p)| {
                expert(
                    recipe,
                    p,
                    priors,
                    recipe.seed ^ (generation * 1_000_003 + i) as u64,
                )
            })
            .collect();
        let mut solved = 0;
        for a in answers {
            let (fits, kept) = a?;
            solved += usize::from(fits);
            samples.extend(kept);
        }
        let mut loss = 0.0;
        for _ in 0..recipe.epochs {
            samples.shuffle(&mut rng);
            loss = 0.0;
            for s in &samples {
                let l = policy.model.cross_entropy(&s.actions, s.taken);
                loss += f64::from(crate::gnn::to_vec(l.clone())[0]);
                let grads = GradientsParams::from_grads(l.backward(), &policy.model);
                policy.model = optimizer.step(recipe.learning_rate, policy.model, grads);
            }
            loss /= samples.len().max(1) as f64;
        }
        report(&GenerationReport {
            generation,
            solved,
            samples: samples.len(),
            loss,
        });
    }
    policy.copied_to(&cpu())
}

fn draw_problems(recipe: &LayoutRecipe, generation: usize, rng: &mut StdRng) -> Vec<Problem> {
    (0..recipe.topologies)
        .map(|i| Problem {
            topology_seed: recipe.topology_seed + (generation * recipe.topologies + i) as u64,
            model: recipe.models[rng.random_range(0..recipe.models.len())].clone(),
            batch: recipe.batches[rng.random_range(0..recipe.batches.len())],
        })
        .collect()
}

/// The expert's decisions on one problem, and whether it found a plan that fits.
fn expert(
    recipe: &LayoutRecipe,
    p: &Problem,
    priors: &(dyn LayoutPriors + Sync),
    seed: u64,
) -> Result<(bool, Vec<LayoutSample>)> {
    let distribution = TopologyDistribution::named(&recipe.distribution)
        .expect("the recipe's distribution was checked");
    let cluster = random_cluster_within(p.topology_seed, distribution);
    let cost = recipe.framework.cost_model(recipe.precision, None);
    let opts = recipe.zoo_options();
    let mut planner = Planner::new(&p.model, &opts, recipe.precision, &cluster, &cost, p.batch)?;
    let answer = expert_layout(&mut planner, priors, recipe.expert_budget, seed)?;
    let fits = answer.best.as_ref().is_some_and(|b| b.report.fits());
    // A problem nothing fits teaches nothing about fast layouts.
    Ok((fits, if fits { answer.samples } else { Vec::new() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = "seed = 5\ndistribution = \"today\"\ntopology_seed = 4000000\n\
        topologies = 3\nmodels = [\"llama-1b\"]\nbatches = [8]\nseq = 256\nprecision = \"bf16\"\n\
        framework = \"pytorch\"\ngenerations = 2\nexpert_budget = 20\nepochs = 1\n\
        learning_rate = 0.001\nwidth = 8\n";

    fn parsed(text: &str) -> std::result::Result<LayoutRecipe, String> {
        let r: LayoutRecipe = parse_toml(text, "r.toml").map_err(|e| e.to_string())?;
        r.check("r.toml").map_err(|e| e.to_string())?;
        Ok(r)
    }

    #[test]
    fn a_bad_recipe_is_one_error_naming_the_file_and_the_field() {
        for (from, to, field) in [
            ("expert_budget = 20", "expert_budget = 0", "expert_budget"),
            (
                "models = [\"llama-1b\"]",
                "models = [\"llama-1b\", \"vgg19\"]",
                "models[1]",
            ),
            (
                "distribution = \"today\"",
                "distribution = \"mars\"",
                "distribution",
            ),
            (
                "learning_rate = 0.001",
                "learning_rate = nan",
                "learning_rate",
            ),
            ("precision = \"bf16\"", "precision = \"fp8\"", "precision"),
            // TAG's GPUs have no bfloat16: nothing would fit, and nothing be learnt.
            (
                "distribution = \"today\"",
                "distribution = \"tag\"",
                "precision",
            ),
            ("width = 8", "width = 8\nwidht = 9", "widht"),
            // Refused when the first model was built, as `<zoo>: seq`.
            ("seq = 256", "seq = 0", "seq"),
        ] {
            let e = parsed(&TINY.replace(from, to)).unwrap_err();
            assert!(e.contains("r.toml") && e.contains(field), "{to}: {e}");
        }
    }

    #[test]
    fn the_same_recipe_trains_the_same_weights() {
        let recipe = parsed(TINY).unwrap();
        let mut kept = Vec::new();
        let a = train_layouts(&recipe, |g| kept.push(g.samples)).unwrap();
        let b = train_layouts(&recipe, |_| {}).unwrap();
        assert_eq!(kept.len(), 2);
        assert!(kept[1] > kept[0] && kept[0] > 0, "{kept:?}");
        let probe = vec![
            [0.3f32; crate::hybrid::LAYOUT_FEATURES],
            [0.6; crate::hybrid::LAYOUT_FEATURES],
        ];
        assert_eq!(a.priors(&probe), b.priors(&probe));
    }
}
