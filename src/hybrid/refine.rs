//! The joint search's last step (beyond Metis and Sailor): best-improvement descent over the plan
//! itself, from the fastest plan that fits among every planner's answers. A [`super::search`]
//! layout gives all stages of a GPU type one TP degree, one ZeRO stage and even replicas, and
//! cannot put two types in one stage; the baselines' plans can (Metis's and FSDP's stages mix
//! types), but each keeps the knobs its algorithm fixes. The moves here reach between them:
//!
//! - one layer across a stage boundary, either way (the layers' split is otherwise by estimated
//!   throughput, which ignores the first and last stages' embedding and head);
//! - the micro-batch count (every divisor of the batch), each stage's replica shares kept in
//!   proportion, as whole sequences;
//! - one stage's ZeRO stage;
//! - one stage's replica shares: even, proportional to each replica's speed (its slowest GPU's
//!   time per layer), or one sequence moved from the replica that ends last to the one that ends
//!   first;
//! - one stage's tensor-parallel degree (1, 2, 4 or 8, each group inside one machine);
//! - one stage cut in two (half its replicas each, the layers by their speeds), or two adjacent
//!   stages of one TP degree made one: the pipeline's depth;
//! - one stage's slowest replica dropped (its GPUs left idle, as best-subset data parallelism
//!   leaves a slow GPU out when its gradient traffic costs more than its compute saves), or one
//!   replica added from idle GPUs of one machine, the fastest first.
//!
//! Each candidate is judged like every planner's ([`Planner::judge`]: each stage the cheapest
//! recomputation with which it fits), so a move that frees memory can also drop a recomputation.

use std::collections::HashMap;

use super::baselines::integer_shares;
use super::plan::{HybridPlan, Stage, ZeroStage};
use super::planner::{Planned, Planner, Pool, divisors, split_layers};

/// The best plan a descent from `start` (which fits) reaches before no move helps or the
/// planner's deadline passes; `start` itself when nothing beats it.
pub(crate) fn refine(planner: &mut Planner, pools: &[Pool], start: Planned) -> Planned {
    let cx = Context {
        layer_us: layer_us_by_device(pools),
        machines: pools.iter().flat_map(|p| p.groups.clone()).collect(),
        tp_degrees: [1, 2, 4, 8]
            .into_iter()
            .filter(|&t| planner.tp_splits_evenly(t))
            .collect(),
    };
    let mut best = start;
    loop {
        let mut improved: Option<Planned> = None;
        for plan in moves(&best.plan, &cx) {
            if planner.out_of_time() {
                return improved.unwrap_or(best);
            }
            let Some(p) = planner.judge(plan) else {
                continue;
            };
            if p.report.fits() && p.beats(Some(improved.as_ref().unwrap_or(&best))) {
                improved = Some(p);
            }
        }
        match improved {
            Some(p) => best = p,
            None => return best,
        }
    }
}

/// What the moves need to know of the cluster and the model.
struct Context {
    /// Each device's time for one layer of the whole micro-batch, µs.
    layer_us: HashMap<usize, f64>,
    /// Machines' GPUs (one device group each), fastest type first: where an added replica is
    /// taken from, and what a tensor-parallel group stays inside.
    machines: Vec<Vec<usize>>,
    /// Tensor-parallel degrees that divide the model's heads.
    tp_degrees: Vec<usize>,
}

/// Each device's time for one layer of the whole micro-batch, µs (its type's).
fn layer_us_by_device(pools: &[Pool]) -> HashMap<usize, f64> {
    pools
        .iter()
        .flat_map(|p| p.groups.iter().flatten().map(|&d| (d, p.layer_us)))
        .collect()
}

/// Every plan one move away from `plan` (module docs).
fn moves(plan: &HybridPlan, cx: &Context) -> Vec<HybridPlan> {
    let mut out = Vec::new();
    layer_shifts(plan, &mut out);
    micro_batch_counts(plan, &mut out);
    zero_stages(plan, &mut out);
    share_moves(plan, &cx.layer_us, &mut out);
    replica_moves(plan, &cx.layer_us, &cx.machines, &mut out);
    tp_degrees(plan, cx, &mut out);
    stage_splits(plan, &cx.layer_us, &mut out);
    stage_merges(plan, &cx.layer_us, &mut out);
    out.retain(|p| p != plan);
    out
}

