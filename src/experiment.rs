//! TAG §5's experiments as commands (`topoplace experiment <name> --out DIR`), each writing
//! `<name>.csv`, `<name>.md` and `<name>.svg` (and `unseen-topologies` its searches one by one,
//! `<name>-per-instance.csv`):
//!
//! - `search-efficiency` (TAG Table 7): the search with the policy's priors against uniform
//!   priors ("pure MCTS") at the same budget, on each model and one cluster, over several seeds:
//!   the iterations to beat DP-NCCL, the iterations to reach the final strategy, the final
//!   speed-up over DP-NCCL.
//! - `unseen-topologies` (TAG §5.7): random topologies whose seeds training never draws; the
//!   speed-up over DP-NCCL per model with the policy (and with uniform priors at equal budget),
//!   and the mean of their paired differences with a 95% bootstrap interval: a gap of a tenth of
//!   a point over 100 topologies is read against it.
//! - `holdout-models` (TAG Table 8): train without one model, place it; against the policy
//!   trained with it and uniform priors.
//! - `overhead` (TAG Fig. 8): the wall time to produce a strategy on an unseen topology.
//! - `reference-best` (beyond TAG, [`crate::reference_best`]): `place`'s default against the fastest of
//!   long searches (ten times the budget, several seeds) and the best heuristic.
//!
//! Every search here skips the SFB double check: it is the same post-processing for both
//! priors and does not change what the comparison measures.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;
use serde::Serialize;

use crate::cluster::{Cluster, TopologyDistribution, random_cluster_within};
use crate::cost::CostModel;
use crate::error::{Result, TrainError};
use crate::gnn::GnnPolicy;
use crate::graph::Graph;
use crate::io::write_atomic;
use crate::mcts::{Mcts, MctsConfig, search_with};
use crate::problem::Problem;
use crate::render::{Table, bar_chart, csv, mean};
use crate::train::imitation::descend;
use crate::train::{Recipe, TrainOptions, train};

/// The experiments, by command name.
pub const NAMES: [&str; 6] = [
    "search-efficiency",
    "unseen-topologies",
    "holdout-models",
    "overhead",
    "reference-best",
    "layout-priors",
];

/// Seeds of the unseen topologies start here: training draws 0..1000 and evaluates from
/// 1,000,000 in the shipped recipe.
pub const UNSEEN_SEED: u64 = 2_000_000;

/// What every experiment takes.
pub struct Setup<'a> {
    /// The models to place, as `(name, graph)` pairs, in the order the tables list them.
    pub models: Vec<(String, Graph)>,
    /// The cluster of `search-efficiency` and `holdout-models`.
    pub cluster: &'a Cluster,
    /// The trained GNN policy whose priors are compared against uniform priors.
    pub policy: &'a GnnPolicy,
    /// MCTS iterations per search (the policy's budget, and the uniform priors' by default).
    pub budget: usize,
    /// `unseen-topologies`: the uniform priors' budget when it differs from the policy's (does
    /// the GNN at a small budget reach what uniform priors reach at a large one?).
    pub uniform_budget: Option<usize>,
    /// METIS op groups each search places (the search tree's depth).
    pub groups: usize,
    /// Searches per (model, priors) in `search-efficiency`; seeds 0..seeds.
    pub seeds: u64,
    /// Unseen topologies in `unseen-topologies` and `overhead`.
    pub topologies: u64,
    /// Seed of the first unseen topology; topology `i` is drawn with `topology_seed + i` (see
    /// [`UNSEEN_SEED`]).
    pub topology_seed: u64,
    /// The unseen topologies' distribution (TAG's: [`TopologyDistribution::TAG`]).
    pub distribution: TopologyDistribution,
    /// Seed every search with one GPU of each device group too ([`MctsConfig::seed_one_gpu`]).
    pub one_gpu_seed: bool,
    /// The cost model every search simulates with: its precision decides each GPU's peak, in
    /// the simulator and in the policy's features (TAG's: [`CostModel::default`]).
    pub cost: CostModel,
    /// `search-efficiency`: also run the warm start's teacher (a coordinate descent over the
    /// tree's strategies, minutes per model) to show how much any prior could gain.
    pub headroom: bool,
}

