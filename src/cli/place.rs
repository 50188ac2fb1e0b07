//! `topoplace place`: the heuristics, then TAG's tree search with the shipped (or a given) policy
//! starting from their placements; reported against the best other method (the fastest
//! heuristic, `dp-subset` among them) and DP-NCCL.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};

use super::common::{BAR, print_either, progress_bar, write_trace};
use super::common::{GnnDeviceArg, Loaded, Numerics};
use super::hybrid_place::{self, HybridRequest};
use topoplace::assets::SHIPPED_POLICY;
use topoplace::error::{InputError, Result, SearchError};
use topoplace::evaluate::{Placement, evaluate_every_replica, thin_batch_warning};
use topoplace::gnn::{self, GnnPolicy};
use topoplace::hybrid::planned_by_default;
use topoplace::io::check_writable;
use topoplace::mcts::{self, GroupOrder, MctsConfig, SearchSplit};
use topoplace::place_summary::PlaceSummary;
use topoplace::placers::heuristics::best_heuristic;
use topoplace::placers::tag::tag_search;
use topoplace::resolve::load_named_cluster;
use topoplace::strategy::save_strategy;
use topoplace::units::to_ms;
use topoplace::zoo;

#[derive(Args)]
pub struct PlaceArgs {
    /// A zoo name or a graph JSON file.
    #[arg(long)]
    model: String,
    /// Batch size: a zoo model is rebuilt at it, a graph file re-batched linearly (what that
    /// assumes: docs/formats.md, "Re-batching"). Default: the model's own.
    #[arg(long, value_parser = super::common::batch)]
    batch: Option<u32>,
    #[command(flatten)]
    numerics: Numerics,
    /// A cluster config: a file, or the name of one in configs/.
    #[arg(long)]
    cluster: String,
    /// Prior policy: `shipped` (the trained models/tag-default.gnn), `none` (uniform priors,
    /// TAG's pure MCTS) or a GNN policy file (`topoplace train`, `topoplace policy init`).
    #[arg(long, default_value = "shipped")]
    policy: String,
    /// Where the GNN runs (`wgpu` in builds with `--features wgpu`).
    #[arg(long, value_enum, default_value_t = GnnDeviceArg::Cpu)]
    gnn_device: GnnDeviceArg,
    /// MCTS iterations (leaf evaluations).
    #[arg(long, default_value_t = 300, value_parser = super::common::at_least_one)]
    budget: usize,
    /// Stop after this many seconds instead (the iteration budget still applies if reached
    /// first; pass a large --budget to search by time only).
    #[arg(long, value_parser = super::common::seconds)]
    time: Option<f64>,
    /// METIS op groups (fewer on small graphs).
    #[arg(long, default_value_t = mcts::DEFAULT_GROUPS, value_parser = super::common::at_least_one)]
    groups: usize,
    /// Order in which the tree decides op groups.
    #[arg(long, value_enum, default_value_t = GroupOrderArg::Compute)]
    group_order: GroupOrderArg,
    /// Batch shares of the searched strategies.
    #[arg(long, value_enum, default_value_t = BatchSplitArg::Even)]
    batch_split: BatchSplitArg,
    /// New pipelines the tree may simulate below `pipeline-dp`'s frames (micro-batch counts and
    /// stage boundaries as actions); 0 leaves pipelines out of the tree.
    #[arg(long, default_value_t = mcts::PIPELINE_LEAVES)]
    pipeline_leaves: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Which search places the model: `tag` (op groups: TAG's tree search with pipelines),
    /// `hybrid` (pipeline stages × tensor × data parallelism with ZeRO and recomputation, for a
    /// zoo GPT or Llama), or `auto`: hybrid for a zoo language model of a billion parameters or
    /// more, tag otherwise.
    #[arg(long, value_enum, default_value_t = PlannerArg::Auto)]
    planner: PlannerArg,
    /// Write the chosen strategy JSON here (a hybrid plan's JSON under the hybrid planner).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write a Chrome trace of the chosen strategy's iteration here.
    #[arg(long)]
    trace: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum PlannerArg {
    Auto,
    Tag,
    Hybrid,
}

/// Whether `place` runs the hybrid planner on `model`.
fn wants_hybrid(args: &PlaceArgs) -> Result<bool> {
    match args.planner {
        PlannerArg::Tag => Ok(false),
        PlannerArg::Hybrid if zoo::lm_shape(&args.model).is_none() => Err(InputError::new(
            "<cli>",
            "--planner",
            format!(
                "hybrid plans a zoo GPT or Llama; \"{}\" is not one",
                args.model
            ),
        )
        .into()),
        PlannerArg::Hybrid => Ok(true),
        PlannerArg::Auto => planned_by_default(&args.model),
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum GroupOrderArg {
    /// Descending compute (TAG).
    Compute,
    /// Compute plus the AllReduce time of the group's parameters (beyond TAG).
    Impact,
}

#[derive(Clone, Copy, ValueEnum)]
enum BatchSplitArg {
    /// Equal shares (TAG).
    Even,
    /// Speed-proportional shares when they make data parallelism faster (beyond TAG).
    Auto,
}

/// Share of `--time` the search leaves unplanned: the result's SFB check, the summary, and the
/// process's start and exit are not among the pieces of work it times (`mcts::reserve`), and
/// without it `place --time 10` ended at 10.02 s on two cores.
const EXIT_MARGIN: f64 = 0.01;

pub fn run(args: PlaceArgs) -> Result<()> {
    let started = Instant::now();
    for path in [&args.out, &args.trace].into_iter().flatten() {
        check_writable(path)?;
    }
    if wants_hybrid(&args)? {
        let cluster = load_named_cluster(&args.cluster, "--cluster")?;
        args.numerics.check(&cluster)?;
        let global_batch = match args.batch {
            Some(b) => b,
            None => zoo::card(&args.model).map_or(8, |c| c.default_batch),
        };
        return hybrid_place::run(HybridRequest {
            model: &args.model,
            cluster: &cluster,
            global_batch,
            numerics: args.numerics,
            time: args.time,
            out: args.out.as_deref(),
            json: args.json,
        });
    }
    let (policy, policy_shown) = load_policy(&args.policy, args.gnn_device)?;
    let inputs = Loaded::load(&args.model, args.batch, &args.cluster, args.numerics)?;
    let Loaded { graph, cluster, .. } = &inputs;
    let p = inputs.problem();
    let config = MctsConfig {
        iterations: args.budget,
        // The limit counts from the command's start (loading the policy and the inputs too), and
        // the search aims at [`EXIT_MARGIN`] of it less, for what it does not measure.
        seconds: args
            .time
            .map(|t| (t * (1.0 - EXIT_MARGIN) - started.elapsed().as_secs_f64()).max(0.0)),
        seed: args.seed,
        group_order: match args.group_order {
            GroupOrderArg::Compute => GroupOrder::Compute,
            GroupOrderArg::Impact => GroupOrder::Impact,
        },
        batch_split: match args.batch_split {
            BatchSplitArg::Even => SearchSplit::Even,
            BatchSplitArg::Auto => SearchSplit::Auto,
        },
        pipeline_leaves: args.pipeline_leaves,
        ..Default::default()
    };
    let bar = progress_bar(args.budget as u64, BAR)?;
    bar.set_message("heuristics");
    let found = tag_search(&p, args.groups, config, policy.as_ref(), |progress| {
        bar.set_position(progress.iterations as u64);
        if let Some(best) = progress.best_us {
            bar.set_message(format!("best {:.2} ms", to_ms(best)));
        }
    });
    bar.finish_and_clear();
    let (found, heuristics) = found?;
    if !found.fits {
        return Err(SearchError::DoesNotFit {
            model: graph.name.clone(),
            cluster: cluster.name.clone(),
            simulated: found.simulated,
        }
        .into());
    }
    let (heuristic, heuristic_us) = best_heuristic(&heuristics);
    let summary = PlaceSummary::new(
        graph,
        cluster,
        &policy_shown,
        &found,
        heuristic,
        heuristic_us,
    );
    if let Some(warning) = thin_batch_warning(graph, cluster, &found.strategy) {
        eprintln!("warning: {warning}");
    }
    if let Some(path) = &args.out {
        save_strategy(
            &found.strategy,
            found.order.as_deref(),
            graph,
            &cluster.name,
            path,
        )?;
    }
    if let Some(path) = &args.trace {
        // Every GPU in the trace: the search's evaluation may have compiled one per class.
        let placement = Placement {
            order: found.order.clone(),
            ..Placement::plain(found.strategy.clone(), "")
        };
        let traced = evaluate_every_replica(&p, &placement)?;
        write_trace(path, graph, cluster, &traced)?;
    }
    print_either(args.json, &summary, PlaceSummary::render_text)
}

/// The policy `--policy` names and how the summary shows it: `none` (uniform priors), `shipped`
/// (the policy embedded in the binary) or a file. Read before any search starts, so a bad file
/// fails fast and names itself.
fn load_policy(policy: &str, device: GnnDeviceArg) -> Result<(Option<GnnPolicy>, String)> {
    let device = gnn::device_named(device.name())?;
    match policy {
        "none" => Ok((None, "none".into())),
        "shipped" => Ok((
            Some(GnnPolicy::shipped_on(&device)?),
            format!("{SHIPPED_POLICY} (shipped)"),
        )),
        file => Ok((
            Some(GnnPolicy::load_on(std::path::Path::new(file), &device)?),
            file.to_string(),
        )),
    }
}
