//! The `topoplace` command line: parses, calls the library, prints. Errors are one line on stderr
//! and a non-zero exit. Each subcommand lives in its own file under `cli/`.

use std::io::Write as _;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod cli;

use cli::{
    bench, cluster, compare, experiment, fidelity, group, import, info, place, policy, selfplay,
    sfb, simulate, solve, topology, train, zoo,
};

#[derive(Parser)]
#[command(
    name = "topoplace",
    version,
    about = "Topology-aware placement of DNN training graphs on heterogeneous GPU clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Ops per phase, parameters, FLOPs and memory of a zoo model or a graph file; with
    /// --cluster, the single-GPU compute time and memory fit on each of its GPU types.
    Info(info::InfoArgs),
    /// Devices, device groups and the bandwidth matrix of a cluster config.
    Cluster(cluster::ClusterArgs),
    /// The built-in model zoo.
    Zoo {
        #[command(subcommand)]
        command: zoo::ZooCommand,
    },
    /// Compile a strategy for a model on a cluster and simulate one training iteration.
    Simulate(simulate::SimulateArgs),
    /// Convert a graph from another format (PyTorch export, QuickP node-link JSON, CSV) into
    /// topoplace's graph JSON.
    Import(import::ImportArgs),
    /// Group ops into op groups (METIS, QuickP, MOIRAI, Celeritas) and print the statistics.
    Group(group::GroupArgs),
    /// Run baseline placers on models × clusters; write results.csv, results.md and SVG charts.
    Compare(compare::CompareArgs),
    /// Search a strategy with TAG's Monte-Carlo tree search and compare it with DP-NCCL and the
    /// best other method (`dp-subset` and every placer that needs no search).
    Place(place::PlaceArgs),
    /// Solve QuickP's (P1/P2) or MOIRAI's placement MILP exactly with HiGHS; print the
    /// objective, bound, gap, status and the simulated time of the solution.
    Solve(solve::SolveArgs),
    /// TAG's sufficient-factor-broadcasting ILP for every replicated gradient of a strategy.
    Sfb(sfb::SfbArgs),
    /// Synthetic cluster topologies.
    Topology {
        #[command(subcommand)]
        command: topology::TopologyCommand,
    },
    /// Train a GNN placement policy by self-play (MCTS with the policy's priors, Adam on the
    /// cross-entropy to the visit distributions) from a recipe in training/.
    Train(train::TrainArgs),
    /// Play one shard of the self-play games of a training run's next generation and write them
    /// as files for `train --samples` (for batch schedulers: a SLURM array, a Kubernetes
    /// indexed Job).
    Selfplay(selfplay::SelfplayArgs),
    /// TAG §5's experiments with a trained policy: search-efficiency, unseen-topologies,
    /// holdout-models, overhead; writes <name>.csv, .md and .svg into --out.
    Experiment(experiment::ExperimentArgs),
    /// The simulator against published measurements (single-GPU and data-parallel training
    /// throughput, NCCL bus bandwidth); --calibrate fits the kernel efficiencies.
    Fidelity(fidelity::FidelityArgs),
    /// Benchmarks that print a table: `bench scale` (cost as the cluster grows to 1,024 GPUs),
    /// `bench place` (wall time of `place` per instance, repeated), `bench gnn` (the GNN's
    /// forward pass and training step on a device).
    Bench {
        #[command(subcommand)]
        command: bench::BenchCommand,
    },
    /// GNN policy files for `place --policy`.
    Policy {
        #[command(subcommand)]
        command: policy::PolicyCommand,
    },
}

fn main() -> ExitCode {
    restore_sigpipe();
    cli::allocator::keep_freed_memory();
    let cli = match parse() {
        Ok(cli) => cli,
        // A usage error: one line on stderr, clap's exit status (2).
        Err(e) if e.use_stderr() => return usage_error(&e),
        // Help or the version, on stdout: a failed write is reported as every output's is.
        Err(e) => return finish(e.print().map_err(cli::out::stdout_error)),
    };
    finish(run(cli.command))
}

/// Print clap's refusal of the command line as one line, as every other error is: its first
/// paragraph (the error and, for missing or conflicting flags, their names) without the usage
/// and help hints that follow it.
fn usage_error(e: &clap::Error) -> ExitCode {
    // A command given without its subcommand shows its help, every line of it.
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        e.exit();
    }
    let text = e.to_string();
    // The error, and clap's tips (`a similar argument exists: '--model'`); not the usage lines.
    let kept = text
        .split("\n\n")
        .enumerate()
        .filter(|(i, part)| *i == 0 || part.trim_start().starts_with("tip:"))
        .map(|(_, part)| part);
    let mut line = kept
        .flat_map(str::split_whitespace)
        .collect::<Vec<_>>()
        .join(" ");
    // clap says only "one or more arguments": name the first that is not UTF-8.
    if e.kind() == clap::error::ErrorKind::InvalidUtf8 {
        let bad = std::env::args_os().skip(1).find(|a| a.to_str().is_none());
        if let Some(bad) = bad {
            line = format!(
                "{line}: {:?} (arguments other than paths must be UTF-8)",
                bad
            );
        }
    }
    let _ = writeln!(std::io::stderr().lock(), "{line}");
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// The command line, parsed.
fn parse() -> Result<Cli, clap::Error> {
    let matches = negative_numbers_as_values(Cli::command()).try_get_matches()?;
    Cli::from_arg_matches(&matches)
}

/// `command` and its subcommands with a negative number after a flag taken as the flag's value,
/// so that `--time -1` is refused by `--time`'s own check ("must be a number of seconds above
/// 0") rather than as "unexpected argument '-1'", which names no flag.
fn negative_numbers_as_values(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| arg.allow_negative_numbers(true))
        .mut_subcommands(negative_numbers_as_values)
}

/// The exit status of a command's `result`, its error (if any) on stderr; stdout flushed first.
fn finish(result: topoplace::Result<()>) -> ExitCode {
    match result.and_then(|()| cli::out::flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Not `eprintln!`: it panics when stderr cannot be written (`2>/dev/full`).
            let _ = writeln!(std::io::stderr().lock(), "error: {e}");
            // Flags that clap's parsers cannot judge alone (`--shard` against `--of`) are
            // usage errors all the same: clap's exit status for them.
            if e.is_usage() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Exit quietly when the reader of our output goes away (`topoplace fidelity | head`), as
/// command-line tools do, instead of panicking in `println!` (Rust ignores SIGPIPE by default).
#[allow(unsafe_code)]
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn run(command: Command) -> topoplace::Result<()> {
    match command {
        Command::Info(args) => info::run(args),
        Command::Cluster(args) => cluster::run(args),
        Command::Zoo { command } => zoo::run(command),
        Command::Simulate(args) => simulate::run(args),
        Command::Import(args) => import::run(args),
        Command::Group(args) => group::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Place(args) => place::run(args),
        Command::Solve(args) => solve::run(args),
        Command::Sfb(args) => sfb::run(args),
        Command::Topology { command } => topology::run(command),
        Command::Train(args) => train::run(args),
        Command::Selfplay(args) => selfplay::run(args),
        Command::Experiment(args) => experiment::run(args),
        Command::Fidelity(args) => fidelity::run(args),
        Command::Bench { command } => bench::run(command),
        Command::Policy { command } => policy::run(command),
    }
}