impl Setup<'_> {
    /// `graph` searched on unseen topology `i` (seed `topology_seed + i` of the distribution)
    /// with `policy`'s priors (`None`: uniform) for `budget` leaves, seeded by the topology.
    fn search_unseen(
        &self,
        graph: &Graph,
        i: u64,
        policy: Option<&GnnPolicy>,
        budget: usize,
    ) -> Result<SearchOutcome> {
        let seed = self.topology_seed + i;
        let cluster = random_cluster_within(seed, self.distribution);
        let p = experiment_problem(graph, &cluster, &self.cost)?;
        let config = MctsConfig {
            iterations: budget,
            seed_one_gpu: self.one_gpu_seed,
            ..experiment_config(seed)
        };
        search_outcome(&p, policy, self.groups, config)
    }
}

/// The result of one search, as the experiments read it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SearchOutcome {
    /// The best strategy's speed-up over DP-NCCL, `T_DP / T − 1` (−1 when it does not fit).
    pub speedup: f64,
    /// The first iteration whose strategy beat DP-NCCL (0: the start did).
    pub beat_dp_at: Option<usize>,
    /// The iteration count after which the best strategy stopped improving.
    pub best_at: usize,
    /// Wall time of the search (seconds).
    pub seconds: f64,
}

/// The tree the experiments run, seeded by `seed`: TAG's search alone, without the SFB double
/// check and the polish (the experiments compare priors, which the polish would blur).
fn experiment_config(seed: u64) -> MctsConfig {
    MctsConfig {
        seed,
        sfb_check: false,
        polish: 0,
        ..MctsConfig::default()
    }
}

/// `graph` on `cluster` with `cost`, refused when a GPU lacks the cost model's precision.
fn experiment_problem<'a>(
    graph: &'a Graph,
    cluster: &'a Cluster,
    cost: &'a CostModel,
) -> Result<Problem<'a>> {
    cost.precision
        .check_cluster(cluster, &cluster.name, "precision")?;
    Ok(Problem {
        graph,
        cluster,
        cost,
    })
}

/// Search `graph` on `cluster` with `policy`'s priors (`None`: uniform) and read the outcome.
pub fn search_once(
    graph: &Graph,
    cluster: &Cluster,
    cost: &CostModel,
    policy: Option<&GnnPolicy>,
    budget: usize,
    groups: usize,
    seed: u64,
) -> Result<SearchOutcome> {
    let p = experiment_problem(graph, cluster, cost)?;
    let config = MctsConfig {
        iterations: budget,
        ..experiment_config(seed)
    };
    search_outcome(&p, policy, groups, config)
}

/// The outcome of the search `config` describes, over `groups` METIS groups of `p`.
fn search_outcome(
    p: &Problem,
    policy: Option<&GnnPolicy>,
    groups: usize,
    config: MctsConfig,
) -> Result<SearchOutcome> {
    let began = Instant::now();
    let mut best: (Option<f64>, usize) = (None, 0);
    let found = search_with(p, groups, config, policy, |progress| {
        if progress.best_us != best.0 {
            best = (progress.best_us, progress.iterations);
        }
    })?;
    Ok(SearchOutcome {
        speedup: found.speedup_over_dp(),
        beat_dp_at: found.beat_dp_at,
        best_at: best.1,
        seconds: began.elapsed().as_secs_f64(),
    })
}

/// The searches of `graph` on the setup's cluster with `policy`'s priors, one per seed 0..`seeds`.
fn seeded_searches(
    s: &Setup,
    graph: &Graph,
    policy: Option<&GnnPolicy>,
) -> Result<Vec<SearchOutcome>> {
    (0..s.seeds)
        .map(|seed| search_once(graph, s.cluster, &s.cost, policy, s.budget, s.groups, seed))
        .collect()
}

/// The warm start's teacher on `graph` and `cluster` (`groups` METIS groups in TAG's search
/// order, `passes` sweeps): its speed-up over DP-NCCL, i.e. how far below the search's start the
/// tree's strategies reach by single-group changes, the headroom `search-efficiency` reports.
pub fn teacher_speedup(
    graph: &Graph,
    cluster: &Cluster,
    cost: &CostModel,
    groups: usize,
    seed: u64,
    passes: usize,
) -> Result<f64> {
    let p = experiment_problem(graph, cluster, cost)?;
    let mcts = Mcts::grouped(p, groups, experiment_config(seed))?;
    let (_, best_us) = descend(&mcts, passes)?;
    Ok(mcts.dp_us() / best_us - 1.0)
}

