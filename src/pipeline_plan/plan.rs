//! The candidates (unit orders, micro-batch counts), each cut into balanced stages by dynamic
//! programming and estimated; the best few simulated ([`super`]'s docs).

use std::time::Instant;

use rayon::prelude::*;

use super::chunks::{Chunks, chunk, running_sum};
use super::frames::{FRAMES, Frame, PipelineFrames};
use super::refine::{REFINE_SIMULATIONS, refined};
use super::simulated_plan::{Simulated, fastest, fastest_noting};
use crate::cluster::{Cluster, GpuSpec, RouteTable};
use crate::cost::collective::ring_allreduce_us;
use crate::data_parallel::PACKINGS;
use crate::error::{Result, SearchError};
use crate::evaluate::Problem;
use crate::strategy::{AllReducePacking, Schedule, Strategy};

/// Most stages: the prefixes of the unit orders stop here, so planning stays cheap on clusters of
/// hundreds of machines (a deeper pipeline's bubble and per-stage launches outweigh its GPUs).
pub const MAX_STAGES: usize = 16;
/// Most micro-batches tried.
pub const MAX_MICRO_BATCHES: u32 = 32;
/// Candidates simulated, best estimates first.
pub const SIMULATED: usize = 8;
/// Candidates simulated side by side, a round at a time: a round's simulations are given up past
/// the best of the rounds before it, so the plans the tree gets as frames (those simulated to
/// their end) depend on the round's size. A count, not the machine's threads, so the frames do
/// not depend on the thread count (with one round per thread, 1 and 3 threads gave GPT other
/// frames: `tests/pipeline_tree.rs`). Two is the round two cores had.
pub const SIMULATED_PER_ROUND: usize = 2;

/// The best pipeline found and its simulated time.
#[derive(Debug, Clone)]
pub struct BestPipeline {
    pub strategy: Strategy,
    pub time_us: f64,
    pub fits: bool,
    pub note: String,
}

/// A unit a stage runs on: a device group, or one GPU.
#[derive(Debug, Clone)]
pub(super) struct Unit {
    pub(super) devices: Vec<usize>,
    gpu: GpuSpec,
    memory_bytes: f64,
    pub(super) label: String,
    /// The whole device group when this unit is half of one ([`wrapped`]).
    whole: Option<(Vec<usize>, String)>,
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
    estimate_us: f64,
    /// A folded twin's wrapped units (its own first and last stages are the whole group).
    unfolded: Option<Vec<Unit>>,
}

/// The best pipeline over the candidates (module docs); `None` on fewer than two GPUs or when
/// the batch has no micro-batch count to cut.
pub fn best_pipeline(
    p: &Problem,
    routes: &RouteTable,
    deadline: Option<Instant>,
) -> Result<Option<BestPipeline>> {
    best_pipeline_refined_by(p, routes, deadline, REFINE_SIMULATIONS)
}

/// [`best_pipeline`] with at most `refine_simulations` simulations refining its cut (none: the
/// dynamic programme's cut as it is).
pub fn best_pipeline_refined_by(
    p: &Problem,
    routes: &RouteTable,
    deadline: Option<Instant>,
    refine_simulations: usize,
) -> Result<Option<BestPipeline>> {
    let found = best_pipeline_with_frames(p, routes, deadline, refine_simulations)?;
    Ok(found.map(|(best, _)| best))
}

