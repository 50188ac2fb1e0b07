//! `topoplace simulate`: compile a strategy and simulate one training iteration.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::common::{Loaded, Numerics};
use super::common::{print_either, strategy_named, write_trace};
use super::hybrid_plan;
use topoplace::compile::Replicas;
use topoplace::error::Result;
use topoplace::evaluate::{
    SimulationSummary, evaluate_strategy, simulate_strategy, thin_batch_warning,
};
use topoplace::sim::Order;
use topoplace::strategy::Reference;

#[derive(Args)]
pub struct SimulateArgs {
    /// A zoo name or a graph JSON file.
    #[arg(long)]
    model: String,
    /// A cluster config: a file, or the name of one in configs/.
    #[arg(long)]
    cluster: String,
    /// `single` (fastest GPU), `dp` (DP-NCCL), `dp-p` (DP-NCCL-P) or a strategy JSON file.
    #[arg(long, default_value = "dp", conflicts_with = "plan")]
    strategy: String,
    /// A hybrid-parallel plan (JSON: stages of layers, tensor × data parallelism, ZeRO stage,
    /// recomputation; docs/hybrid.md) for a zoo GPT or Llama, simulated at layer granularity.
    #[arg(long, conflicts_with_all = ["order", "trace", "batch"])]
    plan: Option<PathBuf>,
    /// Batch size: a zoo model is rebuilt at it, a graph file re-batched linearly (what that
    /// assumes: docs/formats.md, "Re-batching").
    #[arg(long, value_parser = super::common::batch)]
    batch: Option<u32>,
    #[command(flatten)]
    numerics: Numerics,
    /// Execution order on each GPU (default: by the file's priorities when it gives them, else
    /// in arrival order).
    #[arg(long, value_enum)]
    order: Option<OrderArg>,
    /// Write a Chrome trace (chrome://tracing, Perfetto) of every task here.
    #[arg(long)]
    trace: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum OrderArg {
    /// TensorFlow's default: ready tasks in arrival order.
    Fifo,
    /// By the priorities a strategy gives (FastT's order enforcement).
    Priority,
}

impl From<OrderArg> for Order {
    fn from(order: OrderArg) -> Order {
        match order {
            OrderArg::Fifo => Order::Fifo,
            OrderArg::Priority => Order::Priority,
        }
    }
}

pub fn run(args: SimulateArgs) -> Result<()> {
    if let Some(plan) = &args.plan {
        return hybrid_plan::run(&args.model, &args.cluster, plan, args.numerics, args.json);
    }
    let inputs = Loaded::load(&args.model, args.batch, &args.cluster, args.numerics)?;
    let Loaded {
        graph,
        cluster,
        cost,
    } = &inputs;
    let p = inputs.problem();
    let (strategy, priority) = strategy_named(&args.strategy, graph, cluster, cost)?;
    let warning = thin_batch_warning(graph, cluster, &strategy);
    // A trace shows every GPU, so it needs every replica compiled (the times are the same).
    let replicas = match args.trace {
        Some(_) => Replicas::Every,
        None => Replicas::ByClass,
    };
    let evaluation = match (priority, args.order) {
        (Some(order), None | Some(OrderArg::Priority)) => {
            simulate_strategy(&p, &strategy, Some(&order), Order::Priority, replicas)?
        }
        (_, order) => {
            let order = order.unwrap_or(OrderArg::Fifo).into();
            simulate_strategy(&p, &strategy, None, order, replicas)?
        }
    };
    let dp_order = args.order.unwrap_or(OrderArg::Fifo).into();
    let dp = evaluate_strategy(&p, &Reference::Dp.strategy(graph, cluster), dp_order)?;
    let summary = SimulationSummary::new(graph, cluster, &args.strategy, &evaluation, &dp);
    if let Some(warning) = warning {
        eprintln!("warning: {warning}");
    }
    if let Some(path) = &args.trace {
        write_trace(path, graph, cluster, &evaluation)?;
    }
    print_either(args.json, &summary, SimulationSummary::render_text)
}
