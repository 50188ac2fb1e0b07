//! The joint search over hybrid plans, the space Metis (Um et al., ATC'24) and Sailor (SOSP'25)
//! search on heterogeneous clusters: which GPU types take part, how many pipeline stages each
//! type's GPUs form, each type's tensor-parallel degree (its stages' data parallelism follows),
//! the ZeRO stage and the micro-batch count; the layers are split among the stages by their
//! throughput, and each stage gets the cheapest recomputation with which it fits
//! ([`Planner::judge`]).
//!
//! A layout is improved by best-improvement local search, one knob at a time, from several starts
//! (each GPU type alone and all together, with ZeRO-1 and without), until no move helps or the
//! deadline passes. [`plan_all`] runs it after [`super::megatron`], [`super::fsdp`],
//! [`super::metis_atc24`] and [`super::sailor`], then refines the fastest plan any of them found
//! move by move on the plan itself ([`refine`]), so `place`'s answer is never slower than theirs.

use std::time::Instant;

use crate::error::Result;

use super::baselines::{fsdp, integer_shares, megatron};
use super::metis_atc24::metis_atc24;
use super::plan::{HybridPlan, ZeroStage};
use super::planner::{Planned, Planner, Pool, divisors, keep_fitting, split_layers, stage};
use super::refine::refine;
use super::sailor::sailor;

/// One point of the search space.
#[derive(Debug, Clone, PartialEq)]
struct Layout {
    /// Pools taking part, in the pipeline's order.
    types: Vec<usize>,
    /// Stages each pool's GPUs form (index: pool).
    stages: Vec<usize>,
    /// Tensor-parallel degree of each pool's stages (index: pool).
    tp: Vec<usize>,
    zero: ZeroStage,
    micro_batches: u32,
}

impl Layout {
    fn plan(&self, pools: &[Pool], layers: usize, batch: u32) -> Option<HybridPlan> {
        let mut chunks: Vec<(Vec<usize>, usize, f64)> = Vec::new();
        for &t in &self.types {
            let devices: Vec<usize> = pools[t].groups.iter().flatten().copied().collect();
            let k = self.stages[t];
            let tp = self.tp[t];
            if k == 0 || !devices.len().is_multiple_of(k) {
                return None;
            }
            let per = devices.len() / k;
            if !per.is_multiple_of(tp) || (tp > 1 && !pools[t].per_machine().is_multiple_of(tp)) {
                return None;
            }
            for c in devices.chunks(per) {
                chunks.push((c.to_vec(), tp, per as f64 / pools[t].layer_us));
            }
        }
        let micro = batch / self.micro_batches;
        // Replicas take whole sequences: as evenly as they divide.
        let mut shares = Vec::with_capacity(chunks.len());
        for (d, tp, _) in &chunks {
            let dp = d.len() / tp;
            shares.push(if micro.is_multiple_of(dp as u32) {
                None
            } else {
                Some(integer_shares(micro, &vec![1.0; dp])?)
            });
        }
        let weights: Vec<f64> = chunks.iter().map(|c| c.2).collect();
        let ranges = split_layers(layers, &weights)?;
        Some(HybridPlan::one_f_one_b(
            batch,
            self.micro_batches,
            chunks
                .iter()
                .zip(ranges)
                .zip(shares)
                .map(|(((d, tp, _), r), shares)| stage(r, d, *tp, self.zero, shares))
                .collect(),
        ))
    }
}

/// Values a pool's stage count may take: divisors of its device groups, and splits of a group.
fn stage_counts(pool: &Pool, layers: usize) -> Vec<usize> {
    let groups = pool.groups.len();
    let mut v: Vec<usize> = divisors(groups as u32)
        .into_iter()
        .map(|d| d as usize)
        .collect();
    for f in [2, 4, 8] {
        if pool.per_machine().is_multiple_of(f) {
            v.push(groups * f);
        }
    }
    v.retain(|&k| k <= layers);
    v.sort_unstable();
    v.dedup();
    v
}

fn neighbours(l: &Layout, pools: &[Pool], planner: &Planner, batch: u32) -> Vec<Layout> {
    let layers = planner.layers();
    let mut out = Vec::new();
    for zero in [
        ZeroStage::None,
        ZeroStage::Optimizer,
        ZeroStage::Gradients,
        ZeroStage::Parameters,
    ] {
        out.push(Layout { zero, ..l.clone() });
    }
    for m in divisors(batch) {
        out.push(Layout {
            micro_batches: m,
            ..l.clone()
        });
    }
    // The pipeline's order of types.
    for i in 1..l.types.len() {
        let mut swapped = l.clone();
        swapped.types.swap(i - 1, i);
        out.push(swapped);
    }
    for (t, pool) in pools.iter().enumerate() {
        let mut flipped = l.clone();
        if let Some(i) = flipped.types.iter().position(|&x| x == t) {
            flipped.types.remove(i);
        } else {
            flipped.types.push(t);
        }
        if !flipped.types.is_empty() {
            out.push(flipped);
        }
        if !l.types.contains(&t) {
            continue;
        }
        for k in stage_counts(pool, layers) {
            let mut n = l.clone();
            n.stages[t] = k;
            out.push(n);
        }
        for tp in [1, 2, 4, 8] {
            if planner.tp_fits_heads(tp) {
                let mut n = l.clone();
                n.tp[t] = tp;
                out.push(n);
            }
        }
    }
    out.retain(|n| n != l);
    out
}

