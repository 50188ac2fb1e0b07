//! `experiment layout-priors`: the layout policy's priors against uniform priors in the hybrid
//! layout tree ([`crate::hybrid::layout_search`]), TAG's claim carried to the hybrid space —
//! learned priors find a layout as fast with fewer simulations.
//!
//! Per language model, on random topologies: the tree with the policy at `budget` simulated
//! layouts and with uniform priors at `uniform_budget` (and at `budget`, the equal-budget
//! comparison), the fastest fitting plan of each. The table gives the mean iteration time of
//! each, the paired mean of `ln(T_uniform / T_policy)` (above zero: the policy's plans are faster)
//! with its 95% bootstrap interval over the topologies where both fit, and the topologies where
//! only one fits. Beside them, the named instances of the hybrid planner's acceptance.

use rayon::prelude::*;

use crate::cluster::{Cluster, TopologyDistribution, random_cluster_within};
use crate::error::Result;
use crate::experiment::{Output, bootstrap_mean_ci};
use crate::gnn::LayoutPolicy;
use crate::hybrid::{LayoutPriors, Planner, UniformPriors, layout_search};
use crate::precision::Precision;
use crate::render::{Table, bar_chart, csv, mean};
use crate::resolve::load_named_cluster;
use crate::zoo::{Framework, ZooOptions};

/// Resamples of the bootstrap intervals.
const RESAMPLES: usize = 10_000;

/// The hybrid planner's acceptance instances: model, cluster, global batch, precision.
pub const INSTANCES: [(&str, &str, u32, Precision); 4] = [
    ("llama-7b", "hetero-a100-v100", 64, Precision::Fp16),
    ("llama-13b", "hetero-a100-40-v100", 64, Precision::Fp16),
    ("llama-70b", "hetero-h100-a100", 256, Precision::Bf16),
    ("llama-70b", "mixed-1024", 1024, Precision::Bf16),
];

/// What the experiment runs.
pub struct LayoutPriorsSetup<'a> {
    /// The policy whose priors are compared.
    pub policy: &'a LayoutPolicy,
    /// Zoo language models, each planned on every random topology.
    pub models: Vec<String>,
    /// Global batch on the random topologies.
    pub batch: u32,
    /// Random topologies per model.
    pub topologies: u64,
    /// Seed of the first.
    pub topology_seed: u64,
    /// Their distribution.
    pub distribution: TopologyDistribution,
    /// Precision on the random topologies (the instances keep their own).
    pub precision: Precision,
    /// Kernels the models are built from.
    pub framework: Framework,
    /// The policy's simulations per search.
    pub budget: usize,
    /// Uniform priors' simulations per search.
    pub uniform_budget: usize,
    /// Whether to add the named instances ([`INSTANCES`]).
    pub instances: bool,
}

/// The iteration times (ms) one problem's three searches reached; `None` where nothing fit.
#[derive(Debug, Clone, Copy)]
struct Times {
    policy: Option<f64>,
    uniform: Option<f64>,
    uniform_equal: Option<f64>,
    /// Layouts each search simulated, in the same order.
    simulated: [usize; 3],
}

impl LayoutPriorsSetup<'_> {
    fn times(
        &self,
        model: &str,
        cluster: &Cluster,
        batch: u32,
        precision: Precision,
        seed: u64,
    ) -> Result<Times> {
        let cost = self.framework.cost_model(precision, None);
        let opts = ZooOptions {
            framework: self.framework,
            ..ZooOptions::default()
        };
        let run = |priors: &dyn LayoutPriors, budget: usize| -> Result<(Option<f64>, usize)> {
            let mut planner = Planner::new(model, &opts, precision, cluster, &cost, batch)?;
            let found = layout_search(&mut planner, priors, budget, seed)?;
            let ms = found
                .best
                .filter(|b| b.report.fits())
                .map(|b| b.report.iteration_us / 1e3);
            Ok((ms, found.simulated))
        };
        let (policy, a) = run(self.policy, self.budget)?;
        let (uniform, b) = run(&UniformPriors, self.uniform_budget)?;
        let (uniform_equal, c) = run(&UniformPriors, self.budget)?;
        Ok(Times {
            policy,
            uniform,
            uniform_equal,
            simulated: [a, b, c],
        })
    }
}

/// Paired statistics of the policy against one uniform column.
struct Paired {
    both: usize,
    policy_mean_ms: f64,
    uniform_mean_ms: f64,
    log_ratio: f64,
    low: f64,
    high: f64,
    only_policy: usize,
    only_uniform: usize,
}

fn paired(times: &[Times], uniform: impl Fn(&Times) -> Option<f64>) -> Paired {
    let both: Vec<(f64, f64)> = times
        .iter()
        .filter_map(|t| Some((t.policy?, uniform(t)?)))
        .collect();
    let ratios: Vec<f64> = both.iter().map(|(p, u)| (u / p).ln()).collect();
    let (low, high) = bootstrap_mean_ci(&ratios, RESAMPLES, 0);
    Paired {
        both: both.len(),
        policy_mean_ms: mean(&both.iter().map(|b| b.0).collect::<Vec<_>>()),
        uniform_mean_ms: mean(&both.iter().map(|b| b.1).collect::<Vec<_>>()),
        log_ratio: mean(&ratios),
        low,
        high,
        only_policy: times
            .iter()
            .filter(|t| t.policy.is_some() && uniform(t).is_none())
            .count(),
        only_uniform: times
            .iter()
            .filter(|t| t.policy.is_none() && uniform(t).is_some())
            .count(),
    }
}

const HEADER: [&str; 11] = [
    "model",
    "problems",
    "uniform_budget",
    "both_fit",
    "policy_mean_ms",
    "uniform_mean_ms",
    "log_ratio",
    "ci95_low",
    "ci95_high",
    "only_policy_fits",
    "only_uniform_fits",
];

