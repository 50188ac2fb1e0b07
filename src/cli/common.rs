//! What every command shares: JSON output, progress bars, traces, and the one lookup that turns
//! the names a user gives (`--strategy`, `--gbps` ranges, cluster labels) into values.

use serde::Serialize;

pub use topoplace::api::progress_bar;
pub use topoplace::api::{
    Loaded, Numerics, at_least_one, check_seconds, one_to_at_most, strategy_named, write_trace,
};

use topoplace::cluster::{GpuMix, TopologyDistribution};
use topoplace::error::{Error, InputError, Result};

/// The model × cluster instances a benchmark runs (`bench place`, `bench gnn`): by default the
/// pipeline instances, bert-large and gpt on both of TAG's clusters.
#[derive(clap::Args)]
pub struct BenchInstances {
    /// Zoo names or graph JSON files.
    #[arg(long, value_delimiter = ',', default_value = "bert-large,gpt", value_parser = bench_model)]
    pub models: Vec<String>,
    /// Cluster configs: files or names in configs/.
    #[arg(long, value_delimiter = ',', default_value = "tag-cloud,tag-testbed", value_parser = bench_cluster)]
    pub clusters: Vec<String>,
}

/// A model of a benchmark's `--models`: a zoo name or an existing file, checked at the flag (an
/// empty or mistyped name failed only after the first instances had run, naming `<cli>`).
fn bench_model(text: &str) -> std::result::Result<String, String> {
    if topoplace::resolve::is_zoo_model(text) || std::path::Path::new(text).is_file() {
        return Ok(text.to_string());
    }
    Err(format!("\"{text}\" is neither a zoo model nor a file"))
}

/// A cluster of a benchmark's `--clusters`: a shipped config or an existing file.
fn bench_cluster(text: &str) -> std::result::Result<String, String> {
    let shipped = topoplace::assets::config_names();
    if shipped.contains(&text) || std::path::Path::new(text).is_file() {
        return Ok(text.to_string());
    }
    Err(format!(
        "\"{text}\" is neither a cluster file nor a shipped config ({})",
        shipped.join(", ")
    ))
}

impl BenchInstances {
    /// Every model on every cluster, models outermost; a model or cluster named twice is refused,
    /// as `compare` refuses it (its rows would only be measured again).
    pub fn pairs(&self) -> topoplace::error::Result<Vec<(&String, &String)>> {
        use topoplace::placers::compare::named_once;
        named_once(&self.models, "--models")?;
        named_once(&self.clusters, "--clusters")?;
        Ok(self
            .models
            .iter()
            .flat_map(|m| self.clusters.iter().map(move |c| (m, c)))
            .collect())
    }
}

/// Where the GNN runs: `--gnn-device` of `place`, `train` and `bench gnn`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum GnnDeviceArg {
    /// burn's flex CPU backend.
    Cpu,
    /// burn's wgpu backend (builds with `--features wgpu`).
    Wgpu,
}

/// `--gnn-device`: `cpu`, or `wgpu` in a build with the `wgpu` feature (a usage error naming the
/// flag in any other build, where it failed only when the GNN was first built).
pub fn gnn_device(text: &str) -> std::result::Result<GnnDeviceArg, String> {
    let lower = text.trim().to_ascii_lowercase();
    match [GnnDeviceArg::Cpu, GnnDeviceArg::Wgpu]
        .into_iter()
        .find(|d| d.name() == lower)
    {
        Some(GnnDeviceArg::Wgpu) if !cfg!(feature = "wgpu") => {
            Err("wgpu needs a build with `--features wgpu`; this one has the CPU only".into())
        }
        Some(device) => Ok(device),
        None => Err(format!("\"{lower}\": expected cpu or wgpu")),
    }
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

/// Refuses an output path (`flag`'s) that is one of the command's input files: `place --model
/// g.json --out g.json` replaced the graph with the strategy. Inputs that are not files (zoo
/// names, shipped configs) match nothing.
pub fn refuse_an_input(flag: &str, output: &std::path::Path, inputs: &[&str]) -> Result<()> {
    // A CSV graph is a directory of files (or one of them standing for it): each is an input.
    let read = inputs.iter().flat_map(|input| {
        let path = std::path::PathBuf::from(input);
        let csv = topoplace::import::csv_files(&path);
        std::iter::once(path).chain(csv)
    });
    match read
        .into_iter()
        .find(|input| topoplace::io::same_file(output, input))
    {
        Some(input) => Err(InputError::new(
            "<cli>",
            flag,
            format!(
                "is the input file {}: writing there would replace it",
                input.display()
            ),
        )
        .into()),
        None => Ok(()),
    }
}

pub fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::serialise("output", e))?;
    outln!("{text}")?;
    Ok(())
}

/// A GNN's embedding width (`policy init --width`): 1 to 4,096.
pub fn gnn_width(text: &str) -> std::result::Result<usize, String> {
    one_to_at_most(text, topoplace::gnn::MAX_WIDTH)
}

