//! The search's first leaves (beyond TAG, [`MctsConfig::seed_device_groups`]): what an engineer
//! tries first on a heterogeneous cluster — data parallelism inside each device group alone, then
//! over every GPU of one type — evaluated before PUCT picks anything; those that measure faster
//! than the search's start get the policy's top prior at the root, so a policy that ranks them
//! low still weighs them by what they scored.
//!
//! [`MctsConfig::seed_device_groups`]: super::MctsConfig::seed_device_groups

use std::time::Duration;

use super::actions::{one_type_actions, single_group_actions};
use super::search::Mcts;
use crate::error::Result;
use crate::problem::Problem;
use crate::strategy::ReplicationOption;

impl Mcts<'_> {
    /// The first leaves: each root action that all-reduces over one device group alone, then each
    /// that puts a parameter server there, then both over every GPU of one type where the type
    /// spans several device groups (DP over every GPU, the start, is already in the tree), within
    /// the budget; a leaf's completion repeats its first decision, so each is that subset's data
    /// parallelism for every op group. With a policy, the root priors of the seeds faster than
    /// the start (bucketed data parallelism over every GPU) are then lifted ([`lift_priors`]).
    pub(super) fn seed_device_groups(&mut self) -> Result<()> {
        let cluster = self.problem.cluster;
        let ps = single_group_actions(cluster, &self.actions, ReplicationOption::Ps);
        let by_type = [ReplicationOption::AllReduce, ReplicationOption::Ps]
            .map(|option| one_type_actions(cluster, &self.actions, option));
        // No two are the same action: a one-type union spans several device groups.
        let seeds: Vec<u16> = self
            .single_group_allreduce
            .iter()
            .chain(&ps)
            .chain(by_type.iter().flatten())
            .copied()
            .filter(|&a| a != 0)
            .take(self.config.iterations)
            .collect();
        let mut seeds = self.evaluate_seeds(seeds)?;
        if self.config.seed_one_gpu {
            let one_gpu = self.promising_one_gpu_seeds();
            seeds.extend(self.evaluate_seeds(one_gpu)?);
        }
        // Only a seed that measured faster than the start contradicts the policy's ranking; one
        // that measured slower keeps the prior the policy gave it. Both outcomes are cached.
        let start = self.cache[&vec![0u16; self.groups]];
        let faster: Vec<u16> = seeds
            .into_iter()
            .filter(|&a| {
                // A seed abandoned at the time limit has no outcome.
                let seed = self.cache.get(&vec![a; self.groups]);
                seed.is_some_and(|seed| seed.fits && seed.better_than(&start))
            })
            .collect();
        if let Some(priors) = self.tree.nodes[0].priors.as_mut() {
            lift_priors(priors, &faster);
        }
        Ok(())
    }

    /// Simulate each of `seeds` (a root action, repeated for every op group) as a leaf, as many as
    /// the time limit holds; the ones simulated.
    fn evaluate_seeds(&mut self, seeds: Vec<u16>) -> Result<Vec<u16>> {
        let seeds = self.seeds_in_time(seeds);
        let paths: Vec<Vec<u16>> = seeds.iter().map(|&a| vec![a]).collect();
        for path in &paths {
            self.enter(0, path);
        }
        self.evaluate_and_backup(&paths)?;
        self.seeds += seeds.len();
        Ok(seeds)
    }

    /// The actions that duplicate every op group on one device group's GPUs (one GPU's step, no
    /// gradient to synchronise) whose op compute alone, the whole batch on one of its GPUs, is
    /// shorter than the fastest fitting leaf so far, within the budget left. Why the bound: on
    /// TAG's clusters one GPU's step is far slower than data parallelism and would only spend
    /// the budget; in 16 bits on today's clusters one H100 can be the fastest plan of all.
    fn promising_one_gpu_seeds(&self) -> Vec<u16> {
        let cluster = self.problem.cluster;
        let best = match &self.best {
            Some((_, incumbent)) if incumbent.fits => incumbent.time_us,
            _ => f64::INFINITY,
        };
        let actions = single_group_actions(cluster, &self.actions, ReplicationOption::Duplicate);
        let budget_left = self.config.iterations.saturating_sub(self.iterations);
        actions
            .into_iter()
            .filter(|&a| a != 0 && self.one_gpu_compute_us(a) < best)
            .take(budget_left)
            .collect()
    }

    /// The op compute of the whole batch on one GPU of the device group that root action `a`
    /// replicates over.
    fn one_gpu_compute_us(&self, a: u16) -> f64 {
        let Problem {
            graph,
            cluster,
            cost,
        } = self.problem;
        let device = self.actions[a as usize].devices[0];
        cost.serial_us(graph, &cluster.devices[device].gpu)
    }
}

impl Mcts<'_> {
    /// The first of `seeds` whose simulations (side by side) end within the time limit, with one
    /// more simulation's time kept for the result; all of them without a limit. On a graph of
    /// tens of thousands of ops a round of seeds takes seconds, past a short `--time`.
    fn seeds_in_time(&self, mut seeds: Vec<u16>) -> Vec<u16> {
        let Some(limit) = self.config.seconds else {
            return seeds;
        };
        let left = Duration::from_secs_f64(limit)
            .saturating_sub(self.began.elapsed())
            .saturating_sub(self.slowest_simulation.get());
        let fit = (0..=seeds.len())
            .rev()
            .find(|&n| self.time_for(n) <= left)
            .unwrap_or(0);
        seeds.truncate(fit);
        seeds
    }
}

/// Raise the prior of every action in `lifted` to the largest prior, then renormalise to a sum of
/// one. Why: PUCT's exploration term is proportional to the prior, so a seed the policy ranks at
/// a thousandth of its favourite is almost never selected again, however well it scored; here
/// the tree's statistics decide between the seeds and the policy's favourites (measured on TAG's
/// testbed: the trained policy put 0.002 on the V100 machine alone against 0.03 on data
/// parallelism over all 16 GPUs, and its 300 leaves never returned to the V100 machine, the best
/// seed). Uniform priors are left as they are: every action already holds the top prior.
pub fn lift_priors(priors: &mut [f64], lifted: &[u16]) {
    let top = priors.iter().copied().fold(0.0, f64::max);
    for &a in lifted {
        priors[a as usize] = top;
    }
    let sum: f64 = priors.iter().sum();
    if sum > 0.0 {
        priors.iter_mut().for_each(|p| *p /= sum);
    }
}
