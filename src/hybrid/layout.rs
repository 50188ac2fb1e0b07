//! A hybrid plan's layout, the point the joint search and the layout tree move between: which GPU
//! types take part and in which pipeline order, how many stages each type's GPUs form and their
//! tensor-parallel degree, the ZeRO stage and the micro-batch count. [`Layout::plan`] turns it into
//! a plan, the layers split among the stages by their throughput.

use super::baselines::integer_shares;
use super::plan::{HybridPlan, ZeroStage};
use super::planner::{Pool, divisors, split_layers, stage};

/// One point of the search space.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Layout {
    /// Pools taking part, in the pipeline's order.
    pub types: Vec<usize>,
    /// Stages each pool's GPUs form (index: pool).
    pub stages: Vec<usize>,
    /// Tensor-parallel degree of each pool's stages (index: pool).
    pub tp: Vec<usize>,
    pub zero: ZeroStage,
    pub micro_batches: u32,
}

impl Layout {
    pub(crate) fn plan(&self, pools: &[Pool], layers: usize, batch: u32) -> Option<HybridPlan> {
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
pub(crate) fn stage_counts(pool: &Pool, layers: usize) -> Vec<usize> {
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
