//! A plan as the strategy it stands for: one op group per stage, data-parallel on its unit,
//! simulated.

use super::chunks::Chunks;
use super::plan::{BestPipeline, Plan, stage_of_chunk};
use crate::cluster::RouteTable;
use crate::error::Result;
use crate::evaluate::{Placement, Problem, busy_within};
use crate::strategy::{
    AllReducePacking, BatchSplit, GroupDecision, Pipeline, ReplicationOption, Strategy,
};

/// A simulated plan and each GPU's busy µs; `None` when given up past its limit.
pub(super) type Scored = Option<(BestPipeline, Vec<f64>)>;

/// The plan as a strategy with its gradients packed by `packing`, simulated; `None` once its
/// iteration is past `limit_us`. With it, each GPU's busy time.
pub(super) fn score(
    p: &Problem,
    routes: &RouteTable,
    c: &Chunks,
    plan: &Plan,
    packing: AllReducePacking,
    limit_us: f64,
) -> Result<Scored> {
    let mut strategy = strategy(p, c, plan);
    strategy.allreduce = packing;
    let placement = Placement::plain(strategy.clone(), "");
    let Some((timing, busy)) = busy_within(p, routes, &placement, limit_us)? else {
        return Ok(None);
    };
    let stages: Vec<String> = plan.units.iter().map(|u| u.label.clone()).collect();
    let best = BestPipeline {
        strategy,
        time_us: timing.iteration_us,
        fits: timing.fits,
        note: format!(
            "pipeline-dp: {} stages ({}), {} micro-batches, {}, data-parallel inside each",
            plan.units.len(),
            stages.join(" → "),
            plan.micro_batches,
            plan.schedule.name()
        ),
    };
    Ok(Some((best, busy)))
}

/// The busiest of each stage's GPUs' busy time (`busy` per GPU), µs.
pub(super) fn stage_busy(plan: &Plan, busy: &[f64]) -> Vec<f64> {
    plan.units
        .iter()
        .map(|u| u.devices.iter().map(|&d| busy[d]).fold(0.0, f64::max))
        .collect()
}

/// One op group per stage, data-parallel (AllReduce, speed-proportional shares) on its unit.
pub(super) fn strategy(p: &Problem, c: &Chunks, plan: &Plan) -> Strategy {
    let g = p.graph;
    let op_group: Vec<u32> = c
        .of_op
        .iter()
        .map(|&k| stage_of_chunk(&plan.ends, k) as u32)
        .collect();
    let decisions = plan
        .units
        .iter()
        .map(|u| {
            let mut devices = u.devices.clone();
            devices.sort_unstable();
            GroupDecision {
                devices,
                option: ReplicationOption::AllReduce,
            }
        })
        .collect();
    let mut s = Strategy::new(
        "pipeline-dp",
        op_group,
        decisions,
        BatchSplit::Proportional,
        g.len(),
        p.cluster.num_devices(),
    )
    .expect("a plan's stages are valid groups");
    s.allreduce = AllReducePacking::PerTensor;
    let stages: Vec<Vec<usize>> = (0..plan.units.len()).map(|s| vec![s]).collect();
    s.pipeline = Some(
        Pipeline::new(
            "pipeline-dp",
            &stages,
            plan.micro_batches,
            plan.schedule,
            plan.units.len(),
            g.batch_size,
        )
        .expect("a plan's micro-batch count divides the batch"),
    );
    s
}
