//! How a model trains (precision, framework, sequence length, optimizer) and the inputs every job
//! loads from the names a user gives: a model, a cluster, a strategy.

use std::path::Path;

use crate::cluster::Cluster;
use crate::cost::{CostModel, MemoryFormat};
use crate::error::{Error, InputError, Result};
use crate::evaluate::{Evaluation, summary};
use crate::graph::Graph;
use crate::io::write_atomic;
use crate::precision::Precision;
use crate::problem::Problem;
use crate::resolve::{is_zoo_model, load_named_cluster, load_trained};
use crate::sfb::{SfbOptions, duplicated_ops};
use crate::sim::{MAX_TRACE_EVENTS, chrome_trace, trace_events};
use crate::strategy::{Reference, Strategy, load_strategy};
use crate::zoo::{Framework, MAX_SEQ, Optimizer, ZooOptions};

/// `--precision`, `--framework`, `--seq`, `--optimizer` and `--memory-format`: how the model
/// trains ([`Precision`], [`Framework`]; docs/modelling.md). The command line's flags are these
/// fields.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
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
    #[arg(long, value_parser = sequence_length)]
    pub seq: Option<usize>,
    /// The optimizer a zoo model trains with: adam (AdamW's state too; the default: TensorFlow's
    /// one-kernel update under tf1, torch.optim.Adam's multi-tensor `foreach` passes under
    /// pytorch), adam-fused (one kernel per update: `fused=True`, apex, Megatron, DeepSpeed),
    /// sgd-momentum, sgd, adafactor or adam8bit (bitsandbytes); it decides the optimizer state
    /// held in memory and the update's cost. A graph file refuses it (its optimizer ops are the
    /// ones it was exported with), and so does a forward-only `-inference` model.
    #[arg(long)]
    pub optimizer: Option<Optimizer>,
    /// The layout of convolution activations: nchw (PyTorch's default, under which a 16-bit
    /// convolution also transposes its tensors for the tensor cores) or channels-last
    /// (`torch.channels_last`, TensorFlow's). Default: the framework's (nchw under pytorch and
    /// pytorch-eager, channels-last under tf1).
    #[arg(long)]
    pub memory_format: Option<MemoryFormat>,
}

impl Numerics {
    /// The cost model of this precision, framework and memory format.
    pub fn cost(self) -> CostModel {
        self.framework
            .cost_model(self.precision, self.memory_format)
    }

    /// The zoo options of this framework, sequence length and optimizer (at the model's own
    /// batch).
    pub fn zoo_options(self) -> ZooOptions {
        ZooOptions {
            framework: self.framework,
            seq: self.seq,
            optimizer: self.optimizer.unwrap_or_default(),
            ..ZooOptions::default()
        }
    }

    /// `model` at `batch`, built from the framework's ops, as it trains in the precision.
    pub fn model(self, model: &str, batch: Option<u32>) -> Result<Graph> {
        let built = is_zoo_model(model) || crate::zoo::is_spec_file(model);
        if self.optimizer.is_some() && !built && Path::new(model).exists() {
            return Err(InputError::new(
                "<cli>",
                "--optimizer",
                format!(
                    "\"{model}\" is a graph file: its optimizer ops are the ones it was exported \
                     with"
                ),
            )
            .into());
        }
        if self.optimizer.is_some() && built && model.ends_with(crate::zoo::INFERENCE_SUFFIX) {
            return Err(InputError::new(
                "<cli>",
                "--optimizer",
                format!("\"{model}\" is forward-only: it has no optimizer to choose"),
            )
            .into());
        }
        let opts = ZooOptions {
            batch_size: batch,
            ..self.zoo_options()
        };
        load_trained(model, &opts, self.precision)
            .map_err(seq_as_flag)
            .map_err(|e| size_as_flag(e, batch, self.seq))
    }

    /// [`Self::model`] for a model given by `flag` rather than `--model` (`--models`, `info`'s
    /// `<MODEL>`): an error about the name names that flag.
    pub fn model_from(self, flag: &str, model: &str, batch: Option<u32>) -> Result<Graph> {
        self.model(model, batch).map_err(|e| match e {
            Error::Input(i) if i.file == "<cli>" && i.field == "--model" => {
                InputError::new("<cli>", flag, i.message).into()
            }
            other => other,
        })
    }

    /// Refuses `cluster` when one of its GPUs lacks the precision.
    pub fn check(self, cluster: &Cluster) -> Result<()> {
        Ok(self
            .precision
            .check_cluster(cluster, "<cli>", "--precision")?)
    }
}

/// A count that must be at least 1 (`--seq`, `--groups`, `--budget`, `--seeds`, `--threads`):
/// 0 is refused with clap's usage error (exit 2) instead of becoming 1 or a table of NaN.
pub fn at_least_one(text: &str) -> std::result::Result<usize, String> {
    one_to_at_most(text, usize::MAX)
}

