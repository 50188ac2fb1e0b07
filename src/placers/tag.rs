//! TAG's search as placers: METIS op groups and MCTS. `tag` takes its priors from the shipped
//! GNN policy (models/tag-default.gnn, embedded in the binary), `tag-pure`
//! searches with uniform priors (TAG's "pure MCTS"). The budget's steps are MCTS iterations.
//!
//! Beyond TAG, both run [`tag_search`]: the heuristics ([`super::heuristics`]) first — and, on
//! graphs of at most [`MILP_STARTS_UP_TO_OPS`] ops on at most [`MILP_STARTS_UP_TO_GPUS`] GPUs, the exact MILPs' warm starts (their own
//! coarsenings and memory models, improved by counted local search) — whose placements the
//! search polishes from and falls back to, so it never returns anything slower than them.

use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::heuristics::{Heuristic, heuristics};
use super::milp::solve_fitting;
use super::{Budget, Placer};
use crate::error::{Error, Result, SearchError};
use crate::evaluate::Placement;
use crate::gnn::GnnPolicy;
use crate::interrupt;
use crate::mcts::{DEFAULT_GROUPS, MctsConfig, Progress, SearchResult, Starts, search_from};
use crate::problem::Problem;
use crate::sim::deadline;
use crate::solve::{Formulation, SolveOptions};

pub(crate) enum Tag {
    /// Priors from the shipped policy.
    Shipped,
    /// Uniform priors.
    Pure,
}

/// Share of a time limit the heuristics may take before the search starts ...
const HEURISTICS_SHARE: f64 = 0.25;
/// ... but `pipeline-dp` this share: on clusters of several machines its pipeline is the
/// strongest start, and its simulations of whole pipelines take longest (BERT-large at batch 32
/// on TAG's cloud: 5.5 s on 2 slow cores, so a quarter of `--time 10` stopped it before it
/// simulated its best plan, 161.70 ms where it finds 145.37 ms).
const PIPELINE_SHARE: f64 = 0.5;

/// Graphs of at most this many ops also get the exact MILPs' warm starts as starts: op-level
/// schedules on the MILPs' own coarsenings, which on such graphs can reach placements no move of
/// the search's op groups does (mlp on fastt-8xv100: 0.104 against 0.143 ms without them).
pub(crate) const MILP_STARTS_UP_TO_OPS: usize = 128;

/// ... and clusters of at most this many GPUs: the warm starts' list schedules try every GPU for
/// every node on a copy of a timeline that holds every channel between GPUs, so their cost grows
/// with the cube of the GPU count and ignores the time limit (mlp on `mixed-1024`: 20 s of a
/// `--time 2`), while an exact MILP over hundreds of GPUs is out of reach anyway.
pub(crate) const MILP_STARTS_UP_TO_GPUS: usize = 64;

/// The work the MILP warm starts' local searches are counted for ([`SolveOptions::heuristics_only`]):
/// that of a MILP solve with this time limit, seconds.
pub(crate) const MILP_START_WORK_SECONDS: f64 = 10.0;

/// Wall-clock cap of each MILP warm start (they run side by side) when `--time` gives none,
/// seconds: their work is counted, so the cap only guards against a machine many times slower
/// (on 2 shared cores they take 1–4 s). Under `--time` the cap is what is left of the
/// heuristics' share, and a cap reached makes the start depend on the machine's speed.
pub(crate) const MILP_START_CAP_SECONDS: f64 = 60.0;

