//! What every command shares: JSON output, progress bars, traces, and the one lookup that turns
//! the names a user gives (`--strategy`, `--gbps` ranges, cluster labels) into values.

use std::path::Path;

use serde::Serialize;

use topoplace::autocast::autocast;
use topoplace::cluster::{Cluster, TopologyDistribution};
use topoplace::cost::CostModel;
use topoplace::error::{Error, InputError, Result};
use topoplace::evaluate::{Evaluation, summary};
use topoplace::graph::Graph;
use topoplace::io::write_atomic;
use topoplace::precision::Precision;
use topoplace::problem::Problem;
use topoplace::resolve::{load_model_as, load_named_cluster};
use topoplace::sfb::{SfbOptions, duplicated_ops};
use topoplace::sim::chrome_trace;
use topoplace::strategy::{Reference, Strategy, load_strategy};
use topoplace::zoo::{Framework, Optimizer, ZooOptions};

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

/// The model × cluster instances a benchmark runs (`bench place`, `bench gnn`): by default the
/// pipeline instances, bert-large and gpt on both of TAG's clusters.
#[derive(clap::Args)]
pub struct BenchInstances {
    /// Zoo names or graph JSON files.
    #[arg(long, value_delimiter = ',', default_value = "bert-large,gpt")]
    pub models: Vec<String>,
    /// Cluster configs: files or names in configs/.
    #[arg(long, value_delimiter = ',', default_value = "tag-cloud,tag-testbed")]
    pub clusters: Vec<String>,
}

impl BenchInstances {
    /// Every model on every cluster, models outermost.
    pub fn pairs(&self) -> Vec<(&String, &String)> {
        self.models
            .iter()
            .flat_map(|m| self.clusters.iter().map(move |c| (m, c)))
            .collect()
    }
}

/// Where the GNN runs: `--gnn-device` of `place`, `train` and `bench gnn`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum GnnDeviceArg {
    /// burn's flex CPU backend.
    Cpu,
    /// burn's wgpu backend (builds with `--features wgpu`).
    Wgpu,
}

impl GnnDeviceArg {
    /// The name `topoplace::gnn::device_named` knows it by.
    pub fn name(self) -> &'static str {
        match self {
            GnnDeviceArg::Cpu => "cpu",
            GnnDeviceArg::Wgpu => "wgpu",
        }
    }
}

/// `--precision`, `--framework`, `--seq` and `--optimizer`: how the model trains ([`Precision`], [`Framework`];
/// docs/modelling.md).
#[derive(clap::Args, Clone, Copy, Default)]
pub struct Numerics {
    /// Numeric precision: fp32 (TAG's, the default), tf32 (matrix products on Ampere+ tensor
    /// cores), bf16 or fp16 (PyTorch autocast; `amp` = fp16).
    #[arg(long, default_value = "fp32")]
    pub precision: Precision,
    /// Whose kernels a zoo model's graph reproduces and whose runtime memory is charged: tf1
    /// (TensorFlow 1's decomposed ops, tensors only: TAG's, the default), pytorch (fused
    /// attention, LayerNorm, GELU, dropout; CUDA context and caching-allocator reserve) or
    /// pytorch-eager (the same with attention unfused, as Hugging Face models ran before SDPA).
    #[arg(long, default_value = "tf1")]
    pub framework: Framework,
    /// Tokens per sequence of a zoo transformer (BERT: 1 to 512, default 128; GPTs: default
    /// their context).
    #[arg(long, value_parser = at_least_one)]
    pub seq: Option<usize>,
    /// The optimizer a zoo model trains with: adam (AdamW's state too; the default),
    /// sgd-momentum, sgd, adafactor or adam8bit (bitsandbytes); it decides the optimizer state
    /// held in memory and the update's cost.
    #[arg(long, default_value = "adam")]
    pub optimizer: Optimizer,
}

impl Numerics {
    /// The cost model of this precision.
    pub fn cost(self) -> CostModel {
        CostModel {
            precision: self.precision,
            runtime: self.framework.runtime_memory(),
            ..CostModel::default()
        }
    }

    /// `model` at `batch`, built from the framework's ops, as it trains in the precision.
    pub fn model(self, model: &str, batch: Option<u32>) -> Result<Graph> {
        let opts = ZooOptions {
            batch_size: batch,
            framework: self.framework,
            seq: self.seq,
            optimizer: self.optimizer,
            ..ZooOptions::default()
        };
        let graph = load_model_as(model, &opts).map_err(seq_as_flag)?;
        Ok(autocast(&graph, self.precision, model)?)
    }

