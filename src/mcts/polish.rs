//! After the tree (beyond TAG): polish by local search from up to three starts — the best data
//! parallelism over device-group subsets ([`crate::data_parallel`]), the fastest of the
//! placements the caller gives ([`Mcts::with_starts`]: the cheap heuristics') where the search
//! space expresses it, and the tree's best — and return the fastest strategy seen, polished or
//! not (a list schedule with its execution order included). So the search never returns anything
//! slower than what an engineer would run by hand or a heuristic finds. Against the
//! `local-search` placer at the same polish budget (which polishes only the first start) it is
//! not slower on any instance measured, but not by construction: a walk that falls behind a
//! start it cannot move to is given up, where `local-search`, which has no such start, goes on.
//!
//! The local search moves one op group at a time, in the tree's order (most compute first), to
//! the best of a few candidate actions: the actions other groups use, the other replication
//! options on the group's own GPUs, data parallelism over every GPU and over each device group;
//! it also tries the other batch splits and AllReduce packings for the whole strategy. A move is
//! kept only when strictly faster. Sweeps repeat until one improves nothing (a local optimum), the
//! [`MctsConfig::polish`] simulations of that start are spent, the search's time limit passes, or
//! the walk falls so far behind a start it cannot move to (a pipeline, a list schedule) that its
//! own pace cannot catch up ([`cannot_catch_up`]). The walks run side by side.

use std::collections::HashSet;
use std::time::Instant;

use rayon::prelude::*;

use super::known::PointKey;
use super::reserve::no_room_for;
use super::search::Mcts;
use super::tree::Outcome;
use crate::data_parallel::{best_data_parallel_until, variants};
use crate::error::Result;
use crate::evaluate::{Placement, evaluate, limit_to_beat, until};
use crate::strategy::{AllReducePacking, BatchSplit, ReplicationOption};

/// A complete strategy in the search's terms, with the knobs the search leaves global.
#[derive(Clone)]
pub(super) struct Point {
    pub(super) choice: Vec<u16>,
    pub(super) split: BatchSplit,
    /// Groups whose replicas share the batch the other way (sorted).
    pub(super) other_split: Vec<usize>,
    pub(super) packing: AllReducePacking,
    pub(super) outcome: Outcome,
}

impl Point {
    fn key(&self) -> PointKey {
        (
            self.choice.clone(),
            self.split,
            self.other_split.clone(),
            self.packing,
        )
    }

    /// The point with group `g`'s action `a` (and the shares of the rest).
    fn moved(&self, g: usize, a: u16) -> Point {
        let mut choice = self.choice.clone();
        choice[g] = a;
        Point {
            choice,
            other_split: self
                .other_split
                .iter()
                .copied()
                .filter(|&h| h != g)
                .collect(),
            ..self.clone()
        }
    }

    /// The point with group `g`'s batch shares the other way.
    fn split_flipped(&self, g: usize) -> Point {
        let mut other_split = self.other_split.clone();
        match other_split.binary_search(&g) {
            Ok(at) => {
                other_split.remove(at);
            }
            Err(at) => other_split.insert(at, g),
        }
        Point {
            other_split,
            ..self.clone()
        }
    }
}

/// One local search to run: where it starts, how many simulations it may take, and the time
/// (µs) above which it gives up ...
struct Walk {
    start: Point,
    budget: usize,
    /// The order a sweep visits the op groups in.
    order: Vec<usize>,
    give_up_above: f64,
    /// ... checked once a sweep has visited this many groups, and after every sweep.
    give_up_after: usize,
}

/// The walk from data parallelism over every GPU runs only when that is at most this many times
/// slower than the fastest start (on TAG's cloud it is 8 to 40 times slower, and its walk ends
/// there too) ...
const DATA_PARALLEL_WALK_WITHIN: f64 = 4.0;
/// ... and gives up when, past the third of the op groups holding the most parameters, it is
/// still this many times slower than the fastest start.
const DATA_PARALLEL_WALK_GIVES_UP: f64 = 1.25;

/// Whether a walk that began its sweep at `sweep_start_us` and is at `now_us` after visiting
/// `visited` of its `groups` op groups is too slow to ever reach `target_us`, a start no move
/// reaches (on TAG's cloud, BERT-large's pipeline is 9% faster than where the walks from data
/// parallelism end, and they took three quarters of `place`'s time to get there). The walk is
/// projected generously: the rest of the sweep gains at the pace of its part so far (the op
/// groups are visited most compute first, so the later ones usually gain less), and one more
/// sweep gains as much again (with don't-look bits, later sweeps usually gain far less). Beyond
/// TAG, whose search has no such starts.
fn cannot_catch_up(
    sweep_start_us: f64,
    now_us: f64,
    visited: usize,
    groups: usize,
    target_us: f64,
) -> bool {
    if visited == 0 || !now_us.is_finite() {
        return false;
    }
    let sweep_gain = (sweep_start_us - now_us) * groups as f64 / visited as f64;
    sweep_start_us - 2.0 * sweep_gain > target_us
}

