//! A candidate pipeline: its stages (contiguous chunk ranges on units), micro-batch count and
//! schedule, cut by dynamic programming into balanced stages and estimated ([`super`]'s docs).

use super::chunks::{Chunks, running_sum};
use crate::cluster::{Cluster, GpuSpec};
use crate::cost::collective::ring_allreduce_us;
use crate::strategy::{Schedule, Strategy};

/// Most micro-batches tried.
pub(crate) const MAX_MICRO_BATCHES: u32 = 32;

/// The best pipeline found and its simulated time.
#[derive(Debug, Clone)]
pub(crate) struct BestPipeline {
    /// The pipeline as a strategy: its stages, micro-batch count and schedule.
    pub strategy: Strategy,
    /// Simulated iteration time, µs.
    pub time_us: f64,
    /// Whether every GPU's memory held in the simulation.
    pub fits: bool,
    /// One-line description: stages and their units, micro-batches, schedule.
    pub note: String,
}

/// A unit a stage runs on: a device group, or one GPU.
#[derive(Debug, Clone)]
pub(super) struct Unit {
    pub(super) devices: Vec<usize>,
    pub(super) gpu: GpuSpec,
    pub(super) memory_bytes: f64,
    pub(super) label: String,
    /// The whole device group when this unit is half of one ([`super::candidates::wrapped`]).
    pub(super) whole: Option<(Vec<usize>, String)>,
}

/// A plan simulated: its time (µs) and fit.
pub(super) type Tried = (Plan, f64, bool);

/// A candidate: stages (chunk ranges on units) with a micro-batch count and its estimate.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) units: Vec<Unit>,
    /// End chunk (exclusive) of each stage.
    pub(super) ends: Vec<usize>,
    pub(super) micro_batches: u32,
    pub(super) schedule: Schedule,
    pub(super) estimate_us: f64,
    /// A folded twin's wrapped units (its own first and last stages are the whole group).
    pub(super) unfolded: Option<Vec<Unit>>,
}

/// Micro-batch counts that divide the batch, from the stage count up (fewer leaves most of the
/// pipeline idle) to [`MAX_MICRO_BATCHES`].
pub(super) fn micro_batch_counts(batch: u32, stages: usize) -> Vec<u32> {
    (1..=MAX_MICRO_BATCHES.min(batch))
        .filter(|&m| batch.is_multiple_of(m) && m as usize >= stages.min(batch as usize))
        .collect()
}

