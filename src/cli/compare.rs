//! `topoplace compare`: run placers on models × clusters; write results.csv, results.md and SVG
//! charts.

use std::path::PathBuf;

use clap::Args;

use super::common::{Numerics, print_json, refuse_an_input};
use topoplace::api::{CompareRequest, Comparison};
use topoplace::error::Result;
use topoplace::placers::compare;

#[derive(Args)]
pub struct CompareArgs {
    /// Comma-separated zoo models, model-spec files (`.toml`) or graph files.
    #[arg(long, value_delimiter = ',', required = true)]
    models: Vec<String>,
    /// Batch size of every model: a zoo model is rebuilt at it, a graph file re-batched linearly
    /// (what that assumes: docs/formats.md, "Re-batching"). Default: each model's own.
    #[arg(long, value_parser = super::common::batch)]
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
    #[arg(long, value_parser = super::common::output_dir)]
    out: PathBuf,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Simulator calls each search may make.
    #[arg(long, default_value_t = 100, value_parser = super::common::at_least_one)]
    budget: usize,
    /// Each method's wall-clock limit, seconds: the exact placers' solver limit, the searches'
    /// time, and when a list scheduler or heuristic gives up ("no plan in its time").
    #[arg(long, value_parser = super::common::seconds)]
    time_limit: Option<f64>,
    /// Print the rows as JSON instead of the Markdown table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: CompareArgs) -> Result<()> {
    // The tables are known by name before the run, the charts' names after it.
    let inputs: Vec<&str> = (args.models.iter().chain(&args.clusters))
        .map(String::as_str)
        .collect();
    for table in ["results.csv", "results.md"] {
        refuse_an_input("--out", &args.out.join(table), &inputs)?;
    }
    let comparison = Comparison::prepare(&CompareRequest {
        models: &args.models,
        batch: args.batch,
        numerics: args.numerics,
        clusters: &args.clusters,
        methods: &args.methods,
        seed: args.seed,
        budget: args.budget,
        time_limit: args.time_limit,
    })?;
    let rows = comparison.run_showing_progress(true)?;
    for chart in compare::output_paths(&args.out, &rows) {
        refuse_an_input("--out", &chart, &inputs)?;
    }
    compare::write_outputs(&args.out, &rows)?;
    if args.json {
        return print_json(&rows);
    }
    out!("{}", compare::markdown(&rows))?;
    Ok(())
}