/// [`at_least_one`] up to `most`, which a refusal names however large the number given (a
/// number past 2⁶⁴ too).
pub fn one_to_at_most(text: &str, most: usize) -> std::result::Result<usize, String> {
    let text = text.trim();
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) if n <= most => Ok(n),
        Ok(_) => Err(format!("{text} is more than the {most} allowed")),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
            Err(format!("{text} is more than the {most} allowed"))
        }
        Err(_) => Err(format!("\"{text}\" is not a whole number")),
    }
}

/// A sequence length (`--seq`): 1 to [`MAX_SEQ`] tokens, whatever the model; the model
/// may take fewer (BERT's 512), which it says when it is built.
pub fn sequence_length(text: &str) -> std::result::Result<usize, String> {
    one_to_at_most(text, MAX_SEQ)
}

/// The longest time limit taken: a year. Longer ones would overflow the deadline arithmetic
/// (`Instant + Duration`) and mean no limit anyway.
const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// The shortest time limit taken, a millisecond: shorter ones mean the same (nothing is timed
/// that finely) and printed back as hundreds of digits (`1e-300` as `0.000…1`).
const MIN_SECONDS: f64 = 0.001;

/// A time limit in seconds: finite, at least a millisecond, at most a year (NaN, infinity, 0,
/// negatives and absurd lengths are refused).
pub fn check_seconds(x: f64) -> std::result::Result<f64, String> {
    match x.is_finite() && (MIN_SECONDS..=MAX_SECONDS).contains(&x) {
        true => Ok(x),
        false => Err(format!(
            "must be a number of seconds from {MIN_SECONDS} to {MAX_SECONDS} (a year)"
        )),
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

/// A zoo model that the user's `--batch` or `--seq` grew past the graph's bounds (an op's FLOPs
/// or bytes) is the flag's fault, not the op's: a usage error naming the flag, with the op's
/// complaint as the reason.
pub(crate) fn size_as_flag(e: Error, batch: Option<u32>, seq: Option<usize>) -> Error {
    let flag = match (batch, seq) {
        (Some(_), _) => "--batch",
        (None, Some(_)) => "--seq",
        (None, None) => return e,
    };
    match e {
        Error::Input(i) if i.file.starts_with("<zoo") && i.field.starts_with("ops[") => {
            let message = format!("builds a model past the simulator's bounds: {}", i.message);
            InputError::new("<cli>", flag, message).into()
        }
        other => other,
    }
}

/// The model, cluster and cost model a job works on, loaded from `--model` (a zoo name or a
/// file, at `batch` if given) and `--cluster` (a file or a shipped name).
pub struct Loaded {
    /// The model's training graph, in the precision's dtypes.
    pub graph: Graph,
    /// The cluster.
    pub cluster: Cluster,
    /// The cost model of the precision and framework.
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

    /// What a placer or the compiler is asked about: these three together.
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
        // An empty value is a file without the field (it defaults to ""), not one for a
        // model named "".
        if file_says.is_empty() {
            return Err(InputError::new(
                name,
                field,
                format!(
                    "missing: the file does not say which {field} it is for (\"{field}\": \
                     \"{given}\" if it is this one)"
                ),
            )
            .into());
        }
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

/// Refuses a trace of `strategy` that is sure to exceed [`MAX_TRACE_EVENTS`] before it is
/// compiled with every replica: on 1,024 GPUs a graph of 10⁵ ops is 10⁸ tasks, and their
/// compilation aborted the process for memory before the count was checked.
pub fn check_traceable(strategy: &Strategy) -> Result<()> {
    let floor = strategy.task_floor();
    if floor > MAX_TRACE_EVENTS as u64 {
        return Err(too_many_events(&format!("at least {floor}")));
    }
    Ok(())
}

fn too_many_events(events: &str) -> Error {
    InputError::new(
        "<cli>",
        "--trace",
        format!(
            "the iteration is {events} trace events (a task on each GPU and link it holds), \
             more than the {MAX_TRACE_EVENTS} a trace is written with; trace it on fewer GPUs \
             or a smaller graph"
        ),
    )
    .into()
}

/// The Chrome trace of a simulated iteration, written atomically.
pub fn write_trace(path: &Path, graph: &Graph, cluster: &Cluster, e: &Evaluation) -> Result<()> {
    write_atomic(path, trace_json(graph, cluster, e)?.as_bytes())
}

/// The Chrome trace of a simulated iteration, as the JSON text [`write_trace`] writes.
pub fn trace_json(graph: &Graph, cluster: &Cluster, e: &Evaluation) -> Result<String> {
    let events = trace_events(&e.compiled.exec);
    if events > MAX_TRACE_EVENTS {
        return Err(too_many_events(&events.to_string()));
    }
    let trace = chrome_trace(
        &e.compiled.exec,
        &e.result,
        |r| summary::resource_name(cluster, &e.compiled.exec, r),
        |t| summary::task_name(graph, &e.compiled, t),
    );
    serde_json::to_string(&trace).map_err(|e| Error::serialise("trace", e))
}

/// A cluster written as its name (what a JSON result shows of it).
pub(super) fn cluster_name<S: serde::Serializer>(
    c: &Cluster,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&c.name)
}
