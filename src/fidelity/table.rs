//! The fidelity table: every scenario simulated next to its published figure.

use serde::Serialize;

use super::measure::simulate;
use super::scenarios::{Role, Scenario};
use crate::cost::CostModel;
use crate::error::Result;

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FidelityRow {
    pub scenario: String,
    pub metric: &'static str,
    pub simulated: f64,
    pub published: f64,
    /// simulated / published.
    pub ratio: f64,
    pub oom: bool,
    /// "calibration" or "held-out".
    pub role: &'static str,
    pub source: &'static str,
    /// The modelling term missing where the simulator misses by more than 25%.
    pub missing: Option<&'static str>,
}

/// Simulate every scenario.
pub fn fidelity_table(scenarios: &[Scenario], cost: &CostModel) -> Result<Vec<FidelityRow>> {
    scenarios
        .iter()
        .map(|s| {
            let out = simulate(s, cost)?;
            Ok(FidelityRow {
                scenario: s.label(),
                metric: s.metric.unit(),
                simulated: out.value,
                published: s.published,
                ratio: out.value / s.published,
                oom: out.oom,
                role: match s.role {
                    Role::Calibration => "calibration",
                    Role::HeldOut => "held-out",
                },
                source: s.source,
                missing: s.missing,
            })
        })
        .collect()
}

/// The table as Markdown, with a summary line per role.
pub fn render_markdown(rows: &[FidelityRow]) -> String {
    let mut out = String::from(
        "| scenario | metric | simulated | published | ratio | role | source | missing term |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let oom = if r.oom { " (OOM)" } else { "" };
        out += &format!(
            "| {} | {} | {:.1}{oom} | {} | {:.2} | {} | {} | {} |\n",
            r.scenario,
            r.metric,
            r.simulated,
            r.published,
            r.ratio,
            r.role,
            r.source,
            r.missing.unwrap_or("")
        );
    }
    for role in ["calibration", "held-out"] {
        let ratios: Vec<f64> = rows
            .iter()
            .filter(|r| r.role == role)
            .map(|r| r.ratio)
            .collect();
        if ratios.is_empty() {
            continue;
        }
        let within = |tol: f64| ratios.iter().filter(|r| (*r - 1.0).abs() <= tol).count();
        let gm = (ratios.iter().map(|r| r.ln().abs()).sum::<f64>() / ratios.len() as f64).exp();
        out += &format!(
            "\n{role}: {} scenarios, {} within 15%, {} within 25%, geometric-mean error ×{gm:.3}",
            ratios.len(),
            within(0.15),
            within(0.25)
        );
    }
    out + "\n"
}
