//! `topoplace policy init`: GNN policy files for `place --policy`.

use std::path::PathBuf;

use clap::Subcommand;

use topoplace::error::Result;
use topoplace::gnn::{GnnConfig, GnnPolicy};

#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Write an untrained GNN policy (weights drawn from --seed) for testing.
    Init {
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Embedding width f.
        #[arg(long, default_value_t = 64)]
        width: usize,
        /// Attention heads (must divide the width).
        #[arg(long, default_value_t = 4)]
        heads: usize,
    },
}

pub fn run(command: PolicyCommand) -> Result<()> {
    let PolicyCommand::Init {
        out,
        seed,
        width,
        heads,
    } = command;
    let config = GnnConfig {
        width,
        heads,
        ..GnnConfig::default()
    };
    GnnPolicy::init(config, seed)?.save(&out)?;
    println!(
        "wrote an untrained GNN policy (width {width}, {heads} heads, seed {seed}) to {}",
        out.display()
    );
    Ok(())
}
