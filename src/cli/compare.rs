//! `topoplace compare`: run placers on models × clusters; write results.csv, results.md and SVG
//! charts.

use std::path::PathBuf;

use clap::Args;

use super::common::{BAR, Numerics, cluster_label, print_json, progress_bar};
use topoplace::error::Result;
use topoplace::hybrid::planned_by_default;
use topoplace::placers::compare::HybridCase;
use topoplace::placers::{Budget, Placer, compare};
use topoplace::resolve::load_named_cluster;
use topoplace::zoo::ZooOptions;

#[derive(Args)]
pub struct CompareArgs {
    /// Comma-separated zoo models or graph files.
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
    let clusters = args
        .clusters
        .iter()
        .map(|c| {
            let cluster = load_named_cluster(c, "--clusters")?;
            args.numerics.check(&cluster)?;
            Ok((cluster_label(c), cluster))
        })
        .collect::<Result<Vec<_>>>()?;
    // Language models of a billion parameters or more get the hybrid planners (and the
    // placers only when named); the other models the placers.
    let mut placed = Vec::new();
    let mut planned = Vec::new();
    for m in &args.models {
        if planned_by_default(m)? {
            planned.push(m.clone());
        } else {
            placed.push(m.clone());
        }
    }
    let lm_placers: &[Box<dyn Placer>] = if methods.all { &[] } else { &methods.placers };
    let models = |names: &[String]| {
        names
            .iter()
            .map(|m| Ok((m.clone(), args.numerics.model(m, args.batch)?)))
            .collect::<Result<Vec<_>>>()
    };
    let (placed, planned_graphs) = (models(&placed)?, models(&planned)?);
    let cost = args.numerics.cost();
    let budget = Budget {
        steps: args.budget,
        seconds: args.time_limit,
        seed: args.seed,
        deadline: None,
    };
    let total = (placed.len() * methods.placers.len()
        + planned.len() * (lm_placers.len() + methods.hybrid.len()))
        * clusters.len();
    let bar = progress_bar(total as u64, BAR)?;
    let mut on_row = |row: &compare::Row| {
        bar.set_message(format!("{} {} {}", row.model, row.cluster, row.method));
        bar.inc(1);
    };
    let mut rows = compare::run(
        &placed,
        &clusters,
        &methods.placers,
        &budget,
        &cost,
        &mut on_row,
    );
    rows.extend(compare::run(
        &planned_graphs,
        &clusters,
        lm_placers,
        &budget,
        &cost,
        &mut on_row,
    ));
    let opts = ZooOptions {
        framework: args.numerics.framework,
        seq: args.numerics.seq,
        optimizer: args.numerics.optimizer,
        ..ZooOptions::default()
    };
    for (model, graph) in planned_graphs.iter().filter(|_| !methods.hybrid.is_empty()) {
        let case = HybridCase {
            model,
            opts: &opts,
            precision: args.numerics.precision,
            global_batch: graph.batch_size,
            seconds: args
                .time_limit
                .unwrap_or(topoplace::hybrid::DEFAULT_SECONDS),
        };
        for (label, cluster) in &clusters {
            for row in compare::hybrid_rows(&case, label, cluster, &cost, &methods.hybrid)? {
                on_row(&row);
                rows.push(row);
            }
        }
    }
    bar.finish_and_clear();
    compare::write_outputs(&args.out, &rows)?;
    if args.json {
        return print_json(&rows);
    }
    out!("{}", compare::markdown(&rows))?;
    Ok(())
}
