//! `topoplace compare`: run placers on models × clusters; write results.csv, results.md and SVG
//! charts.

use std::path::PathBuf;

use clap::Args;

use super::common::{BAR, Numerics, cluster_label, print_json, progress_bar};
use topoplace::error::Result;
use topoplace::placers::{Budget, compare};
use topoplace::resolve::load_named_cluster;

#[derive(Args)]
pub struct CompareArgs {
    /// Comma-separated zoo models or graph files.
    #[arg(long, value_delimiter = ',', required = true)]
    models: Vec<String>,
    /// Batch size of every model: a zoo model is rebuilt at it, a graph file re-batched linearly
    /// (what that assumes: docs/formats.md, "Re-batching"). Default: each model's own.
    #[arg(long)]
    batch: Option<u32>,
    #[command(flatten)]
    numerics: Numerics,
    /// Comma-separated cluster configs: files, or names of configs/*.toml.
    #[arg(long, value_delimiter = ',', required = true)]
    clusters: Vec<String>,
    /// `all`, or comma-separated method names.
    #[arg(long, default_value = "all", value_parser = super::common::method_list)]
    methods: String,
    /// Directory for results.csv, results.md and the charts.
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Simulator calls each search may make.
    #[arg(long, default_value_t = 100, value_parser = super::common::at_least_one)]
    budget: usize,
    /// Time limit of the exact placers (`quickp-milp`, `moirai-milp`), seconds.
    #[arg(long, value_parser = super::common::seconds)]
    time_limit: Option<f64>,
    /// Print the rows as JSON instead of the Markdown table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: CompareArgs) -> Result<()> {
    let methods = compare::parse_methods(&args.methods)?;
    let models = args
        .models
        .iter()
        .map(|m| Ok((m.clone(), args.numerics.model(m, args.batch)?)))
        .collect::<Result<Vec<_>>>()?;
    let clusters = args
        .clusters
        .iter()
        .map(|c| {
            let cluster = load_named_cluster(c, "--clusters")?;
            args.numerics.check(&cluster)?;
            Ok((cluster_label(c), cluster))
        })
        .collect::<Result<Vec<_>>>()?;
    let cost = args.numerics.cost();
    let budget = Budget {
        steps: args.budget,
        seconds: args.time_limit,
        seed: args.seed,
        deadline: None,
    };
    let total = (models.len() * clusters.len() * methods.len()) as u64;
    let bar = progress_bar(total, BAR)?;
    let rows = compare::run(&models, &clusters, &methods, &budget, &cost, |row| {
        bar.set_message(format!("{} {} {}", row.model, row.cluster, row.method));
        bar.inc(1);
    });
    bar.finish_and_clear();
    compare::write_outputs(&args.out, &rows)?;
    if args.json {
        return print_json(&rows);
    }
    out!("{}", compare::markdown(&rows))?;
    Ok(())
}
