//! `topoplace bench`: benchmarks that print a table. `scale` (cost as the cluster grows),
//! `place` (wall time of `place` per instance) and `gnn` (the GNN's forward pass and training
//! step); each measures in child processes or in this one, as its module says.

mod child;
mod gnn;
mod place;
mod scale;

use clap::Subcommand;

use topoplace::error::Result;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Seconds and peak memory of compile + simulate (DP-NCCL) and of `place` at its default
    /// budget on clusters of 8-GPU machines, half A100 and half V100, with the growth exponent
    /// between sizes.
    Scale(scale::ScaleArgs),
    /// Wall seconds of `place` per instance, each run a process of its own, repeated; without
    /// `--time` every run's result must agree, and `--limit` judges the slowest run.
    Place(place::PlaceBenchArgs),
    /// Milliseconds of the GNN's forward pass and of one training step per instance, on the
    /// CPU or (builds with `--features wgpu`) the GPU.
    Gnn(gnn::GnnBenchArgs),
    /// One size of `scale`, measured in this process; prints JSON (what `scale` runs).
    #[command(hide = true)]
    ScaleOne(scale::OneArgs),
}

pub fn run(command: BenchCommand) -> Result<()> {
    match command {
        BenchCommand::Scale(args) => scale::run(args),
        BenchCommand::Place(args) => place::run(args),
        BenchCommand::Gnn(args) => gnn::run(args),
        BenchCommand::ScaleOne(args) => scale::run_one(&args),
    }
}