/// A finished experiment: a table (also CSV) and a chart.
pub struct Output {
    /// The experiment's command name (one of [`NAMES`]), the stem of the files it writes.
    pub name: &'static str,
    /// The results table, written as `<name>.md`.
    pub table: Table,
    /// The same table as CSV text, written as `<name>.csv`.
    pub csv: String,
    /// The chart as SVG text, written as `<name>.svg`.
    pub svg: String,
    /// One row per search behind the table, for paired tests of one's own (`unseen-topologies`).
    pub per_instance: Option<String>,
}

impl Output {
    /// Write `<name>.csv`, `<name>.md`, `<name>.svg` and any `<name>-per-instance.csv` into
    /// `dir` (atomically).
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut files = vec![
            (format!("{}.csv", self.name), self.csv.clone()),
            (format!("{}.md", self.name), self.table.render_markdown()),
            (format!("{}.svg", self.name), self.svg.clone()),
        ];
        if let Some(rows) = &self.per_instance {
            files.push((format!("{}-per-instance.csv", self.name), rows.clone()));
        }
        let mut written = Vec::new();
        for (file, text) in files {
            let path = dir.join(file);
            write_atomic(&path, text.as_bytes())?;
            written.push(path);
        }
        Ok(written)
    }
}

/// The rows as a table, the ratios in `percent` columns shown as signed percentages.
fn shown_as_percent(header: &[&str], rows: &[Vec<String>], percent: &[usize]) -> Table {
    let mut table = Table::new(header.iter().copied());
    for r in rows {
        let mut shown = r.clone();
        for &c in percent {
            let x: f64 = r[c].parse().unwrap_or(f64::NAN);
            shown[c] = match x.is_finite() {
                true => format!("{:+.2}%", 100.0 * x),
                false => "-".to_string(),
            };
        }
        table.row(shown);
    }
    table
}

/// TAG Table 7: the policy's priors against uniform priors at the same budget.
pub fn search_efficiency(s: &Setup) -> Result<Output> {
    let header = [
        "model",
        "priors",
        "seeds",
        "beat_dp_iterations",
        "best_found_at",
        "speedup",
        "seconds",
    ];
    let mut rows = Vec::new();
    let mut chart = Vec::new();
    for (name, graph) in &s.models {
        let mut means = Vec::new();
        for (label, policy) in [("uniform", None), ("policy", Some(s.policy))] {
            let runs = seeded_searches(s, graph, policy)?;
            // A search that never beats DP-NCCL counts as the whole budget.
            let beat: Vec<f64> = runs
                .iter()
                .map(|r| r.beat_dp_at.unwrap_or(s.budget) as f64)
                .collect();
            let best_at: Vec<f64> = runs.iter().map(|r| r.best_at as f64).collect();
            let speedup = mean(&runs.iter().map(|r| r.speedup).collect::<Vec<_>>());
            let seconds = mean(&runs.iter().map(|r| r.seconds).collect::<Vec<_>>());
            rows.push(vec![
                name.clone(),
                label.to_string(),
                s.seeds.to_string(),
                format!("{:.1}", mean(&beat)),
                format!("{:.1}", mean(&best_at)),
                format!("{speedup:.6}"),
                format!("{seconds:.3}"),
            ]);
            means.push(100.0 * speedup);
        }
        if s.headroom {
            let began = Instant::now();
            let speedup = teacher_speedup(graph, s.cluster, &s.cost, s.groups, 0, 1)?;
            rows.push(vec![
                name.clone(),
                "teacher".to_string(),
                "1".to_string(),
                String::new(),
                String::new(),
                format!("{speedup:.6}"),
                format!("{:.3}", began.elapsed().as_secs_f64()),
            ]);
            means.push(100.0 * speedup);
        }
        chart.push((name.clone(), means));
    }
    let table = shown_as_percent(&header, &rows, &[5]);
    let chart_series = if s.headroom { 3 } else { 2 };
    Ok(Output {
        name: "search-efficiency",
        csv: csv(&header, &rows),
        svg: bar_chart(
            &format!(
                "speed-up over DP-NCCL (%) on {}, budget {}",
                s.cluster.name, s.budget
            ),
            &[
                "uniform priors",
                "GNN priors",
                "teacher (coordinate descent)",
            ][..chart_series],
            &chart,
        ),
        table,
        per_instance: None,
    })
}

