//! `topoplace simulate`: compile a strategy and simulate one training iteration.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::common::{Loaded, Numerics, print_either, write_trace};
use super::hybrid_plan;
use topoplace::api::{SimulateRequest, simulate};
use topoplace::error::Result;
use topoplace::evaluate::SimulationSummary;
use topoplace::sim::Order;

#[derive(Args)]
pub struct SimulateArgs {
    /// A zoo name, a model-spec file (`.toml`) or a graph JSON file.
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
    if let Some(path) = &args.trace {
        let inputs = [args.model.as_str(), &args.cluster, &args.strategy];
        super::common::refuse_an_input("--trace", path, &inputs)?;
        topoplace::io::check_writable(path)?;
    }
    let simulated = simulate(&SimulateRequest {
        model: &args.model,
        batch: args.batch,
        cluster: &args.cluster,
        strategy: &args.strategy,
        numerics: args.numerics,
        order: args.order.map(Order::from),
        // A trace shows every GPU, so it needs every replica compiled (the times are the same).
        every_replica: args.trace.is_some(),
    })?;
    if let Some(warning) = &simulated.warning {
        errln!("warning: {warning}");
    }
    if let Some(path) = &args.trace {
        let Loaded { graph, cluster, .. } = &simulated.inputs;
        write_trace(path, graph, cluster, &simulated.evaluation)?;
    }
    print_either(
        args.json,
        &simulated.summary,
        SimulationSummary::render_text,
    )
}
