//! `topoplace place` for a language model of a billion parameters or more: the joint search over
//! hybrid plans (pipeline stages × tensor × data parallelism, ZeRO, recomputation) against
//! Megatron-LM's default layout and FSDP, the speed-up over the faster of them first, then the
//! plan per stage with the memory each GPU expects.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::common::{Numerics, print_either};
use super::hybrid_plan::{stage_table, verdict};
use topoplace::cluster::Cluster;
use topoplace::error::{Result, SearchError};
use topoplace::hybrid::{HybridPlan, HybridReport, JOINT_SEARCH, Planned, Planner, plan_all};
use topoplace::io::write_atomic;
use topoplace::zoo::ZooOptions;

/// What is placed and how long the search may take.
pub struct HybridRequest<'a> {
    pub model: &'a str,
    pub cluster: &'a Cluster,
    pub global_batch: u32,
    pub numerics: Numerics,
    pub time: Option<f64>,
    pub out: Option<&'a Path>,
    pub json: bool,
}

#[derive(Serialize)]
struct Baseline {
    method: &'static str,
    iteration_ms: Option<f64>,
    fits: bool,
}

#[derive(Serialize)]
struct HybridPlaceOutput<'a> {
    model: &'a str,
    cluster: &'a str,
    iteration_ms: f64,
    tokens_per_s: f64,
    fits: bool,
    speedup_over_best_other: Option<f64>,
    baselines: Vec<Baseline>,
    search_seconds: f64,
    plan: &'a HybridPlan,
    report: &'a HybridReport,
}

pub fn run(r: HybridRequest) -> Result<()> {
    let started = Instant::now();
    let opts = ZooOptions {
        framework: r.numerics.framework,
        seq: r.numerics.seq,
        optimizer: r.numerics.optimizer,
        ..ZooOptions::default()
    };
    let cost = r.numerics.cost();
    let limit = r.time.unwrap_or(topoplace::hybrid::DEFAULT_SECONDS) * 0.95;
    let end = started + Duration::from_secs_f64(limit);
    let mut planner = Planner::new(
        r.model,
        &opts,
        r.numerics.precision,
        r.cluster,
        &cost,
        r.global_batch,
    )?;
    let placed = plan_all(&mut planner, Some(end))?;
    let Some(best) = placed.best() else {
        return Err(SearchError::DoesNotFit {
            model: r.model.to_string(),
            cluster: r.cluster.name.clone(),
            simulated: planner.judged(),
        }
        .into());
    };
    let best_other = placed.best_baseline_us();
    if let Some(path) = r.out {
        let text = serde_json::to_string_pretty(&best.plan)
            .map_err(|e| topoplace::error::Error::serialise("plan", e))?;
        write_atomic(path, text.as_bytes())?;
    }
    let seq = planner_seq(&mut planner, r.global_batch)?;
    let Planned { plan, report } = best;
    let out = HybridPlaceOutput {
        model: r.model,
        cluster: &r.cluster.name,
        iteration_ms: report.iteration_us / 1e3,
        tokens_per_s: f64::from(r.global_batch) * seq / (report.iteration_us * 1e-6),
        fits: report.fits(),
        speedup_over_best_other: best_other.map(|t| t / report.iteration_us),
        baselines: placed
            .methods
            .iter()
            .filter(|m| m.method != JOINT_SEARCH)
            .map(|m| Baseline {
                method: m.method,
                iteration_ms: m.planned.as_ref().map(|p| p.report.iteration_us / 1e3),
                fits: m.planned.as_ref().is_some_and(|p| p.report.fits()),
            })
            .collect(),
        search_seconds: started.elapsed().as_secs_f64(),
        plan,
        report,
    };
    print_either(r.json, &out, |o| text(o, r.cluster))
}

fn planner_seq(planner: &mut Planner, batch: u32) -> Result<f64> {
    Ok(planner.seq(batch)? as f64)
}

fn text(o: &HybridPlaceOutput, cluster: &Cluster) -> String {
    let vs = match o.speedup_over_best_other {
        Some(s) => format!("{s:.3}× the best other method"),
        None => "no other method fits".to_string(),
    };
    let others: Vec<String> = o
        .baselines
        .iter()
        .map(|b| match (b.iteration_ms, b.fits) {
            (Some(ms), true) => format!("{} {ms:.2} ms", b.method),
            (Some(ms), false) => format!("{} {ms:.2} ms out of memory", b.method),
            (None, _) => format!("{} none", b.method),
        })
        .collect();
    format!(
        "{} on {}: {:.2} ms per iteration, {:.0} tokens/s ({vs}; {}), found in {:.1} s\n\
         hybrid plan: {}\n{}",
        o.model,
        o.cluster,
        o.iteration_ms,
        o.tokens_per_s,
        others.join(", "),
        o.search_seconds,
        verdict(o.plan, o.report),
        stage_table(o.plan, o.report, cluster)
    )
}
