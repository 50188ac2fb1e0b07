//! TAG's search as placers: METIS op groups and MCTS. `tag` takes its priors from the shipped
//! GNN policy (models/tag-default.gnn, embedded in the binary), `tag-pure`
//! searches with uniform priors (TAG's "pure MCTS"). The budget's steps are MCTS iterations.
//!
//! Beyond TAG, both run [`tag_search`]: the heuristics ([`super::heuristics`]) first — and, on
//! graphs of at most [`EXACT_STARTS_UP_TO_OPS`] ops, the exact MILPs for up to
//! [`EXACT_START_SECONDS`] — whose placements the search polishes from and falls back to, so it
//! never returns anything slower than them.

use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::heuristics::{Heuristic, heuristics};
use super::milp::Milp;
use super::{Budget, Placer};
use crate::cluster::RouteTable;
use crate::error::Result;
use crate::evaluate::{Placement, Problem};
use crate::gnn::GnnPolicy;
use crate::mcts::{DEFAULT_GROUPS, MctsConfig, Progress, SearchResult, Starts, search_from};
use crate::solve::Formulation;

pub enum Tag {
    /// Priors from the shipped policy.
    Shipped,
    /// Uniform priors.
    Pure,
}

/// Share of a time limit the heuristics may take before the search starts.
const HEURISTICS_SHARE: f64 = 0.25;

/// Graphs of at most this many ops also get the exact MILPs' placements as starts: the MILPs
/// can solve them within seconds (MOIRAI proves mlp × quickp-fat-tree-4 optimal in about 8 s),
/// where on larger graphs they only time out.
pub const EXACT_STARTS_UP_TO_OPS: usize = 128;

/// Time limit of each exact MILP start (they run side by side), seconds; at most the share of
/// `--time` the heuristics get.
pub const EXACT_START_SECONDS: f64 = 10.0;

/// The heuristics, then TAG's search over `groups` METIS op groups starting from their
/// placements: what `topoplace place` and the `tag` placers run. `config.seconds` bounds the
/// whole (the heuristics stop at a quarter of it; the search gets what is left).
pub fn tag_search(
    p: &Problem,
    groups: usize,
    mut config: MctsConfig,
    policy: Option<&GnnPolicy>,
    progress: impl FnMut(Progress),
) -> Result<(SearchResult, Vec<Heuristic>)> {
    let began = Instant::now();
    let routes = RouteTable::new(p.cluster);
    let deadline = config
        .seconds
        .map(|s| began + Duration::from_secs_f64(s * HEURISTICS_SHARE));
    let found = heuristics(p, &routes, deadline)?;
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
    };
    if p.graph.len() <= EXACT_STARTS_UP_TO_OPS {
        let seconds = config.seconds.map_or(EXACT_START_SECONDS, |s| {
            (s * HEURISTICS_SHARE - began.elapsed().as_secs_f64()).clamp(0.0, EXACT_START_SECONDS)
        });
        starts.unsimulated = exact_starts(p, seconds, config.seed);
    }
    let before_tree = began.elapsed().as_secs_f64();
    if let Some(s) = &mut config.seconds {
        *s = (*s - before_tree).max(0.0);
    }
    let mut result = search_from(p, groups, config, policy, starts, progress)?;
    result.seconds += before_tree;
    Ok((result, found))
}

/// The exact MILPs' placements within `seconds` each (solved side by side); a MILP that finds
/// nothing (no placement fits its memory model, a model too large) gives no start.
fn exact_starts(p: &Problem, seconds: f64, seed: u64) -> Vec<Placement> {
    if seconds <= 0.0 {
        return Vec::new();
    }
    let budget = Budget {
        steps: 0,
        seconds: Some(seconds),
        seed,
        deadline: None,
    };
    [Formulation::Quickp, Formulation::Moirai]
        .into_par_iter()
        .filter_map(|f| Milp(f).place(p, &budget).ok())
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
        let (found, _) = tag_search(p, DEFAULT_GROUPS, config, policy.as_ref(), |_| {})?;
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
