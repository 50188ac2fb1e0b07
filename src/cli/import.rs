//! `topoplace import`: convert a graph from another format into topoplace's graph JSON.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Serialize;

use super::common::print_json;
use topoplace::error::Result;
use topoplace::graph::save_graph;
use topoplace::import::{self, Format, flops_estimated_warning, import_torch};
use topoplace::resolve::import_model;

#[derive(Args)]
pub struct ImportArgs {
    /// The file (or, for CSV, the directory holding ops.csv and edges.csv) to convert.
    input: PathBuf,
    /// The input's format; detected from the file when left out.
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// Where to write the graph JSON.
    #[arg(long)]
    out: PathBuf,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    /// A PyTorch export (datasets/export_torch.py).
    Torch,
    /// QuickP's node-link JSON.
    Quickp,
    /// A directory (or file) of ops.csv and edges.csv.
    Csv,
    /// topoplace's own graph JSON.
    Topoplace,
}

impl From<FormatArg> for Format {
    fn from(format: FormatArg) -> Format {
        match format {
            FormatArg::Torch => Format::Torch,
            FormatArg::Quickp => Format::Quickp,
            FormatArg::Csv => Format::Csv,
            FormatArg::Topoplace => Format::Topoplace,
        }
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
    /// Op types of a PyTorch export whose FLOPs are estimates.
    flops_estimated: Vec<String>,
}

pub fn run(args: ImportArgs) -> Result<()> {
    let input = args.input.display().to_string();
    super::common::refuse_an_input("--out", &args.out, &[&input])?;
    let format = match args.format {
        Some(format) => format.into(),
        None => import::detect(&args.input)?,
    };
    let graph = import_model(&args.input, Some(format))?;
    let flops_estimated = match format {
        Format::Torch => {
            let meta = import_torch(&args.input)?.meta;
            if let Some(warning) = flops_estimated_warning(&meta, &args.input.display().to_string())
            {
                errln!("{warning}");
            }
            meta.flops_estimated
        }
        _ => Vec::new(),
    };
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
        flops_estimated,
    };
    if args.json {
        return print_json(&done);
    }
    outln!(
        "{} ({}) -> {}: {} ops, {} edges, {} parameters, batch {}",
        done.input,
        done.format,
        done.out,
        done.ops,
        done.edges,
        done.params,
        done.batch_size
    )?;
    Ok(())
}
