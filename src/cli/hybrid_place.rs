//! `topoplace place` for a language model of a billion parameters or more, printed: the speed-up
//! over the best of Megatron-LM's default layout, FSDP and the Metis- and Sailor-style planners
//! first, then the plan per stage with the memory each GPU expects.

use std::path::Path;

use super::common::print_either;
use super::hybrid_plan::{stage_table, verdict};
use topoplace::api::HybridPlaced;
use topoplace::error::Result;

/// Writes the plan to `out` if given, then prints `placed`.
pub fn report(placed: &HybridPlaced, out: Option<&Path>, json: bool) -> Result<()> {
    if let Some(path) = out {
        placed.write_plan(path)?;
    }
    print_either(json, placed, text)
}

fn text(o: &HybridPlaced) -> String {
    let vs = match o.speedup_over_best_other {
        Some(s) => format!("{s:.3}× the best other method"),
        None if o.baselines.iter().any(|b| b.out_of_time) => {
            "no other method found a plan that fits in its share of the time".to_string()
        }
        None => "no other method fits".to_string(),
    };
    let others: Vec<String> = o
        .baselines
        .iter()
        .map(|b| match (b.iteration_ms, b.fits, b.out_of_time) {
            (Some(ms), true, _) => format!("{} {ms:.2} ms", b.method),
            (Some(ms), false, _) => format!("{} {ms:.2} ms out of memory", b.method),
            (None, _, true) => format!("{} none in time", b.method),
            (None, _, false) => format!("{} none", b.method),
        })
        .collect();
    format!(
        "{} on {}: {:.2} ms per iteration, {:.0} tokens/s ({vs}; {}), found in {:.1} s\n\
         hybrid plan: {}\n{}",
        o.model,
        o.cluster.name,
        o.iteration_ms,
        o.tokens_per_s,
        others.join(", "),
        o.search_seconds,
        verdict(&o.plan, &o.report),
        stage_table(&o.plan, &o.report, &o.cluster)
    )
}
