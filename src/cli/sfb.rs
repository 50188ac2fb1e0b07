//! `topoplace sfb`: TAG's sufficient-factor-broadcasting ILP for every replicated gradient of a
//! strategy.

use std::time::{Duration, Instant};

use clap::Args;

use super::common::{Loaded, Numerics};
use super::common::{print_either, strategy_named};
use topoplace::error::Result;
use topoplace::sfb::{SfbOptions, SfbReport, check_strategy};

#[derive(Args)]
pub struct SfbArgs {
    /// A zoo name, a model-spec file (`.toml`) or a graph file.
    #[arg(long)]
    model: String,
    #[arg(long)]
    cluster: String,
    /// `dp`, `dp-p`, `single`, or a strategy JSON file.
    #[arg(long, default_value = "dp")]
    strategy: String,
    /// Hops above each gradient op the duplicated subgraph may reach.
    #[arg(long, default_value_t = 3, value_parser = super::common::sfb_depth)]
    depth: usize,
    /// Seconds the whole check may take; gradients whose ILP would start later keep their
    /// AllReduce (the report counts them).
    #[arg(long, default_value_t = 60.0, value_parser = super::common::seconds)]
    time_limit: f64,
    /// Batch size (TAG §5.6 uses 4): a zoo model is rebuilt at it, a graph file re-batched linearly.
    #[arg(long, value_parser = super::common::batch)]
    batch: Option<u32>,
    #[command(flatten)]
    numerics: Numerics,
    #[arg(long)]
    json: bool,
}

pub fn run(args: SfbArgs) -> Result<()> {
    let inputs = Loaded::load(&args.model, args.batch, &args.cluster, args.numerics)?;
    let Loaded {
        graph,
        cluster,
        cost,
    } = &inputs;
    let (strategy, _) = strategy_named(&args.strategy, graph, cluster, cost)?;
    let opts = SfbOptions {
        depth: args.depth,
        deadline: Some(Instant::now() + Duration::from_secs_f64(args.time_limit)),
        ..Default::default()
    };
    let decisions = check_strategy(graph, cluster, cost, &strategy, &opts)?;
    let report = SfbReport::new(graph, &decisions);
    print_either(args.json, &report, SfbReport::render_text)
}
