//! Sailor's planner (Strati et al., SOSP'25, "Sailor: Automating Distributed Training over
//! Dynamic, Heterogeneous, and Geo-distributed Clusters"), re-implemented on this simulator. Its
//! plans are `D` data-parallel copies of one pipeline whose stages each run on one GPU type with
//! their own tensor-parallel degree (1, 2 or 4); it searches, as Sailor does:
//!
//! 1. the data-parallel degree `D` and the micro-batch size (sequences per pipeline copy);
//! 2. the GPU quota of each type: how many stages of that type the pipeline has and their TP
//!    degree, within the type's GPUs (`stages × D × TP`);
//! 3. the layer partition, by each stage's speed (its TP degree over one layer's time on its
//!    type), which balances the stages as Sailor's dynamic programme does;
//!
//! with ZeRO off and activation recomputation where a stage needs it to fit (Sailor's memory
//! planner), keeping the fastest plan that fits.

use crate::error::Result;

use super::plan::{HybridPlan, ZeroStage};
use super::planner::{Planned, Planner, Pool, divisors, keep_fitting, split_layers, stage};

/// For one type: how many stages of it and their TP degree (0 stages: the type is unused).
type Quota = (usize, usize);

fn quotas(pool: &Pool, d: usize, layers: usize, planner: &Planner) -> Vec<Quota> {
    let gpus: usize = pool.groups.iter().map(Vec::len).sum();
    let mut out = vec![(0, 1)];
    for tp in [1usize, 2, 4] {
        if !pool.per_machine().is_multiple_of(tp) || !planner.tp_splits_evenly(tp) {
            continue;
        }
        for k in 1..=layers.min(16) {
            if k * d * tp <= gpus {
                out.push((k, tp));
            }
        }
    }
    out
}

fn plan_of(
    pools: &[Pool],
    choice: &[Quota],
    d: usize,
    m: u32,
    layers: usize,
    batch: u32,
) -> Option<HybridPlan> {
    let mut parts = Vec::new();
    for (t, &(k, tp)) in choice.iter().enumerate() {
        let devices: Vec<usize> = pools[t].groups.iter().flatten().copied().collect();
        for s in 0..k {
            let ids = devices[s * d * tp..(s + 1) * d * tp].to_vec();
            parts.push((ids, tp, tp as f64 / pools[t].layer_us));
        }
    }
    let weights: Vec<f64> = parts.iter().map(|p| p.2).collect();
    let ranges = split_layers(layers, &weights)?;
    Some(HybridPlan::one_f_one_b(
        batch,
        m,
        parts
            .into_iter()
            .zip(ranges)
            .map(|((ids, tp, _), r)| stage(r, &ids, tp, ZeroStage::None, None))
            .collect(),
    ))
}

/// Every combination of one quota per type, the all-unused one left out, one at a time: with
/// many GPU types the product is far too large to hold, and the caller's time limit has to be able
/// to stop it between two combinations.
fn combinations(options: &[Vec<Quota>]) -> impl Iterator<Item = Vec<Quota>> + '_ {
    let mut next = (!options.iter().any(Vec::is_empty)).then(|| vec![0usize; options.len()]);
    std::iter::from_fn(move || {
        let at = next.as_mut()?;
        let choice: Vec<Quota> = at.iter().zip(options).map(|(&i, o)| o[i]).collect();
        // Advance the odometer: the last type turns fastest.
        let mut t = options.len();
        loop {
            if t == 0 {
                next = None;
                break;
            }
            t -= 1;
            at[t] += 1;
            if at[t] < options[t].len() {
                break;
            }
            at[t] = 0;
        }
        Some(choice)
    })
    .filter(|c| c.iter().any(|q| q.0 > 0))
}

/// The fastest plan that fits in Sailor's space (module docs).
pub fn sailor(planner: &mut Planner) -> Result<Option<Planned>> {
    let pools = planner.pools()?;
    let layers = planner.layers();
    let batch = planner.global_batch;
    let n = planner.cluster.devices.len();
    let mut best: Option<Planned> = None;
    'search: for d in divisors(batch).into_iter().filter(|&d| d as usize <= n) {
        let d = d as usize;
        let options: Vec<Vec<Quota>> = pools
            .iter()
            .map(|p| quotas(p, d, layers, planner))
            .collect();
        for choice in combinations(&options) {
            if planner.out_of_time() {
                break 'search;
            }
            for mbs in [1u32, 2, 4, 8] {
                let copy = d as u32 * mbs;
                if !batch.is_multiple_of(copy) {
                    continue;
                }
                let Some(plan) = plan_of(&pools, &choice, d, batch / copy, layers, batch) else {
                    continue;
                };
                keep_fitting(&mut best, planner.judge(plan));
            }
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_walk_the_whole_product_but_the_all_unused_one() {
        let options = vec![vec![(0, 1), (1, 1)], vec![(0, 1), (1, 2), (2, 1)]];
        let all: Vec<Vec<Quota>> = combinations(&options).collect();
        // 2 × 3 = 6 combinations, less [(0, 1), (0, 1)].
        assert_eq!(all.len(), 5);
        assert_eq!(all[0], vec![(0, 1), (1, 2)]);
        assert_eq!(all[4], vec![(1, 1), (2, 1)]);
        let mut sorted = all.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 5, "no combination twice");
        assert!(combinations(&[vec![(1, 1)], vec![]]).next().is_none());
    }

    #[test]
    fn combinations_of_many_types_start_without_building_the_product() {
        // 40 types of 20 quotas each: 20^40 combinations, the first one at once.
        let mut quotas = vec![vec![(0, 1); 20]; 40];
        quotas[39][1] = (1, 1);
        assert_eq!(combinations(&quotas).next().unwrap()[39], (1, 1));
    }
}
