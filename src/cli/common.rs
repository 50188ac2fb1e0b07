//! What every command shares: JSON output, progress bars, traces, and the one lookup that turns
//! the names a user gives (`--strategy`, `--gbps` ranges, cluster labels) into values.

use std::path::Path;

use serde::Serialize;

use topoplace::cluster::{Bandwidths, Cluster};
use topoplace::cost::CostModel;
use topoplace::error::{Error, InputError, Result, write_atomic};
use topoplace::evaluate::{Evaluation, Problem, summary};
use topoplace::graph::Graph;
use topoplace::inputs::{load_model, load_named_cluster};
use topoplace::sfb::{SfbOptions, duplicated_ops};
use topoplace::sim::chrome_trace;
use topoplace::strategy::{Reference, Strategy, load_strategy};

/// The progress bar layout of `compare` and `place`.
pub const BAR: &str = "{bar:30} {pos}/{len} {elapsed} {msg}";

/// A progress bar of `len` steps drawn as `template` (indicatif's syntax).
pub fn progress_bar(len: u64, template: &str) -> Result<indicatif::ProgressBar> {
    let style = indicatif::ProgressStyle::with_template(template)
        .map_err(|e| Error::serialise("a progress bar", e))?;
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(style);
    Ok(bar)
}

pub fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::serialise("output", e))?;
    println!("{text}");
    Ok(())
}

/// The model, cluster and cost model a command works on, loaded from `--model` (a zoo name or a
/// file, at `batch` if given) and `--cluster` (a file or a shipped name).
pub struct Inputs {
    pub graph: Graph,
    pub cluster: Cluster,
    pub cost: CostModel,
}

impl Inputs {
    pub fn load(model: &str, batch: Option<u32>, cluster: &str) -> Result<Inputs> {
        Ok(Inputs {
            graph: load_model(model, batch)?,
            cluster: load_named_cluster(cluster)?,
            cost: CostModel::default(),
        })
    }

    pub fn problem(&self) -> Problem<'_> {
        Problem {
            graph: &self.graph,
            cluster: &self.cluster,
            cost: &self.cost,
        }
    }
}

/// `--strategy`: a reference strategy (`single`, `dp`, `dp-p`) or a strategy file. A file written
/// by an older version that asks for SFB (`"sfb": true`) gets its duplicated ops decided here.
pub fn strategy_named(
    name: &str,
    graph: &Graph,
    cluster: &Cluster,
    cost: &CostModel,
) -> Result<Strategy> {
    if let Some(reference) = Reference::parse(name) {
        return Ok(reference.strategy(graph, cluster));
    }
    let loaded = load_strategy(Path::new(name), graph, cluster.devices.len())?;
    let mut strategy = loaded.strategy;
    if loaded.sfb_requested {
        strategy.sfb_duplicated =
            duplicated_ops(graph, cluster, cost, &strategy, &SfbOptions::default())?;
    }
    Ok(strategy)
}

/// The Chrome trace of a simulated iteration, written atomically.
pub fn write_trace(path: &Path, graph: &Graph, cluster: &Cluster, e: &Evaluation) -> Result<()> {
    let trace = chrome_trace(
        &e.compiled.exec,
        &e.result,
        |r| summary::resource_name(cluster, &e.compiled.exec, r),
        |t| summary::task_name(graph, &e.compiled, t),
    );
    let text = serde_json::to_string(&trace).map_err(|e| Error::serialise("trace", e))?;
    write_atomic(path, text.as_bytes())
}

/// `LOW,HIGH` in whole Gbps.
pub fn gbps_range(text: &str) -> std::result::Result<[u32; 2], String> {
    let parts: Vec<&str> = text.split(',').collect();
    let [lo, hi] = parts[..] else {
        return Err(format!("\"{text}\": expected LOW,HIGH in whole Gbps"));
    };
    let whole = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| format!("\"{s}\" is not a whole number of Gbps"))
    };
    Ok([whole(lo)?, whole(hi)?])
}

/// The bandwidth ranges of `--intra-gbps` / `--inter-gbps` (TAG's where not given), checked.
pub fn bandwidths(
    intra_gbps: Option<[u32; 2]>,
    inter_gbps: Option<[u32; 2]>,
) -> Result<Bandwidths> {
    let b = Bandwidths {
        intra_gbps: intra_gbps.unwrap_or(Bandwidths::TAG.intra_gbps),
        inter_gbps: inter_gbps.unwrap_or(Bandwidths::TAG.inter_gbps),
    };
    match b.problem() {
        Some((field, problem)) => {
            let flag = format!("--{}", field.replace('_', "-"));
            Err(InputError::new("<cli>", &flag, &problem).into())
        }
        None => Ok(b),
    }
}

/// How a cluster argument appears in results: a config file by its stem ("tag-testbed" for
/// configs/tag-testbed.toml), a shipped config by its name.
pub fn cluster_label(arg: &str) -> String {
    Path::new(arg)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| arg.to_string())
}

/// Print `value` as JSON, or its text form.
pub fn print_either<T: Serialize>(
    json: bool,
    value: &T,
    text: impl FnOnce(&T) -> String,
) -> Result<()> {
    if json {
        print_json(value)
    } else {
        print!("{}", text(value));
        Ok(())
    }
}
