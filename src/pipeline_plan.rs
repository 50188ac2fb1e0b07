//! A pipeline as the planners for heterogeneous clusters make one (AMP, Li et al. NeurIPS'22;
//! Metis, Um et al. ATC'24): stages are device groups (each data-parallel inside, shares by
//! speed), the model is cut into contiguous stages of its forward order by dynamic programming
//! that balances each stage's time on its own GPUs under a memory bound, and the best few of the
//! cost model's candidates are simulated, the fastest kept. The `pipeline-dp` placer returns it.
//!
//! - Layer order: every forward op has its position in the topological order; an input takes the
//!   first, a parameter its first consumer's, a backward op the latest forward op it reads (the
//!   layer whose activation it differentiates; one reading none inherits from its inputs), an
//!   optimizer update its gradient's. Positions are cut into at most [`CHUNKS`] chunks of
//!   balanced compute, the units stages are made of.
//! - Stage time per micro-batch (1F1B, `m` micro-batches): the chunks' forward and backward
//!   compute on the group's GPU type divided by its GPU count and by `m`, plus sending what
//!   crosses the cut per micro-batch (activations forward, their gradients back) over the route
//!   to the next stage. The iteration: `(m + p − 1)` times the slowest stage, plus the slowest
//!   stage's gradient AllReduce (once, after the last micro-batch), plus what crosses the cuts
//!   once per iteration (a weight tied across stages, its summed gradient). Memory per GPU: the
//!   stage's parameters and optimizer state plus `p − s` micro-batches of its activations split
//!   over its GPUs.
//! - Candidates: the device groups (or, on a cluster with one, its GPUs) ordered fastest first
//!   and slowest first, every prefix of at least two; micro-batch counts that divide the batch, up
//!   to [`MAX_MICRO_BATCHES`]. The balanced cut of each is scored by the cost model, and the
//!   [`SIMULATED`] best are simulated.

use rayon::prelude::*;

use crate::cluster::{Cluster, GpuSpec, RouteTable};
use crate::error::Result;
use crate::evaluate::{Placement, Problem, evaluate};
use crate::graph::{Graph, OpIdx, Phase, Splittability};
use crate::strategy::{
    AllReducePacking, BatchSplit, GroupDecision, Pipeline, ReplicationOption, Schedule, Strategy,
};

/// Most chunks the forward order is cut into before stages are made of them.
pub const CHUNKS: usize = 96;
/// Most micro-batches tried.
pub const MAX_MICRO_BATCHES: u32 = 32;
/// Candidates simulated, best estimates first.
pub const SIMULATED: usize = 8;

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
struct Unit {
    devices: Vec<usize>,
    gpu: GpuSpec,
    memory_bytes: f64,
    label: String,
}

/// Per chunk, what stages are costed from.
struct Chunks {
    /// Chunk of every op.
    of_op: Vec<usize>,
    /// Forward and backward compute per chunk at the full batch, per GPU type of `types`.
    work_us: Vec<Vec<f64>>,
    types: Vec<String>,
    /// Gradient bytes (AllReduced) and resident bytes (parameters, optimizer state) per chunk.
    grad_bytes: Vec<f64>,
    resident_bytes: Vec<f64>,
    /// Forward output bytes per chunk at the full batch (activations kept for the backward).
    activation_bytes: Vec<f64>,
    /// Bytes of activations and activation gradients crossing a cut after each chunk, either way,
    /// at the full batch: sent once per micro-batch, a share each.
    cut_bytes: Vec<f64>,
    /// Bytes of everything else crossing a cut after each chunk (tied weights, their summed
    /// gradients): sent once per iteration.
    cut_once_bytes: Vec<f64>,
}

/// A candidate: stages (chunk ranges on units) with a micro-batch count and its estimate.
#[derive(Debug, Clone)]
struct Plan {
    units: Vec<Unit>,
    /// End chunk (exclusive) of each stage.
    ends: Vec<usize>,
    micro_batches: u32,
    estimate_us: f64,
}

