//! FlexFlow-style MCMC search (Jia et al., 2019; QuickP's MCMC baseline): ops are grouped by
//! METIS, and each group takes one configuration from a menu — data-parallel over every GPU, over
//! one machine's GPUs or one device group's GPUs, or whole on one GPU; a step changes one random
//! group's configuration, simulates, and accepts by the Metropolis rule on the
//! simulated iteration time. It starts from data parallelism and returns the best strategy
//! seen. Seeded, so the same seed gives the same placement.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::{Budget, Placer};
use crate::error::Result;
use crate::evaluate::{Placement, evaluate, until};
use crate::group::{metis::metis, op_weights, reference_gpu};
use crate::problem::Problem;
use crate::strategy::{AllReducePacking, BatchSplit, GroupDecision, ReplicationOption, Strategy};

pub(crate) struct Mcmc;

/// Groups per GPU: enough for the search to move work around, few enough to explore.
const GROUPS_PER_GPU: usize = 4;
/// A move that is this much slower (relative) is accepted with probability 1/e.
const TEMPERATURE: f64 = 0.05;

impl Placer for Mcmc {
    fn name(&self) -> &'static str {
        "mcmc"
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let began = Instant::now();
        let n = p.cluster.devices.len();
        let weights = op_weights(p.graph, reference_gpu(p.graph), p.cost);
        // METIS refuses parts of a vertex or two; tiny graphs get fewer groups.
        let k = (GROUPS_PER_GPU * n).min(p.graph.len() / 4).max(1);
        let grouping = metis(p.graph, &weights, k, budget.seed)?;
        let mut rng = StdRng::seed_from_u64(budget.seed);
        let menu = menu(p);
        // Choice 0, data parallel over every GPU, for every group: DP-NCCL.
        let mut current = vec![0; grouping.num_groups()];
        let build = |choices: &[usize]| strategy(p, &grouping.op_group, &menu, choices);
        let mut current_cost = cost(p, &build(&current)?)?;
        let (mut best, mut best_cost) = (current.clone(), current_cost);
        let mut taken = 0;
        let end = budget.seconds.map(|s| began + Duration::from_secs_f64(s));
        for _ in 0..budget.steps {
            if end.is_some_and(|end| Instant::now() >= end) {
                break;
            }
            taken += 1;
            let mut next = current.clone();
            let g = rng.random_range(0..next.len());
            next[g] = rng.random_range(0..menu.len());
            if next[g] == current[g] {
                continue;
            }
            // Under equal time a step still simulating at the end is abandoned, not finished.
            let Some(next_cost) = until(end, || cost(p, &build(&next)?))? else {
                break;
            };
            let accept = next_cost <= current_cost || {
                let worse = (next_cost - current_cost) / (TEMPERATURE * current_cost);
                rng.random::<f64>() < (-worse).exp()
            };
            if accept {
                current = next;
                current_cost = next_cost;
                if current_cost < best_cost {
                    best = current.clone();
                    best_cost = current_cost;
                }
            }
        }
        Ok(Placement::plain(
            build(&best)?,
            format!(
                "mcmc: {} METIS groups, best of {} steps from data parallel",
                grouping.num_groups(),
                taken
            ),
        ))
    }
}

/// The configurations a group may take: data parallel over every GPU (first), over each
/// machine's and each device group's GPUs (when that is a proper subset of two or more), and
/// whole on each single GPU.
fn menu(p: &Problem) -> Vec<GroupDecision> {
    let n = p.cluster.devices.len();
    let data_parallel = |devices: Vec<usize>| GroupDecision {
        devices,
        option: ReplicationOption::AllReduce,
    };
    let mut menu = vec![data_parallel((0..n).collect())];
    let subsets = p
        .cluster
        .machines
        .iter()
        .map(|m| &m.devices)
        .chain(p.cluster.groups.iter().map(|g| &g.devices));
    for devices in subsets {
        let mut devices = devices.clone();
        devices.sort_unstable();
        let candidate = data_parallel(devices);
        if candidate.devices.len() > 1 && candidate.devices.len() < n && !menu.contains(&candidate)
        {
            menu.push(candidate);
        }
    }
    menu.extend((0..n).map(|d| GroupDecision {
        devices: vec![d],
        option: ReplicationOption::ModelParallel,
    }));
    menu
}

/// The strategy for one menu choice per METIS group. Groups with the same choice share one
/// strategy group, so the all-data-parallel start is exactly DP-NCCL (one packed AllReduce).
fn strategy(
    p: &Problem,
    op_group: &[u32],
    menu: &[GroupDecision],
    choices: &[usize],
) -> Result<Strategy> {
    let n = p.cluster.devices.len();
    let mut slot = vec![u32::MAX; menu.len()];
    let mut decisions = Vec::new();
    for &c in choices {
        if slot[c] == u32::MAX {
            slot[c] = decisions.len() as u32;
            decisions.push(menu[c].clone());
        }
    }
    let ops = op_group
        .iter()
        .map(|&g| slot[choices[g as usize]])
        .collect();
    let mut s = Strategy::new("mcmc", ops, decisions, BatchSplit::Even, p.graph.len(), n)?;
    s.allreduce = AllReducePacking::Packed;
    Ok(s)
}

/// Simulated iteration time, with out-of-memory strategies penalised by their excess so the
/// search is pulled back towards strategies that fit.
fn cost(p: &Problem, s: &Strategy) -> Result<f64> {
    let e = evaluate(p, &Placement::plain(s.clone(), ""))?;
    let t = e.report.iteration_us;
    if e.result.oom.is_empty() {
        return Ok(t);
    }
    let excess: f64 = e.result.oom.iter().map(|o| o.excess_bytes()).sum();
    let capacity: f64 = p.cluster.devices.iter().map(|d| d.memory_bytes).sum();
    Ok(t * (2.0 + 10.0 * excess / capacity))
}