/// Where the polished search ends: a point of the search space, or a start no point of the space
/// expresses (the single fastest GPU, a subset the action space of a large cluster lacks, a list
/// scheduler's per-op placement) when nothing found is faster.
pub(super) enum Finish {
    Point(Point),
    Fixed(Placement, Outcome),
}

impl Finish {
    pub(super) fn outcome(&self) -> Outcome {
        match self {
            Finish::Point(p) => p.outcome,
            Finish::Fixed(_, o) => *o,
        }
    }
}

impl Mcts<'_> {
    /// Each start's polished point (distinct ones) and the fastest start, fastest first, to be
    /// judged after TAG's SFB double check (which can reorder them); the simulations run.
    pub(super) fn polished(&self, deadline: Option<Instant>) -> Result<(Vec<Finish>, usize)> {
        let (dp, mut simulated) = match &self.data_parallel {
            Some(known) => (known.clone(), 0),
            None => {
                // Under a time limit the subsets are tried while it lasts (`local-search` under
                // equal time: its start took seconds past the limit on 1,024 GPUs).
                let dp = best_data_parallel_until(&self.problem, deadline)?;
                let outcome = Outcome {
                    time_us: dp.time_us,
                    fits: dp.fits,
                    packing: dp.strategy.allreduce,
                };
                (
                    (Placement::plain(dp.strategy, dp.note), outcome),
                    dp.simulated,
                )
            }
        };
        let mut fixed = vec![dp];
        for (start, known) in &self.starts {
            let outcome = match known {
                Some(o) => *o,
                None if no_room_for(deadline, self.slowest_simulation.get()) => continue,
                None => {
                    simulated += 1;
                    self.outcome_of_placement(start)?
                }
            };
            fixed.push((start.clone(), outcome));
        }
        // A pipeline the tree found is a start the moves cannot change, as pipeline-dp's is.
        // Before any iteration the tree's best is its start, DP-NCCL or Horovod: kept, since a
        // time limit spent before the search leaves dp-subset with the fastest GPU alone, which
        // can be far slower.
        let tree_best = self.best.clone();
        let tree_pipeline = tree_best
            .as_ref()
            .filter(|(c, _)| self.frame_of(c).is_some());
        if let Some((key, outcome)) = tree_pipeline {
            let placement = self.pipeline_placement(key, outcome.packing);
            fixed.push((placement, *outcome));
        }
        // Polish dp-subset (what `local-search` does), the best start if another, the tree's best
        // and, where it is close enough, the tree's start: the other starts are far slower on the
        // clusters where they differ.
        let mut starts: Vec<Point> = self.as_point(&fixed[0].0, fixed[0].1).into_iter().collect();
        let best_start = fixed
            .iter()
            .filter_map(|(start, o)| self.as_point(start, *o))
            .reduce(|a, b| {
                if b.outcome.better_than(&a.outcome) {
                    b
                } else {
                    a
                }
            });
        starts.extend(best_start);
        if let Some((choice, outcome)) = tree_best.filter(|(c, _)| self.frame_of(c).is_none()) {
            starts.push(Point {
                choice,
                split: self.split,
                other_split: Vec::new(),
                packing: outcome.packing,
                outcome,
            });
        }
        let catch_up_to = fastest_fitting(&fixed);
        // dp-subset's walk gets the whole budget (it is `local-search`'s); later ones half.
        let mut walks: Vec<Walk> = starts
            .into_iter()
            .enumerate()
            .map(|(i, start)| Walk {
                start,
                budget: if i == 0 {
                    self.config.polish
                } else {
                    self.config.polish / 2
                },
                order: (0..self.groups).collect(),
                give_up_above: f64::INFINITY,
                give_up_after: 0,
            })
            .collect();
        walks.extend(self.data_parallel_walk(catch_up_to));
        let mut seen = HashSet::new();
        walks.retain(|w| seen.insert(w.start.key()));
        // The walks run side by side: on two cores a walk's own parallel simulations often
        // leave one idle (a group with one or three fresh candidates).
        let mut walks: Vec<(Point, usize)> = walks
            .into_par_iter()
            .map(|w| self.local_search(w, catch_up_to, deadline))
            .collect::<Result<_>>()?;
        // Both ends stay finishes: the SFB check can reorder them.
        let fastest = walks
            .iter()
            .map(|(p, _)| p)
            .reduce(|a, b| {
                if b.outcome.better_than(&a.outcome) {
                    b
                } else {
                    a
                }
            })
            .cloned();
        if let Some(fastest) = fastest {
            walks.push(self.shares_refined(fastest, deadline)?);
        }
        let mut finishes = Vec::new();
        for (point, used) in walks {
            simulated += used;
            if !finishes
                .iter()
                .any(|f| matches!(f, Finish::Point(q) if q.key() == point.key()))
            {
                finishes.push(Finish::Point(point));
            }
        }
        let (s, o) = fixed
            .into_iter()
            .reduce(|a, b| if b.1.better_than(&a.1) { b } else { a })
            .expect("dp-subset is a start");
        finishes.push(Finish::Fixed(s, o));
        finishes.sort_by(|a, b| {
            let (a, b) = (a.outcome(), b.outcome());
            (!a.fits, a.time_us)
                .partial_cmp(&(!b.fits, b.time_us))
                .expect("finite times")
        });
        Ok((finishes, simulated))
    }

    /// The walk from the tree's start, data parallelism over every GPU: on a heterogeneous
    /// cluster with slow links between machines it is slower than dp-subset, yet moving its few
    /// parameter-heavy groups onto one machine's GPUs reaches what no other walk does (VGG19 on
    /// TAG's testbed: 68.1 ms where the others stop at 113.8 ms). Its sweeps visit those groups
    /// first, so a walk in vain (BERT's parameters are spread evenly) is given up early.
    fn data_parallel_walk(&self, fastest: f64) -> Option<Walk> {
        if self.iterations == 0 {
            // No tree, no tree's start: `local-search` walks from dp-subset only.
            return None;
        }
        let choice = vec![0u16; self.groups];
        let outcome = *self.cache.get(&choice)?;
        if !outcome.fits || outcome.time_us > DATA_PARALLEL_WALK_WITHIN * fastest {
            return None;
        }
        Some(Walk {
            start: Point {
                choice,
                split: self.split,
                other_split: Vec::new(),
                packing: outcome.packing,
                outcome,
            },
            budget: self.config.polish / 2,
            order: self.by_parameters(),
            give_up_above: DATA_PARALLEL_WALK_GIVES_UP * fastest,
            give_up_after: self.groups.div_ceil(3),
        })
    }

    /// The op groups, those holding the most resident bytes (parameters, optimizer state) first.
    fn by_parameters(&self) -> Vec<usize> {
        let mut bytes = vec![0.0; self.groups];
        for (op, &g) in self.op_group.iter().enumerate() {
            bytes[g as usize] += self.problem.graph.op(op).resident_bytes;
        }
        let mut order: Vec<usize> = (0..self.groups).collect();
        order.sort_by(|&a, &b| bytes[b].total_cmp(&bytes[a]));
        order
    }

    fn outcome_of_placement(&self, placement: &Placement) -> Result<Outcome> {
        let e = evaluate(&self.problem, placement)?;
        Ok(Outcome {
            time_us: e.report.iteration_us,
            fits: e.result.oom.is_empty(),
            packing: placement.strategy.allreduce,
        })
    }

    /// A start as a point, when it has one group whose decision is one of the actions, no SFB
    /// and no execution order of its own.
    fn as_point(&self, start: &Placement, outcome: Outcome) -> Option<Point> {
        let s = &start.strategy;
        if s.group_count() != 1 || !s.sfb_duplicated.is_empty() || start.order.is_some() {
            return None;
        }
        let decision = s.decision(0);
        let a = self.actions.iter().position(|x| x == decision)?;
        Some(Point {
            choice: vec![a as u16; self.groups],
            split: s.split_of(0),
            other_split: Vec::new(),
            packing: s.allreduce,
            outcome,
        })
    }

    /// Sweeps of single-group moves from `at` to a local optimum, within the polish budget and
    /// the deadline; the point reached and the simulations run. A group whose moves all failed is
    /// not looked at again until it or a group it exchanges tensors with changes ("don't-look
    /// bits", as in Bentley's 2-opt for the TSP): later sweeps then cost a fraction of the first.
    /// `catch_up_to` is the fastest start that fits (µs; infinite when none does): a walk whose
    /// pace cannot reach it is given up ([`cannot_catch_up`]).
    fn local_search(
        &self,
        walk: Walk,
        catch_up_to: f64,
        deadline: Option<Instant>,
    ) -> Result<(Point, usize)> {
        let Walk {
            start: mut at,
            budget,
            order,
            give_up_above,
            give_up_after,
        } = walk;
        // No round of moves starts that the time left cannot hold.
        let out_of_time = || no_room_for(deadline, self.slowest_round.get());
        let mut tried = HashSet::new();
        tried.insert(at.key());
        let mut look = vec![true; self.groups];
        let mut used = 0;
        // Where a walk is judged against the start it cannot move to: after each third of a
        // sweep and at its end.
        let thirds = [self.groups.div_ceil(3), (2 * self.groups).div_ceil(3)];
        loop {
            if out_of_time() {
                return Ok((at, used));
            }
            let before = at.outcome;
            let behind = |at: &Point, visited: usize| {
                before.fits
                    && at.outcome.fits
                    && cannot_catch_up(
                        before.time_us,
                        at.outcome.time_us,
                        visited,
                        self.groups,
                        catch_up_to,
                    )
            };
            // The global knobs first: shares and packing, as data parallelism tries them.
            let every_gpu: Vec<usize> = (0..self.problem.cluster.devices.len()).collect();
            let knobs: Vec<Point> = variants(self.problem.cluster, &every_gpu)
                .into_iter()
                .map(|(split, packing)| Point {
                    split,
                    packing,
                    ..at.clone()
                })
                .filter(|p| tried.insert(p.key()))
                .take(budget.saturating_sub(used))
                .collect();
            used += knobs.len();
            let knobs_improved = self
                .slowest_round
                .timed(|| self.improved(at.clone(), knobs, deadline))?;
            if knobs_improved.outcome.better_than(&at.outcome) {
                look.fill(true);
            }
            at = knobs_improved;
            for (k, &g) in order.iter().enumerate() {
                let hopeless = (k >= give_up_after && at.outcome.time_us > give_up_above)
                    || (thirds.contains(&k) && behind(&at, k));
                if used >= budget || out_of_time() || hopeless {
                    return Ok((at, used));
                }
                if !look[g] {
                    continue;
                }
                let moves: Vec<Point> = self
                    .candidates(&at.choice, g)
                    .into_iter()
                    .map(|a| at.moved(g, a))
                    .filter(|p| tried.insert(p.key()))
                    .take(budget - used)
                    .collect();
                used += moves.len();
                let next = self
                    .slowest_round
                    .timed(|| self.improved(at.clone(), moves, deadline))?;
                if next.outcome.better_than(&at.outcome) {
                    for &h in &self.group_neighbours[g] {
                        look[h] = true;
                    }
                } else {
                    look[g] = false;
                }
                at = next;
            }
            let hopeless = at.outcome.time_us > give_up_above || behind(&at, self.groups);
            if used >= budget || out_of_time() || hopeless {
                return Ok((at, used));
            }
            if !at.outcome.better_than(&before) {
                return Ok((at, used));
            }
        }
    }

    /// The fastest walk's end, with per-group batch shares: each op group whose replicas split
    /// the batch over GPUs of different speeds tries the other shares (side by side), and the
    /// improving flips are tried together too; the best point and the simulations run. Flips
    /// are not moves of the walks: tried from a walk's start they steer it elsewhere (VGG19 on
    /// TAG's testbed to a slower optimum), after a flip every action move is a fresh simulation,
    /// and refining every walk's end took BERT-large on TAG's cloud past 10 s.
    /// Not started when the time left cannot hold its simulations (one per flip, side by side).
    fn shares_refined(&self, at: Point, deadline: Option<Instant>) -> Result<(Point, usize)> {
        let (groups, flips): (Vec<usize>, Vec<Point>) = (0..self.groups)
            .filter(|&g| self.shares_matter(at.choice[g]))
            .map(|g| (g, at.split_flipped(g)))
            .unzip();
        if no_room_for(deadline, self.time_for(flips.len() + 1)) {
            return Ok((at, 0));
        }
        let mut used = flips.len();
        let scored = self.scored(flips, &at.outcome, deadline)?;
        let improving: Vec<usize> = groups
            .iter()
            .zip(&scored)
            .filter(|(_, p)| p.outcome.better_than(&at.outcome))
            .map(|(&g, _)| g)
            .collect();
        let mut together = Vec::new();
        if improving.len() > 1 {
            let all = improving
                .iter()
                .fold(at.clone(), |p, &g| p.split_flipped(g));
            together = self.scored(vec![all], &at.outcome, deadline)?;
            used += 1;
        }
        let best = scored.into_iter().chain(together).fold(at, |best, p| {
            if p.outcome.better_than(&best.outcome) {
                p
            } else {
                best
            }
        });
        Ok((best, used))
    }

    /// Actions to try for group `g`: those other groups use, the other options on its GPUs, data
    /// parallelism over every GPU and over each single device group (on clusters small enough
    /// for every subset to be an action: FlexFlow's menu has them, and on a random topology
    /// they took VGG19 from 151.3 to 140.2 ms); not its current one.
    fn candidates(&self, choice: &[u16], g: usize) -> Vec<u16> {
        let options = ReplicationOption::ALL.len() as u16;
        let own = choice[g] - choice[g] % options;
        let mut out: Vec<u16> = choice.to_vec();
        out.extend(own..own + options);
        out.push(0);
        out.extend(self.single_group_allreduce.iter().copied());
        out.sort_unstable();
        out.dedup();
        out.retain(|&a| a != choice[g]);
        out
    }

    /// Whether how action `a`'s replicas share the batch matters: they split it and their GPUs
    /// differ in speed.
    fn shares_matter(&self, a: u16) -> bool {
        let decision = &self.actions[a as usize];
        let speed = |d: usize| self.problem.cluster.devices[d].gpu.fp32_tflops;
        decision.option.splits_batch()
            && decision
                .devices
                .windows(2)
                .any(|w| speed(w[0]) != speed(w[1]))
    }

    /// The fastest of `points` (simulated in parallel; ties: the first) when it beats `at`,
    /// else `at`.
    fn improved(&self, at: Point, points: Vec<Point>, deadline: Option<Instant>) -> Result<Point> {
        let scored = self.scored(points, &at.outcome, deadline)?;
        let mut best = at;
        for p in scored {
            if p.outcome.better_than(&best.outcome) {
                best = p;
            }
        }
        Ok(best)
    }

    /// `points` with their outcomes, simulated in parallel. Only whether each beats `beat` (and,
    /// if so, by how much) is wanted: the polish keeps a point only when it is strictly faster
    /// than the one it moves from. So a simulation past a fitting `beat`'s time is given up and
    /// its point marked slower than anything that fits. A point whose answer is already known
    /// ([`super::known`]) is not simulated again. One still simulating at `deadline` is abandoned
    /// ([`crate::sim::deadline`]) and marked the same way, unnoted: the walk then ends, out of
    /// time.
    fn scored(
        &self,
        points: Vec<Point>,
        beat: &Outcome,
        deadline: Option<Instant>,
    ) -> Result<Vec<Point>> {
        let limit_us = limit_to_beat(beat.time_us, beat.fits);
        points
            .into_par_iter()
            .map(|mut p| {
                let key = p.key();
                let found = match self.known.answer(&key, limit_us) {
                    Some(found) => found,
                    None => match until(deadline, || self.timed_within(&p, limit_us))? {
                        Some(found) => {
                            self.known.note(key, limit_us, found);
                            found
                        }
                        None => None,
                    },
                };
                p.outcome = found.unwrap_or(Outcome {
                    time_us: f64::INFINITY,
                    fits: false,
                    packing: p.packing,
                });
                Ok(p)
            })
            .collect()
    }
}