/// The cut of the chunks into `order.len()` stages that minimises the slowest stage's time per
/// micro-batch (each stage within its GPUs' memory), by dynamic programming; `None` when no cut
/// fits. Under 1F1B a stage waits for its sends (it has only as many micro-batches in flight as
/// the round trip through the later stages needs without them), so a stage's time is its
/// compute plus its send; under GPipe the sends overlap the next forwards (or backwards), so it
/// is the larger of the two, and the fill and drain add each stage's compute and send once.
pub(super) fn balanced(
    c: &Chunks,
    order: &[Unit],
    m: u32,
    schedule: Schedule,
    cluster: &Cluster,
) -> Option<Plan> {
    let (n, p) = (c.grad_bytes.len(), order.len());
    if n < p {
        return None;
    }
    // Sums over chunks `a..b` as `prefix[b] − prefix[a]`.
    let prefix = |v: &[f64]| -> Vec<f64> { std::iter::once(0.0).chain(running_sum(v)).collect() };
    // Each stage's GPU type, looked up once rather than in the dynamic programme's loop.
    let type_of: Vec<usize> = order
        .iter()
        .map(|u| c.types.iter().position(|x| x == u.gpu.name).unwrap())
        .collect();
    let work = c.work(m);
    let [fixed, scaled, accumulate] = [&work.fixed_us, &work.scaled_us, &c.accumulate_us]
        .map(|per_type| per_type.iter().map(|w| prefix(w)).collect::<Vec<_>>());
    // Accumulations per micro-batch: `m − 1` over the iteration.
    let accumulations = f64::from(m - 1) / f64::from(m);
    let (resident, activation) = (prefix(&c.resident_bytes), prefix(&c.activation_bytes));
    // (compute, send) of one micro-batch on stage `s` holding chunks `a..b`; `None` when it does
    // not fit.
    let stage_parts = |s: usize, a: usize, b: usize| -> Option<(f64, f64)> {
        let (u, t) = (&order[s], type_of[s]);
        let gpus = u.devices.len() as f64;
        let compute = fixed[t][b] - fixed[t][a]
            + (scaled[t][b] - scaled[t][a]) / gpus
            + accumulations * (accumulate[t][b] - accumulate[t][a]);
        let in_flight = f64::from(schedule.in_flight(s, p, m));
        let memory = resident[b] - resident[a]
            + in_flight * (activation[b] - activation[a]) / gpus / f64::from(m);
        if memory > u.memory_bytes {
            return None;
        }
        let send = match order.get(s + 1) {
            Some(next) if b < n => {
                let bytes = c.cut_bytes[b - 1] / f64::from(m);
                cluster.transfer_us(u.devices[0], next.devices[0], bytes)
            }
            _ => 0.0,
        };
        Some((compute, send))
    };
    let stage_time = |s: usize, a: usize, b: usize| match stage_parts(s, a, b) {
        None => f64::INFINITY,
        Some((compute, send)) => match schedule {
            Schedule::OneFOneB => compute + send,
            Schedule::GPipe => compute.max(send),
        },
    };
    // best[s][i]: the slowest stage of the best cut of chunks 0..i into stages 0..=s.
    let mut best = vec![vec![f64::INFINITY; n + 1]; p];
    let mut from = vec![vec![0usize; n + 1]; p];
    for (i, slot) in best[0].iter_mut().enumerate().skip(1) {
        *slot = stage_time(0, 0, i);
    }
    for s in 1..p {
        for i in (s + 1)..=n {
            for j in s..i {
                let t = best[s - 1][j].max(stage_time(s, j, i));
                if t < best[s][i] {
                    best[s][i] = t;
                    from[s][i] = j;
                }
            }
        }
    }
    let slowest = best[p - 1][n];
    if !slowest.is_finite() {
        return None;
    }
    let mut ends = vec![n; p];
    for s in (1..p).rev() {
        ends[s - 1] = from[s][ends[s]];
    }
    let allreduce = (0..p)
        .map(|s| {
            let grads: f64 = c.grad_bytes[stage_start(&ends, s)..ends[s]].iter().sum();
            ring_allreduce_us(cluster, &order[s].devices, grads)
        })
        .fold(0.0, f64::max);
    let stage_of = |k: usize| stage_of_chunk(&ends, k);
    let once: f64 = c
        .once
        .iter()
        .map(|t| {
            let from = &order[stage_of(t.home)];
            let mut stages: Vec<usize> = t.readers.iter().map(|&k| stage_of(k)).collect();
            stages.dedup();
            stages
                .into_iter()
                .filter(|&s| s != stage_of(t.home))
                .map(|s| cluster.transfer_us(from.devices[0], order[s].devices[0], t.bytes))
                .sum::<f64>()
        })
        .sum();
    let pipeline_us = match schedule {
        Schedule::OneFOneB => f64::from(m + p as u32 - 1) * slowest,
        Schedule::GPipe => {
            let fill: f64 = (0..p)
                .map(|s| {
                    let a = stage_start(&ends, s);
                    let (compute, send) = stage_parts(s, a, ends[s]).unwrap_or_default();
                    compute + send
                })
                .sum();
            f64::from(m - 1) * slowest + fill
        }
    };
    Some(Plan {
        units: order.to_vec(),
        ends,
        micro_batches: m,
        schedule,
        estimate_us: pipeline_us + allreduce + once,
        unfolded: None,
    })
}

/// The stage holding chunk `k`, stages ending (exclusive) at `ends`.
pub(super) fn stage_of_chunk(ends: &[usize], k: usize) -> usize {
    ends.iter().position(|&e| k < e).unwrap()
}

/// The first chunk of stage `s`.
fn stage_start(ends: &[usize], s: usize) -> usize {
    if s == 0 { 0 } else { ends[s - 1] }
}