/// Each stage of several replicas and layers cut in two: its first half of replicas takes the
/// first layers, the second half the rest, the layers split by the halves' speeds.
fn stage_splits(plan: &HybridPlan, layer_us: &HashMap<usize, f64>, out: &mut Vec<HybridPlan>) {
    let micro = plan.global_batch / plan.micro_batches;
    for (i, s) in plan.stages.iter().enumerate() {
        if s.dp() < 2 || s.layer_count() < 2 {
            continue;
        }
        let (front, back) = s.replicas.split_at(s.dp() / 2);
        let speed = |half: &[Vec<usize>]| -> f64 { replica_speeds(half, layer_us).iter().sum() };
        let Some(ranges) = split_layers(s.layer_count(), &[speed(front), speed(back)]) else {
            continue;
        };
        let halves: Option<Vec<Stage>> = [front, back]
            .into_iter()
            .zip(ranges)
            .map(|(half, r)| {
                let mut h = s.clone();
                h.layers = [s.layers[0] + r[0], s.layers[0] + r[1]];
                h.replicas = half.to_vec();
                h.shares = whole_sequences(micro, &replica_speeds(half, layer_us))?;
                Some(h)
            })
            .collect();
        if let Some(halves) = halves {
            let mut p = plan.clone();
            p.stages.splice(i..=i, halves);
            out.push(p);
        }
    }
}

/// Each pair of adjacent stages of one TP degree made one stage of both's layers and replicas
/// (the first's ZeRO stage), its shares by speed.
fn stage_merges(plan: &HybridPlan, layer_us: &HashMap<usize, f64>, out: &mut Vec<HybridPlan>) {
    let micro = plan.global_batch / plan.micro_batches;
    for i in 1..plan.stages.len() {
        let (a, b) = (&plan.stages[i - 1], &plan.stages[i]);
        if a.tp() != b.tp() {
            continue;
        }
        let mut merged = a.clone();
        merged.layers = [a.layers[0], b.layers[1]];
        merged.replicas.extend(b.replicas.iter().cloned());
        let Some(shares) = whole_sequences(micro, &replica_speeds(&merged.replicas, layer_us))
        else {
            continue;
        };
        merged.shares = shares;
        let mut p = plan.clone();
        p.stages.splice(i - 1..=i, [merged]);
        out.push(p);
    }
}

/// Each replica's speed ([`replica_speed`]).
fn replica_speeds(replicas: &[Vec<usize>], layer_us: &HashMap<usize, f64>) -> Vec<f64> {
    replicas
        .iter()
        .map(|r| replica_speed(r, layer_us))
        .collect()
}

/// Each stage's GPUs regrouped at every other tensor-parallel degree whose groups each stay
/// inside one machine (its data parallelism follows), with sequence parallelism where TP > 1
/// and the replicas' shares by speed.
fn tp_degrees(plan: &HybridPlan, cx: &Context, out: &mut Vec<HybridPlan>) {
    let micro = plan.global_batch / plan.micro_batches;
    for (i, s) in plan.stages.iter().enumerate() {
        // The stage's GPUs machine by machine, so consecutive GPUs share a machine.
        let mine: std::collections::HashSet<usize> = s.devices().collect();
        let per_machine: Vec<Vec<usize>> = cx
            .machines
            .iter()
            .map(|m| m.iter().copied().filter(|d| mine.contains(d)).collect())
            .filter(|m: &Vec<usize>| !m.is_empty())
            .collect();
        for &t in &cx.tp_degrees {
            if t == s.tp() || per_machine.iter().any(|m| !m.len().is_multiple_of(t)) {
                continue;
            }
            let replicas: Vec<Vec<usize>> = per_machine
                .iter()
                .flat_map(|m| m.chunks(t).map(<[usize]>::to_vec))
                .collect();
            let speed = replica_speeds(&replicas, &cx.layer_us);
            if let Some(shares) = whole_sequences(micro, &speed) {
                let mut p = plan.clone();
                let stage = &mut p.stages[i];
                stage.replicas = replicas;
                stage.shares = shares;
                stage.sequence_parallel = t > 1;
                out.push(p);
            }
        }
    }
}

