//! `topoplace experiment NAME`: TAG §5's experiments with a policy.

use std::path::PathBuf;

use clap::Args;
use indicatif::ProgressBar;

use super::common::{DistributionArgs, Numerics, print_json};
use topoplace::assets::{SHIPPED_LAYOUT_POLICY, SHIPPED_POLICY};
use topoplace::error::{Error, InputError, Result};
use topoplace::experiment::{self, Setup};
use topoplace::gnn::{GnnPolicy, LayoutPolicy};
use topoplace::layout_priors::LayoutPriorsSetup;
use topoplace::resolve::load_named_cluster;
use topoplace::train::Recipe;

#[derive(Args)]
pub struct ExperimentArgs {
    #[arg(value_parser = topoplace::experiment::NAMES)]
    name: String,
    /// Output directory for <name>.csv, <name>.md, <name>.svg (and holdout training runs).
    #[arg(long, value_parser = super::common::output_dir)]
    out: PathBuf,
    /// The GNN policy; default the shipped one (models/tag-default.gnn).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Models (zoo names or graph files); default TAG's six (layout-priors: llama-1b, llama-3b,
    /// llama-7b, llama-13b).
    #[arg(long, value_delimiter = ',')]
    models: Option<Vec<String>>,
    /// layout-priors: the layout policy; default the shipped one.
    #[arg(long)]
    layout_policy: Option<PathBuf>,
    /// layout-priors: global batch on the random topologies [default: 64].
    #[arg(long, value_parser = super::common::batch)]
    batch: Option<u32>,
    /// layout-priors: leave out the hybrid planner's four named instances.
    #[arg(long)]
    no_instances: bool,
    /// The cluster of search-efficiency, holdout-models and reference-best [default:
    /// tag-testbed].
    #[arg(long)]
    cluster: Option<String>,
    /// MCTS iterations per search (the same for every priors compared).
    #[arg(long, default_value_t = 300, value_parser = super::common::at_least_one)]
    budget: usize,
    /// unseen-topologies and layout-priors: the uniform priors' budget (default --budget): e.g.
    /// the GNN at 50 against uniform priors at 300.
    #[arg(long, value_parser = super::common::at_least_one)]
    uniform_budget: Option<usize>,
    /// METIS op groups.
    #[arg(long, default_value_t = topoplace::mcts::DEFAULT_GROUPS, value_parser = super::common::at_least_one)]
    groups: usize,
    /// search-efficiency and holdout-models: searches per model and priors (seeds 0..N, their
    /// mean reported); reference-best: long searches per model (at most 1,000) [default: 3].
    #[arg(long, value_parser = experiment_seeds)]
    seeds: Option<u64>,
    /// unseen-topologies, overhead and layout-priors: random topologies (at most 10,000)
    /// [default: 100].
    #[arg(long, value_parser = experiment_topologies)]
    topologies: Option<u64>,
    /// unseen-topologies, overhead and layout-priors: seed of the first unseen topology (training
    /// draws 0..1000) [default: 1000000].
    #[arg(long)]
    topology_seed: Option<u64>,
    /// unseen-topologies, overhead and layout-priors: the random topologies' distribution.
    #[command(flatten)]
    distribution: DistributionArgs,
    /// How the models train: the policy sees each GPU's peak in this precision.
    #[command(flatten)]
    numerics: Numerics,
    /// unseen-topologies and overhead: leave out the seeds with one GPU of each device group
    /// (every op group duplicated on its GPUs), for both priors, as searches ran before they were
    /// the default.
    #[arg(long)]
    no_one_gpu_seed: bool,
    /// search-efficiency: add the warm start's teacher per model (a coordinate descent over the
    /// tree's strategies; minutes per model): the headroom any prior could reach.
    #[arg(long)]
    headroom: bool,
    /// holdout-models: the recipe trained without each model (default
    /// training/tag-expert.toml).
    #[arg(long)]
    recipe: Option<PathBuf>,
    /// holdout-models: Adam steps of each held-out training (default the recipe's; at most
    /// 1,000,000, as a recipe's).
    #[arg(long, value_parser = experiment_steps)]
    steps: Option<u64>,
    #[arg(long)]
    json: bool,
}

