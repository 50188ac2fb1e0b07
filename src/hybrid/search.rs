//! The joint search over hybrid plans, the space Metis (Um et al., ATC'24) and Sailor (SOSP'25)
//! search on heterogeneous clusters: which GPU types take part, how many pipeline stages each
//! type's GPUs form, each type's tensor-parallel degree (its stages' data parallelism follows),
//! the ZeRO stage and the micro-batch count; the layers are split among the stages by their
//! throughput, and each stage gets the cheapest recomputation with which it fits
//! ([`Planner::judge`]).
//!
//! A layout is improved by best-improvement local search, one knob at a time, from several starts
//! (each GPU type alone and all together, and the baselines' plans where a layout expresses them),
//! until no move helps or the deadline passes; the plans of [`super::megatron`] and
//! [`super::fsdp`] compete with the result, so the answer is never slower than theirs.

use crate::error::Result;

use super::baselines::{fsdp, megatron};
use super::plan::{HybridPlan, ZeroStage};
use super::planner::{Planned, Planner, Pool, divisors, split_layers, stage};

/// One point of the search space.
#[derive(Debug, Clone, PartialEq)]
struct Layout {
    /// Pools taking part, fastest first.
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
        if chunks
            .iter()
            .any(|(d, tp, _)| !micro.is_multiple_of((d.len() / tp) as u32))
        {
            return None;
        }
        let weights: Vec<f64> = chunks.iter().map(|c| c.2).collect();
        let ranges = split_layers(layers, &weights)?;
        Some(HybridPlan {
            global_batch: batch,
            micro_batches: self.micro_batches,
            schedule: crate::strategy::Schedule::OneFOneB,
            overlap_grad_reduce: true,
            stages: chunks
                .iter()
                .zip(ranges)
                .map(|((d, tp, _), r)| stage(r, d, *tp, self.zero, None))
                .collect(),
        })
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
    for (t, pool) in pools.iter().enumerate() {
        let mut flipped = l.clone();
        if let Some(i) = flipped.types.iter().position(|&x| x == t) {
            flipped.types.remove(i);
        } else {
            flipped.types.push(t);
            flipped.types.sort_unstable();
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

/// The best hybrid plan found for the planner's model, cluster and batch (module docs).
pub fn search(planner: &mut Planner) -> Result<Option<Planned>> {
    let pools = planner.pools()?;
    let batch = planner.global_batch;
    let layers = planner.layers();
    let mut best: Option<Planned> = None;
    for p in [megatron(planner)?, fsdp(planner)?].into_iter().flatten() {
        if p.beats(best.as_ref()) {
            best = Some(p);
        }
    }
    let mut starts: Vec<Vec<usize>> = (0..pools.len()).map(|t| vec![t]).collect();
    if pools.len() > 1 {
        starts.push((0..pools.len()).collect());
    }
    for types in starts {
        let tp = pools
            .iter()
            .map(|p| {
                [8, 4, 2, 1]
                    .into_iter()
                    .find(|&t| p.per_machine().is_multiple_of(t) && planner.tp_fits_heads(t))
                    .unwrap_or(1)
            })
            .collect();
        let start = Layout {
            types,
            stages: vec![1; pools.len()],
            tp,
            zero: ZeroStage::Optimizer,
            micro_batches: batch,
        };
        let found = descend(planner, &pools, start, layers, batch);
        if let Some(p) = found
            && p.beats(best.as_ref())
        {
            best = Some(p);
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
