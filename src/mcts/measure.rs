//! How the search measures a choice: each op group's action, the AllReduce packing and the
//! batch shares built into a strategy, compiled and simulated ([`crate::evaluate`]); given up
//! past a limit where only "faster than this?" is asked.

use super::actions::{PACKINGS, Shares, build_strategy};
use super::polish::Point;
use super::search::Mcts;
use super::tree::Outcome;
use crate::error::Result;
use crate::evaluate::{
    Evaluation, Placement, evaluate, evaluate_within, limit_to_beat, timing_within,
};
use crate::gnn::Feedback;
use crate::problem::Problem;
use crate::strategy::{AllReducePacking, BatchSplit, Strategy};

impl Mcts<'_> {
    pub(super) fn evaluate(
        &self,
        choice: &[u16],
        packing: AllReducePacking,
    ) -> Result<(Strategy, Evaluation)> {
        self.evaluate_with(choice, packing, self.split, &[])
    }

    /// Compile and simulate `choice` with the given packing and batch shares (`split`, but the
    /// other way for the groups in `other_split`).
    pub(super) fn evaluate_with(
        &self,
        choice: &[u16],
        packing: AllReducePacking,
        split: BatchSplit,
        other_split: &[usize],
    ) -> Result<(Strategy, Evaluation)> {
        let placement = self.placement_of(choice, packing, split, other_split)?;
        let e = evaluate(&self.problem, &placement)?;
        Ok((placement.strategy, e))
    }

    /// `choice` with the packing and shares as a placement, for [`evaluate`], [`evaluate_within`]
    /// or [`crate::evaluate::timing_within`] (the polish's moves, the tree's second packing).
    pub(super) fn placement_of(
        &self,
        choice: &[u16],
        packing: AllReducePacking,
        split: BatchSplit,
        other_split: &[usize],
    ) -> Result<Placement> {
        if self.frame_of(choice).is_some() {
            return Ok(self.pipeline_placement(choice, packing));
        }
        let strategy = build_strategy(
            &self.op_group,
            &self.actions,
            choice,
            packing,
            Shares {
                split,
                other: other_split,
            },
            self.problem.cluster.devices.len(),
        )?;
        Ok(Placement::plain(strategy, ""))
    }

    /// Simulate `choice` under each packing and keep the better (so the all-DP choice is
    /// Horovod-style when bucketing wins); with a policy, also the better one's runtime feedback.
    /// A pipeline is simulated once, under its frame's packing, with no feedback.
    pub(super) fn simulate(&self, choice: &[u16]) -> Result<(Outcome, Option<Feedback>)> {
        if self.frame_of(choice).is_some() {
            return Ok((self.simulate_pipeline(choice)?, None));
        }
        let placement = self.placement_of(choice, PACKINGS[0], self.split, &[])?;
        let (packing, e) = under_best_packing(&self.problem, placement, &PACKINGS)?;
        let feedback = self.policy.as_ref().map(|p| p.feedback(&e));
        Ok((outcome_of(&e, packing), feedback))
    }

    /// A polish point's outcome, or `None` once its simulation passes `limit_us`.
    pub(super) fn timed_within(&self, p: &Point, limit_us: f64) -> Result<Option<Outcome>> {
        let placement = self.placement_of(&p.choice, p.packing, p.split, &p.other_split)?;
        let within = timing_within(&self.problem, &placement, limit_us)?;
        Ok(within.map(|t| Outcome {
            time_us: t.iteration_us,
            fits: t.fits,
            packing: p.packing,
        }))
    }

    pub(super) fn outcome(&self, choice: &[u16], packing: AllReducePacking) -> Result<Outcome> {
        let (_, e) = self.evaluate(choice, packing)?;
        Ok(outcome_of(&e, packing))
    }
}

/// `placement` simulated under each of `packings` (its own packing replaced), the faster kept: a
/// later packing only when strictly faster, its simulation given up past the kept one's time.
/// The kept packing and its evaluation; `packings` must not be empty.
pub(super) fn under_best_packing(
    p: &Problem,
    mut placement: Placement,
    packings: &[AllReducePacking],
) -> Result<(AllReducePacking, Evaluation)> {
    let mut best: Option<(Outcome, Evaluation)> = None;
    for &packing in packings {
        let limit_us = best
            .as_ref()
            .map_or(f64::INFINITY, |(b, _)| limit_to_beat(b.time_us, b.fits));
        placement.strategy.allreduce = packing;
        let Some(e) = evaluate_within(p, &placement, limit_us)? else {
            continue;
        };
        let o = outcome_of(&e, packing);
        if best.as_ref().is_none_or(|(b, _)| o.better_than(b)) {
            best = Some((o, e));
        }
    }
    let (o, e) = best.expect("at least one packing");
    Ok((o.packing, e))
}

pub(super) fn outcome_of(e: &Evaluation, packing: AllReducePacking) -> Outcome {
    Outcome {
        time_us: e.report.iteration_us,
        fits: e.result.oom.is_empty(),
        packing,
    }
}
