//! `topoplace bench place`: the wall time of `place` on given instances, each run in a child
//! process of its own as a user runs it (start-up, the policy and the inputs loaded, the output
//! written), repeated, with the result of every run: a time limit (`--limit`) is judged on the
//! slowest run (an instance over it makes the command fail after the table), and without
//! `--time` runs of one instance that disagree are an error (same seed, same result; under
//! `--time` how far a run gets depends on the machine's speed).

use std::time::Instant;

use clap::Args;
use serde::Serialize;

use super::child::{bench, stdout_of, this_executable};
use crate::cli::common::{BenchInstances, print_either, progress_bar};
use topoplace::error::Result;

#[derive(Args)]
pub struct PlaceBenchArgs {
    #[command(flatten)]
    instances: BenchInstances,
    /// Batch size (each model's own when absent; the pipeline instances are measured at 32).
    #[arg(long, value_parser = crate::cli::common::batch)]
    batch: Option<u32>,
    /// Runs of each instance (the machine is shared and noisy: read the median and the spread).
    #[arg(long, default_value_t = 3, value_parser = crate::cli::common::bench_repeat)]
    repeat: usize,
    /// Pass `--time` to `place`.
    #[arg(long, value_parser = crate::cli::common::seconds)]
    time: Option<f64>,
    /// Judge each instance's slowest run against this many seconds (`place`'s promise); the
    /// command fails after the table when one is over.
    #[arg(long, value_parser = crate::cli::common::seconds)]
    limit: Option<f64>,
    #[arg(long)]
    json: bool,
}

/// One instance's runs.
#[derive(Debug, Clone, Serialize)]
struct Row {
    model: String,
    cluster: String,
    /// Each run's result and strategies simulated, in run order (all equal without `--time`).
    iteration_ms: Vec<f64>,
    simulated: Vec<u64>,
    /// Wall seconds of each run, in run order.
    wall_s: Vec<f64>,
    median_s: f64,
    /// Whether the slowest run kept `--limit` (none without one).
    within_limit: Option<bool>,
}

/// What one `place --json` run printed that the table shows.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    iteration_us: f64,
    simulated: u64,
}

pub fn run(args: PlaceBenchArgs) -> Result<()> {
    let instances = args.instances.pairs()?;
    let runs = (instances.len() * args.repeat) as u64;
    let bar = progress_bar(runs, "{bar:30} {pos}/{len} place runs {elapsed}")?;
    let mut rows = Vec::new();
    for (model, cluster) in instances {
        let mut outcomes: Vec<Outcome> = Vec::new();
        let mut wall_s = Vec::new();
        for _ in 0..args.repeat {
            let (o, seconds) = place_once(&args, model, cluster)?;
            if args.time.is_none() && outcomes.first().is_some_and(|first| *first != o) {
                return Err(bench(format!(
                    "{model} on {cluster}: two runs disagree ({:?} then {o:?})",
                    outcomes[0]
                )));
            }
            outcomes.push(o);
            wall_s.push(seconds);
            bar.inc(1);
        }
        let slowest = wall_s.iter().copied().fold(0.0, f64::max);
        rows.push(Row {
            model: model.clone(),
            cluster: cluster.clone(),
            iteration_ms: outcomes.iter().map(|o| o.iteration_us / 1000.0).collect(),
            simulated: outcomes.iter().map(|o| o.simulated).collect(),
            median_s: median(&wall_s),
            wall_s,
            within_limit: args.limit.map(|l| slowest <= l),
        });
    }
    bar.finish_and_clear();
    print_either(args.json, &rows, |rows| render(rows, args.limit))?;
    judge_limit(&rows, args.limit)
}

/// An error naming the instances whose slowest run broke `--limit`, after the table is printed:
/// a limit judged is a test, and a failed test exits non-zero.
fn judge_limit(rows: &[Row], limit: Option<f64>) -> Result<()> {
    let over: Vec<String> = rows
        .iter()
        .filter(|r| r.within_limit == Some(false))
        .map(|r| format!("{} on {}", r.model, r.cluster))
        .collect();
    match limit {
        Some(l) if !over.is_empty() => Err(bench(format!(
            "the slowest run took more than --limit {l} s on {}",
            over.join(", ")
        ))),
        _ => Ok(()),
    }
}

/// One `place --json` run in a child process: what it found and its wall seconds.
fn place_once(args: &PlaceBenchArgs, model: &str, cluster: &str) -> Result<(Outcome, f64)> {
    let mut command = this_executable()?;
    command.args(["place", "--model", model, "--cluster", cluster, "--json"]);
    if let Some(batch) = args.batch {
        command.args(["--batch", &batch.to_string()]);
    }
    if let Some(time) = args.time {
        command.args(["--time", &time.to_string()]);
    }
    let began = Instant::now();
    let stdout = stdout_of(command, &format!("{model} on {cluster}"))?;
    let seconds = began.elapsed().as_secs_f64();
    let found: serde_json::Value =
        serde_json::from_slice(&stdout).map_err(|e| bench(format!("{model} on {cluster}: {e}")))?;
    let missing = |key: &str| {
        bench(format!(
            "{model} on {cluster}: no number `{key}` in place's JSON"
        ))
    };
    let outcome = Outcome {
        iteration_us: found["iteration_us"]
            .as_f64()
            .ok_or_else(|| missing("iteration_us"))?,
        simulated: found["simulated"]
            .as_u64()
            .ok_or_else(|| missing("simulated"))?,
    };
    Ok((outcome, seconds))
}

/// The median of `xs` (the mean of the middle two for an even count).
pub(super) fn median(xs: &[f64]) -> f64 {
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn render(rows: &[Row], limit: Option<f64>) -> String {
    let mut s = "`place`, each run a process of its own, wall seconds in run order\n\n".to_string();
    s += "| model | cluster | iteration ms | simulated | median s | runs s |";
    s += if limit.is_some() {
        " within limit |\n"
    } else {
        "\n"
    };
    s += "|---|---|---|---|---|---|";
    s += if limit.is_some() { "---|\n" } else { "\n" };
    for r in rows {
        let runs: Vec<String> = r.wall_s.iter().map(|w| format!("{w:.2}")).collect();
        let iteration: Vec<String> = r.iteration_ms.iter().map(|t| format!("{t:.2}")).collect();
        let simulated: Vec<String> = r.simulated.iter().map(u64::to_string).collect();
        s += &format!(
            "| {} | {} | {} | {} | {:.2} | {} |",
            r.model,
            r.cluster,
            distinct(&iteration),
            distinct(&simulated),
            r.median_s,
            runs.join(", ")
        );
        s += &match r.within_limit {
            Some(ok) => format!(" {} |\n", if ok { "yes" } else { "no" }),
            None => "\n".to_string(),
        };
    }
    if let Some(l) = limit {
        s += &format!("\nwithin limit: the slowest run took at most {l} s\n");
    }
    s
}

/// The values, each once, in first-seen order (one value when every run agreed).
fn distinct(values: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for v in values {
        if !seen.contains(&v.as_str()) {
            seen.push(v);
        }
    }
    seen.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[7.5]), 7.5);
    }

    #[test]
    fn distinct_values_keep_their_first_order() {
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(distinct(&v(&["1.50", "1.50"])), "1.50");
        assert_eq!(distinct(&v(&["2", "1", "2", "3"])), "2, 1, 3");
    }
}