/// Each stage with its slowest replica dropped, and with one replica added from the first
/// machine (fastest type first) with enough idle GPUs; the stage's shares proportional to its
/// replicas' speeds, or even where they give whole sequences alike.
fn replica_moves(
    plan: &HybridPlan,
    layer_us: &HashMap<usize, f64>,
    machines: &[Vec<usize>],
    out: &mut Vec<HybridPlan>,
) {
    let micro = plan.global_batch / plan.micro_batches;
    let used: std::collections::HashSet<usize> = plan.devices().into_iter().collect();
    for (i, s) in plan.stages.iter().enumerate() {
        let mut with = |replicas: Vec<Vec<usize>>| {
            let speed = replica_speeds(&replicas, layer_us);
            if let Some(shares) = whole_sequences(micro, &speed) {
                let mut p = plan.clone();
                p.stages[i].replicas = replicas;
                p.stages[i].shares = shares;
                out.push(p);
            }
        };
        if s.dp() > 1 {
            let slowest = (0..s.dp())
                .min_by(|&a, &b| {
                    replica_speed(&s.replicas[a], layer_us)
                        .total_cmp(&replica_speed(&s.replicas[b], layer_us))
                })
                .expect("several replicas");
            let mut fewer = s.replicas.clone();
            fewer.remove(slowest);
            with(fewer);
        }
        let idle = machines.iter().find_map(|m| {
            let free: Vec<usize> = m.iter().copied().filter(|d| !used.contains(d)).collect();
            (free.len() >= s.tp()).then(|| free[..s.tp()].to_vec())
        });
        if let Some(replica) = idle {
            let mut more = s.replicas.clone();
            more.push(replica);
            with(more);
        }
    }
}

/// A replica's speed, layers per µs: its slowest GPU's, which its tensor-parallel peers wait for.
fn replica_speed(replica: &[usize], layer_us: &HashMap<usize, f64>) -> f64 {
    1.0 / replica.iter().map(|d| layer_us[d]).fold(0.0, f64::max)
}

/// One layer across each boundary, either way, leaving every stage at least one.
fn layer_shifts(plan: &HybridPlan, out: &mut Vec<HybridPlan>) {
    for b in 1..plan.stages.len() {
        let (left, right) = (&plan.stages[b - 1], &plan.stages[b]);
        if left.layer_count() > 1 {
            out.push(with_boundary(plan, b, left.layers[1] - 1));
        }
        if right.layer_count() > 1 {
            out.push(with_boundary(plan, b, left.layers[1] + 1));
        }
    }
}

/// `plan` with the boundary between stages `b - 1` and `b` at layer `at`.
fn with_boundary(plan: &HybridPlan, b: usize, at: usize) -> HybridPlan {
    let mut p = plan.clone();
    p.stages[b - 1].layers[1] = at;
    p.stages[b].layers[0] = at;
    p
}

/// Every other micro-batch count whose micro-batch gives each replica a whole sequence or more.
fn micro_batch_counts(plan: &HybridPlan, out: &mut Vec<HybridPlan>) {
    for m in divisors(plan.global_batch) {
        if m == plan.micro_batches {
            continue;
        }
        let micro = plan.global_batch / m;
        let stages: Option<Vec<Stage>> = plan
            .stages
            .iter()
            .map(|s| {
                let mut s = s.clone();
                s.shares = whole_sequences(micro, &s.replica_shares())?;
                Some(s)
            })
            .collect();
        if let Some(stages) = stages {
            out.push(HybridPlan {
                micro_batches: m,
                stages,
                ..plan.clone()
            });
        }
    }
}

/// Shares of `micro` sequences in proportion to `weights`, whole sequences each (`None` inside
/// the `Some` where they come out even); `None` when there are fewer sequences than replicas.
fn whole_sequences(micro: u32, weights: &[f64]) -> Option<Option<Vec<f64>>> {
    let shares = integer_shares(micro, weights)?;
    let even = shares.iter().all(|&s| (s - shares[0]).abs() < 1e-12);
    Some((!even).then_some(shares))
}

