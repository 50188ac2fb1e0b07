//! `experiment reference-best`: how far `place`'s default search is from what its search space
//! holds. Per model, on one cluster: the fastest heuristic (the best other method `place`
//! reports), `place` at its defaults (seed 0), and a reference-best — the fastest of `seeds`
//! searches with ten times the tree budget and ten times the polish budget. A default within a
//! few percent of the reference says the space holds little more; a wide gap says the default
//! budget leaves speed on the table.

use std::time::Instant;

use crate::error::Result;
use crate::experiment::{Output, Setup};
use crate::mcts::{DEFAULT_POLISH, MctsConfig, SearchResult};
use crate::placers::heuristics::best_heuristic;
use crate::placers::tag::tag_search;
use crate::problem::Problem;
use crate::render::{Table, bar_chart, csv};
use crate::units::to_ms;

/// How much longer the reference searches run than the default, in tree and polish budget.
pub(crate) const REFERENCE_FACTOR: usize = 10;

/// The reference-best table for every model of `s` on `s.cluster`.
pub fn reference_best(s: &Setup) -> Result<Output> {
    let header = [
        "model",
        "cluster",
        "best_heuristic",
        "heuristic_ms",
        "default_ms",
        "reference_ms",
        "default_over_reference",
        "default_over_heuristic",
        "reference_seeds",
        "default_seconds",
        "reference_seconds",
    ];
    let mut rows = Vec::new();
    let mut chart = Vec::new();
    for (name, graph) in &s.models {
        let p = Problem {
            graph,
            cluster: s.cluster,
            cost: &s.cost,
        };
        let began = Instant::now();
        let default = MctsConfig {
            iterations: s.budget,
            ..MctsConfig::default()
        };
        let (found, heuristics) = tag_search(&p, s.groups, default, Some(s.policy), |_| {})?;
        let default_seconds = began.elapsed().as_secs_f64();
        let (heuristic, heuristic_us) = best_heuristic(&heuristics);
        let began = Instant::now();
        let mut reference = found.iteration_us();
        for seed in 0..s.seeds {
            let long = MctsConfig {
                iterations: REFERENCE_FACTOR * s.budget,
                polish: REFERENCE_FACTOR * DEFAULT_POLISH,
                seed,
                ..MctsConfig::default()
            };
            let (r, _) = tag_search(&p, s.groups, long, Some(s.policy), |_| {})?;
            reference = reference.min(time_if_fits(&r));
        }
        let default_us = time_if_fits(&found);
        rows.push(vec![
            name.clone(),
            s.cluster.name.clone(),
            heuristic,
            format!("{:.3}", to_ms(heuristic_us)),
            format!("{:.3}", to_ms(default_us)),
            format!("{:.3}", to_ms(reference)),
            format!("{:.4}", default_us / reference),
            format!("{:.4}", default_us / heuristic_us),
            s.seeds.to_string(),
            format!("{default_seconds:.1}"),
            format!("{:.1}", began.elapsed().as_secs_f64()),
        ]);
        chart.push((
            name.clone(),
            vec![to_ms(heuristic_us), to_ms(default_us), to_ms(reference)],
        ));
    }
    let mut table = Table::new(header);
    for r in &rows {
        table.row(r.clone());
    }
    Ok(Output {
        name: "reference-best",
        csv: csv(&header, &rows),
        svg: bar_chart(
            &format!(
                "iteration time (ms) on {}: best heuristic, place (budget {}), reference ({}x, {} seeds)",
                s.cluster.name, s.budget, REFERENCE_FACTOR, s.seeds
            ),
            &["best heuristic", "place", "reference"],
            &chart,
        ),
        table,
        per_instance: None,
    })
}

/// The result's iteration time, or infinity when it runs out of memory.
fn time_if_fits(r: &SearchResult) -> f64 {
    if r.fits {
        r.iteration_us()
    } else {
        f64::INFINITY
    }
}
