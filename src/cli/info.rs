//! `topoplace info`: ops per phase, parameters, FLOPs and memory of a model.

use clap::Args;

use super::common::{parse_framework, parse_precision, print_either};
use topoplace::autocast::autocast;
use topoplace::cluster::Cluster;
use topoplace::cost::CostModel;
use topoplace::error::Result;
use topoplace::graph::simplify;
use topoplace::precision::Precision;
use topoplace::resolve::load_model_as;
use topoplace::resolve::load_named_cluster;
use topoplace::zoo::Framework;
use topoplace::{inspect, zoo};

#[derive(Args)]
pub struct InfoArgs {
    /// A zoo name (`topoplace zoo list`; add `-inference` for the forward-only graph) or a graph
    /// JSON file.
    model: String,
    /// Batch size: a zoo model is rebuilt at it, a graph file re-batched linearly (what that
    /// assumes: docs/formats.md, "Re-batching").
    #[arg(long)]
    batch: Option<u32>,
    /// Numeric precision: fp32 (the default), tf32, bf16, fp16 (`amp`); memory and, with
    /// --cluster, the compute estimates follow it.
    #[arg(long, default_value = "fp32", value_parser = parse_precision)]
    precision: Precision,
    /// Whose kernels a zoo model is built from: tf1 (the default) or pytorch.
    #[arg(long, default_value = "tf1", value_parser = parse_framework)]
    framework: Framework,
    /// Simplify first (TAG §4.1.1: drop Identity/NoOp and ops that reach no optimizer).
    #[arg(long)]
    simplify: bool,
    /// A cluster config (a file, or the name of one in configs/): estimate the model on each GPU
    /// type in it.
    #[arg(long)]
    cluster: Option<String>,
    #[arg(long)]
    json: bool,
}

pub fn run(args: InfoArgs) -> Result<()> {
    let loaded = load_model_as(&args.model, args.batch, args.framework)?;
    let mut graph = autocast(&loaded, args.precision, &args.model)?;
    let mut simplified = None;
    if args.simplify {
        let (g, stats) = simplify(&graph)?;
        graph = g;
        simplified = Some(stats);
    }
    let cluster: Option<Cluster> = args
        .cluster
        .as_deref()
        .map(|c| load_named_cluster(c, "--cluster"))
        .transpose()?;
    if let Some(cluster) = &cluster {
        args.precision
            .check_cluster(cluster, "<cli>", "--precision")?;
    }
    let cost = CostModel {
        precision: args.precision,
        ..CostModel::default()
    };
    let card = zoo::card(args.model.strip_suffix("-inference").unwrap_or(&args.model));
    let report = inspect::ModelReport::new(&graph, card, simplified, cluster.as_ref(), &cost);
    print_either(args.json, &report, inspect::ModelReport::render_text)
}