/// Each stage at each other ZeRO stage.
fn zero_stages(plan: &HybridPlan, out: &mut Vec<HybridPlan>) {
    for i in 0..plan.stages.len() {
        for zero in [
            ZeroStage::None,
            ZeroStage::Optimizer,
            ZeroStage::Gradients,
            ZeroStage::Parameters,
        ] {
            if zero != plan.stages[i].zero {
                let mut p = plan.clone();
                p.stages[i].zero = zero;
                out.push(p);
            }
        }
    }
}

/// Each stage of several replicas with even shares, speed-proportional shares, and one sequence
/// moved from its slowest replica (time per micro-batch) to its fastest.
fn share_moves(plan: &HybridPlan, layer_us: &HashMap<usize, f64>, out: &mut Vec<HybridPlan>) {
    let micro = plan.global_batch / plan.micro_batches;
    for (i, s) in plan.stages.iter().enumerate() {
        if s.dp() < 2 {
            continue;
        }
        let speed = replica_speeds(&s.replicas, layer_us);
        let mut with = |shares: Option<Vec<f64>>| {
            let mut p = plan.clone();
            p.stages[i].shares = shares;
            out.push(p);
        };
        for weights in [vec![1.0; s.dp()], speed.clone()] {
            if let Some(shares) = whole_sequences(micro, &weights) {
                with(shares);
            }
        }
        if let Some(shares) = one_sequence_moved(micro, &s.replica_shares(), &speed) {
            with(Some(shares));
        }
    }
}