/// TAG §5.7: the speed-up over DP-NCCL on unseen random topologies, per model, with the policy
/// and with uniform priors at the same budget.
pub fn unseen_topologies(s: &Setup) -> Result<Output> {
    let header = [
        "model",
        "topologies",
        "policy_mean",
        "policy_min",
        "policy_max",
        "policy_share_above_dp",
        "uniform_mean",
        "policy_better",
        "policy_worse",
        "mean_difference",
        "difference_ci95_low",
        "difference_ci95_high",
    ];
    let uniform_budget = s.uniform_budget.unwrap_or(s.budget);
    let mut rows = Vec::new();
    let mut chart = Vec::new();
    let mut per_instance = Vec::new();
    for (name, graph) in &s.models {
        let pairs: Vec<(SearchOutcome, SearchOutcome)> = (0..s.topologies)
            .into_par_iter()
            .map(|i| {
                let with = s.search_unseen(graph, i, Some(s.policy), s.budget)?;
                let without = s.search_unseen(graph, i, None, uniform_budget)?;
                Ok((with, without))
            })
            .collect::<Result<_>>()?;
        let policy: Vec<f64> = pairs.iter().map(|p| p.0.speedup).collect();
        let uniform: Vec<f64> = pairs.iter().map(|p| p.1.speedup).collect();
        let better = pairs
            .iter()
            .filter(|p| p.0.speedup > p.1.speedup + 1e-9)
            .count();
        let worse = pairs
            .iter()
            .filter(|p| p.0.speedup < p.1.speedup - 1e-9)
            .count();
        let above = policy.iter().filter(|&&x| x > 0.0).count() as f64 / policy.len() as f64;
        let mut differences = Vec::with_capacity(pairs.len());
        for (i, (p, u)) in policy.iter().zip(&uniform).enumerate() {
            differences.push(p - u);
            per_instance.push(vec![
                name.clone(),
                (s.topology_seed + i as u64).to_string(),
                format!("{p:.6}"),
                format!("{u:.6}"),
            ]);
        }
        let (low, high) = bootstrap_mean_ci(&differences, BOOTSTRAP_RESAMPLES, 0);
        rows.push(vec![
            name.clone(),
            s.topologies.to_string(),
            format!("{:.6}", mean(&policy)),
            format!(
                "{:.6}",
                policy.iter().copied().fold(f64::INFINITY, f64::min)
            ),
            format!(
                "{:.6}",
                policy.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            ),
            format!("{above:.3}"),
            format!("{:.6}", mean(&uniform)),
            better.to_string(),
            worse.to_string(),
            format!("{:.6}", mean(&differences)),
            finite_or_empty(low),
            finite_or_empty(high),
        ]);
        chart.push((
            name.clone(),
            vec![100.0 * mean(&uniform), 100.0 * mean(&policy)],
        ));
    }
    let table = shown_as_percent(&header, &rows, &[2, 3, 4, 6, 9, 10, 11]);
    let per_instance_header = ["model", "topology_seed", "policy", "uniform"];
    Ok(Output {
        name: "unseen-topologies",
        csv: csv(&header, &rows),
        svg: bar_chart(
            &format!(
                "mean speed-up over DP-NCCL (%) on {} unseen topologies, budget {} (uniform {})",
                s.topologies, s.budget, uniform_budget
            ),
            &["uniform priors", "GNN priors"],
            &chart,
        ),
        table,
        per_instance: Some(csv(&per_instance_header, &per_instance)),
    })
}

/// `x` to six places for a CSV cell, or an empty cell when it is no number (an interval of one
/// sample).
fn finite_or_empty(x: f64) -> String {
    match x.is_finite() {
        true => format!("{x:.6}"),
        false => String::new(),
    }
}

/// Resamples of [`bootstrap_mean_ci`] in the experiments' tables.
const BOOTSTRAP_RESAMPLES: usize = 10_000;

/// The 95% percentile-bootstrap interval of the mean of `xs` (Efron): the 2.5th and 97.5th
/// percentiles of the means of `resamples` resamples with replacement, drawn from `seed`. For
/// paired differences it says whether a gap in the means is larger than the topologies' spread.
/// Fewer than two values have no spread to resample: no interval (NaN, printed as a dash), where
/// one topology gave "+0.00% … +0.00%".
pub fn bootstrap_mean_ci(xs: &[f64], resamples: usize, seed: u64) -> (f64, f64) {
    if xs.len() < 2 || resamples == 0 {
        return (f64::NAN, f64::NAN);
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| {
            let sum: f64 = (0..xs.len())
                .map(|_| xs[rng.random_range(0..xs.len())])
                .sum();
            sum / xs.len() as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * resamples as f64) as usize).min(resamples - 1)];
    (at(0.025), at(0.975))
}

