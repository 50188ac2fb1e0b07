//! `topoplace policy init|upgrade`: GNN policy files for `place --policy`.

use std::path::PathBuf;

use clap::Subcommand;

use topoplace::error::{GnnError, Result};
use topoplace::gnn::{GnnConfig, GnnPolicy, policy::upgrade_v1};
use topoplace::io::write_atomic;

#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Write an untrained GNN policy (weights drawn from --seed) for testing.
    Init {
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Embedding width f.
        #[arg(long, default_value_t = 64, value_parser = super::common::gnn_width)]
        width: usize,
        /// Attention heads (must divide the width).
        #[arg(long, default_value_t = 4, value_parser = super::common::gnn_heads)]
        heads: usize,
    },
    /// Add a checksum to a policy file written before policy files carried one (in place; the
    /// weights are unchanged).
    Upgrade { file: PathBuf },
}

pub fn run(command: PolicyCommand) -> Result<()> {
    let (out, seed, width, heads) = match command {
        PolicyCommand::Init {
            out,
            seed,
            width,
            heads,
        } => (out, seed, width, heads),
        PolicyCommand::Upgrade { file } => return upgrade(&file),
    };
    let config = GnnConfig {
        width,
        heads,
        ..GnnConfig::default()
    };
    GnnPolicy::init(config, seed)?.save(&out)?;
    outln!(
        "wrote an untrained GNN policy (width {width}, {heads} heads, seed {seed}) to {}",
        out.display()
    )?;
    Ok(())
}

fn upgrade(file: &std::path::Path) -> Result<()> {
    let shown = file.display().to_string();
    let bytes = topoplace::io::read_bounded(file).map_err(|source| GnnError::Read {
        path: shown.clone(),
        source,
    })?;
    let Some(upgraded) = upgrade_v1(&bytes, &shown)? else {
        return Err(GnnError::NotAPolicy {
            path: shown,
            why: "not a policy file of the format before checksums".into(),
        }
        .into());
    };
    write_atomic(file, &upgraded)?;
    outln!("added a checksum to {shown}")?;
    Ok(())
}