/// One hybrid planner's answer.
#[derive(Debug, Clone)]
pub struct MethodPlan {
    /// `megatron`, `fsdp`, `metis-atc24`, `sailor`, or `hybrid` (the joint search).
    pub method: &'static str,
    /// Its plan, `None` where it found none.
    pub planned: Option<Planned>,
    /// How long it took, seconds.
    pub seconds: f64,
}

/// Seconds the hybrid planners take together on one model and cluster when not told
/// (`place --time`, `compare --time-limit`).
pub const DEFAULT_SECONDS: f64 = 50.0;

/// The joint search's name among the methods.
pub const JOINT_SEARCH: &str = "hybrid";

/// What every hybrid planner answered: the four baselines, then the joint search.
#[derive(Debug, Clone)]
pub struct HybridPlacement {
    /// Each planner's answer, the joint search's last.
    pub methods: Vec<MethodPlan>,
}

impl HybridPlacement {
    fn fitting(&self, baselines_only: bool) -> impl DoubleEndedIterator<Item = &Planned> {
        self.methods
            .iter()
            .filter(move |m| !baselines_only || m.method != JOINT_SEARCH)
            .filter_map(|m| m.planned.as_ref().filter(|p| p.report.fits()))
    }

    /// The fastest plan that fits among all (the joint search's when it ties).
    pub fn best(&self) -> Option<&Planned> {
        self.fitting(false)
            .rev()
            .fold(None, |best, p| if p.beats(best) { Some(p) } else { best })
    }

    /// The fastest baseline that fits, µs.
    pub fn best_baseline_us(&self) -> Option<f64> {
        self.fitting(true)
            .map(|p| p.report.iteration_us)
            .reduce(f64::min)
    }
}

type Planning = fn(&mut Planner) -> Result<Option<Planned>>;

/// Every hybrid planner in turn, by `end` when given: each baseline gets a share of the time
/// left (Megatron and FSDP a tenth, Metis a third, Sailor half), the joint search's layouts half
/// of the rest and its refinement of the fastest plan so far ([`refine`]) what remains.
pub fn plan_all(planner: &mut Planner, end: Option<Instant>) -> Result<HybridPlacement> {
    let planners: [(&'static str, f64, Planning); 5] = [
        ("megatron", 0.1, megatron),
        ("fsdp", 0.1, fsdp),
        ("metis-atc24", 0.35, metis_atc24),
        ("sailor", 0.5, sailor),
        (JOINT_SEARCH, 0.5, search),
    ];
    let share_of_what_is_left = |began: Instant, share: f64| {
        end.map(|end| began + end.saturating_duration_since(began).mul_f64(share))
    };
    let mut methods = Vec::with_capacity(planners.len());
    for (method, share, plan) in planners {
        let began = Instant::now();
        planner.set_deadline(share_of_what_is_left(began, share));
        let planned = plan(planner)?;
        methods.push(MethodPlan {
            method,
            planned,
            seconds: began.elapsed().as_secs_f64(),
        });
    }
    let began = Instant::now();
    planner.set_deadline(end);
    let mut placement = HybridPlacement { methods };
    if let Some(start) = placement.best().cloned() {
        let pools = planner.pools()?;
        let refined = refine(planner, &pools, start);
        let joint = placement
            .methods
            .last_mut()
            .expect("the joint search is listed");
        keep_fitting(&mut joint.planned, Some(refined));
        joint.seconds += began.elapsed().as_secs_f64();
    }
    Ok(placement)
}

/// The best plan the joint search finds for the planner's model, cluster and batch (module
/// docs).
pub fn search(planner: &mut Planner) -> Result<Option<Planned>> {
    let pools = planner.pools()?;
    let batch = planner.global_batch;
    let layers = planner.layers();
    let mut best: Option<Planned> = None;
    let mut starts: Vec<Vec<usize>> = (0..pools.len()).map(|t| vec![t]).collect();
    if pools.len() > 1 {
        starts.push((0..pools.len()).collect());
    }
    for types in starts {
        let tp: Vec<usize> = pools
            .iter()
            .map(|p| {
                [8, 4, 2, 1]
                    .into_iter()
                    .find(|&t| p.per_machine().is_multiple_of(t) && planner.tp_fits_heads(t))
                    .unwrap_or(1)
            })
            .collect();
        for zero in [ZeroStage::Optimizer, ZeroStage::None] {
            let start = Layout {
                types: types.clone(),
                stages: vec![1; pools.len()],
                tp: tp.clone(),
                zero,
                micro_batches: 1,
            };
            let found = descend(planner, &pools, start, layers, batch);
            if let Some(p) = found
                && p.beats(best.as_ref())
            {
                best = Some(p);
            }
        }
        if planner.out_of_time() {
            break;
        }
    }
    Ok(best)
}

/// Best-improvement descent from `start`; the best plan it simulated.
fn descend(
    planner: &mut Planner,
    pools: &[Pool],
    start: Layout,
    layers: usize,
    batch: u32,
) -> Option<Planned> {
    let mut current = start;
    let mut best: Option<Planned> = current
        .plan(pools, layers, batch)
        .and_then(|p| planner.judge(p));
    loop {
        let mut improved: Option<(Layout, Planned)> = None;
        for n in neighbours(&current, pools, planner, batch) {
            if planner.out_of_time() {
                return best;
            }
            let Some(plan) = n.plan(pools, layers, batch) else {
                continue;
            };
            let Some(p) = planner.judge(plan) else {
                continue;
            };
            let beats_round = match &improved {
                Some((_, q)) => p.beats(Some(q)),
                None => p.beats(best.as_ref()),
            };
            if beats_round {
                improved = Some((n, p));
            }
        }
        match improved {
            Some((n, p)) => {
                current = n;
                best = Some(p);
            }
            None => return best,
        }
    }
}