/// `shares` of `micro` sequences with one sequence moved from the replica that takes longest
/// (share over speed) to the one that would take least with it; `None` when the slowest holds a
/// single sequence or the move would not shorten the longest.
fn one_sequence_moved(micro: u32, shares: &[f64], speed: &[f64]) -> Option<Vec<f64>> {
    let f = f64::from(micro);
    let mut counts: Vec<f64> = shares.iter().map(|s| (s * f).round()).collect();
    let time = |c: f64, i: usize| c / speed[i];
    let slowest =
        (0..counts.len()).max_by(|&a, &b| time(counts[a], a).total_cmp(&time(counts[b], b)))?;
    let fastest = (0..counts.len())
        .filter(|&i| i != slowest)
        .min_by(|&a, &b| time(counts[a] + 1.0, a).total_cmp(&time(counts[b] + 1.0, b)))?;
    if counts[slowest] <= 1.0
        || time(counts[fastest] + 1.0, fastest) >= time(counts[slowest], slowest)
    {
        return None;
    }
    counts[slowest] -= 1.0;
    counts[fastest] += 1.0;
    Some(counts.iter().map(|c| c / f).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::parse_cluster;
    use crate::cost::CostModel;
    use crate::precision::Precision;
    use crate::zoo::{Framework, ZooOptions};

    use super::super::planner::stage;

    /// Llama 3.2 1B (16 layers) on one DGX A100 as two stages of four data-parallel GPUs, the
    /// layers cut at `at`.
    fn two_stages(at: usize) -> HybridPlan {
        HybridPlan::one_f_one_b(
            8,
            2,
            vec![
                stage([0, at], &[0, 1, 2, 3], 1, ZeroStage::None, None),
                stage([at, 16], &[4, 5, 6, 7], 1, ZeroStage::None, None),
            ],
        )
    }

    #[test]
    fn refining_a_lopsided_pipeline_reaches_the_best_cut_found_by_brute_force() {
        let cluster = parse_cluster(
            "name = \"dgx\"\n[[machine]]\nname = \"a\"\ngpu = \"A100-80GB\"\ngpus = 8\n\
             intra_bandwidth = \"300 GB/s\"\ninterconnect = \"nvswitch\"\nnic = \"200 Gbps\"\n",
            "<test>",
        )
        .unwrap();
        let cost = CostModel {
            precision: Precision::Bf16,
            ..CostModel::default()
        };
        let opts = ZooOptions {
            framework: Framework::Pytorch,
            seq: Some(256),
            ..ZooOptions::default()
        };
        let mut planner =
            Planner::new("llama-1b", &opts, Precision::Bf16, &cluster, &cost, 8).unwrap();
        let pools = planner.pools().unwrap();
        let brute = (1..16)
            .filter_map(|at| planner.judge(two_stages(at)))
            .map(|p| p.report.iteration_us)
            .fold(f64::INFINITY, f64::min);
        let start = planner.judge(two_stages(1)).unwrap();
        assert!(start.report.fits());
        let refined = refine(&mut planner, &pools, start.clone());
        assert!(refined.report.fits());
        assert!(refined.report.iteration_us < start.report.iteration_us);
        assert!(
            refined.report.iteration_us <= brute * (1.0 + 1e-9),
            "{} µs refined, {brute} µs the best cut",
            refined.report.iteration_us
        );
    }

    #[test]
    fn a_sequence_moves_from_the_slowest_replica_to_the_fastest() {
        // Four sequences each on a replica twice as fast as the other: the slow one ends last.
        let moved = one_sequence_moved(8, &[0.5, 0.5], &[2.0, 1.0]).unwrap();
        assert_eq!(moved, vec![5.0 / 8.0, 3.0 / 8.0]);
        // Five against three at speeds 2 and 1: 2.5 against 3, and six against two would be 3
        // against 2 — no shorter: no move.
        assert_eq!(
            one_sequence_moved(8, &[5.0 / 8.0, 3.0 / 8.0], &[2.0, 1.0]),
            None
        );
        // A replica of one sequence keeps it.
        assert_eq!(one_sequence_moved(2, &[0.5, 0.5], &[1.0, 1.0]), None);
    }

    #[test]
    fn tensor_parallel_groups_stay_inside_a_machine() {
        // Two machines of four GPUs, one stage over six of them (four and two): TP 2 splits
        // each machine's share in pairs; TP 4 would straddle the machines and is not offered.
        let cx = Context {
            layer_us: (0..8).map(|d| (d, 1.0)).collect(),
            machines: vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]],
            tp_degrees: vec![1, 2, 4, 8],
        };
        let plan = HybridPlan::one_f_one_b(
            12,
            1,
            vec![stage([0, 4], &[0, 1, 2, 3, 4, 5], 1, ZeroStage::None, None)],
        );
        let mut out = Vec::new();
        tp_degrees(&plan, &cx, &mut out);
        assert_eq!(out.len(), 1);
        let s = &out[0].stages[0];
        assert_eq!(s.replicas, vec![vec![0, 1], vec![2, 3], vec![4, 5]]);
        assert!(s.sequence_parallel);
        assert_eq!(s.shares, None);
    }

    #[test]
    fn a_stage_cut_in_two_and_merged_again_is_the_stage() {
        let layer_us: HashMap<usize, f64> = (0..4).map(|d| (d, 1.0)).collect();
        let plan = HybridPlan::one_f_one_b(
            8,
            2,
            vec![stage([0, 8], &[0, 1, 2, 3], 1, ZeroStage::Optimizer, None)],
        );
        let mut split = Vec::new();
        stage_splits(&plan, &layer_us, &mut split);
        assert_eq!(split.len(), 1);
        let halves = &split[0].stages;
        assert_eq!((halves[0].layers, halves[1].layers), ([0, 4], [4, 8]));
        assert_eq!(halves[0].replicas, vec![vec![0], vec![1]]);
        assert_eq!(halves[1].replicas, vec![vec![2], vec![3]]);
        let mut merged = Vec::new();
        stage_merges(&split[0], &layer_us, &mut merged);
        assert_eq!(merged, vec![plan]);
    }

    #[test]
    fn whole_sequences_are_none_when_even_and_refused_below_one_each() {
        assert_eq!(whole_sequences(8, &[1.0, 1.0]), Some(None));
        assert_eq!(
            whole_sequences(8, &[3.0, 1.0]),
            Some(Some(vec![6.0 / 8.0, 2.0 / 8.0]))
        );
        assert_eq!(whole_sequences(1, &[1.0, 1.0]), None);
    }
}
