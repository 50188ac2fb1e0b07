//! `<run>/metrics.csv` and `<run>/loss.svg`: one row per Adam step, and its chart.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::io::write_atomic;
use crate::render::{Series, csv, line_chart};

/// One row of `<run>/metrics.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepMetrics {
    /// Adam steps taken so far (1-based).
    pub step: u64,
    pub generation: u64,
    /// Mean cross-entropy of the batch (NaN when the replay buffer is empty).
    pub loss: f64,
    /// Mean entropy of the batch's targets: the lowest loss reachable.
    pub target_entropy: f64,
    /// Targets in the replay buffer.
    pub replay: usize,
    /// Mean `T_DP / T − 1` of this step's games.
    pub game_speedup: f64,
    /// Mean speed-up over DP-NCCL on the held-out topologies with the policy's priors and with
    /// uniform ones, at the same budget (only on evaluation steps).
    pub eval_policy: Option<f64>,
    pub eval_uniform: Option<f64>,
}

const CSV_HEADER: [&str; 8] = [
    "step",
    "generation",
    "loss",
    "target_entropy",
    "replay",
    "game_speedup",
    "eval_policy",
    "eval_uniform",
];

impl StepMetrics {
    /// The row's `metrics.csv` fields.
    fn csv_fields(&self) -> Vec<String> {
        let opt = |x: Option<f64>| x.map(|v| format!("{v:.6}")).unwrap_or_default();
        vec![
            self.step.to_string(),
            self.generation.to_string(),
            format!("{:.6}", self.loss),
            format!("{:.6}", self.target_entropy),
            self.replay.to_string(),
            format!("{:.6}", self.game_speedup),
            opt(self.eval_policy),
            opt(self.eval_uniform),
        ]
    }
}

/// `<run>/metrics.csv`, rewritten whole (atomically) after every step.
pub(super) fn write_metrics(run_dir: &Path, rows: &[StepMetrics]) -> Result<()> {
    let fields: Vec<Vec<String>> = rows.iter().map(StepMetrics::csv_fields).collect();
    let text = csv(&CSV_HEADER, &fields);
    write_atomic(&run_dir.join("metrics.csv"), text.as_bytes())?;
    write_atomic(&run_dir.join("loss.svg"), loss_chart(rows).as_bytes())
}

/// The loss, its floor (the targets' entropy) and the held-out speed-ups against the step.
pub(crate) fn loss_chart(rows: &[StepMetrics]) -> String {
    let line = |name, colour, f: &dyn Fn(&StepMetrics) -> Option<f64>| Series {
        name,
        colour,
        points: rows
            .iter()
            .filter_map(|r| f(r).map(|y| (r.step as f64, y)))
            .collect(),
    };
    line_chart(
        "self-play training: cross-entropy to the visit distributions",
        "Adam step",
        &[
            line("loss", "#1f77b4", &|r| Some(r.loss)),
            line("target entropy", "#7f7f7f", &|r| Some(r.target_entropy)),
            line("held-out T_DP/T − 1, GNN", "#2ca02c", &|r| r.eval_policy),
            line("held-out T_DP/T − 1, uniform", "#d62728", &|r| {
                r.eval_uniform
            }),
        ],
    )
}