/// TAG Fig. 8: seconds to produce a strategy (grouping + search with the policy) on unseen
/// topologies, per model.
pub fn overhead(s: &Setup) -> Result<Output> {
    let header = [
        "model",
        "topologies",
        "mean_seconds",
        "max_seconds",
        "budget",
    ];
    let mut rows = Vec::new();
    let mut chart = Vec::new();
    for (name, graph) in &s.models {
        // One at a time: the time of a search alone on the machine.
        let times: Vec<f64> = (0..s.topologies)
            .map(|i| {
                s.search_unseen(graph, i, Some(s.policy), s.budget)
                    .map(|o| o.seconds)
            })
            .collect::<Result<_>>()?;
        let max = times.iter().copied().fold(0.0, f64::max);
        rows.push(vec![
            name.clone(),
            s.topologies.to_string(),
            format!("{:.3}", mean(&times)),
            format!("{max:.3}"),
            s.budget.to_string(),
        ]);
        chart.push((name.clone(), vec![mean(&times)]));
    }
    let table = shown_as_percent(&header, &rows, &[]);
    Ok(Output {
        name: "overhead",
        csv: csv(&header, &rows),
        svg: bar_chart(
            &format!(
                "seconds to a strategy on an unseen topology, budget {}",
                s.budget
            ),
            &["GNN + MCTS"],
            &chart,
        ),
        table,
        per_instance: None,
    })
}

/// TAG Table 8: for each model, a policy trained by `recipe` without it (run in
/// `<out>/holdout-<model>/`, `steps` Adam steps) places it on the cluster; against the policy
/// trained with it (`s.policy`) and uniform priors, same budget and seeds (the mean of
/// `s.seeds` searches each).
pub fn holdout_models(
    s: &Setup,
    recipe: &Recipe,
    steps: Option<u64>,
    out: &Path,
    mut progress: impl FnMut(&str),
) -> Result<Output> {
    let header = [
        "model",
        "held_out",
        "trained_with",
        "uniform",
        "seeds",
        "time_ratio",
        "training_steps",
    ];
    let mut rows = Vec::new();
    let mut chart = Vec::new();
    for (name, graph) in &s.models {
        let mut held = recipe.without_model(name);
        held.name = format!("{}-without-{name}", recipe.name);
        if held.training_set.models.is_empty() {
            return Err(TrainError::NothingLeft {
                recipe: recipe.name.clone(),
                model: name.to_string(),
            }
            .into());
        }
        if let Some(steps) = steps {
            held.steps = steps;
        }
        let run_dir = out.join(format!("holdout-{name}"));
        progress(&format!(
            "training without {name}: {} steps into {}",
            held.steps,
            run_dir.display()
        ));
        let trained = train(
            &held,
            &TrainOptions {
                run_dir: run_dir.clone(),
                resume: true,
                samples: None,
                gnn_device: "cpu".into(),
            },
            |_| {},
        )?;
        let policy = GnnPolicy::load(&trained.policy)?;
        // The mean over the same seeds as `search-efficiency`: one search's tie-breaks can move
        // a model's result by several points either way.
        let search = |p: Option<&GnnPolicy>| -> Result<f64> {
            let runs = seeded_searches(s, graph, p)?;
            Ok(mean(&runs.iter().map(|r| r.speedup).collect::<Vec<_>>()))
        };
        let without = search(Some(&policy))?;
        let with = search(Some(s.policy))?;
        let uniform = search(None)?;
        rows.push(vec![
            name.clone(),
            format!("{without:.6}"),
            format!("{with:.6}"),
            format!("{uniform:.6}"),
            s.seeds.to_string(),
            // The held-out policy's iteration time over the full policy's (speed-ups are over the
            // same DP-NCCL time).
            format!("{:.4}", (1.0 + with) / (1.0 + without)),
            held.steps.to_string(),
        ]);
        chart.push((
            name.clone(),
            vec![100.0 * uniform, 100.0 * without, 100.0 * with],
        ));
    }
    let table = shown_as_percent(&header, &rows, &[1, 2, 3]);
    Ok(Output {
        name: "holdout-models",
        csv: csv(&header, &rows),
        svg: bar_chart(
            &format!(
                "speed-up over DP-NCCL (%) on {}, budget {}",
                s.cluster.name, s.budget
            ),
            &["uniform priors", "trained without it", "trained with it"],
            &chart,
        ),
        table,
        per_instance: None,
    })
}
