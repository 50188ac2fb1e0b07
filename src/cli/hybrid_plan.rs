//! `topoplace simulate --plan`: a hybrid-parallel plan of a zoo language model simulated at layer
//! granularity, printed per stage with the memory each GPU expects and what dominates it.

use std::path::Path;

use serde::Serialize;

use super::common::{Numerics, print_either};
use topoplace::cluster::Cluster;
use topoplace::error::Result;
use topoplace::hybrid::{HybridModel, HybridPlan, HybridReport, estimate, load_plan};
use topoplace::render::Table;
use topoplace::resolve::load_named_cluster;
use topoplace::zoo::ZooOptions;

#[derive(Serialize)]
struct PlanOutput<'a> {
    model: &'a str,
    #[serde(serialize_with = "cluster_name")]
    cluster: &'a Cluster,
    iteration_ms: f64,
    tokens_per_s: f64,
    fits: bool,
    plan: &'a HybridPlan,
    report: &'a HybridReport,
}

pub fn run(model: &str, cluster: &str, plan: &Path, numerics: Numerics, json: bool) -> Result<()> {
    let source = plan.display().to_string();
    let plan = load_plan(plan)?;
    let cluster = load_named_cluster(cluster, "--cluster")?;
    numerics.check(&cluster)?;
    plan.check_micro_batches(&source)?;
    let opts = ZooOptions {
        framework: numerics.framework,
        seq: numerics.seq,
        optimizer: numerics.optimizer,
        ..ZooOptions::default()
    };
    let micro_batch = plan.global_batch / plan.micro_batches;
    let hybrid = HybridModel::from_zoo(model, micro_batch, &opts, numerics.precision)?;
    hybrid.check(&plan, cluster.devices.len(), &source)?;
    let cost = numerics.cost();
    let report = estimate(&hybrid, &cluster, &cost, &plan);
    let seq = hybrid.seq() as f64;
    let out = PlanOutput {
        model,
        cluster: &cluster,
        iteration_ms: report.iteration_us / 1e3,
        tokens_per_s: f64::from(plan.global_batch) * seq / (report.iteration_us * 1e-6),
        fits: report.fits(),
        plan: &plan,
        report: &report,
    };
    print_either(json, &out, text)
}

fn gib(bytes: f64) -> String {
    format!("{:.1}", bytes / 2f64.powi(30))
}

fn text(o: &PlanOutput) -> String {
    format!(
        "{} on {}: {:.2} ms per iteration, {:.0} tokens/s, {}\n{}",
        o.model,
        o.cluster.name,
        o.iteration_ms,
        o.tokens_per_s,
        verdict(o.plan, o.report),
        stage_table(o.plan, o.report, o.cluster)
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
            format!("{:?}", s.recompute).to_lowercase(),
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

fn cluster_name<S: serde::Serializer>(c: &&Cluster, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&c.name)
}