/// A GNN's attention heads (`policy init --heads`): 1 to 64.
pub fn gnn_heads(text: &str) -> std::result::Result<usize, String> {
    one_to_at_most(text, topoplace::gnn::MAX_HEADS)
}

/// Solver threads (`solve --threads`): 1 to 256.
pub fn solver_threads(text: &str) -> std::result::Result<u32, String> {
    one_to_at_most(text, 256).map(|n| n as u32)
}

/// A batch size (`--batch`): 1 to 2³²−1 samples. 0 was refused only after loading the model,
/// with exit 1 where clap's usage errors exit 2.
pub fn batch(text: &str) -> std::result::Result<u32, String> {
    one_to_at_most(text, u32::MAX as usize).map(|n| n as u32)
}

/// SFB's search depth (`sfb --depth`): 0 to 64 hops. 4,294,967,295 ran for 24 s before.
pub fn sfb_depth(text: &str) -> std::result::Result<usize, String> {
    if text.trim() == "0" {
        return Ok(0);
    }
    one_to_at_most(text, 64)
}

/// Samples of one benchmarked training step (`bench gnn --samples`): 1 to 256, sixteen times the
/// shipped recipe's batch. A step's autodiff graph grows with them: 256 take about 2.5 s a step on
/// the MLP, 4,096 ran past ten minutes at `--repeat 1`.
pub fn gnn_samples(text: &str) -> std::result::Result<usize, String> {
    one_to_at_most(text, 256)
}

/// Timed runs of each measurement (`bench gnn --repeat`, `bench place --repeat`): 1 to 1,000. 99,999,999,999 ran for
/// days with nothing shown; a median of a thousand runs is as steady as a median gets.
pub fn bench_repeat(text: &str) -> std::result::Result<usize, String> {
    one_to_at_most(text, 1000)
}

/// A cluster size of `bench scale --gpus`: 1 to 8, or a multiple of 8 up to 1,024.
pub fn scale_gpus(text: &str) -> std::result::Result<usize, String> {
    let n = one_to_at_most(text, 1024)?;
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

/// A time limit in seconds, checked by [`check_seconds`].
pub fn seconds(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) => check_seconds(x),
        Err(_) => Err(format!("\"{text}\" is not a number of seconds")),
    }
}

/// A directory to write into (`--out` of `compare`, `experiment`, `train`, ...): refused at the
/// flag when it, or a folder above it, exists and is not a directory, before any work is done.
pub fn output_dir(text: &str) -> std::result::Result<std::path::PathBuf, String> {
    if text.trim().is_empty() {
        return Err("must name a directory".to_string());
    }
    let dir = std::path::PathBuf::from(text);
    match topoplace::io::blocked_dir(&dir) {
        Some(blocked) if blocked == dir => {
            Err("the path exists and is not a directory".to_string())
        }
        Some(blocked) => Err(format!(
            "{} exists and is not a directory",
            blocked.display()
        )),
        None => Ok(dir),
    }
}

/// The largest memory size a flag takes: 1 EiB, a million TiB, past any machine (and a value
/// that overflows reads as larger).
const MOST_MEMORY: f64 = (1u64 << 60) as f64;

/// A memory size with a unit ("4 GiB", "512 MiB"), above 0 and at most [`MOST_MEMORY`].
pub fn memory(text: &str) -> std::result::Result<f64, String> {
    let most = MOST_MEMORY / topoplace::units::GIB / 1024.0;
    match topoplace::units::parse_size(text) {
        Ok(b) if b > MOST_MEMORY => Err(format!("{text} is too large: at most {most} TiB")),
        Ok(b) if b > 0.0 => Ok(b),
        Ok(_) => Err("must be above 0".to_string()),
        Err(e) => Err(e),
    }
}

/// A relative gap: 0 to 1. Once a placement is found its time and the bound are both at least
/// 0, so the gap is at most 1 and a larger one would stop where 1 does.
pub fn gap(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        Ok(_) => Err("must be a fraction from 0 to 1".to_string()),
        Err(_) => Err(format!("\"{text}\" is not a number")),
    }
}

/// The least memory a solve may be limited to: the process holds about this before it builds
/// anything, so a smaller limit could only refuse every model.
const LEAST_SOLVER_MEMORY: f64 = 256.0 * 1024.0 * 1024.0;

/// `solve --memory-limit`: a size of at least 256 MiB.
pub fn solver_memory(text: &str) -> std::result::Result<f64, String> {
    match memory(text)? {
        b if b < LEAST_SOLVER_MEMORY => Err(format!(
            "{text} is too small: the process holds about 256 MiB before it builds a model"
        )),
        b => Ok(b),
    }
}