/// [`best_pipeline_refined_by`] and the frames TAG's tree searches from it ([`PipelineFrames`]):
/// the best plan as refined, then the fastest simulated plan of each other stage placement
/// (units and schedule), [`FRAMES`] at most.
pub fn best_pipeline_with_frames(
    p: &Problem,
    routes: &RouteTable,
    deadline: Option<Instant>,
    refine_simulations: usize,
) -> Result<Option<(BestPipeline, PipelineFrames)>> {
    let units = units(p.cluster);
    if units.len() < 2 {
        return Ok(None);
    }
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Err(SearchError::OutOfTime.into());
    }
    let counts = micro_batch_counts(p.graph.batch_size, 2);
    let chunks = chunk(p, &gpu_types(&units), &counts)?;
    let mut plans: Vec<Plan> = orders(&units)
        .into_par_iter()
        .flat_map_iter(|order| {
            let counts = micro_batch_counts(p.graph.batch_size, order.len());
            counts
                .into_iter()
                .flat_map(|m| Schedule::ALL.map(|schedule| (m, schedule)))
                .filter_map(|(m, schedule)| {
                    balanced(&chunks, &order, m, schedule, (p.cluster, routes))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    plans.sort_by(|a, b| a.estimate_us.total_cmp(&b.estimate_us));
    let plans = with_folded_twins(best_of_each_schedule(plans));
    let mut tried = Vec::new();
    let rc = (routes, &chunks);
    let Some((best, plan)) = simulated(p, rc, &plans, None, deadline, &mut tried)? else {
        return Ok(None);
    };
    let (best, plan, moves, refining) = if deadline.is_some_and(|d| Instant::now() >= d) {
        (best, plan, 0, Vec::new())
    } else {
        let near = other_schedule(&plan, &chunks, (p.cluster, routes));
        let kept = simulated(
            p,
            rc,
            near.as_slice(),
            Some((best, plan)),
            deadline,
            &mut tried,
        )?;
        let (best, plan) = kept.expect("the best so far is kept");
        let best = repacked(p, rc, (best, &plan))?;
        refined(p, rc, (best, plan), (refine_simulations, deadline))?
    };
    let mut best = best.pipeline;
    best.note = format!(
        "{}{}, {}",
        best.note,
        match moves {
            0 => String::new(),
            1 => ", its cut moved once on the simulator".to_string(),
            n => format!(", its cut moved {n} times on the simulator"),
        },
        packing_words(best.strategy.allreduce),
    );
    let frames = frames(chunks, (&best, plan, refining), tried, p.graph.batch_size);
    Ok(Some((best, frames)))
}

/// The frames: `plan` (simulated as `best`, `refining` the moves its refinement simulated) first,
/// then the fastest of `tried` of each other stage placement, [`FRAMES`] in all.
fn frames(
    chunks: Chunks,
    (best, plan, refining): (&BestPipeline, Plan, Vec<Tried>),
    mut tried: Vec<Tried>,
    batch: u32,
) -> PipelineFrames {
    tried.sort_by(|a, b| {
        let (a, b) = ((a.1, a.2), (b.1, b.2));
        // Fitting first, then faster.
        b.1.cmp(&a.1).then(a.0.total_cmp(&b.0))
    });
    let mut kept = vec![Frame {
        plan,
        packing: best.strategy.allreduce,
        time_us: best.time_us,
        fits: best.fits,
        known: refining,
    }];
    for (plan, time_us, fits) in tried {
        if kept.len() == FRAMES {
            break;
        }
        let placed_alike =
            |k: &Frame| same_units(&k.plan.units, &plan.units) && k.plan.schedule == plan.schedule;
        if !kept.iter().any(placed_alike) {
            kept.push(Frame {
                plan,
                packing: AllReducePacking::PerTensor,
                time_us,
                fits,
                known: Vec::new(),
            });
        }
    }
    PipelineFrames::new(chunks, kept, batch)
}

/// `plans` simulated a round ([`SIMULATED_PER_ROUND`]) at a time, in order, and the fastest
/// kept with its plan (`best` the fastest so far, if any); a deadline stops between rounds once
/// one has run (one already past when planning starts gives up). A plan is kept only when
/// strictly faster than the best so far, so past that time its simulation is given up.
fn simulated(
    p: &Problem,
    (routes, chunks): (&RouteTable, &Chunks),
    plans: &[Plan],
    mut best: Option<(Simulated, Plan)>,
    deadline: Option<Instant>,
    tried: &mut Vec<Tried>,
) -> Result<Option<(Simulated, Plan)>> {
    for round in plans.chunks(SIMULATED_PER_ROUND) {
        if best.is_some() && deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let candidates: Vec<_> = round
            .iter()
            .map(|plan| (plan, AllReducePacking::PerTensor))
            .collect();
        let to_beat = best.as_ref().map(|(b, _)| &b.pipeline);
        let mut finished = Vec::new();
        let faster = fastest_noting(p, (routes, chunks), &candidates, to_beat, &mut finished)?;
        tried.extend(
            finished
                .into_iter()
                .map(|(i, t, f)| (round[i].clone(), t, f)),
        );
        if let Some((i, s)) = faster {
            best = Some((s, round[i].clone()));
        }
    }
    Ok(best)
}

/// `plan` under the other schedule: the same units (unfolded, cut afresh for that schedule,
/// folded again if it was). The estimates rank the schedules of one plan poorly against each
/// other (bert-large at batch 32 on TAG's cloud: its best plan, both V100 machines with the
/// first folded round both ends at 4 micro-batches, was simulated under 1F1B, 158.88 ms with
/// its best packing, but not under GPipe, 147.27 ms).
fn other_schedule(
    plan: &Plan,
    chunks: &Chunks,
    (cluster, routes): (&Cluster, &RouteTable),
) -> Option<Plan> {
    let units = plan.unfolded.as_ref().unwrap_or(&plan.units);
    let schedule = Schedule::ALL.into_iter().find(|&s| s != plan.schedule)?;
    let near = balanced(
        chunks,
        units,
        plan.micro_batches,
        schedule,
        (cluster, routes),
    )?;
    match plan.unfolded {
        Some(_) => folded(&near),
        None => Some(near),
    }
}

/// `best` (simulated from `plan`) with its stages' gradients packed each other way data
/// parallelism tries (one buffer per stage, Horovod's buckets), simulated side by side, the
/// fastest kept: they overlap the last micro-batch's backward differently from one ring per
/// tensor (bert-large at batch 32 on TAG's testbed: 221.08 ms per tensor, 213.27 ms packed).
fn repacked(
    p: &Problem,
    (routes, chunks): (&RouteTable, &Chunks),
    (best, plan): (Simulated, &Plan),
) -> Result<Simulated> {
    let candidates: Vec<_> = PACKINGS
        .iter()
        .filter(|&&k| k != best.pipeline.strategy.allreduce)
        .map(|&k| (plan, k))
        .collect();
    let faster = fastest(p, (routes, chunks), &candidates, Some(&best.pipeline))?;
    Ok(faster.map_or(best, |(_, s)| s))
}

/// How a pipeline's stages synchronise their gradients, in words.
fn packing_words(k: AllReducePacking) -> String {
    match k {
        AllReducePacking::PerTensor => "one AllReduce per gradient".to_string(),
        AllReducePacking::Packed => "each stage's gradients in one AllReduce".to_string(),
        AllReducePacking::Buckets(bytes) => {
            format!("gradients in {} MiB buckets", bytes >> 20)
        }
    }
}

/// The [`SIMULATED`] best estimates (`plans` sorted, kept so), half of each schedule where
/// both have that many: the estimates rank plans of one schedule better than across the two.
fn best_of_each_schedule(plans: Vec<Plan>) -> Vec<Plan> {
    let per_schedule = SIMULATED / Schedule::ALL.len();
    let mut kept = vec![false; plans.len()];
    for schedule in Schedule::ALL {
        let of_schedule = (0..plans.len()).filter(|&i| plans[i].schedule == schedule);
        for i in of_schedule.take(per_schedule) {
            kept[i] = true;
        }
    }
    let mut room = SIMULATED.saturating_sub(kept.iter().filter(|&&k| k).count());
    for k in kept.iter_mut().filter(|k| !**k) {
        if room == 0 {
            break;
        }
        *k = true;
        room -= 1;
    }
    plans
        .into_iter()
        .zip(kept)
        .filter_map(|(plan, keep)| keep.then_some(plan))
        .collect()
}

/// `plans`, each wrapped one followed by its folded twin: the same cut, its first and last
/// stages both on the whole device group instead of a half each (a V-shaped pipeline). The
/// estimate cannot rank the two (it sees each stage alone, while the twin's end stages share
/// their GPUs and fill each other's bubbles), so both are simulated.
fn with_folded_twins(plans: Vec<Plan>) -> Vec<Plan> {
    let mut out = Vec::with_capacity(2 * plans.len());
    for plan in plans {
        let twin = folded(&plan);
        out.push(plan);
        out.extend(twin);
    }
    out
}

/// The folded twin of a wrapped plan (see [`with_folded_twins`]); `None` for any other plan.
fn folded(plan: &Plan) -> Option<Plan> {
    let last = plan.units.len() - 1;
    let (devices, label) = plan.units[0].whole.clone()?;
    let end = |which: &str| Unit {
        devices: devices.clone(),
        label: format!("{label} ({which} stage)"),
        whole: None,
        ..plan.units[0].clone()
    };
    let mut units = plan.units.clone();
    units[0] = end("first");
    units[last] = end("last");
    Some(Plan {
        units,
        unfolded: Some(plan.units.clone()),
        ..plan.clone()
    })
}

/// The GPU types of `units`, each once.
fn gpu_types(units: &[Unit]) -> Vec<&GpuSpec> {
    let mut types: Vec<&GpuSpec> = Vec::new();
    for u in units {
        if !types.iter().any(|t| t.name == u.gpu.name) {
            types.push(&u.gpu);
        }
    }
    types
}

/// The device groups, or the GPUs of the only one.
fn units(cluster: &Cluster) -> Vec<Unit> {
    let of = |devices: Vec<usize>, label: String| {
        let first = &cluster.devices[devices[0]];
        let memory_bytes = devices
            .iter()
            .map(|&d| cluster.devices[d].memory_bytes)
            .fold(f64::INFINITY, f64::min);
        Unit {
            gpu: first.gpu,
            memory_bytes,
            devices,
            label,
            whole: None,
        }
    };
    if cluster.groups.len() >= 2 {
        cluster
            .groups
            .iter()
            .map(|g| of(g.devices.clone(), g.name.clone()))
            .collect()
    } else {
        cluster
            .devices
            .iter()
            .map(|d| of(vec![d.index], d.name.clone()))
            .collect()
    }
}

/// Unit orders: fastest first and slowest first (by the group's total FP32), every prefix of
/// at least two units; and each prefix wrapped round its first unit (its first half runs the
/// first stage, its second half the last), so that a weight tied between the model's ends (an
/// embedding and the output layer) is shared inside one machine rather than across the slowest
/// link.
fn orders(units: &[Unit]) -> Vec<Vec<Unit>> {
    let speed = |u: &Unit| u.gpu.fp32_tflops * u.devices.len() as f64;
    let mut fast_first = units.to_vec();
    fast_first.sort_by(|a, b| speed(b).total_cmp(&speed(a)));
    let mut slow_first = fast_first.clone();
    slow_first.reverse();
    let mut out = Vec::new();
    for order in [fast_first, slow_first] {
        for p in 2..=order.len().min(MAX_STAGES) {
            let prefix = order[..p].to_vec();
            let wrapped = wrapped(&prefix);
            for o in std::iter::once(prefix).chain(wrapped) {
                if !out.iter().any(|x: &Vec<Unit>| same_units(x, &o)) {
                    out.push(o);
                }
            }
        }
    }
    out
}

/// `order` with its first unit split in halves, the first half first and the second last.
fn wrapped(order: &[Unit]) -> Option<Vec<Unit>> {
    let first = &order[0];
    let half = first.devices.len() / 2;
    if half == 0 {
        return None;
    }
    let part = |devices: &[usize], which: &str| Unit {
        devices: devices.to_vec(),
        label: format!("{} ({which} half)", first.label),
        whole: Some((first.devices.clone(), first.label.clone())),
        ..first.clone()
    };
    let mut out = vec![part(&first.devices[..half], "first")];
    out.extend(order[1..].iter().cloned());
    out.push(part(&first.devices[half..], "second"));
    Some(out)
}

fn same_units(a: &[Unit], b: &[Unit]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.devices == y.devices)
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
fn balanced(
    c: &Chunks,
    order: &[Unit],
    m: u32,
    schedule: Schedule,
    (cluster, routes): (&Cluster, &RouteTable),
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
                routes.transfer_us(u.devices[0], next.devices[0], bytes)
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
                .map(|s| routes.transfer_us(from.devices[0], order[s].devices[0], t.bytes))
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