/// The fastest start that fits, µs (infinite when none does).
fn fastest_fitting(fixed: &[(Placement, Outcome)]) -> f64 {
    fixed
        .iter()
        .filter(|(_, o)| o.fits)
        .map(|(_, o)| o.time_us)
        .fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::cannot_catch_up;

    /// A walk 10 µs faster after a third of 30 groups projects a 30 µs sweep and as much again:
    /// from 100 µs it can reach 40 µs, no further.
    #[test]
    fn a_walk_is_projected_at_its_pace_for_this_sweep_and_one_more() {
        assert!(cannot_catch_up(100.0, 90.0, 10, 30, 39.0));
        assert!(!cannot_catch_up(100.0, 90.0, 10, 30, 41.0));
        // At a sweep's end the projection is one more sweep like it.
        assert!(cannot_catch_up(100.0, 94.0, 30, 30, 87.9));
        assert!(!cannot_catch_up(100.0, 94.0, 30, 30, 88.1));
    }

    /// A walk that gained nothing cannot reach anything faster; one ahead of the target is never
    /// given up; nothing is judged before a group is visited or on an unfinished time.
    #[test]
    fn only_a_walk_behind_its_target_is_given_up() {
        assert!(cannot_catch_up(100.0, 100.0, 30, 30, 99.0));
        assert!(!cannot_catch_up(100.0, 100.0, 30, 30, 101.0));
        assert!(!cannot_catch_up(100.0, 95.0, 0, 30, 1.0));
        assert!(!cannot_catch_up(100.0, f64::INFINITY, 10, 30, 1.0));
        assert!(!cannot_catch_up(100.0, 90.0, 10, 30, f64::INFINITY));
    }
}
