//! `topoplace info`: ops per phase, parameters, FLOPs and memory of a model.

use clap::Args;

use super::common::{Numerics, print_either};
use topoplace::cluster::Cluster;
use topoplace::error::Result;
use topoplace::graph::simplify;
use topoplace::resolve::load_named_cluster;
use topoplace::{inspect, zoo};

#[derive(Args)]
pub struct InfoArgs {
    /// A zoo name (`topoplace zoo list`; add `-inference` for the forward-only graph), a
    /// model-spec file (`.toml`, a GPT or Llama at any size) or a graph JSON file.
    model: String,
    /// Batch size: a zoo model is rebuilt at it, a graph file re-batched linearly (what that
    /// assumes: docs/formats.md, "Re-batching").
    #[arg(long, value_parser = super::common::batch)]
    batch: Option<u32>,
    #[command(flatten)]
    numerics: Numerics,
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
    let mut graph = args
        .numerics
        .model_from("<MODEL>", &args.model, args.batch)?;
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
        args.numerics.check(cluster)?;
    }
    let cost = args.numerics.cost();
    let card = zoo::card(args.model.strip_suffix("-inference").unwrap_or(&args.model));
    let mut report = inspect::ModelReport::new(&graph, card, simplified, cluster.as_ref(), &cost);
    report.seq = args.numerics.seq;
    print_either(args.json, &report, inspect::ModelReport::render_text)
}