    /// Refuses `cluster` when one of its GPUs lacks the precision.
    pub fn check(self, cluster: &Cluster) -> Result<()> {
        Ok(self
            .precision
            .check_cluster(cluster, "<cli>", "--precision")?)
    }
}

/// The zoo's refusal of a sequence length (`<zoo>: seq: 513 tokens: BERT takes 1 to 512`) as
/// what it is here: a bad value of `--seq`, a usage error.
fn seq_as_flag(e: Error) -> Error {
    match e {
        Error::Input(i) if i.file == "<zoo>" && i.field == "seq" => {
            InputError::new("<cli>", "--seq", i.message).into()
        }
        other => other,
    }
}

pub fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::serialise("output", e))?;
    outln!("{text}")?;
    Ok(())
}

/// The model, cluster and cost model a command works on, loaded from `--model` (a zoo name or a
/// file, at `batch` if given) and `--cluster` (a file or a shipped name).
pub struct Loaded {
    pub graph: Graph,
    pub cluster: Cluster,
    pub cost: CostModel,
}

impl Loaded {
    /// The model at `batch`, the cluster, and the cost model, all as `numerics` says (refused
    /// when a GPU of the cluster lacks its precision).
    pub fn load(
        model: &str,
        batch: Option<u32>,
        cluster: &str,
        numerics: Numerics,
    ) -> Result<Loaded> {
        let cluster = load_named_cluster(cluster, "--cluster")?;
        numerics.check(&cluster)?;
        Ok(Loaded {
            graph: numerics.model(model, batch)?,
            cluster,
            cost: numerics.cost(),
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

/// `--strategy`: a reference strategy (`single`, `dp`, `dp-p`) or a strategy file, with the
/// file's execution priorities if it gives them. A file written by an older version that asks
/// for SFB (`"sfb": true`) gets its duplicated ops decided here.
pub fn strategy_named(
    name: &str,
    graph: &Graph,
    cluster: &Cluster,
    cost: &CostModel,
) -> Result<(Strategy, Option<Vec<f64>>)> {
    if let Some(reference) = Reference::parse(name) {
        return Ok((reference.strategy(graph, cluster), None));
    }
    if !Path::new(name).exists() {
        return Err(InputError::new(
            "<cli>",
            "--strategy",
            format!("\"{name}\" is neither `single`, `dp`, `dp-p` nor a strategy file"),
        )
        .into());
    }
    let loaded = load_strategy(Path::new(name), graph, cluster.devices.len())?;
    // A strategy names the model and cluster it was made for: another one is a mistake, not a
    // placement to simulate.
    for (field, file_says, given) in [
        ("model", &loaded.model, &graph.name),
        ("cluster", &loaded.cluster, &cluster.name),
    ] {
        if file_says != given {
            return Err(InputError::new(
                name,
                field,
                format!("the strategy is for {field} \"{file_says}\", not \"{given}\""),
            )
            .into());
        }
    }
    let mut strategy = loaded.strategy;
    if loaded.sfb_requested {
        strategy.sfb_duplicated =
            duplicated_ops(graph, cluster, cost, &strategy, &SfbOptions::default())?;
    }
    Ok((strategy, loaded.priority))
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
/// A count that must be at least 1 (`--groups`, `-k`, `--budget`, `--seeds`, `--threads`):
/// 0 is refused with clap's usage error (exit 2) instead of becoming 1 or a table of NaN.
pub fn at_least_one(text: &str) -> std::result::Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("\"{text}\" is not a whole number")),
    }
}

/// [`at_least_one`] up to `most`: sizes whose memory or threads grow with them, where a typo
/// like 100000 would abort the process allocating instead of being refused.
fn one_to(text: &str, most: usize) -> std::result::Result<usize, String> {
    let n = at_least_one(text)?;
    if n > most {
        return Err(format!("{n} is more than the {most} allowed"));
    }
    Ok(n)
}

/// A GNN's embedding width (`policy init --width`): 1 to 4,096.
pub fn gnn_width(text: &str) -> std::result::Result<usize, String> {
    one_to(text, 4096)
}

/// A GNN's attention heads (`policy init --heads`): 1 to 64.
pub fn gnn_heads(text: &str) -> std::result::Result<usize, String> {
    one_to(text, 64)
}

/// Solver threads (`solve --threads`): 1 to 256.
pub fn solver_threads(text: &str) -> std::result::Result<u32, String> {
    one_to(text, 256).map(|n| n as u32)
}

/// A batch size (`--batch`): 1 to 2³²−1 samples. 0 was refused only after loading the model,
/// with exit 1 where clap's usage errors exit 2.
pub fn batch(text: &str) -> std::result::Result<u32, String> {
    let n = at_least_one(text)?;
    u32::try_from(n).map_err(|_| format!("{n} is more than the {} allowed", u32::MAX))
}

/// SFB's search depth (`sfb --depth`): 0 to 64 hops. 4,294,967,295 ran for 24 s before.
pub fn sfb_depth(text: &str) -> std::result::Result<usize, String> {
    if text.trim() == "0" {
        return Ok(0);
    }
    one_to(text, 64)
}

/// Samples of one benchmarked training step (`bench gnn --samples`): 1 to 4,096. A million ran
/// for minutes with no progress shown.
pub fn gnn_samples(text: &str) -> std::result::Result<usize, String> {
    one_to(text, 4096)
}

/// A cluster size of `bench scale --gpus`: 1 to 8, or a multiple of 8 up to 1,024.
pub fn scale_gpus(text: &str) -> std::result::Result<usize, String> {
    let n = one_to(text, 1024)?;
    if n > 8 && !n.is_multiple_of(8) {
        return Err(format!("{n}: sizes are 1 to 8 GPUs or multiples of 8"));
    }
    Ok(n)
}

/// `solve --coarsen`: `auto`, `none` or a grouping method of `topoplace group`.
pub fn coarsen(text: &str) -> std::result::Result<String, String> {
    let methods = topoplace::group::method_names();
    if text == "auto" || text == "none" || methods.contains(&text) {
        return Ok(text.to_string());
    }
    Err(format!(
        "\"{text}\" is none of auto, none, {}",
        methods.join(", ")
    ))
}

/// [`at_least_one`] as a u64.
pub fn at_least_one_u64(text: &str) -> std::result::Result<u64, String> {
    at_least_one(text).map(|n| n as u64)
}

/// The longest time limit taken: a year. Longer ones would overflow the deadline arithmetic
/// (`Instant + Duration`) and mean no limit anyway.
const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// A time limit in seconds: finite, positive, at most a year (NaN, infinity, 0, negatives and
/// absurd lengths are refused).
pub fn seconds(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= MAX_SECONDS => Ok(x),
        Ok(_) => Err(format!(
            "must be a number of seconds above 0 and at most {MAX_SECONDS} (a year)"
        )),
        Err(_) => Err(format!("\"{text}\" is not a number of seconds")),
    }
}

/// A memory size with a unit ("4 GiB", "512 MiB"), above 0.
pub fn memory(text: &str) -> std::result::Result<f64, String> {
    match topoplace::units::parse_size(text) {
        Ok(b) if b.is_finite() && b > 0.0 => Ok(b),
        Ok(_) => Err("must be above 0".to_string()),
        Err(e) => Err(e),
    }
}

/// A relative gap: finite and at least 0.
pub fn gap(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        Ok(_) => Err("must be a finite fraction of at least 0".to_string()),
        Err(_) => Err(format!("\"{text}\" is not a number")),
    }
}

/// `--methods`: `all` or known method names, checked when the flags are parsed (an unknown name
/// is a usage error, exit 2, listing the known ones).
pub fn method_list(text: &str) -> std::result::Result<String, String> {
    topoplace::placers::compare::parse_methods(text)
        .map(|_| text.to_string())
        .map_err(|e| e.to_string())
}

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
    let range = [whole(lo)?, whole(hi)?];
    if range[0] > range[1] {
        return Err(format!("\"{text}\": LOW is above HIGH"));
    }
    Ok(range)
}

/// The random topologies of `--intra-gbps` / `--inter-gbps` (TAG's where not given) and
/// `--nvlink`, checked.
pub fn distribution(
    intra_gbps: Option<[u32; 2]>,
    inter_gbps: Option<[u32; 2]>,
    nvlink: bool,
) -> Result<TopologyDistribution> {
    let b = TopologyDistribution {
        intra_gbps: intra_gbps.unwrap_or(TopologyDistribution::TAG.intra_gbps),
        inter_gbps: inter_gbps.unwrap_or(TopologyDistribution::TAG.inter_gbps),
        nvlink,
        ..TopologyDistribution::TAG
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
        out!("{}", text(value))?;
        Ok(())
    }
}
