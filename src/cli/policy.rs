//! `topoplace policy init|upgrade|train-layouts`: GNN policy files for `place --policy`, and the
//! hybrid layout tree's policy.

use std::path::PathBuf;

use clap::Subcommand;

use indicatif::{ProgressBar, ProgressStyle};
use topoplace::error::{GnnError, InputError, Result};
use topoplace::gnn::{GnnConfig, GnnPolicy, policy::upgrade_v1};
use topoplace::io::write_atomic;
use topoplace::train::{LayoutRecipe, train_layouts as train_layouts_from};

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
    /// Train the hybrid layout tree's policy by expert iteration from a recipe
    /// (training/layouts.toml) and write it to --out.
    TrainLayouts {
        recipe: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
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
        PolicyCommand::TrainLayouts { recipe, out } => return train_layouts(&recipe, &out),
    };
    if !width.is_multiple_of(heads) {
        // The flags' own parsers see one value each; together they are still a usage error.
        return Err(InputError::new(
            "<cli>",
            "--heads",
            format!("{heads} does not divide the width {width}"),
        )
        .into());
    }
    let config = GnnConfig {
        width,
        heads,
        ..GnnConfig::default()
    };
    if let Err(problem) = config.check() {
        return Err(InputError::new("<cli>", "--width", problem).into());
    }
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
        match GnnPolicy::load(file) {
            Ok(_) => {
                outln!("{shown} already carries a checksum; unchanged")?;
                return Ok(());
            }
            // A policy of today's format that does not load (a checksum that does not match):
            // the loader says why, where "not of the old format" would mislead.
            Err(e) if bytes.starts_with(b"topoplace-gnn ") => return Err(e),
            Err(_) => {}
        }
        return Err(GnnError::NotAPolicy {
            kind: "GNN policy",
            path: shown,
            why: "not a policy file of the format before checksums".into(),
        }
        .into());
    };
    write_atomic(file, &upgraded)?;
    outln!("added a checksum to {shown}")?;
    Ok(())
}

fn train_layouts(recipe: &std::path::Path, out: &std::path::Path) -> Result<()> {
    let shown = recipe.display().to_string();
    super::common::refuse_an_input("--out", out, &[&shown])?;
    let r = LayoutRecipe::load(recipe)?;
    topoplace::io::check_writable(out)?;
    let bar = ProgressBar::new(r.generations as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} generation {pos}/{len} {msg} ({elapsed})")
            .expect("a valid template"),
    );
    let policy = train_layouts_from(&r, |g| {
        bar.inc(1);
        bar.suspend(|| {
            errln!(
                "generation {}: {} of {} problems fit, {} decisions kept, loss {:.4}",
                g.generation,
                g.solved,
                r.topologies,
                g.samples,
                g.loss
            )
        });
    })?;
    bar.finish_and_clear();
    policy.save(out)?;
    outln!("wrote the layout policy to {}", out.display())?;
    Ok(())
}
