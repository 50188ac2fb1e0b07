//! `topoplace topology random`: a random cluster from TAG's distribution, as a TOML config;
//! `topoplace topology nvidia-smi`: a machine entry from `nvidia-smi topo -m` output.

use std::path::PathBuf;

use clap::Subcommand;

use super::common::{DistributionArgs, print_json};
use topoplace::cluster::{lookup_gpu, parse_nvidia_smi_topo, random_cluster_within};
use topoplace::error::{InputError, Result};
use topoplace::io::write_atomic;

#[derive(Subcommand)]
pub enum TopologyCommand {
    /// A random cluster from TAG's distribution (§5.2) or today's, as a TOML config.
    Random {
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write the TOML here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the cluster summary as JSON instead of TOML (with `--out`, the file still gets
        /// the TOML).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        distribution: DistributionArgs,
    },
    /// A `[[machine]]` entry (interconnect, pair and port bandwidths) from the output of
    /// `nvidia-smi topo -m` saved in a file.
    NvidiaSmi {
        /// The saved output of `nvidia-smi topo -m`.
        file: PathBuf,
        /// The GPU type (a catalog name): its NVLink bandwidth sets the brick rate.
        #[arg(long)]
        gpu: String,
        /// The entry's name.
        #[arg(long, default_value = "machine", value_parser = machine_name)]
        name: String,
    },
}

pub fn run(command: TopologyCommand) -> Result<()> {
    let (seed, out, json, topologies) = match command {
        TopologyCommand::Random {
            seed,
            out,
            json,
            distribution,
        } => (seed, out, json, distribution.resolve()?),
        TopologyCommand::NvidiaSmi { file, gpu, name } => {
            return nvidia_smi(&file, &gpu, &name);
        }
    };
    let cluster = random_cluster_within(seed, topologies);
    let text = cluster.to_toml();
    // With both, the file gets the TOML and standard output the summary.
    match (out, json) {
        (Some(path), json) => {
            write_atomic(&path, text.as_bytes())?;
            if json {
                print_json(&cluster.summary())?;
            }
            Ok(())
        }
        (None, true) => print_json(&cluster.summary()),
        (None, false) => {
            out!("{text}")?;
            Ok(())
        }
    }
}

fn nvidia_smi(file: &std::path::Path, gpu: &str, name: &str) -> Result<()> {
    // The flag first, as a usage error (exit 2), before the file is read.
    let gpu = lookup_gpu("<cli>", "--gpu", gpu)?;
    let shown = file.display().to_string();
    let text = topoplace::io::read_text_file(file)?;
    let topo = parse_nvidia_smi_topo(&text).map_err(|m| InputError::new(&shown, "topo", m))?;
    if let Some(why) = topo.gpu_problem(gpu) {
        return Err(InputError::new("<cli>", "--gpu", why).into());
    }
    out!("{}", topo.machine_toml(name, gpu))?;
    Ok(())
}

/// `--name`: not blank, as a cluster's machines are told apart by their names, and printable, as
/// the cluster loader wants it (a line break was written into a config it then refused).
fn machine_name(text: &str) -> std::result::Result<String, String> {
    if topoplace::error::is_blank(text) {
        return Err("must not be empty".to_string());
    }
    match topoplace::error::unprintable(text) {
        Some(why) => Err(why),
        None => Ok(text.to_string()),
    }
}
