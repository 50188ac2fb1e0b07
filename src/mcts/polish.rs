//! After the tree (beyond TAG): start from the better of the tree's best strategy and the best
//! data parallelism ([`crate::data_parallel`]), then polish it by local search, so the search
//! never returns anything slower than what an engineer would run by hand.
//!
//! The local search moves one op group at a time, in the tree's order (most compute first), to
//! the best of a few candidate actions: the actions other groups use, the other replication
//! options on the group's own GPUs, and data parallelism over every GPU; it also tries the other
//! batch split and AllReduce packings for the whole strategy. A move is kept only when strictly
//! faster. It stops after [`MctsConfig::polish`] simulations or at the search's time limit.

use std::time::Instant;

use rayon::prelude::*;

use super::search::Mcts;
use super::tree::Outcome;
use crate::data_parallel::{best_data_parallel, variants};
use crate::error::Result;
use crate::strategy::{AllReducePacking, BatchSplit, ReplicationOption, Strategy};

/// A complete strategy in the search's terms, with the knobs the search leaves global.
#[derive(Clone)]
pub(super) struct Point {
    pub(super) choice: Vec<u16>,
    pub(super) split: BatchSplit,
    pub(super) packing: AllReducePacking,
    pub(super) outcome: Outcome,
}

/// Where the polished search ends: a point of the search space, or the best data parallelism
/// when no point of the space expresses it (the single fastest GPU, or a subset the action space
/// of a large cluster lacks) and nothing found is faster.
pub(super) enum Finish {
    Point(Point),
    Fixed(Strategy, Outcome),
}

impl Mcts<'_> {
    /// The tree's best, or the best data parallelism where faster, polished.
    pub(super) fn polished(&self, deadline: Option<Instant>) -> Result<(Finish, usize)> {
        let (choice, outcome) = self.best.clone().expect("DP is evaluated first");
        let tree = Point {
            choice,
            split: self.split,
            packing: outcome.packing,
            outcome,
        };
        let dp = best_data_parallel(&self.problem, &self.routes)?;
        let dp_outcome = Outcome {
            time_us: dp.time_us,
            fits: dp.fits,
            packing: dp.strategy.allreduce,
        };
        let start = match self.as_point(&dp.strategy, dp_outcome) {
            Some(p) if p.outcome.better_than(&tree.outcome) => p,
            _ => tree,
        };
        let (point, simulated) = self.local_search(start, deadline)?;
        if dp_outcome.better_than(&point.outcome) {
            return Ok((Finish::Fixed(dp.strategy, dp_outcome), simulated));
        }
        Ok((Finish::Point(point), simulated))
    }

    /// `s` (every op in one group) as a point, when its decision is one of the actions.
    fn as_point(&self, s: &Strategy, outcome: Outcome) -> Option<Point> {
        let decision = s.decision(0);
        let a = self.actions.iter().position(|x| x == decision)?;
        Some(Point {
            choice: vec![a as u16; self.groups],
            split: s.batch_split,
            packing: s.allreduce,
            outcome,
        })
    }

    fn local_search(&self, mut at: Point, deadline: Option<Instant>) -> Result<(Point, usize)> {
        let budget = self.config.polish;
        let out_of_time = || deadline.is_some_and(|d| Instant::now() >= d);
        // The global knobs first: shares and packing, as data parallelism tries them.
        let every_gpu: Vec<usize> = (0..self.problem.cluster.devices.len()).collect();
        let knobs: Vec<Point> = variants(self.problem.cluster, &every_gpu)
            .into_iter()
            .filter(|&(s, k)| (s, k) != (at.split, at.packing))
            .map(|(split, packing)| Point {
                split,
                packing,
                ..at.clone()
            })
            .collect();
        let mut used = knobs.len();
        at = self.improved(at, knobs)?;
        for g in 0..self.groups {
            if used >= budget || out_of_time() {
                break;
            }
            let moves: Vec<Point> = self
                .candidates(&at.choice, g)
                .into_iter()
                .take(budget - used)
                .map(|a| {
                    let mut choice = at.choice.clone();
                    choice[g] = a;
                    Point {
                        choice,
                        ..at.clone()
                    }
                })
                .collect();
            used += moves.len();
            at = self.improved(at, moves)?;
        }
        Ok((at, used))
    }

    /// Actions to try for group `g`: those other groups use, the other options on its GPUs, and
    /// data parallelism over every GPU; not its current one.
    fn candidates(&self, choice: &[u16], g: usize) -> Vec<u16> {
        let options = ReplicationOption::ALL.len() as u16;
        let own = choice[g] - choice[g] % options;
        let mut out: Vec<u16> = choice.to_vec();
        out.extend(own..own + options);
        out.push(0);
        out.sort_unstable();
        out.dedup();
        out.retain(|&a| a != choice[g]);
        out
    }

    /// The fastest of `points` (simulated in parallel; ties: the first) when it beats `at`, else
    /// `at`.
    fn improved(&self, at: Point, points: Vec<Point>) -> Result<Point> {
        let scored: Vec<Result<Point>> = points
            .into_par_iter()
            .map(|mut p| {
                let (_, e) = self.evaluate_with(&p.choice, p.packing, p.split)?;
                p.outcome = Outcome {
                    time_us: e.report.iteration_us,
                    fits: e.result.oom.is_empty(),
                    packing: p.packing,
                };
                Ok(p)
            })
            .collect();
        let mut best = at;
        for p in scored {
            let p = p?;
            if p.outcome.better_than(&best.outcome) {
                best = p;
            }
        }
        Ok(best)
    }
}
