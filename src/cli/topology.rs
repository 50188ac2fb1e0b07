//! `topoplace topology random`: a random cluster from TAG's distribution, as a TOML config.

use std::path::PathBuf;

use clap::Subcommand;

use super::common::{bandwidths, gbps_range, print_json};
use topoplace::cluster::random_cluster_within;
use topoplace::error::{Result, write_atomic};

#[derive(Subcommand)]
pub enum TopologyCommand {
    /// A random cluster from TAG's distribution (§5.2), as a TOML config.
    Random {
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write the TOML here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the cluster summary as JSON instead of TOML.
        #[arg(long)]
        json: bool,
        /// Intra-machine bandwidth range, whole Gbps (TAG: 64,160); a recipe's
        /// `training_set.intra_gbps`.
        #[arg(long, value_parser = gbps_range, value_name = "LOW,HIGH")]
        intra_gbps: Option<[u32; 2]>,
        /// Inter-machine (NIC) bandwidth range, whole Gbps (TAG: 20,50); a recipe's
        /// `training_set.inter_gbps`.
        #[arg(long, value_parser = gbps_range, value_name = "LOW,HIGH")]
        inter_gbps: Option<[u32; 2]>,
    },
}

pub fn run(command: TopologyCommand) -> Result<()> {
    let TopologyCommand::Random {
        seed,
        out,
        json,
        intra_gbps,
        inter_gbps,
    } = command;
    let cluster = random_cluster_within(seed, bandwidths(intra_gbps, inter_gbps)?);
    if json {
        return print_json(&cluster.summary());
    }
    let text = cluster.to_toml();
    match out {
        Some(path) => write_atomic(&path, text.as_bytes()),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}