/// The best pipeline over the candidates (module docs); `None` on fewer than two GPUs or when
/// the batch has no micro-batch count to cut.
pub fn best_pipeline(p: &Problem, routes: &RouteTable) -> Result<Option<BestPipeline>> {
    let units = units(p.cluster);
    if units.len() < 2 {
        return Ok(None);
    }
    let chunks = chunk(p, &units);
    let mut plans: Vec<Plan> = orders(&units)
        .into_par_iter()
        .flat_map_iter(|order| {
            micro_batch_counts(p.graph.batch_size, order.len())
                .into_iter()
                .filter_map(|m| balanced(&chunks, &order, m, routes, p.graph.batch_size))
                .collect::<Vec<_>>()
        })
        .collect();
    plans.sort_by(|a, b| a.estimate_us.total_cmp(&b.estimate_us));
    let scored: Vec<Result<BestPipeline>> = plans
        .into_iter()
        .take(SIMULATED)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|plan| score(p, routes, &chunks, &plan))
        .collect();
    let mut best: Option<BestPipeline> = None;
    for s in scored {
        let s = s?;
        if best
            .as_ref()
            .is_none_or(|b| (s.fits, -s.time_us) > (b.fits, -b.time_us))
        {
            best = Some(s);
        }
    }
    Ok(best)
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
/// at least two units.
fn orders(units: &[Unit]) -> Vec<Vec<Unit>> {
    let speed = |u: &Unit| u.gpu.fp32_tflops * u.devices.len() as f64;
    let mut fast_first = units.to_vec();
    fast_first.sort_by(|a, b| speed(b).total_cmp(&speed(a)));
    let mut slow_first = fast_first.clone();
    slow_first.reverse();
    let mut out = Vec::new();
    for order in [fast_first, slow_first] {
        for p in 2..=order.len() {
            let prefix = order[..p].to_vec();
            if !out.iter().any(|o: &Vec<Unit>| same_units(o, &prefix)) {
                out.push(prefix);
            }
        }
    }
    out
}

fn same_units(a: &[Unit], b: &[Unit]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.devices == y.devices)
}

/// Micro-batch counts that divide the batch, from the stage count up (fewer leaves most of the
/// pipeline idle) to [`MAX_MICRO_BATCHES`].
fn micro_batch_counts(batch: u32, stages: usize) -> Vec<u32> {
    (1..=MAX_MICRO_BATCHES.min(batch))
        .filter(|&m| batch.is_multiple_of(m) && m as usize >= stages.min(batch as usize))
        .collect()
}

/// Every op's position in the forward order (module docs).
fn positions(g: &Graph) -> Vec<usize> {
    let order = g.topological_order();
    let mut pos = vec![usize::MAX; g.len()];
    let mut next = 0;
    for &i in &order {
        if matches!(g.op(i).phase, Phase::Forward | Phase::Input) {
            pos[i] = next;
            next += 1;
        }
    }
    let last = next.saturating_sub(1);
    for &i in &order {
        if g.op(i).phase != Phase::Backward {
            continue;
        }
        let forward = g
            .predecessors(i)
            .filter(|&j| g.op(j).phase == Phase::Forward)
            .map(|j| pos[j])
            .max();
        let inherited = g
            .predecessors(i)
            .filter(|&j| pos[j] != usize::MAX)
            .map(|j| pos[j])
            .min();
        pos[i] = forward.or(inherited).unwrap_or(last);
    }
    for link in g.gradients() {
        pos[link.optimizer] = pos[link.grad];
    }
    for &i in order.iter().rev() {
        if pos[i] == usize::MAX {
            pos[i] = g
                .successors(i)
                .map(|j| pos[j])
                .filter(|&x| x != usize::MAX)
                .min()
                .unwrap_or(0);
        }
    }
    pos
}

