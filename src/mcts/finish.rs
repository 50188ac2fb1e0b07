//! The end of a search: the finishes the polish leaves (or the tree's best), each given TAG's SFB
//! double check, the fastest kept, and the result assembled.

use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::measure::outcome_of;
use super::polish::Finish;
use super::reserve::{kept_back, no_room_for};
use super::result::SearchResult;
use super::search::Mcts;
use super::tree::Outcome;
use crate::error::Result;
use crate::evaluate::{Evaluation, Placement, evaluate};
use crate::strategy::{BatchSplit, GroupDecision, Strategy};

/// A finish after the SFB check: its placement, evaluation, search choice (when a point of the
/// space) and outcome.
type Checked = (Placement, Evaluation, Option<Vec<u16>>, Outcome);

/// Each op group's decision, op count and batch shares, as [`crate::mcts::SearchResult`] reports
/// them.
type Groups = (Vec<GroupDecision>, Vec<usize>, Vec<BatchSplit>);

impl Mcts<'_> {
    pub(super) fn finish(&self, seconds: f64) -> Result<SearchResult> {
        let started = Instant::now();
        let (choice, best) = self.best.clone().expect("DP is evaluated first");
        let (placement, evaluation, choice, fits, polished) = if self.config.polish == 0 {
            let (s, e) = self.evaluate(&choice, best.packing)?;
            let (placement, e) = self.sfb_checked(Placement::plain(s, ""), e)?;
            (placement, e, Some(choice), best.fits, 0)
        } else {
            // The polish ends in time for the result's compilation, which follows it.
            let deadline = self
                .config
                .seconds
                .map(|s| started + Duration::from_secs_f64((s - seconds).max(0.0)));
            let (finishes, n) =
                self.polished(kept_back(deadline, self.slowest_simulation.get()))?;
            // Every finish gets the check, side by side, and they are judged after it: sufficient
            // factors can save a fifth of an iteration (VGG19 on a random topology: a finish at
            // 151.9 ms became 126.5 ms, ahead of one at 127.1 ms). Past the time limit only the
            // fastest finish is compiled again, without the check.
            let late = no_room_for(deadline, self.time_for(finishes.len()));
            let checked: Vec<Checked> = finishes
                .into_par_iter()
                .take(if late { 1 } else { usize::MAX })
                .map(|finish| self.checked(finish, !late))
                .collect::<Result<_>>()?;
            let mut best: Option<Checked> = None;
            for c in checked {
                if best.as_ref().is_none_or(|b| c.3.better_than(&b.3)) {
                    best = Some(c);
                }
            }
            let (placement, e, choice, o) = best.expect("dp-subset is a finish");
            (placement, e, choice, o.fits, n)
        };
        let Placement {
            strategy, order, ..
        } = placement;
        let seconds = seconds + started.elapsed().as_secs_f64();
        let (decisions, group_ops, shares) = match choice {
            Some(choice) if self.frame_of(&choice).is_none() => {
                self.search_groups(&choice, &strategy)
            }
            _ => strategy_groups(&strategy),
        };
        Ok(SearchResult {
            strategy,
            order,
            evaluation,
            fits,
            decisions,
            group_ops,
            shares,
            dp_us: self.dp.time_us,
            dp_fits: self.dp.fits,
            beat_dp_at: self.beat_dp_at,
            iterations: self.iterations,
            simulated: self.cache.len() - self.pipelines_known + polished,
            seeds: self.seeds,
            seconds,
            actions: self.actions.len(),
            pipeline_leaves: self.pipeline_leaves,
            priors_abandoned: self.priors_abandoned,
        })
    }

    /// A finish compiled, given TAG's SFB double check (when `sfb`), and scored.
    fn checked(&self, finish: Finish, sfb: bool) -> Result<Checked> {
        let (placement, e, choice) = match finish {
            Finish::Point(p) => {
                let (s, e) = self.evaluate_with(&p.choice, p.packing, p.split, &p.other_split)?;
                (Placement::plain(s, ""), e, Some(p.choice))
            }
            Finish::Fixed(placement, _) => {
                let e = evaluate(&self.problem, &placement)?;
                (placement, e, None)
            }
        };
        let (placement, e) = if sfb {
            self.sfb_checked(placement, e)?
        } else {
            (placement, e)
        };
        let o = outcome_of(&e, placement.strategy.allreduce);
        Ok((placement, e, choice, o))
    }

    /// The decision, op count and batch shares of each search op group under `choice`, built
    /// as `strategy`.
    fn search_groups(&self, choice: &[u16], strategy: &Strategy) -> Groups {
        let mut group_ops = vec![0; self.groups];
        let mut shares = vec![strategy.batch_split; self.groups];
        for (op, &g) in self.op_group.iter().enumerate() {
            group_ops[g as usize] += 1;
            shares[g as usize] = strategy.split_of(strategy.group_of(op));
        }
        let decisions = choice
            .iter()
            .map(|&a| self.actions[a as usize].clone())
            .collect();
        (decisions, group_ops, shares)
    }

    /// [`Self::with_sfb_if_faster`] when the search does the double check.
    fn sfb_checked(
        &self,
        placement: Placement,
        evaluation: Evaluation,
    ) -> Result<(Placement, Evaluation)> {
        if self.config.sfb_check {
            self.with_sfb_if_faster(placement, evaluation)
        } else {
            Ok((placement, evaluation))
        }
    }

    /// TAG's double check of replicated groups (§4.2.3): compile `strategy` again with
    /// sufficient-factor broadcasting wherever the SFB ILP says it beats AllReduce, and keep that
    /// version when it fits and is faster. Done once, on the search's result: the ILP takes
    /// 0.3–2 s on a zoo model, too long for every leaf.
    fn with_sfb_if_faster(
        &self,
        placement: Placement,
        evaluation: Evaluation,
    ) -> Result<(Placement, Evaluation)> {
        let p = &self.problem;
        let options = crate::sfb::SfbOptions::default();
        let strategy = &placement.strategy;
        let duplicated =
            crate::sfb::duplicated_ops(p.graph, p.cluster, p.cost, strategy, &options)?;
        if duplicated.is_empty() {
            return Ok((placement, evaluation));
        }
        let mut sfb = placement.clone();
        sfb.strategy.sfb_duplicated = duplicated;
        let e = evaluate(p, &sfb)?;
        let before = outcome_of(&evaluation, strategy.allreduce);
        if outcome_of(&e, strategy.allreduce).better_than(&before) {
            Ok((sfb, e))
        } else {
            Ok((placement, evaluation))
        }
    }
}

/// A strategy's own groups: their decisions and op counts (a start the search space lacks).
fn strategy_groups(s: &Strategy) -> Groups {
    let group_ops = s.members().iter().map(Vec::len).collect();
    let shares = (0..s.group_count()).map(|g| s.split_of(g)).collect();
    (s.decisions().to_vec(), group_ops, shares)
}
