//! `topoplace zoo list` and `topoplace zoo export`: the built-in model zoo.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde::Serialize;

use super::common::{print_either, print_json};
use topoplace::error::Result;
use topoplace::graph::save_graph;
use topoplace::io::check_writable;
use topoplace::{inspect, zoo};

#[derive(Subcommand)]
pub enum ZooCommand {
    /// Names, variants, batch sizes and sizes of the zoo models.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Write zoo graphs as JSON files (training and forward-only variants).
    Export {
        /// Output directory.
        #[arg(long, default_value = "datasets/zoo", value_parser = super::common::output_dir)]
        out: PathBuf,
        /// Comma-separated zoo names, each exported with its forward-only variant (a name ending
        /// in `-inference` exports that variant alone); all by default.
        #[arg(long, value_delimiter = ',', value_parser = super::common::zoo_name)]
        models: Vec<String>,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(command: ZooCommand) -> Result<()> {
    match command {
        ZooCommand::List { json } => {
            let rows = inspect::zoo_listing()?;
            print_either(json, &rows, |rows| inspect::render_zoo_listing(rows))
        }
        ZooCommand::Export { out, models, json } => export(&out, &models, json),
    }
}

#[derive(Serialize)]
struct ExportedFile {
    model: String,
    path: String,
    ops: usize,
    edges: usize,
}

/// The graphs `--models` NAME exports: the training graph and the forward-only one, or the
/// forward-only one alone when NAME asks for it (`mlp-inference`), not its `-inference` twin.
fn variants(name: &str) -> Vec<String> {
    if name.ends_with(zoo::INFERENCE_SUFFIX) {
        vec![name.to_string()]
    } else {
        vec![name.to_string(), format!("{name}{}", zoo::INFERENCE_SUFFIX)]
    }
}

fn export(out: &Path, models: &[String], json: bool) -> Result<()> {
    let names: Vec<String> = if models.is_empty() {
        zoo::NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        models.to_vec()
    };
    // A second export of one model would only write its files twice.
    topoplace::placers::compare::named_once(&names, "--models")?;
    // Build every graph before writing any file, so a bad name leaves no partial export.
    let mut graphs = Vec::new();
    for name in &names {
        for variant in variants(name) {
            graphs.push(zoo::build(&variant, &zoo::ZooOptions::default())?);
        }
    }
    // Every path checked first too: a directory in a file's place left the files before it
    // written.
    for g in &graphs {
        check_writable(&out.join(format!("{}.json", g.name)))?;
    }
    let mut written = Vec::new();
    for g in &graphs {
        let path = out.join(format!("{}.json", g.name));
        save_graph(g, &path)?;
        written.push(ExportedFile {
            model: g.name.clone(),
            path: path.display().to_string(),
            ops: g.len(),
            edges: g.edges().len(),
        });
    }
    if json {
        return print_json(&written);
    }
    for f in &written {
        outln!(
            "{:<24} {:>6} ops {:>6} edges  {}",
            f.model,
            f.ops,
            f.edges,
            f.path
        )?;
    }
    Ok(())
}