/// Cut the positions into chunks of balanced compute and total what each holds.
fn chunk(p: &Problem, units: &[Unit]) -> Chunks {
    let g = p.graph;
    let pos = positions(g);
    let mut types: Vec<&GpuSpec> = Vec::new();
    for u in units {
        if !types.iter().any(|t| t.name == u.gpu.name) {
            types.push(&u.gpu);
        }
    }
    let time = |op: OpIdx, gpu: &GpuSpec| match g.op(op).phase {
        Phase::Forward | Phase::Backward | Phase::Input => {
            p.cost.compute_time_us(g.op(op), gpu, 1.0)
        }
        _ => 0.0,
    };
    let positions = pos.iter().copied().max().unwrap_or(0) + 1;
    let mut work_at = vec![0.0; positions];
    for op in 0..g.len() {
        work_at[pos[op]] += time(op, types[0]);
    }
    let of_position = balanced_cut(&work_at, CHUNKS);
    let n = of_position.iter().copied().max().unwrap_or(0) + 1;
    let of_op: Vec<usize> = pos.iter().map(|&x| of_position[x]).collect();
    let mut c = Chunks {
        work_us: vec![vec![0.0; n]; types.len()],
        types: types.iter().map(|t| t.name.to_string()).collect(),
        grad_bytes: vec![0.0; n],
        resident_bytes: vec![0.0; n],
        activation_bytes: vec![0.0; n],
        cut_bytes: vec![0.0; n],
        cut_once_bytes: vec![0.0; n],
        of_op,
    };
    for op in 0..g.len() {
        let k = c.of_op[op];
        for (t, gpu) in types.iter().enumerate() {
            c.work_us[t][k] += time(op, gpu);
        }
        c.resident_bytes[k] += g.op(op).resident_bytes;
        if g.op(op).phase == Phase::Forward {
            c.activation_bytes[k] += g.op(op).output_bytes;
        }
    }
    for link in g.gradients() {
        c.grad_bytes[c.of_op[link.grad]] += g.op(link.grad).output_bytes;
    }
    // A tensor crosses every cut between its producer's chunk and its farthest consumer's, once
    // however many consumers lie beyond: per micro-batch when it carries the batch (activations
    // and their gradients), once per iteration otherwise (a tied weight, its summed gradient).
    for u in 0..g.len() {
        let home = c.of_op[u];
        let (lo, hi, bytes) = g.out_edges(u).iter().map(|&e| &g.edges()[e]).fold(
            (home, home, 0.0f64),
            |(lo, hi, bytes), e| {
                let k = c.of_op[e.dst];
                let far = if k == home { bytes } else { bytes.max(e.bytes) };
                (lo.min(k), hi.max(k), far)
            },
        );
        let op = g.op(u);
        let per_micro_batch = matches!(op.phase, Phase::Forward | Phase::Backward | Phase::Input)
            && op.split == Splittability::Concat
            && op.scales_with_batch();
        let cut = if per_micro_batch {
            &mut c.cut_bytes
        } else {
            &mut c.cut_once_bytes
        };
        for crossed in &mut cut[lo..hi] {
            *crossed += bytes;
        }
    }
    c
}

/// Chunk of each position: consecutive positions, at most `parts` chunks of about equal work.
fn balanced_cut(work: &[f64], parts: usize) -> Vec<usize> {
    let total: f64 = work.iter().sum();
    let target = total / parts as f64;
    let mut out = Vec::with_capacity(work.len());
    let (mut chunk, mut acc) = (0usize, 0.0);
    for &w in work {
        if acc > 0.0 && acc + w > target && chunk + 1 < parts {
            chunk += 1;
            acc = 0.0;
        }
        acc += w;
        out.push(chunk);
    }
    out
}