/// Groups of `-k` for a grouping method: metis and chunks take a count (default 60, as TAG
/// uses); the others choose their own, so a `-k` given with them would be ignored.
pub fn group_count(k: Option<usize>, method: &str) -> Result<usize> {
    const DEFAULT_GROUPS: usize = 60;
    match (k, method) {
        (Some(k), "metis" | "chunks") => Ok(k),
        (None, _) => Ok(DEFAULT_GROUPS),
        (Some(_), other) => Err(InputError::new(
            "<cli>",
            "-k",
            format!("sets the group count of metis and chunks; {other} chooses its own"),
        )
        .into()),
    }
}

/// `zoo export --models`: a name the zoo builds, checked at the flag.
pub fn zoo_name(text: &str) -> std::result::Result<String, String> {
    match topoplace::resolve::is_zoo_model(text) {
        true => Ok(text.to_string()),
        false => Err(format!(
            "\"{text}\" is not a zoo model (`topoplace zoo list` names them)"
        )),
    }
}

/// `--methods`: `all` or known method names, checked when the flags are parsed (an unknown name
/// is a usage error, exit 2, listing the known ones).
pub fn method_list(text: &str) -> std::result::Result<String, String> {
    // clap names the flag itself: a refusal about `--methods` gives its message alone.
    topoplace::placers::compare::parse_methods(text)
        .map(|_| text.to_string())
        .map_err(|e| match e {
            Error::Input(i) if i.file == "<cli>" => i.message,
            other => other.to_string(),
        })
}

/// `LOW,HIGH` in whole Gbps, 1 to 1 PB/s (8,000,000 Gbps).
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
    // A reversed or zero range, and the loader's bounds, so that every cluster drawn from the range loads.
    match topoplace::cluster::gbps_range_problem(range) {
        Some(why) => Err(why),
        None => Ok(range),
    }
}

/// The flags that choose a random topology's distribution (`topology random`, `experiment`).
#[derive(clap::Args, Clone, Debug)]
pub struct DistributionArgs {
    /// The distribution the flags below start from: `tag` (TAG §5.2: V100, GTX 1080 Ti and P100
    /// at 64–160 Gbps inside a machine and 20–50 Gbps between machines) or `today` (H100, A100s
    /// and an RTX 3070, NVLink in half the machines that have it, 128–256 and 100–400 Gbps)
    /// [default: tag].
    #[arg(long, value_parser = distribution_name)]
    distribution: Option<TopologyDistribution>,
    /// The GPU types drawn from: tag, wide (TAG's and T4, A100, H100) or today (the
    /// distribution's by default); a recipe's `training_set.gpus`.
    #[arg(long)]
    gpus: Option<GpuMix>,
    /// Intra-machine bandwidth range, whole Gbps (the distribution's by default); a recipe's
    /// `training_set.intra_gbps`.
    #[arg(long, value_parser = gbps_range, value_name = "LOW,HIGH", allow_hyphen_values = true)]
    intra_gbps: Option<[u32; 2]>,
    /// Inter-machine (NIC) bandwidth range, whole Gbps (the distribution's by default); a
    /// recipe's `training_set.inter_gbps`.
    #[arg(long, value_parser = gbps_range, value_name = "LOW,HIGH", allow_hyphen_values = true)]
    inter_gbps: Option<[u32; 2]>,
    /// NVLink in half the machines whose GPU type has it (on by default in `today`); a recipe's
    /// `training_set.nvlink`.
    #[arg(long)]
    nvlink: bool,
}

impl DistributionArgs {
    /// The first of these flags given, if any (for a command that reads them only sometimes).
    pub fn given(&self) -> Option<&'static str> {
        [
            ("--distribution", self.distribution.is_some()),
            ("--gpus", self.gpus.is_some()),
            ("--intra-gbps", self.intra_gbps.is_some()),
            ("--inter-gbps", self.inter_gbps.is_some()),
            ("--nvlink", self.nvlink),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }

    /// The distribution these flags ask for, checked.
    pub fn resolve(&self) -> Result<TopologyDistribution> {
        let base = self.distribution.unwrap_or(TopologyDistribution::TAG);
        let b = TopologyDistribution {
            intra_gbps: self.intra_gbps.unwrap_or(base.intra_gbps),
            inter_gbps: self.inter_gbps.unwrap_or(base.inter_gbps),
            gpus: self.gpus.unwrap_or(base.gpus),
            nvlink: self.nvlink || base.nvlink,
        };
        match b.problem() {
            Some((field, problem)) => {
                let flag = format!("--{}", field.replace('_', "-"));
                Err(InputError::new("<cli>", &flag, &problem).into())
            }
            None => Ok(b),
        }
    }
}

/// `--distribution`'s value: a named distribution.
fn distribution_name(text: &str) -> std::result::Result<TopologyDistribution, String> {
    TopologyDistribution::named(text)
        .ok_or_else(|| format!("\"{text}\": expected one of tag, today"))
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
