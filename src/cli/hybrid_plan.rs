//! `topoplace simulate --plan`: a hybrid-parallel plan of a zoo language model simulated at layer
//! granularity, printed per stage with the memory each GPU expects and what dominates it.

use std::path::Path;

use super::common::{Numerics, print_either};
use topoplace::api::{PlanSimulated, simulate_plan};
use topoplace::cluster::Cluster;
use topoplace::error::Result;
use topoplace::hybrid::{HybridPlan, HybridReport};
use topoplace::render::Table;

pub fn run(model: &str, cluster: &str, plan: &Path, numerics: Numerics, json: bool) -> Result<()> {
    let simulated = simulate_plan(model, cluster, plan, numerics)?;
    if let Some(note) = numerics.precision.fallback_note(&simulated.cluster) {
        errln!("warning: {note}");
    }
    print_either(json, &simulated, text)
}

fn gib(bytes: f64) -> String {
    format!("{:.1}", bytes / 2f64.powi(30))
}

fn text(o: &PlanSimulated) -> String {
    format!(
        "{} on {}: {:.2} ms per iteration, {:.0} tokens/s, {}\n{}",
        o.model,
        o.cluster.name,
        o.iteration_ms,
        o.tokens_per_s,
        verdict(&o.plan, &o.report),
        stage_table(&o.plan, &o.report, &o.cluster)
    )
}

/// Micro-batches and whether the plan fits (the tightest GPU when it does not).
pub fn verdict(plan: &HybridPlan, report: &HybridReport) -> String {
    let fits = match report.tightest() {
        Some(m) if !m.fits() => format!(
            "OUT OF MEMORY on GPU {}: {} GiB of {} GiB",
            m.device,
            gib(m.total),
            gib(m.capacity)
        ),
        _ => "fits".to_string(),
    };
    format!(
        "{} micro-batches of {} ({fits})",
        plan.micro_batches,
        plan.global_batch / plan.micro_batches
    )
}

/// The plan per stage: layers, GPUs, TP, DP, ZeRO, recomputation, sequence parallelism, times per
/// micro-batch and the tightest GPU's memory with what dominates it.
pub fn stage_table(plan: &HybridPlan, report: &HybridReport, cluster: &Cluster) -> String {
    let mut t = Table::new([
        "stage",
        "layers",
        "GPUs",
        "type",
        "TP",
        "DP",
        "ZeRO",
        "recompute",
        "SP",
        "fwd ms",
        "bwd ms",
        "TP comm ms",
        "DP sync ms",
        "optim ms",
        "peak GiB",
        "of",
        "dominated by",
    ]);
    for (i, (s, r)) in plan.stages.iter().zip(&report.stages).enumerate() {
        let Some(peak) = r
            .memory
            .iter()
            .max_by(|a, b| (a.total / a.capacity).total_cmp(&(b.total / b.capacity)))
        else {
            continue;
        };
        t.row(vec![
            i.to_string(),
            format!("{}..{}", s.layers[0], s.layers[1]),
            (s.tp() * s.dp()).to_string(),
            s.replicas[0]
                .first()
                .map_or("", |&d| cluster.devices[d].gpu.name)
                .to_string(),
            s.tp().to_string(),
            s.dp().to_string(),
            s.zero.level().to_string(),
            s.recompute.name().to_string(),
            if s.sequence_parallel { "yes" } else { "no" }.to_string(),
            format!("{:.2}", r.forward_us / 1e3),
            format!("{:.2}", r.backward_us / 1e3),
            format!("{:.2}", r.tp_comm_us / 1e3),
            format!("{:.2}", r.dp_sync_us / 1e3),
            format!("{:.2}", r.optimizer_us / 1e3),
            gib(peak.total),
            gib(peak.capacity),
            peak.dominant().to_string(),
        ]);
    }
    t.render()
}
