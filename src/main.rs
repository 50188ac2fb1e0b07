//! The `topoplace` command line: parses, calls the library, prints. Errors are one line on stderr
//! and a non-zero exit.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use topoplace::cluster::{Bandwidths, Cluster, load_cluster, random_cluster_within};
use topoplace::compile::RouteTable;
use topoplace::cost::CostModel;
use topoplace::error::{Error, InputError, Result, write_atomic};
use topoplace::gnn::{GnnConfig, GnnPolicy};
use topoplace::graph::{Graph, save_graph, simplify};
use topoplace::inputs::{load_model, load_named_cluster};
use topoplace::sim::summary as simulation;
use topoplace::sim::{Evaluation, Order, chrome_trace, evaluate};
use topoplace::strategy::{Reference, load_strategy, save_strategy};
use topoplace::{baselines, group as grouping, import, inspect, place_summary, zoo};

mod train_cli;

#[derive(Parser)]
#[command(
    name = "topoplace",
    version,
    about = "Topology-aware placement of DNN training graphs on heterogeneous GPU clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Ops per phase, parameters, FLOPs and memory of a zoo model or a graph file; with
    /// --cluster, the single-GPU compute time and memory fit on each of its GPU types.
    Info(InfoArgs),
    /// Devices, device groups and the bandwidth matrix of a cluster config.
    Cluster {
        /// A TOML cluster config (see configs/).
        config: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// The built-in model zoo.
    Zoo {
        #[command(subcommand)]
        command: ZooCommand,
    },
    /// Compile a strategy for a model on a cluster and simulate one training iteration.
    Simulate(SimulateArgs),
    /// Convert a graph from another format (PyTorch export, QuickP node-link JSON, CSV) into
    /// topoplace's graph JSON.
    Import(ImportArgs),
    /// Group ops into op groups (METIS, QuickP, MOIRAI, Celeritas) and print the statistics.
    Group(GroupArgs),
    /// Run baseline placers on models × clusters; write results.csv, results.md and SVG charts.
    Compare(CompareArgs),
    /// Search a strategy with TAG's Monte-Carlo tree search and compare it with DP-NCCL and the
    /// best heuristic (DP-NCCL-P, Horovod).
    Place(PlaceArgs),
    /// Solve QuickP's (P1/P2) or MOIRAI's placement MILP exactly with HiGHS; print the
    /// objective, bound, gap, status and the simulated time of the solution.
    Solve(SolveArgs),
    /// TAG's sufficient-factor-broadcasting ILP for every replicated gradient of a strategy.
    Sfb(SfbArgs),
    /// Synthetic cluster topologies.
    Topology {
        #[command(subcommand)]
        command: TopologyCommand,
    },
    /// Train a GNN placement policy by self-play (MCTS with the policy's priors, Adam on the
    /// cross-entropy to the visit distributions) from a recipe in training/.
    Train(TrainArgs),
    /// Play one shard of the self-play games of a training run's next generation and write them
    /// as files for `train --samples` (for batch schedulers: a SLURM array, a Kubernetes
    /// indexed Job).
    Selfplay(SelfplayArgs),
    /// TAG §5's experiments with a trained policy: search-efficiency, unseen-topologies,
    /// holdout-models, overhead; writes <name>.csv, .md and .svg into --out.
    Experiment(ExperimentArgs),
    /// GNN policy files for `place --policy`.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Write an untrained GNN policy (weights drawn from --seed) for testing.
    Init {
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Embedding width f.
        #[arg(long, default_value_t = 64)]
        width: usize,
        /// Attention heads (must divide the width).
        #[arg(long, default_value_t = 4)]
        heads: usize,
    },
}

