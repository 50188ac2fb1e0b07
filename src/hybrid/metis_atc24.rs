//! Metis's planner (Um et al., USENIX ATC'24, "Metis: Fast Automatic Distributed Training on
//! Heterogeneous GPUs"), re-implemented on this simulator; not the METIS graph partitioner. It
//! searches, as the paper's search does:
//!
//! 1. orders of the GPU types (the pipeline visits one type's machines, then the next's);
//! 2. device-group sizes: the ordered GPUs cut into consecutive stages whose sizes are powers of
//!    two (a stage may span two types);
//! 3. each stage's (DP, TP) with TP a power of two inside a machine, one degree for every stage;
//! 4. the micro-batch count;
//! 5. the layer partition balanced by each stage's compute capacity, and inside a stage that mixes
//!    types a batch split proportional to each GPU's speed (whole sequences).
//!
//! Metis has no ZeRO and no recomputation: plans run plain data parallelism and keep every
//! activation, and one that does not fit is discarded (its memory check). The fastest plan that
//! fits is kept.

use crate::error::Result;

use super::baselines::integer_shares;
use super::plan::{HybridPlan, ZeroStage};
use super::planner::{Planned, Planner, Pool, keep_fitting, split_layers, stage};

/// Cuts of `n` into at most `most` consecutive powers of two (each ≥ `least`), at most `cap` of
/// them, fewer stages first.
fn power_of_two_cuts(n: usize, most: usize, least: usize, cap: usize) -> Vec<Vec<usize>> {
    fn grow(
        left: usize,
        most: usize,
        least: usize,
        cut: &mut Vec<usize>,
        out: &mut Vec<Vec<usize>>,
        cap: usize,
    ) {
        if out.len() >= cap {
            return;
        }
        if left == 0 {
            out.push(cut.clone());
            return;
        }
        if cut.len() == most {
            return;
        }
        let mut size = left.next_power_of_two();
        while size >= least.max(1) {
            if size <= left {
                cut.push(size);
                grow(left - size, most, least, cut, out, cap);
                cut.pop();
            }
            size /= 2;
        }
    }
    let mut out = Vec::new();
    for stages in 1..=most {
        grow(n, stages, least, &mut Vec::new(), &mut out, cap);
    }
    out.sort_by_key(Vec::len);
    out.dedup();
    out
}

/// Every order of `n` items (the identity only past 4).
fn orders(n: usize) -> Vec<Vec<usize>> {
    if n > 4 {
        return vec![(0..n).collect()];
    }
    let mut out = vec![vec![]];
    for _ in 0..n {
        out = out
            .into_iter()
            .flat_map(|o: Vec<usize>| {
                (0..n)
                    .filter(|i| !o.contains(i))
                    .map(|i| {
                        let mut p = o.clone();
                        p.push(i);
                        p
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    out
}

/// The plan of one point of Metis's space; `None` when the micro-batch does not divide.
fn plan_of(
    pools: &[Pool],
    order: &[usize],
    cut: &[usize],
    tp: usize,
    micro_batches: u32,
    layers: usize,
    batch: u32,
) -> Option<HybridPlan> {
    let devices: Vec<(usize, f64)> = order
        .iter()
        .flat_map(|&t| {
            let speed = 1.0 / pools[t].layer_us;
            pools[t].groups.iter().flatten().map(move |&d| (d, speed))
        })
        .collect();
    let micro = batch / micro_batches;
    let mut start = 0;
    let mut parts = Vec::new();
    for &size in cut {
        let part = &devices[start..start + size];
        start += size;
        if !size.is_multiple_of(tp) {
            return None;
        }
        let dp = size / tp;
        if !micro.is_multiple_of(dp as u32) && dp > 1 {
            return None;
        }
        // A replica runs at its slowest GPU's speed.
        let speeds: Vec<f64> = part
            .chunks(tp)
            .map(|r| r.iter().map(|x| x.1).fold(f64::INFINITY, f64::min))
            .collect();
        let mixed = speeds.iter().any(|&s| s != speeds[0]);
        let shares = if mixed {
            Some(integer_shares(micro, &speeds)?)
        } else {
            None
        };
        let ids: Vec<usize> = part.iter().map(|x| x.0).collect();
        parts.push((ids, speeds.iter().sum::<f64>() * tp as f64, shares));
    }
    let weights: Vec<f64> = parts.iter().map(|p| p.1).collect();
    let ranges = split_layers(layers, &weights)?;
    Some(HybridPlan::one_f_one_b(
        batch,
        micro_batches,
        parts
            .into_iter()
            .zip(ranges)
            .map(|((ids, _, shares), r)| stage(r, &ids, tp, ZeroStage::None, shares))
            .collect(),
    ))
}

/// Micro-batch counts giving the widest stage's replicas 1, 2, 4 or 8 sequences each (Metis's
/// micro-batch sizes).
fn micro_batch_counts(cut: &[usize], tp: usize, batch: u32) -> Vec<u32> {
    let widest = cut.iter().map(|s| s / tp).max().unwrap_or(1) as u32;
    [1u32, 2, 4, 8]
        .into_iter()
        .filter_map(|per| {
            let micro = widest * per;
            (micro > 0 && batch.is_multiple_of(micro)).then(|| batch / micro)
        })
        .collect()
}

/// The fastest plan that fits in Metis's space (module docs).
pub fn metis_atc24(planner: &mut Planner) -> Result<Option<Planned>> {
    let pools = planner.pools()?;
    let layers = planner.layers();
    let batch = planner.global_batch;
    let n = planner.cluster.devices.len();
    let per_machine = pools.iter().map(Pool::per_machine).min().unwrap_or(1);
    // Stages of at least a machine's GPUs past 64 GPUs keep the cuts to a few thousand.
    let least = if n > 64 { per_machine } else { 1 };
    let cuts = power_of_two_cuts(n, layers.min(16), least, 1000);
    let mut best: Option<Planned> = None;
    'search: for order in orders(pools.len()) {
        for cut in &cuts {
            for tp in [1usize, 2, 4, 8] {
                if !per_machine.is_multiple_of(tp) || !planner.tp_splits_evenly(tp) {
                    continue;
                }
                for m in micro_batch_counts(cut, tp, batch) {
                    if planner.out_of_time() {
                        break 'search;
                    }
                    let Some(plan) = plan_of(&pools, &order, cut, tp, m, layers, batch) else {
                        continue;
                    };
                    keep_fitting(&mut best, planner.judge_as_is(plan));
                }
            }
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_are_powers_of_two_summing_to_the_whole() {
        let cuts = power_of_two_cuts(24, 3, 1, 1000);
        assert!(cuts.contains(&vec![16, 8]));
        assert!(cuts.contains(&vec![8, 16]));
        assert!(cuts.contains(&vec![8, 8, 8]));
        assert!(
            cuts.iter()
                .all(|c| c.iter().sum::<usize>() == 24 && c.len() <= 3)
        );
        assert!(cuts.iter().flatten().all(|s| s.is_power_of_two()));
        assert_eq!(power_of_two_cuts(16, 1, 1, 10), vec![vec![16]]);
        assert_eq!(orders(3).len(), 6);
    }
}
