//! The joint search over hybrid plans, the space Metis (Um et al., ATC'24) and Sailor (SOSP'25)
//! search on heterogeneous clusters: which GPU types take part, how many pipeline stages each
//! type's GPUs form, each type's tensor-parallel degree (its stages' data parallelism follows),
//! the ZeRO stage and the micro-batch count; the layers are split among the stages by their
//! throughput, and each stage gets the cheapest recomputation with which it fits
//! ([`Planner::judge`]).
//!
//! The search starts with the layout tree ([`layout_search`]): a hundred layouts simulated under
//! the layout policy's priors. A layout is then improved by best-improvement local search, one
//! knob at a time, from several starts (the tree's best layout, each GPU type alone and all
//! together, with ZeRO-1 and without), until no move helps or the deadline passes. [`plan_all`] runs it after [`super::megatron`], [`super::fsdp`],
//! [`super::metis_atc24`] and [`super::sailor`], then refines the fastest plan any of them found
//! move by move on the plan itself ([`refine`]), so `place`'s answer is never slower than theirs.

use std::time::Instant;

use crate::error::Result;

use super::baselines::{fsdp, megatron};
use super::layout::{Layout, stage_counts};
use super::layout_tree::{LayoutPriors, LayoutSpace, complete, search_in};
use super::metis_atc24::metis_atc24;
use super::plan::ZeroStage;
use super::planner::{Planned, Planner, Pool, divisors, keep_fitting};
use super::refine::refine;
use super::sailor::sailor;

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
            if planner.tp_splits_evenly(tp) {
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
    /// Whether it ran out of its share of the time limit: a planner without a plan then may
    /// have one it did not reach.
    pub out_of_time: bool,
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

/// Layouts the layout tree simulates at the start of the joint search: a quarter of what the
/// uniform priors needed to match the shipped policy at 50 (models/README.md), cheap beside the
/// descent.
const TREE_BUDGET: usize = 100;

/// Every hybrid planner in turn, by `end` when given: each baseline gets a share of the time
/// left (Megatron and FSDP a tenth, Metis a third, Sailor half), the joint search's layouts
/// (under `priors`) half of the rest and its refinement of the fastest plan so far ([`refine`])
/// what remains.
pub fn plan_all(
    planner: &mut Planner,
    end: Option<Instant>,
    priors: &dyn LayoutPriors,
) -> Result<HybridPlacement> {
    let planners: [(&'static str, f64, Option<Planning>); 5] = [
        ("megatron", 0.1, Some(megatron)),
        ("fsdp", 0.1, Some(fsdp)),
        ("metis-atc24", 0.35, Some(metis_atc24)),
        ("sailor", 0.5, Some(sailor)),
        (JOINT_SEARCH, 0.5, None),
    ];
    let share_of_what_is_left = |began: Instant, share: f64| {
        end.map(|end| began + end.saturating_duration_since(began).mul_f64(share))
    };
    let mut methods = Vec::with_capacity(planners.len());
    for (method, share, plan) in planners {
        let began = Instant::now();
        planner.set_deadline(share_of_what_is_left(began, share));
        let planned = match plan {
            Some(plan) => plan(planner)?,
            None => search(planner, priors)?,
        };
        methods.push(MethodPlan {
            method,
            planned,
            seconds: began.elapsed().as_secs_f64(),
            out_of_time: planner.out_of_time(),
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
/// docs): the layout tree under `priors` ([`super::layout_search`]), then the descents, one of them from
/// the tree's best layout.
pub fn search(planner: &mut Planner, priors: &dyn LayoutPriors) -> Result<Option<Planned>> {
    let space = LayoutSpace::new(planner)?;
    let (layers, batch) = (planner.layers(), planner.global_batch);
    let tree = search_in(planner, &space, priors, TREE_BUDGET, 0);
    let mut best = tree.best;
    if let Some(start) = tree.layout.map(|l| complete(&l))
        && !planner.out_of_time()
        && let Some((_, p)) = descend(planner, &space.pools, start, layers, batch)
        && p.beats(best.as_ref())
    {
        best = Some(p);
    }
    if let Some((_, p)) = descents(planner)?
        && p.beats(best.as_ref())
    {
        best = Some(p);
    }
    Ok(best)
}

/// The descents' best layout and its plan: from each GPU type alone and all together, with ZeRO-1
/// and without.
pub(crate) fn descents(planner: &mut Planner) -> Result<Option<(Layout, Planned)>> {
    let pools = planner.pools()?;
    let batch = planner.global_batch;
    let layers = planner.layers();
    let mut best: Option<(Layout, Planned)> = None;
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
                    .find(|&t| p.per_machine().is_multiple_of(t) && planner.tp_splits_evenly(t))
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
            if let Some((l, p)) = found
                && p.beats(best.as_ref().map(|b| &b.1))
            {
                best = Some((l, p));
            }
        }
        if planner.out_of_time() {
            break;
        }
    }
    Ok(best)
}

/// Best-improvement descent from `start`; the best layout it simulated, with its plan.
fn descend(
    planner: &mut Planner,
    pools: &[Pool],
    start: Layout,
    layers: usize,
    batch: u32,
) -> Option<(Layout, Planned)> {
    let mut best: Option<(Layout, Planned)> = start
        .plan(pools, layers, batch)
        .and_then(|p| planner.judge(p))
        .map(|p| (start.clone(), p));
    let mut current = start;
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
                None => p.beats(best.as_ref().map(|b| &b.1)),
            };
            if beats_round {
                improved = Some((n, p));
            }
        }
        match improved {
            Some((n, p)) => {
                current = n.clone();
                best = Some((n, p));
            }
            None => return best,
        }
    }
}