/// The heuristics, then TAG's search over `groups` METIS op groups starting from their
/// placements: what `topoplace place` and the `tag` placers run. `config.seconds` bounds the
/// whole (the heuristics stop at a quarter of it, `pipeline-dp` at half; the search gets what is
/// left).
pub fn tag_search(
    p: &Problem,
    groups: usize,
    mut config: MctsConfig,
    policy: Option<&GnnPolicy>,
    progress: impl FnMut(Progress),
) -> Result<(SearchResult, Vec<Heuristic>)> {
    crate::mcts::check_action_space(p.cluster)?;
    let began = Instant::now();
    let share_of_time = |share: f64| {
        config
            .seconds
            .map(|s| began + Duration::from_secs_f64(s * share))
    };
    let found = heuristics(
        p,
        share_of_time(HEURISTICS_SHARE),
        share_of_time(PIPELINE_SHARE),
    )?;
    // dp-subset is the polish's first start, handed over so it is not searched for again.
    let known = |h: &Heuristic| (h.placement.clone(), h.time_us, h.fits);
    let mut starts = Starts {
        data_parallel: found.iter().find(|h| h.name == "dp-subset").map(known),
        known: found
            .iter()
            .filter(|h| h.name != "dp-subset")
            .map(known)
            .collect(),
        unsimulated: Vec::new(),
        pipelines: found.iter().find_map(|h| h.frames.clone()),
    };
    if p.graph.len() <= MILP_STARTS_UP_TO_OPS && p.cluster.devices.len() <= MILP_STARTS_UP_TO_GPUS {
        let cap = config.seconds.map_or(MILP_START_CAP_SECONDS, |s| {
            (s * HEURISTICS_SHARE - began.elapsed().as_secs_f64())
                .clamp(0.0, MILP_START_CAP_SECONDS)
        });
        starts.unsimulated = milp_warm_starts(p, cap, config.seed);
    }
    let before_tree = began.elapsed().as_secs_f64();
    if let Some(s) = &mut config.seconds {
        *s = (*s - before_tree).max(0.0);
    }
    let mut result = search_from(p, groups, config, policy, starts, progress)?;
    result.seconds += before_tree;
    Ok((result, found))
}

/// The QuickP and MOIRAI MILPs' warm starts (solved side by side), each after the counted work
/// of [`MILP_START_WORK_SECONDS`] and within `cap` seconds: counted, so the same seed gives the
/// same starts on any machine that finishes them within the cap, where HiGHS's incumbent at a
/// time limit would not. One that finds nothing (no schedule fits its memory model) gives no
/// start.
fn milp_warm_starts(p: &Problem, cap: f64, seed: u64) -> Vec<Placement> {
    if cap <= 0.0 {
        return Vec::new();
    }
    let opts = SolveOptions {
        time_limit_s: cap,
        seed: seed as i32,
        heuristics_only: Some(MILP_START_WORK_SECONDS.min(cap)),
        ..SolveOptions::default()
    };
    [Formulation::Quickp, Formulation::Moirai]
        .into_par_iter()
        .filter_map(|f| solve_fitting(p, f, &opts).ok())
        .map(|(_, _, _, placement)| placement)
        .collect()
}

impl Placer for Tag {
    fn name(&self) -> &'static str {
        match self {
            Tag::Shipped => "tag",
            Tag::Pure => "tag-pure",
        }
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let config = MctsConfig {
            iterations: budget.steps,
            seconds: budget.seconds,
            seed: budget.seed,
            ..MctsConfig::default()
        };
        let policy = match self {
            Tag::Shipped => Some(GnnPolicy::shipped()?),
            Tag::Pure => None,
        };
        // Past the limit's allowance no plan is given (the row says so) rather than a late one:
        // the reference simulations the search cannot cut short take seconds on 10⁵ ops.
        let last_moment = budget.deadline.zip(budget.seconds).map(|(end, limit)| {
            end + Duration::from_secs_f64(interrupt::give_up_after(limit) - limit)
        });
        let searched = deadline::during(last_moment, || {
            tag_search(p, DEFAULT_GROUPS, config, policy.as_ref(), |_| {})
        });
        let (found, _) = match searched {
            Err(Error::Search(SearchError::Abandoned)) => return Err(SearchError::OutOfTime.into()),
            searched => searched?,
        };
        let priors = match &policy {
            Some(_) => "GNN priors (models/tag-default.gnn)",
            None => "uniform priors",
        };
        let mut placement = Placement::plain(
            found.strategy,
            format!(
                "tag: MCTS, {priors}, {} op groups, {} iterations, polished from the heuristics",
                found.group_ops.len(),
                found.iterations
            ),
        );
        placement.order = found.order;
        placement.fits = Some(found.fits);
        Ok(placement)
    }
}