/// The cut of the chunks into `order.len()` stages that minimises the slowest stage's time per
/// micro-batch (each stage within its GPUs' memory), by dynamic programming; `None` when no cut
/// fits.
fn balanced(c: &Chunks, order: &[Unit], m: u32, routes: &RouteTable, batch: u32) -> Option<Plan> {
    let (n, p) = (c.grad_bytes.len(), order.len());
    if n < p || m > batch {
        return None;
    }
    let prefix = |v: &[f64]| -> Vec<f64> {
        std::iter::once(0.0)
            .chain(v.iter().scan(0.0, |s, x| {
                *s += x;
                Some(*s)
            }))
            .collect()
    };
    let work: Vec<Vec<f64>> = c.work_us.iter().map(|w| prefix(w)).collect();
    let (resident, activation) = (prefix(&c.resident_bytes), prefix(&c.activation_bytes));
    let stage_time = |s: usize, a: usize, b: usize| -> f64 {
        let u = &order[s];
        let t = c.types.iter().position(|x| x == u.gpu.name).unwrap();
        let gpus = u.devices.len() as f64;
        let compute = (work[t][b] - work[t][a]) / gpus / f64::from(m);
        let in_flight = f64::from(Schedule::OneFOneB.in_flight(s, p, m));
        let memory = resident[b] - resident[a]
            + in_flight * (activation[b] - activation[a]) / gpus / f64::from(m);
        if memory > u.memory_bytes {
            return f64::INFINITY;
        }
        let send = match order.get(s + 1) {
            Some(next) if b < n => {
                let bytes = c.cut_bytes[b - 1] / f64::from(m);
                routes.transfer_us(u.devices[0], next.devices[0], bytes)
            }
            _ => 0.0,
        };
        compute + send
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
            let a = if s == 0 { 0 } else { ends[s - 1] };
            let grads: f64 = c.grad_bytes[a..ends[s]].iter().sum();
            let u = &order[s];
            let k = u.devices.len() as f64;
            if k < 2.0 {
                return 0.0;
            }
            2.0 * (k - 1.0) / k * grads / routes.bandwidth(u.devices[0], u.devices[1])
        })
        .fold(0.0, f64::max);
    let once: f64 = (0..p - 1)
        .map(|s| {
            let (u, next) = (&order[s], &order[s + 1]);
            routes.transfer_us(u.devices[0], next.devices[0], c.cut_once_bytes[ends[s] - 1])
        })
        .sum();
    Some(Plan {
        units: order.to_vec(),
        ends,
        micro_batches: m,
        estimate_us: f64::from(m + p as u32 - 1) * slowest + allreduce + once,
    })
}

/// The plan as a strategy, simulated.
fn score(p: &Problem, routes: &RouteTable, c: &Chunks, plan: &Plan) -> Result<BestPipeline> {
    let strategy = strategy(p, c, plan);
    let e = evaluate(p, routes, &Placement::plain(strategy.clone(), ""))?;
    let stages: Vec<String> = plan.units.iter().map(|u| u.label.clone()).collect();
    Ok(BestPipeline {
        strategy,
        time_us: e.report.iteration_us,
        fits: !e.report.is_oom(),
        note: format!(
            "pipeline-dp: {} stages ({}), {} micro-batches, 1F1B, data-parallel inside each",
            plan.units.len(),
            stages.join(" → "),
            plan.micro_batches
        ),
    })
}

/// One op group per stage, data-parallel (AllReduce, speed-proportional shares) on its unit.
fn strategy(p: &Problem, c: &Chunks, plan: &Plan) -> Strategy {
    let g = p.graph;
    let stage_of_chunk = |k: usize| plan.ends.iter().position(|&e| k < e).unwrap();
    let op_group: Vec<u32> = c.of_op.iter().map(|&k| stage_of_chunk(k) as u32).collect();
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
            Schedule::OneFOneB,
            plan.units.len(),
            g.batch_size,
        )
        .expect("a plan's micro-batch count divides the batch"),
    );
    s
}