/// The CSV row of one comparison. Where no problem fits under both priors the means, the ratio
/// and its interval have no value: left empty, where they read `NaN` before.
fn row(name: &str, problems: usize, budget: usize, p: &Paired) -> Vec<String> {
    // No pair, or one pair's interval: an empty cell, not NaN.
    let stat = |x: f64, digits: usize| match p.both == 0 || !x.is_finite() {
        true => String::new(),
        false => format!("{x:.digits$}"),
    };
    vec![
        name.to_string(),
        problems.to_string(),
        budget.to_string(),
        p.both.to_string(),
        stat(p.policy_mean_ms, 3),
        stat(p.uniform_mean_ms, 3),
        stat(p.log_ratio, 6),
        stat(p.low, 6),
        stat(p.high, 6),
        p.only_policy.to_string(),
        p.only_uniform.to_string(),
    ]
}

/// A CSV row as the table shows it: the ratio and its interval as percentages; `-` for what has
/// no value, and "none fit" for the ratio of a comparison no problem fits under both priors.
fn shown_row(r: &[String]) -> Vec<String> {
    let mut shown = r.to_vec();
    for c in 4..=8 {
        shown[c] = match (r[c].parse::<f64>(), c) {
            (Ok(x), 6..=8) => format!("{:+.2}%", 100.0 * x),
            (Ok(_), _) => r[c].clone(),
            (Err(_), 6) => "none fit".to_string(),
            (Err(_), _) => "-".to_string(),
        };
    }
    shown
}

/// Runs the experiment (module docs); `progress` hears each model as it starts.
pub fn layout_priors(s: &LayoutPriorsSetup, mut progress: impl FnMut(&str)) -> Result<Output> {
    let mut rows = Vec::new();
    let mut per_instance = Vec::new();
    let mut chart = Vec::new();
    let mut add = |name: &str, times: &[Times], seeds: &[String]| {
        let unequal = paired(times, |t| t.uniform);
        let equal = paired(times, |t| t.uniform_equal);
        rows.push(row(name, times.len(), s.uniform_budget, &unequal));
        rows.push(row(name, times.len(), s.budget, &equal));
        chart.push((
            name.to_string(),
            vec![100.0 * unequal.log_ratio, 100.0 * equal.log_ratio],
        ));
        for (t, seed) in times.iter().zip(seeds) {
            let ms = |x: Option<f64>| x.map_or("out of memory".into(), |v| format!("{v:.3}"));
            per_instance.push(vec![
                name.to_string(),
                seed.clone(),
                ms(t.policy),
                ms(t.uniform),
                ms(t.uniform_equal),
                t.simulated[0].to_string(),
                t.simulated[1].to_string(),
                t.simulated[2].to_string(),
            ]);
        }
    };
    for model in &s.models {
        progress(model);
        let times: Vec<Times> = (0..s.topologies)
            .into_par_iter()
            .map(|i| {
                let seed = s.topology_seed + i;
                let cluster = random_cluster_within(seed, s.distribution);
                s.times(model, &cluster, s.batch, s.precision, i)
            })
            .collect::<Result<_>>()?;
        let seeds: Vec<String> = (0..s.topologies)
            .map(|i| (s.topology_seed + i).to_string())
            .collect();
        add(model, &times, &seeds);
    }
    if s.instances {
        for (model, cluster, batch, precision) in INSTANCES {
            progress(&format!("{model} on {cluster}"));
            let c = load_named_cluster(cluster, "<instance>")?;
            let times = [s.times(model, &c, batch, precision, 0)?];
            add(
                &format!("{model} × {cluster}"),
                &times,
                &[cluster.to_string()],
            );
        }
    }
    let mut table = Table::new(HEADER);
    for r in &rows {
        table.row(shown_row(r));
    }
    Ok(Output {
        name: "layout-priors",
        csv: csv(&HEADER, &rows),
        svg: bar_chart(
            &format!(
                "ln(T uniform / T policy) (%), policy at {} simulated layouts",
                s.budget
            ),
            &[
                &format!("uniform at {}", s.uniform_budget),
                &format!("uniform at {}", s.budget),
            ],
            &chart,
        ),
        table,
        per_instance: Some(csv(
            &[
                "model",
                "topology",
                "policy_ms",
                "uniform_ms",
                "uniform_equal_budget_ms",
                "policy_simulated",
                "uniform_simulated",
                "uniform_equal_budget_simulated",
            ],
            &per_instance,
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A comparison no problem fits under both priors has no mean: its CSV cells are empty and
    /// its table says so, where both showed `NaN` and `NaN%`.
    #[test]
    fn a_comparison_nothing_fits_shows_no_nan() {
        let none = paired(&[], |t| t.uniform);
        let csv_row = row("llama-1b", 1, 2, &none);
        assert!(csv_row.iter().all(|c| !c.contains("NaN")), "{csv_row:?}");
        assert_eq!(csv_row[4..=8], ["", "", "", "", ""]);
        let shown = shown_row(&csv_row);
        assert_eq!(shown[4..=8], ["-", "-", "none fit", "-", "-"]);
        let some = Paired {
            both: 1,
            policy_mean_ms: 2.0,
            uniform_mean_ms: 3.0,
            log_ratio: 0.25,
            low: 0.1,
            high: 0.5,
            only_policy: 0,
            only_uniform: 0,
        };
        let shown = shown_row(&row("llama-1b", 1, 2, &some));
        assert_eq!(
            shown[4..=8],
            ["2.000", "3.000", "+25.00%", "+10.00%", "+50.00%"]
        );
    }
}