#[derive(Args)]
struct TrainArgs {
    /// A training recipe (training/*.toml).
    #[arg(long)]
    config: PathBuf,
    /// The run's directory (checkpoints, metrics.csv, loss.svg, policy.gnn); default
    /// training/runs/<recipe name>.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue from the run's latest checkpoint.
    #[arg(long)]
    resume: bool,
    /// Learn from the games `topoplace selfplay` shards wrote here instead of playing them;
    /// stops (after a checkpoint) at the first generation whose games are missing.
    #[arg(long)]
    samples: Option<PathBuf>,
    /// Testing aid: die (abort, as a kill would) right after this step, before its checkpoint.
    #[arg(long, hide = true)]
    abort_after_step: Option<u64>,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct SelfplayArgs {
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
    #[arg(long)]
    out: PathBuf,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ExperimentArgs {
    #[arg(value_parser = topoplace::experiment::NAMES)]
    name: String,
    /// Output directory for <name>.csv, <name>.md, <name>.svg (and holdout training runs).
    #[arg(long)]
    out: PathBuf,
    /// The GNN policy; default the shipped one (models/tag-default.gnn).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Models (zoo names or graph files); default TAG's six.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "vgg19,resnet101,inception-v3,transformer,bert-small,bert-large"
    )]
    models: Vec<String>,
    /// The cluster of search-efficiency and holdout-models.
    #[arg(long, default_value = "tag-testbed")]
    cluster: String,
    /// MCTS iterations per search (the same for every priors compared).
    #[arg(long, default_value_t = 300)]
    budget: usize,
    /// METIS op groups.
    #[arg(long, default_value_t = topoplace::mcts::DEFAULT_GROUPS)]
    groups: usize,
    /// search-efficiency: searches per model and priors (seeds 0..N).
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// unseen-topologies and overhead: random topologies.
    #[arg(long, default_value_t = 100)]
    topologies: u64,
    /// Seed of the first unseen topology (training draws 0..1000, evaluates from 1,000,000).
    #[arg(long, default_value_t = topoplace::experiment::UNSEEN_SEED)]
    topology_seed: u64,
    /// unseen-topologies and overhead: the topologies' intra-machine bandwidth range, whole
    /// Gbps (default TAG's 64,160).
    #[arg(long, value_parser = gbps_range, value_name = "LOW,HIGH")]
    intra_gbps: Option<[u32; 2]>,
    /// unseen-topologies and overhead: the topologies' inter-machine bandwidth range, whole
    /// Gbps (default TAG's 20,50).
    #[arg(long, value_parser = gbps_range, value_name = "LOW,HIGH")]
    inter_gbps: Option<[u32; 2]>,
    /// search-efficiency: add the warm start's teacher per model (a coordinate descent over the
    /// tree's strategies; minutes per model): the headroom any prior could reach.
    #[arg(long)]
    headroom: bool,
    /// holdout-models: the recipe trained without each model.
    #[arg(long, default_value = "training/tag-default.toml")]
    recipe: PathBuf,
    /// holdout-models: Adam steps of each held-out training (default the recipe's).
    #[arg(long)]
    steps: Option<u64>,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct InfoArgs {
    /// A zoo name (`topoplace zoo list`; add `-inference` for the forward-only graph) or a graph
    /// JSON file.
    model: String,
    /// Override the zoo model's batch size.
    #[arg(long)]
    batch: Option<u32>,
    /// Simplify first (TAG §4.1.1: drop Identity/NoOp and ops that reach no optimizer).
    #[arg(long)]
    simplify: bool,
    /// A cluster config: estimate the model on each GPU type in it.
    #[arg(long)]
    cluster: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct SimulateArgs {
    /// A zoo name or a graph JSON file.
    #[arg(long)]
    model: String,
    /// A cluster config: a file, or the name of one in configs/.
    #[arg(long)]
    cluster: String,
    /// `single` (fastest GPU), `dp` (DP-NCCL), `dp-p` (DP-NCCL-P) or a strategy JSON file.
    #[arg(long, default_value = "dp")]
    strategy: String,
    /// Override the zoo model's batch size.
    #[arg(long)]
    batch: Option<u32>,
    /// Execution order on each GPU: `fifo` (TensorFlow's default) or `priority` (as given in a
    /// strategy; FastT's order enforcement).
    #[arg(long, default_value = "fifo")]
    order: String,
    /// Write a Chrome trace (chrome://tracing, Perfetto) of every task here.
    #[arg(long)]
    trace: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ImportArgs {
    /// The file (or, for CSV, the directory holding ops.csv and edges.csv) to convert.
    input: PathBuf,
    /// `torch`, `quickp`, `csv` or `topoplace`; detected from the file when left out.
    #[arg(long)]
    format: Option<String>,
    /// Where to write the graph JSON.
    #[arg(long)]
    out: PathBuf,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct GroupArgs {
    /// A zoo name or a graph file of any supported format.
    #[arg(long)]
    model: String,
    /// `metis`, `quickp`, `moirai`, `celeritas` or `chunks` (contiguous topological chunks).
    #[arg(long, default_value = "metis")]
    method: String,
    /// Number of groups for `metis` and `chunks` (TAG uses 60).
    #[arg(short, long, default_value_t = 60)]
    k: usize,
    /// GPU whose compute times weight the ops (default: the profiled GPU of an imported graph,
    /// else V100-SXM2-32GB).
    #[arg(long)]
    gpu: Option<String>,
    /// Override the zoo model's batch size.
    #[arg(long)]
    batch: Option<u32>,
    /// Write the coarse graph for Graphviz here.
    #[arg(long)]
    dot: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CompareArgs {
    /// Comma-separated zoo models or graph files.
    #[arg(long, value_delimiter = ',', required = true)]
    models: Vec<String>,
    /// Comma-separated cluster configs: files, or names of configs/*.toml.
    #[arg(long, value_delimiter = ',', required = true)]
    clusters: Vec<String>,
    /// `all`, or comma-separated method names.
    #[arg(long, default_value = "all")]
    methods: String,
    /// Directory for results.csv, results.md and the charts.
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Simulator calls each search may make.
    #[arg(long, default_value_t = 100)]
    budget: usize,
    /// Time limit of the exact placers (`quickp-milp`, `moirai-milp`), seconds.
    #[arg(long)]
    time_limit: Option<f64>,
    /// Print the rows as JSON instead of the Markdown table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct SolveArgs {
    /// A zoo name or a graph file.
    #[arg(long)]
    model: String,
    /// A cluster config: a file, or the name of one in configs/.
    #[arg(long)]
    cluster: String,
    /// `quickp` (P1/P2, no congestion) or `moirai` (communication tasks on channels).
    #[arg(long)]
    formulation: String,
    /// `auto` (QuickP P2: fusion + co-location; MOIRAI: its fusion rules), `none` (single ops:
    /// QuickP P1), or a grouping method of `topoplace group`.
    #[arg(long, default_value = "auto")]
    coarsen: String,
    /// Solver time limit, seconds.
    #[arg(long, default_value_t = 60.0)]
    time_limit: f64,
    /// Relative MIP gap at which to stop.
    #[arg(long, default_value_t = 1e-4)]
    gap: f64,
    #[arg(long, default_value_t = 1)]
    threads: u32,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct SfbArgs {
    /// A zoo name or a graph file.
    #[arg(long)]
    model: String,
    #[arg(long)]
    cluster: String,
    /// `dp`, `dp-p`, `single`, or a strategy JSON file.
    #[arg(long, default_value = "dp")]
    strategy: String,
    /// Hops above each gradient op the duplicated subgraph may reach.
    #[arg(long, default_value_t = 3)]
    depth: usize,
    /// Override the zoo model's batch size (TAG §5.6 uses 4).
    #[arg(long)]
    batch: Option<u32>,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct PlaceArgs {
    /// A zoo name or a graph JSON file.
    #[arg(long)]
    model: String,
    /// A cluster config: a file, or the name of one in configs/.
    #[arg(long)]
    cluster: String,
    /// Prior policy: `shipped` (the trained models/tag-default.gnn), `none` (uniform priors,
    /// TAG's pure MCTS) or a GNN policy file (`topoplace train`, `topoplace policy init`).
    #[arg(long, default_value = "shipped")]
    policy: String,
    /// Where the GNN runs: `cpu` (burn flex) or `wgpu` (builds with `--features wgpu`).
    #[arg(long, default_value = "cpu")]
    gnn_device: String,
    /// MCTS iterations (leaf evaluations).
    #[arg(long, default_value_t = 300)]
    budget: usize,
    /// Stop after this many seconds instead (the iteration budget still applies if reached
    /// first; pass a large --budget to search by time only).
    #[arg(long)]
    time: Option<f64>,
    /// METIS op groups (fewer on small graphs).
    #[arg(long, default_value_t = topoplace::mcts::DEFAULT_GROUPS)]
    groups: usize,
    /// Order in which the tree decides op groups: `compute` (descending compute, TAG) or
    /// `impact` (compute plus the AllReduce time of the group's parameters; beyond TAG).
    #[arg(long, default_value = "compute", value_parser = ["compute", "impact"])]
    group_order: String,
    /// Batch shares of the searched strategies: `even` (TAG) or `auto` (speed-proportional
    /// shares when they make data parallelism faster; beyond TAG).
    #[arg(long, default_value = "even", value_parser = ["even", "auto"])]
    batch_split: String,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write the chosen strategy JSON here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write a Chrome trace of the chosen strategy's iteration here.
    #[arg(long)]
    trace: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum ZooCommand {
    /// Names, variants, batch sizes and sizes of the zoo models.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Write zoo graphs as JSON files (training and forward-only variants).
    Export {
        /// Output directory.
        #[arg(long, default_value = "datasets/zoo")]
        out: PathBuf,
        /// Comma-separated zoo names; all by default.
        #[arg(long, value_delimiter = ',')]
        models: Vec<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum TopologyCommand {
    /// A random cluster from TAG's distribution (§5.2), as a TOML config.
    Random {
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write the TOML here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the cluster summary as JSON instead of TOML.
        #[arg(long)]
        json: bool,
        /// Intra-machine bandwidth range, whole Gbps (TAG: 64,160); a recipe's
        /// `training_set.intra_gbps`.
        #[arg(long, value_parser = gbps_range, value_name = "LOW,HIGH")]
        intra_gbps: Option<[u32; 2]>,
        /// Inter-machine (NIC) bandwidth range, whole Gbps (TAG: 20,50); a recipe's
        /// `training_set.inter_gbps`.
        #[arg(long, value_parser = gbps_range, value_name = "LOW,HIGH")]
        inter_gbps: Option<[u32; 2]>,
    },
}

/// `LOW,HIGH` in whole Gbps.
fn gbps_range(text: &str) -> std::result::Result<[u32; 2], String> {
    let parts: Vec<&str> = text.split(',').collect();
    let [lo, hi] = parts[..] else {
        return Err(format!("\"{text}\": expected LOW,HIGH in whole Gbps"));
    };
    let whole = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| format!("\"{s}\" is not a whole number of Gbps"))
    };
    Ok([whole(lo)?, whole(hi)?])
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> Result<()> {
    match command {
        Command::Info(args) => info(args),
        Command::Cluster { config, json } => {
            let cluster = load_cluster(&config)?;
            let summary = cluster.summary();
            if json {
                print_json(&summary)
            } else {
                print!("{}", summary.render_text());
                Ok(())
            }
        }
        Command::Zoo { command } => match command {
            ZooCommand::List { json } => zoo_list(json),
            ZooCommand::Export { out, models, json } => zoo_export(&out, &models, json),
        },
        Command::Simulate(args) => simulate(args),
        Command::Import(args) => import_graph(args),
        Command::Group(args) => group(args),
        Command::Compare(args) => compare(args),
        Command::Place(args) => place(args),
        Command::Solve(args) => solve(args),
        Command::Sfb(args) => sfb(args),
        Command::Topology { command } => match command {
            TopologyCommand::Random {
                seed,
                out,
                json,
                intra_gbps,
                inter_gbps,
            } => topology_random(seed, bandwidths(intra_gbps, inter_gbps)?, out, json),
        },
        Command::Train(args) => train_cli::train(args),
        Command::Selfplay(args) => train_cli::selfplay(args),
        Command::Experiment(args) => train_cli::experiment(args),
        Command::Policy { command } => match command {
            PolicyCommand::Init {
                out,
                seed,
                width,
                heads,
            } => policy_init(&out, seed, width, heads),
        },
    }
}

/// The progress bar layout of `compare` and `place`.
const BAR: &str = "{bar:30} {pos}/{len} {elapsed} {msg}";

/// A progress bar of `len` steps drawn as `template` (indicatif's syntax).
fn progress_bar(len: u64, template: &str) -> Result<indicatif::ProgressBar> {
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .map_err(|e| Error::Other(e.to_string()))?,
    );
    Ok(bar)
}

fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::Other(format!("serialising output: {e}")))?;
    println!("{text}");
    Ok(())
}

fn info(args: InfoArgs) -> Result<()> {
    let mut graph = load_model(&args.model, args.batch)?;
    let mut simplified = None;
    if args.simplify {
        let (g, stats) = simplify(&graph)?;
        graph = g;
        simplified = Some(stats);
    }
    let cluster: Option<Cluster> = args.cluster.as_deref().map(load_cluster).transpose()?;
    let card = zoo::card(args.model.strip_suffix("-inference").unwrap_or(&args.model));
    let report = inspect::ModelReport::new(&graph, card, simplified, cluster.as_ref());
    if args.json {
        print_json(&report)
    } else {
        print!("{}", report.render_text());
        Ok(())
    }
}

fn zoo_list(json: bool) -> Result<()> {
    let rows = inspect::zoo_listing()?;
    if json {
        print_json(&rows)
    } else {
        print!("{}", inspect::render_zoo_listing(&rows));
        Ok(())
    }
}

#[derive(Serialize)]
struct ExportedFile {
    model: String,
    path: String,
    ops: usize,
    edges: usize,
}

fn zoo_export(out: &Path, models: &[String], json: bool) -> Result<()> {
    let names: Vec<String> = if models.is_empty() {
        zoo::NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        models.to_vec()
    };
    // Build every graph before writing any file, so a bad name leaves no partial export.
    let mut graphs = Vec::new();
    for name in &names {
        for variant in [name.clone(), format!("{name}-inference")] {
            graphs.push(zoo::build(&variant, &zoo::ZooOptions::default())?);
        }
    }
    let mut written = Vec::new();
    for g in &graphs {
        let path = out.join(format!("{}.json", g.name));
        save_graph(g, &path)?;
        written.push(ExportedFile {
            model: g.name.clone(),
            path: path.display().to_string(),
            ops: g.len(),
            edges: g.edges().len(),
        });
    }
    if json {
        print_json(&written)
    } else {
        for f in &written {
            println!(
                "{:<24} {:>6} ops {:>6} edges  {}",
                f.model, f.ops, f.edges, f.path
            );
        }
        Ok(())
    }
}

/// The bandwidth ranges of `--intra-gbps` / `--inter-gbps` (TAG's where not given), checked.
fn bandwidths(intra_gbps: Option<[u32; 2]>, inter_gbps: Option<[u32; 2]>) -> Result<Bandwidths> {
    let b = Bandwidths {
        intra_gbps: intra_gbps.unwrap_or(Bandwidths::TAG.intra_gbps),
        inter_gbps: inter_gbps.unwrap_or(Bandwidths::TAG.inter_gbps),
    };
    match b.problem() {
        Some((field, problem)) => {
            let flag = format!("--{}", field.replace('_', "-"));
            Err(InputError::new("<cli>", &flag, &problem).into())
        }
        None => Ok(b),
    }
}

impl ExperimentArgs {
    fn bandwidths(&self) -> Result<Bandwidths> {
        bandwidths(self.intra_gbps, self.inter_gbps)
    }
}

fn topology_random(
    seed: u64,
    bandwidths: Bandwidths,
    out: Option<PathBuf>,
    json: bool,
) -> Result<()> {
    let cluster = random_cluster_within(seed, bandwidths);
    if json {
        return print_json(&cluster.summary());
    }
    let text = cluster.to_toml();
    match out {
        Some(path) => write_atomic(&path, text.as_bytes()),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

fn simulate(args: SimulateArgs) -> Result<()> {
    let graph = load_model(&args.model, args.batch)?;
    let cluster = load_named_cluster(&args.cluster)?;
    let order = match args.order.as_str() {
        "fifo" => Order::Fifo,
        "priority" => Order::Priority,
        other => {
            return Err(InputError::new(
                "<cli>",
                "--order",
                format!("\"{other}\" is not an order (fifo, priority)"),
            )
            .into());
        }
    };
    let strategy = match Reference::parse(&args.strategy) {
        Some(reference) => reference.strategy(&graph, &cluster),
        None => load_strategy(Path::new(&args.strategy), &graph, cluster.devices.len())?,
    };
    let cost = CostModel::default();
    let run =
        |s| evaluate(&graph, &cluster, s, &cost, order).map_err(|e| Error::Other(e.to_string()));
    let evaluation = run(&strategy)?;
    let dp = run(&Reference::Dp.strategy(&graph, &cluster))?;
    let summary =
        simulation::SimulationSummary::new(&graph, &cluster, &args.strategy, &evaluation, &dp);
    if let Some(path) = &args.trace {
        write_trace(path, &graph, &cluster, &evaluation)?;
    }
    if args.json {
        print_json(&summary)
    } else {
        print!("{}", summary.render_text());
        Ok(())
    }
}

#[derive(Serialize)]
struct Imported {
    input: String,
    format: &'static str,
    out: String,
    name: String,
    batch_size: u32,
    ops: usize,
    edges: usize,
    params: u64,
}

fn import_graph(args: ImportArgs) -> Result<()> {
    let format = match &args.format {
        Some(name) => import::parse_format(name)?,
        None => import::detect(&args.input)?,
    };
    let graph = import::import(&args.input, Some(format))?;
    save_graph(&graph, &args.out)?;
    let done = Imported {
        input: args.input.display().to_string(),
        format: format.name(),
        out: args.out.display().to_string(),
        name: graph.name.clone(),
        batch_size: graph.batch_size,
        ops: graph.len(),
        edges: graph.edges().len(),
        params: graph.summary().params,
    };
    if args.json {
        print_json(&done)
    } else {
        println!(
            "{} ({}) -> {}: {} ops, {} edges, {} parameters, batch {}",
            done.input, done.format, done.out, done.ops, done.edges, done.params, done.batch_size
        );
        Ok(())
    }
}

fn group(args: GroupArgs) -> Result<()> {
    let graph = load_model(&args.model, args.batch)?;
    let gpu = match &args.gpu {
        Some(name) => topoplace::cluster::catalog::lookup_gpu("<cli>", "--gpu", name)?,
        None => grouping::reference_gpu(&graph),
    };
    let weights = grouping::op_weights(&graph, gpu, &CostModel::default());
    let result = grouping::group_by_name(&graph, &weights, &args.method, args.k)?;
    if let Some(path) = &args.dot {
        write_atomic(path, result.to_dot().as_bytes())?;
    }
    if args.json {
        return print_json(&result.stats);
    }
    let s = &result.stats;
    println!(
        "{} grouped by {} (weights: {} compute times)",
        graph.name, s.method, gpu.name
    );
    println!("ops -> groups  {} -> {}", s.ops, s.groups);
    println!(
        "cut           {} of {} tensor bytes ({:.1}%)",
        topoplace::report::bytes(s.cut_bytes),
        topoplace::report::bytes(s.total_edge_bytes),
        100.0 * s.cut_bytes / s.total_edge_bytes.max(f64::MIN_POSITIVE)
    );
    println!(
        "balance       {:.3} (largest group compute / mean)",
        s.balance
    );
    println!(
        "CCR           {:.3} -> {:.3} (Celeritas eq. 1 at {} GB/s)",
        s.ccr_before,
        s.ccr_after,
        topoplace::units::to_gbs(s.bandwidth_bytes_per_us)
    );
    println!(
        "coarse graph  {}",
        if result.is_acyclic() {
            "acyclic"
        } else {
            "has cycles (fine: the simulator runs ops)"
        }
    );
    Ok(())
}

/// A cluster config path, or the name of one of the shipped configs.
/// How a cluster argument appears in results: a config file by its stem ("tag-testbed" for
/// configs/tag-testbed.toml), a shipped config by its name.
fn cluster_label(arg: &str) -> String {
    Path::new(arg)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| arg.to_string())
}

fn compare(args: CompareArgs) -> Result<()> {
    let methods = baselines::compare::parse_methods(&args.methods)?;
    let models = args
        .models
        .iter()
        .map(|m| Ok((m.clone(), load_model(m, None)?)))
        .collect::<Result<Vec<_>>>()?;
    let clusters = args
        .clusters
        .iter()
        .map(|c| Ok((cluster_label(c), load_named_cluster(c)?)))
        .collect::<Result<Vec<_>>>()?;
    let budget = baselines::Budget {
        steps: args.budget,
        seconds: args.time_limit,
        seed: args.seed,
    };
    let total = (models.len() * clusters.len() * methods.len()) as u64;
    let bar = progress_bar(total, BAR)?;
    let rows = baselines::compare::run(&models, &clusters, &methods, &budget, |row| {
        bar.set_message(format!("{} {} {}", row.model, row.cluster, row.method));
        bar.inc(1);
    });
    bar.finish_and_clear();
    baselines::compare::write_outputs(&args.out, &rows)?;
    if args.json {
        print_json(&rows)
    } else {
        print!("{}", baselines::compare::markdown(&rows));
        Ok(())
    }
}

/// The policy `--policy` names and how the summary shows it: `none` (uniform priors),
/// `shipped` (models/tag-default.gnn, uniform priors when this checkout has none) or a file.
/// Read before any search starts, so a bad file fails fast and names itself.
fn load_policy(policy: &str, device: &str) -> Result<(Option<GnnPolicy>, String)> {
    let device = topoplace::gnn::device_named(device)?;
    let path = match policy {
        "none" => None,
        "shipped" => topoplace::gnn::shipped_policy_path(),
        file => Some(PathBuf::from(file)),
    };
    match path {
        None => Ok((None, "none".into())),
        Some(path) => Ok((
            Some(GnnPolicy::load_on(&path, &device)?),
            path.display().to_string(),
        )),
    }
}

/// `topoplace policy init`: an untrained policy file.
fn policy_init(out: &Path, seed: u64, width: usize, heads: usize) -> Result<()> {
    let config = GnnConfig {
        width,
        heads,
        ..GnnConfig::default()
    };
    GnnPolicy::init(config, seed)?.save(out)?;
    println!(
        "wrote an untrained GNN policy (width {width}, {heads} heads, seed {seed}) to {}",
        out.display()
    );
    Ok(())
}

fn place(args: PlaceArgs) -> Result<()> {
    let (policy, policy_shown) = load_policy(&args.policy, &args.gnn_device)?;
    let graph = load_model(&args.model, None)?;
    let cluster = load_named_cluster(&args.cluster)?;
    let cost = CostModel::default();
    let p = baselines::Problem {
        graph: &graph,
        cluster: &cluster,
        cost: &cost,
    };
    let config = topoplace::mcts::MctsConfig {
        iterations: args.budget,
        seconds: args.time,
        seed: args.seed,
        group_order: match args.group_order.as_str() {
            "impact" => topoplace::mcts::GroupOrder::Impact,
            _ => topoplace::mcts::GroupOrder::Compute,
        },
        batch_split: match args.batch_split.as_str() {
            "auto" => topoplace::mcts::SearchSplit::Auto,
            _ => topoplace::mcts::SearchSplit::Even,
        },
        ..Default::default()
    };
    let bar = progress_bar(args.budget as u64, BAR)?;
    let found =
        topoplace::mcts::search_with(&p, args.groups, config, policy.as_ref(), |progress| {
            bar.set_position(progress.iterations as u64);
            if let Some(best) = progress.best_us {
                bar.set_message(format!("best {:.2} ms", topoplace::units::to_ms(best)));
            }
        });
    bar.finish_and_clear();
    let found = found?;
    if !found.fits {
        return Err(Error::Other(format!(
            "{} does not fit on {}: all {} strategies tried (DP-NCCL included) run out of GPU \
             memory",
            graph.name, cluster.name, found.simulated
        )));
    }
    let routes = RouteTable::new(&cluster);
    let heuristic = place_summary::best_heuristic(&p, &routes)?;
    let summary =
        place_summary::PlaceSummary::new(&graph, &cluster, &policy_shown, &found, heuristic);
    if let Some(path) = &args.out {
        save_strategy(&found.strategy, &graph, &cluster.name, path)?;
    }
    if let Some(path) = &args.trace {
        write_trace(path, &graph, &cluster, &found.evaluation)?;
    }
    if args.json {
        print_json(&summary)
    } else {
        print!("{}", summary.render_text());
        Ok(())
    }
}

/// The Chrome trace of a simulated iteration, written atomically.
fn write_trace(path: &Path, graph: &Graph, cluster: &Cluster, e: &Evaluation) -> Result<()> {
    let trace = chrome_trace(
        &e.compiled.exec,
        &e.result,
        |r| simulation::resource_name(cluster, &e.compiled.exec, r),
        |t| simulation::task_name(graph, &e.compiled, t),
    );
    let text = serde_json::to_string(&trace)
        .map_err(|e| Error::Other(format!("serialising trace: {e}")))?;
    write_atomic(path, text.as_bytes())
}

fn solve(args: SolveArgs) -> Result<()> {
    use topoplace::solve::{Coarsen, Formulation, SolveOptions, summary};
    let formulation = Formulation::parse(&args.formulation)?;
    let graph = load_model(&args.model, None)?;
    let cluster = load_named_cluster(&args.cluster)?;
    let cost = CostModel::default();
    let p = baselines::Problem {
        graph: &graph,
        cluster: &cluster,
        cost: &cost,
    };
    let opts = SolveOptions {
        time_limit_s: args.time_limit,
        mip_rel_gap: args.gap,
        threads: args.threads,
        ..SolveOptions::default()
    };
    let s = summary::run(&p, formulation, &Coarsen::parse(&args.coarsen), &opts)?;
    if args.json {
        print_json(&s)
    } else {
        print!("{}", s.render_text());
        Ok(())
    }
}

fn sfb(args: SfbArgs) -> Result<()> {
    use topoplace::sfb;
    let graph = load_model(&args.model, args.batch)?;
    let cluster = load_named_cluster(&args.cluster)?;
    let cost = CostModel::default();
    let strategy = match Reference::parse(&args.strategy) {
        Some(r) => r.strategy(&graph, &cluster),
        None => load_strategy(Path::new(&args.strategy), &graph, cluster.devices.len())?,
    };
    let opts = sfb::SfbOptions {
        depth: args.depth,
        ..Default::default()
    };
    let decisions = sfb::check_strategy(&graph, &cluster, &cost, &strategy, &opts)?;
    let report = sfb::SfbReport::new(&graph, &decisions);
    if args.json {
        print_json(&report)
    } else {
        print!("{}", report.render_text());
        Ok(())
    }
}
