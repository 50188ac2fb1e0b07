//! `topoplace cluster`: devices, device groups and the bandwidth matrix of a cluster config.

use clap::Args;

use super::common::print_either;
use topoplace::error::Result;
use topoplace::resolve::load_named_cluster;

#[derive(Args)]
pub struct ClusterArgs {
    /// A cluster config: a TOML file, or the name of one in configs/.
    config: String,
    #[arg(long)]
    json: bool,
}

pub fn run(args: ClusterArgs) -> Result<()> {
    let summary = load_named_cluster(&args.config, "config")?.summary();
    print_either(args.json, &summary, |s| s.render_text())
}
