//! `topoplace group`: group ops into op groups and print the statistics.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::common::print_json;
use topoplace::cost::CostModel;
use topoplace::error::Result;
use topoplace::io::write_atomic;
use topoplace::render::bytes;
use topoplace::resolve::load_model;
use topoplace::units::to_gbs;
use topoplace::{cluster::catalog::lookup_gpu, group as grouping};

#[derive(Args)]
pub struct GroupArgs {
    /// A zoo name, a model-spec file (`.toml`) or a graph file of any supported format.
    #[arg(long)]
    model: String,
    /// The grouping method.
    #[arg(long, value_enum, default_value_t = MethodArg::Metis)]
    method: MethodArg,
    /// Number of groups for `metis` and `chunks` (default 60, as TAG uses); the other methods
    /// choose their own count and refuse it.
    #[arg(short, long, value_parser = super::common::at_least_one)]
    k: Option<usize>,
    /// GPU whose compute times weight the ops (default: the profiled GPU of an imported graph,
    /// else V100-SXM2-32GB).
    #[arg(long)]
    gpu: Option<String>,
    /// Batch size: a zoo model is rebuilt at it, a graph file re-batched linearly (what that
    /// assumes: docs/formats.md, "Re-batching").
    #[arg(long, value_parser = super::common::batch)]
    batch: Option<u32>,
    /// Seconds the grouping may take (QuickP's takes minutes on 10⁵ ops): past it, an error.
    #[arg(long, default_value_t = 60.0, value_parser = super::common::seconds)]
    time_limit: f64,
    /// Write the coarse graph for Graphviz here.
    #[arg(long)]
    dot: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum MethodArg {
    /// METIS k-way (TAG §4.1.2).
    Metis,
    /// QuickP's fusion and co-location.
    Quickp,
    /// MOIRAI's fusion rules.
    Moirai,
    /// Celeritas's CPD-TOPO order and fusion.
    Celeritas,
    /// The topological order cut into k contiguous chunks of balanced compute.
    Chunks,
}

impl MethodArg {
    /// The library's name of the method.
    fn name(self) -> String {
        self.to_possible_value()
            .expect("every method has a name")
            .get_name()
            .to_string()
    }
}

pub fn run(args: GroupArgs) -> Result<()> {
    if let Some(path) = &args.dot {
        super::common::refuse_an_input("--dot", path, &[&args.model])?;
    }
    let began = std::time::Instant::now();
    let graph = load_model(&args.model, args.batch)?;
    let gpu = match &args.gpu {
        Some(name) => lookup_gpu("<cli>", "--gpu", name)?,
        None => grouping::reference_gpu(&graph),
    };
    let weights = grouping::op_weights(&graph, gpu, &CostModel::default());
    let method = args.method.name();
    let k = super::common::group_count(args.k, &method)?;
    let deadline = began + std::time::Duration::from_secs_f64(args.time_limit);
    let result = grouping::group_within(&graph, &weights, &method, k, deadline, args.time_limit)?;
    if let Some(path) = &args.dot {
        write_atomic(path, result.to_dot().as_bytes())?;
    }
    if args.json {
        return print_json(&result.stats);
    }
    let s = &result.stats;
    outln!(
        "{} grouped by {} (weights: {} compute times)",
        graph.name,
        s.method,
        gpu.name
    )?;
    outln!("ops -> groups  {} -> {}", s.ops, s.groups)?;
    if let Some(asked) = args.k.filter(|&asked| s.groups < asked) {
        outln!(
            "note          {asked} groups asked, {} formed: {method} makes no empty group, and \
             keeps ops it cannot part together",
            s.groups
        )?;
    }
    outln!(
        "cut           {} of {} tensor bytes ({:.1}%)",
        bytes(s.cut_bytes),
        bytes(s.total_edge_bytes),
        100.0 * s.cut_bytes / s.total_edge_bytes.max(f64::MIN_POSITIVE)
    )?;
    outln!(
        "balance       {:.3} (largest group compute / mean)",
        s.balance
    )?;
    outln!(
        "CCR           {:.3} -> {:.3} (Celeritas eq. 1 at {} GB/s)",
        s.ccr_before,
        s.ccr_after,
        to_gbs(s.bandwidth_bytes_per_us)
    )?;
    let shape = if result.is_acyclic() {
        "acyclic"
    } else {
        "has cycles (fine: the simulator runs ops)"
    };
    outln!("coarse graph  {shape}")?;
    Ok(())
}
