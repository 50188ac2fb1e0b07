//! `topoplace solve`: QuickP's (P1/P2) or MOIRAI's placement MILP solved exactly with HiGHS.

use clap::{Args, ValueEnum};

use super::common::{Loaded, Numerics};
use super::common::{group_count, print_either};
use topoplace::error::Result;
use topoplace::solve::{Coarsen, Formulation, SolveOptions, summary};

#[derive(Args)]
pub struct SolveArgs {
    /// A zoo name, a model-spec file (`.toml`) or a graph file.
    #[arg(long)]
    model: String,
    /// A cluster config: a file, or the name of one in configs/.
    #[arg(long)]
    cluster: String,
    /// The MILP.
    #[arg(long, value_enum)]
    formulation: FormulationArg,
    /// `auto` (QuickP P2: fusion + co-location; MOIRAI: its fusion rules), `none` (single ops:
    /// QuickP P1), or a grouping method of `topoplace group`.
    #[arg(long, default_value = "auto", value_parser = super::common::coarsen)]
    coarsen: String,
    /// Solver time limit, seconds.
    #[arg(long, default_value_t = 60.0, value_parser = super::common::seconds)]
    time_limit: f64,
    /// Relative MIP gap at which to stop.
    #[arg(long, default_value_t = 1e-4, value_parser = super::common::gap)]
    gap: f64,
    /// Solver threads, 1 to 256.
    #[arg(long, default_value_t = 1, value_parser = super::common::solver_threads)]
    threads: u32,
    /// Groups of `--coarsen metis` or `--coarsen chunks` (default 60); refused with the other
    /// coarsenings, which choose their own count.
    #[arg(short, long, value_parser = super::common::at_least_one)]
    k: Option<usize>,
    /// Largest model to build, e.g. "4 GiB": a larger one is refused before it is built, with
    /// its estimated size.
    #[arg(long, default_value = "4 GiB", value_parser = super::common::solver_memory, allow_hyphen_values = true)]
    memory_limit: f64,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormulationArg {
    /// QuickP's P1/P2 (no congestion).
    Quickp,
    /// MOIRAI's (communication tasks on channels).
    Moirai,
}

pub fn run(args: SolveArgs) -> Result<()> {
    let formulation = match args.formulation {
        FormulationArg::Quickp => Formulation::Quickp,
        FormulationArg::Moirai => Formulation::Moirai,
    };
    let inputs = Loaded::load(&args.model, None, &args.cluster, Numerics::default())?;
    let p = inputs.problem();
    let opts = SolveOptions {
        time_limit_s: args.time_limit,
        mip_rel_gap: args.gap,
        threads: args.threads,
        memory_limit_bytes: args.memory_limit,
        ..SolveOptions::default()
    };
    let coarsen = Coarsen::parse(&args.coarsen);
    // Building and solving take minutes on large instances: a spinner on the terminal (drawn on
    // stderr only when it is one) shows the solve is alive and how long it has run.
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    spinner.set_message(format!(
        "{} MILP of {} on {} (limit {} s)",
        formulation.name(),
        inputs.graph.name,
        inputs.cluster.name,
        args.time_limit
    ));
    let s = summary::run(
        &p,
        formulation,
        &coarsen,
        group_count(args.k, &args.coarsen)?,
        &opts,
    );
    spinner.finish_and_clear();
    let s = s?;
    print_either(args.json, &s, |s| s.render_text())
}
