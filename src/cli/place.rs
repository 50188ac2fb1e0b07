//! `topoplace place`: the heuristics, then TAG's tree search with the shipped (or a given) policy
//! starting from their placements; reported against the best other method (the fastest
//! heuristic, `dp-subset` among them) and DP-NCCL.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};

use super::common::print_either;
use super::common::{GnnDeviceArg, Numerics};
use super::hybrid_place;
use topoplace::api::{PlaceRequest, Placed, PlannerChoice, TagPlaced, place_showing_progress};
use topoplace::error::{InputError, Result};
use topoplace::io::check_writable;
use topoplace::mcts::{self, GroupOrder, SearchSplit};
use topoplace::place_summary::PlaceSummary;

#[derive(Args)]
pub struct PlaceArgs {
    /// A zoo name, a model-spec file (`.toml`) or a graph JSON file.
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
    #[arg(long, default_value = "cpu", value_parser = crate::cli::common::gnn_device)]
    gnn_device: GnnDeviceArg,
    /// MCTS iterations (leaf evaluations).
    #[arg(long, default_value_t = DEFAULT_BUDGET, value_parser = super::common::at_least_one)]
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

/// The tree's iterations when `--budget` is not given.
const DEFAULT_BUDGET: usize = 300;

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum PlannerArg {
    Auto,
    Tag,
    Hybrid,
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

pub fn run(args: PlaceArgs) -> Result<()> {
    let started = Instant::now();
    check_outputs(&args)?;
    let request = PlaceRequest {
        model: &args.model,
        batch: args.batch,
        cluster: &args.cluster,
        numerics: args.numerics,
        policy: &args.policy,
        gnn_device: args.gnn_device.name(),
        budget: args.budget,
        time: args.time,
        groups: args.groups,
        group_order: match args.group_order {
            GroupOrderArg::Compute => GroupOrder::Compute,
            GroupOrderArg::Impact => GroupOrder::Impact,
        },
        batch_split: match args.batch_split {
            BatchSplitArg::Even => SearchSplit::Even,
            BatchSplitArg::Auto => SearchSplit::Auto,
        },
        pipeline_leaves: args.pipeline_leaves,
        seed: args.seed,
        planner: match args.planner {
            PlannerArg::Auto => PlannerChoice::Auto,
            PlannerArg::Tag => PlannerChoice::Tag,
            PlannerArg::Hybrid => PlannerChoice::Hybrid,
        },
        started,
    };
    if request.wants_hybrid()? {
        refuse_tag_only_flags(&args)?;
    }
    let placed = place_showing_progress(&request, true);
    match placed? {
        Placed::Hybrid(h) => hybrid_place::report(&h, args.out.as_deref(), args.json),
        Placed::Tag(t) => report(&t, &args),
    }
}

/// Under the hybrid planners, `--trace` is refused (a hybrid plan is simulated at layer
/// granularity: there is no op-level timeline to trace), and the flags of TAG's tree given other
/// than their defaults are named in a warning: they were ignored without a word.
fn refuse_tag_only_flags(args: &PlaceArgs) -> Result<()> {
    if args.trace.is_some() {
        return Err(InputError::new(
            "<cli>",
            "--trace",
            "the hybrid planners simulate a plan at layer granularity and have no op-level \
             trace; `--planner tag` places the model by op groups and traces that",
        )
        .into());
    }
    let ignored: Vec<&str> = [
        ("--policy", args.policy != "shipped"),
        (
            "--gnn-device",
            !matches!(args.gnn_device, GnnDeviceArg::Cpu),
        ),
        ("--budget", args.budget != DEFAULT_BUDGET),
        ("--groups", args.groups != mcts::DEFAULT_GROUPS),
        (
            "--group-order",
            !matches!(args.group_order, GroupOrderArg::Compute),
        ),
        (
            "--batch-split",
            !matches!(args.batch_split, BatchSplitArg::Even),
        ),
        (
            "--pipeline-leaves",
            args.pipeline_leaves != mcts::PIPELINE_LEAVES,
        ),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect();
    if !ignored.is_empty() {
        errln!(
            "warning: {} set TAG's tree search, which the hybrid planners do not run; ignored",
            ignored.join(", ")
        );
    }
    Ok(())
}

/// Refuses, before any search, an output that could not be written: otherwise `--out` is
/// replaced and then `--trace` fails, or one file is written over the other.
fn check_outputs(args: &PlaceArgs) -> Result<()> {
    if let (Some(out), Some(trace)) = (&args.out, &args.trace)
        && (out == trace || topoplace::io::same_destination(out, trace))
    {
        return Err(InputError::new("<cli>", "--trace", "is the --out file too").into());
    }
    for (flag, path) in [("--out", &args.out), ("--trace", &args.trace)] {
        if let Some(path) = path {
            super::common::refuse_an_input(
                flag,
                path,
                &[&args.model, &args.cluster, &args.policy],
            )?;
            check_writable(path)?;
        }
    }
    Ok(())
}

/// Writes what `--out` and `--trace` ask for, then prints the summary.
fn report(placed: &TagPlaced, args: &PlaceArgs) -> Result<()> {
    if let Some(warning) = &placed.warning {
        errln!("warning: {warning}");
    }
    placed.write_outputs(args.out.as_deref(), args.trace.as_deref())?;
    print_either(args.json, &placed.summary, PlaceSummary::render_text)
}
