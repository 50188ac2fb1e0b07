//! `topoplace cluster`: devices, device groups and the bandwidth matrix of a cluster config.

use std::path::PathBuf;

use clap::Args;

use super::common::print_either;
use topoplace::cluster::load_cluster;
use topoplace::error::Result;

#[derive(Args)]
pub struct ClusterArgs {
    /// A TOML cluster config (see configs/).
    config: PathBuf,
    #[arg(long)]
    json: bool,
}

pub fn run(args: ClusterArgs) -> Result<()> {
    let summary = load_cluster(&args.config)?.summary();
    print_either(args.json, &summary, |s| s.render_text())
}