/// `topoplace experiment NAME`: TAG §5's experiments with a policy file.
pub fn run(args: ExperimentArgs) -> Result<()> {
    check_seeds(&args)?;
    check_flags_apply(&args)?;
    if args.name == "layout-priors" {
        return layout_priors(&args);
    }
    let cluster = load_named_cluster(args.cluster(), "--cluster")?;
    // The precision is the flag's to refuse, before any model is built: deep in the experiment
    // the refusal named the cluster's file and a `precision` field, with exit 1.
    match args.name.as_str() {
        "unseen-topologies" | "overhead" => check_distribution_precision(&args)?,
        _ => args.numerics.check(&cluster)?,
    }
    let (policy, policy_shown) = match &args.policy {
        Some(path) => (GnnPolicy::load(path)?, path.display().to_string()),
        None => (GnnPolicy::shipped()?, SHIPPED_POLICY.to_string()),
    };
    if let Some(models) = &args.models {
        // A model twice would be searched and averaged twice.
        topoplace::placers::compare::named_once(models, "--models")?;
    }
    let models = args
        .models
        .clone()
        .unwrap_or_else(|| TAG_MODELS.iter().map(|m| m.to_string()).collect())
        .iter()
        .map(|m| Ok((m.clone(), args.numerics.model_from("--models", m, None)?)))
        .collect::<Result<Vec<_>>>()?;
    let setup = Setup {
        models,
        cluster: &cluster,
        policy: &policy,
        budget: args.budget,
        uniform_budget: args.uniform_budget,
        groups: args.groups,
        seeds: args.seeds.unwrap_or(DEFAULT_SEEDS),
        topologies: args.topologies(),
        topology_seed: args.topology_seed(),
        distribution: args.distribution.resolve()?,
        cost: args.numerics.cost(),
        one_gpu_seed: !args.no_one_gpu_seed,
        headroom: args.headroom,
    };
    let spinner = ProgressBar::new_spinner();
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    spinner.set_message(format!("{} with {policy_shown}", args.name));
    let output = match args.name.as_str() {
        "search-efficiency" => experiment::search_efficiency(&setup),
        "unseen-topologies" => experiment::unseen_topologies(&setup),
        "overhead" => experiment::overhead(&setup),
        "reference-best" => topoplace::reference_best::reference_best(&setup),
        "holdout-models" => {
            let default = std::path::Path::new(DEFAULT_RECIPE);
            let recipe = Recipe::load(args.recipe.as_deref().unwrap_or(default))?;
            experiment::holdout_models(&setup, &recipe, args.steps, &args.out, |m| {
                spinner.set_message(m.to_string())
            })
        }
        other => Err(Error::Unknown {
            kind: "experiment",
            name: other.to_string(),
            expected: format!("known: {}", experiment::NAMES.join(", ")),
        }),
    };
    spinner.finish_and_clear();
    show(&args, output?)
}

/// Searches per model and priors unless `--seeds` says otherwise.
const DEFAULT_SEEDS: u64 = 3;
/// Random topologies unless `--topologies` says otherwise.
const DEFAULT_TOPOLOGIES: u64 = 100;
/// layout-priors' global batch unless `--batch` says otherwise.
const DEFAULT_LAYOUT_BATCH: u32 = 64;

impl ExperimentArgs {
    fn cluster(&self) -> &str {
        self.cluster.as_deref().unwrap_or("tag-testbed")
    }

    fn topologies(&self) -> u64 {
        self.topologies.unwrap_or(DEFAULT_TOPOLOGIES)
    }

    fn topology_seed(&self) -> u64 {
        self.topology_seed
            .unwrap_or(topoplace::experiment::UNSEEN_SEED)
    }
}

/// The recipe holdout-models trains without each model unless `--recipe` names another.
const DEFAULT_RECIPE: &str = "training/tag-expert.toml";

/// Refuses a flag that only other experiments read: it was silently ignored (a corrupt
/// `--layout-policy` or a missing `--recipe` under search-efficiency went unnoticed).
fn check_flags_apply(args: &ExperimentArgs) -> Result<()> {
    const ON_CLUSTER: &[&str] = &["search-efficiency", "holdout-models", "reference-best"];
    const ON_RANDOM: &[&str] = &["unseen-topologies", "overhead", "layout-priors"];
    let flags: [(&str, bool, &[&str]); 13] = [
        (
            "--layout-policy",
            args.layout_policy.is_some(),
            &["layout-priors"],
        ),
        ("--no-instances", args.no_instances, &["layout-priors"]),
        ("--batch", args.batch.is_some(), &["layout-priors"]),
        ("--recipe", args.recipe.is_some(), &["holdout-models"]),
        ("--steps", args.steps.is_some(), &["holdout-models"]),
        ("--headroom", args.headroom, &["search-efficiency"]),
        ("--cluster", args.cluster.is_some(), ON_CLUSTER),
        ("--seeds", args.seeds.is_some(), ON_CLUSTER),
        ("--topologies", args.topologies.is_some(), ON_RANDOM),
        ("--topology-seed", args.topology_seed.is_some(), ON_RANDOM),
        (
            args.distribution.given().unwrap_or("--distribution"),
            args.distribution.given().is_some(),
            ON_RANDOM,
        ),
        (
            "--uniform-budget",
            args.uniform_budget.is_some(),
            &["unseen-topologies", "layout-priors"],
        ),
        (
            "--no-one-gpu-seed",
            args.no_one_gpu_seed,
            &["unseen-topologies", "overhead"],
        ),
    ];
    for (flag, given, readers) in flags {
        if given && !readers.contains(&args.name.as_str()) {
            let message = match readers {
                [one] => format!("only {one} reads it, not {}", args.name),
                [rest @ .., last] => {
                    format!(
                        "only {} and {last} read it, not {}",
                        rest.join(", "),
                        args.name
                    )
                }
                [] => format!("no experiment reads it, not {}", args.name),
            };
            return Err(InputError::new("<cli>", flag, message).into());
        }
    }
    Ok(())
}

