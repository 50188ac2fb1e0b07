//! The plans an engineer launches without a planner, the bar a hybrid search must clear:
//!
//! - [`megatron`]: Megatron-LM's usual layout — tensor parallelism over the GPUs of a machine,
//!   pipeline stages across machines with the layers split evenly, data parallelism over the
//!   rest, the distributed optimizer (ZeRO-1), one sequence per replica and micro-batch, the
//!   fewest stages that fit and recomputation only where a stage needs it; over every GPU and over
//!   the fastest type's alone, the faster kept.
//! - [`fsdp`]: PyTorch FSDP (ZeRO-3) over the best subset of GPU types (each type alone, or all),
//!   each GPU's share of the batch proportional to its speed, at the fastest micro-batch count
//!   that fits.

use crate::error::Result;

use super::plan::{HybridPlan, ZeroStage};
use super::planner::{Planned, Planner, divisors, split_layers, stage};

/// Megatron-LM's default layout (module docs).
pub fn megatron(planner: &mut Planner) -> Result<Option<Planned>> {
    let pools = planner.pools()?;
    let every: Vec<usize> = (0..planner.cluster.devices.len()).collect();
    let fastest: Vec<usize> = pools[0].groups.iter().flatten().copied().collect();
    let mut best: Option<Planned> = None;
    for devices in [every, fastest] {
        let per_machine = planner
            .cluster
            .groups
            .iter()
            .filter(|g| g.devices.iter().any(|d| devices.contains(d)))
            .map(|g| g.devices.len())
            .min()
            .unwrap_or(1);
        let Some(tp) = [8, 4, 2, 1]
            .into_iter()
            .find(|&t| per_machine.is_multiple_of(t) && planner.tp_splits_evenly(t))
        else {
            continue;
        };
        if let Some(p) = fewest_stages_that_fit(planner, &devices, tp)
            && p.beats(best.as_ref())
        {
            best = Some(p);
        }
    }
    Ok(best)
}

fn fewest_stages_that_fit(planner: &mut Planner, devices: &[usize], tp: usize) -> Option<Planned> {
    let n = devices.len();
    let layers = planner.layers();
    let batch = planner.global_batch;
    let mut last = None;
    for pp in (1..=n / tp).filter(|pp| (n / tp).is_multiple_of(*pp) && *pp <= layers) {
        if planner.out_of_time() {
            break;
        }
        let dp = n / tp / pp;
        if !batch.is_multiple_of(dp as u32) {
            continue;
        }
        let ranges = split_layers(layers, &vec![1.0; pp])?;
        let per_stage = n / pp;
        let stages = ranges
            .iter()
            .enumerate()
            .map(|(s, &r)| {
                let d = &devices[s * per_stage..(s + 1) * per_stage];
                stage(r, d, tp, ZeroStage::Optimizer, None)
            })
            .collect();
        let plan = HybridPlan::one_f_one_b(batch, batch / dp as u32, stages);
        let Some(p) = planner.judge(plan) else {
            continue;
        };
        if p.report.fits() {
            return Some(p);
        }
        last = Some(p);
    }
    last
}

/// FSDP over the best subset of GPU types (module docs).
pub fn fsdp(planner: &mut Planner) -> Result<Option<Planned>> {
    let pools = planner.pools()?;
    let mut sets: Vec<Vec<usize>> = (0..pools.len()).map(|i| vec![i]).collect();
    if pools.len() > 1 {
        sets.push((0..pools.len()).collect());
    }
    let batch = planner.global_batch;
    let layers = planner.layers();
    let mut best: Option<Planned> = None;
    for set in sets {
        let mut devices = Vec::new();
        let mut speed = Vec::new();
        for &i in &set {
            for &d in pools[i].groups.iter().flatten() {
                devices.push(d);
                speed.push(1.0 / pools[i].layer_us);
            }
        }
        for m in divisors(batch) {
            if planner.out_of_time() {
                break;
            }
            let micro = batch / m;
            let Some(shares) = integer_shares(micro, &speed) else {
                continue;
            };
            let plan = HybridPlan::one_f_one_b(
                batch,
                m,
                vec![stage(
                    [0, layers],
                    &devices,
                    1,
                    ZeroStage::Parameters,
                    Some(shares),
                )],
            );
            if let Some(p) = planner.judge(plan)
                && p.beats(best.as_ref())
            {
                best = Some(p);
            }
        }
    }
    Ok(best)
}

/// Shares of a micro-batch of `micro` sequences proportional to `speed`, each a whole number of
/// sequences and at least one; `None` when there are fewer sequences than GPUs.
pub(crate) fn integer_shares(micro: u32, speed: &[f64]) -> Option<Vec<f64>> {
    let n = speed.len();
    if (micro as usize) < n || n == 0 {
        return None;
    }
    let weights: Vec<f64> = speed.to_vec();
    let counts = split_layers(micro as usize, &weights)?;
    let f = f64::from(micro);
    Some(counts.iter().map(|r| (r[1] - r[0]) as f64 / f).collect())
}