/// TAG's six models, the default of every experiment but layout-priors.
const TAG_MODELS: [&str; 6] = [
    "vgg19",
    "resnet101",
    "inception-v3",
    "transformer",
    "bert-small",
    "bert-large",
];

/// The language models layout-priors plans by default.
const LANGUAGE_MODELS: [&str; 4] = ["llama-1b", "llama-3b", "llama-7b", "llama-13b"];

/// Most `--seeds`: each is a search per model and priors, a second or more, and a typo such as
/// `--seeds 100000000` ran for months without a line of output.
const MAX_SEEDS: usize = 1_000;
/// Most `--topologies`: each is a search per priors on a cluster of up to 64 GPUs.
const MAX_TOPOLOGIES: usize = 10_000;

fn experiment_seeds(text: &str) -> std::result::Result<u64, String> {
    topoplace::api::one_to_at_most(text, MAX_SEEDS).map(|n| n as u64)
}

/// `--steps`: at most a recipe's most (`training_steps`): 1,000,001 ran silently for hours.
fn experiment_steps(text: &str) -> std::result::Result<u64, String> {
    topoplace::api::one_to_at_most(text, topoplace::train::MAX_STEPS as usize).map(|n| n as u64)
}

fn experiment_topologies(text: &str) -> std::result::Result<u64, String> {
    topoplace::api::one_to_at_most(text, MAX_TOPOLOGIES).map(|n| n as u64)
}

/// Refuses `--topology-seed` when the topologies' seeds `topology_seed ..
/// topology_seed + topologies` pass 2⁶⁴−1: they wrapped round to 0, the shipped policy's
/// training seeds, and the "unseen" topologies were seen ones.
fn check_seeds(args: &ExperimentArgs) -> Result<()> {
    let (first, topologies) = (args.topology_seed(), args.topologies());
    if first.checked_add(topologies).is_none() {
        return Err(InputError::new(
            "<cli>",
            "--topology-seed",
            format!(
                "{first}: with --topologies {topologies} the seeds pass {}; take a seed at most {}",
                u64::MAX,
                u64::MAX - topologies
            ),
        )
        .into());
    }
    Ok(())
}

/// Refuses `--precision` when a GPU type of the random topologies' distribution lacks it (bf16
/// on TAG's pre-Ampere GPUs): no problem would fit, and every row would be empty.
fn check_distribution_precision(args: &ExperimentArgs) -> Result<()> {
    let distribution = args.distribution.resolve()?;
    args.numerics
        .precision
        .supported_by_mix(distribution.gpus)
        .map_err(|why| InputError::new("<cli>", "--precision", why).into())
}

/// Refuses a `--models` entry that is not a language model, naming the flag (the planner's own
/// refusal named `--model`, a flag this command does not have).
fn check_language_models(models: &[String]) -> Result<()> {
    for m in models {
        if topoplace::zoo::lm_shape(m)?.is_none() {
            return Err(InputError::new(
                "<cli>",
                "--models",
                format!(
                    "\"{m}\" is not a zoo language model (a gpt* or llama* size, or a model-spec \
                     .toml file)"
                ),
            )
            .into());
        }
    }
    Ok(())
}

fn layout_priors(args: &ExperimentArgs) -> Result<()> {
    check_distribution_precision(args)?;
    let models = args
        .models
        .clone()
        .unwrap_or_else(|| LANGUAGE_MODELS.iter().map(|m| m.to_string()).collect());
    topoplace::placers::compare::named_once(&models, "--models")?;
    check_language_models(&models)?;
    let (policy, shown) = match &args.layout_policy {
        Some(path) => (LayoutPolicy::load(path)?, path.display().to_string()),
        None => (LayoutPolicy::shipped()?, SHIPPED_LAYOUT_POLICY.to_string()),
    };
    let setup = LayoutPriorsSetup {
        policy: &policy,
        models,
        batch: args.batch.unwrap_or(DEFAULT_LAYOUT_BATCH),
        topologies: args.topologies(),
        topology_seed: args.topology_seed(),
        distribution: args.distribution.resolve()?,
        precision: args.numerics.precision,
        framework: args.numerics.framework,
        budget: args.budget,
        uniform_budget: args.uniform_budget.unwrap_or(args.budget),
        instances: !args.no_instances,
    };
    let spinner = ProgressBar::new_spinner();
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    let output = topoplace::layout_priors::layout_priors(&setup, |m| {
        spinner.set_message(format!("layout-priors with {shown}: {m}"))
    });
    spinner.finish_and_clear();
    show(args, output?)
}

fn show(args: &ExperimentArgs, output: topoplace::experiment::Output) -> Result<()> {
    let files = output.write(&args.out)?;
    if args.json {
        let rows: Vec<serde_json::Map<String, serde_json::Value>> = csv_rows(&output.csv);
        return print_json(&rows);
    }
    out!("{}", output.table.render())?;
    for f in files {
        outln!("wrote {}", f.display())?;
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
