//! Every placer behind one [`Placer`] trait: TAG's search (what `place` runs) and the methods it
//! is compared against. Every [`Placement`] they return is judged by
//! [`crate::evaluate::evaluate`].
//!
//! - [`dp`]: `single`, `dp-nccl`, `dp-nccl-p`, `horovod` — fixed strategies.
//! - [`dp_subset`]: `dp-subset`, data parallelism over the best subset of device groups with the
//!   best shares and packing: what an engineer would do by hand, the bar to beat.
//! - [`pipeline`]: `pipeline-dp`, a pipeline over the device groups with stages balanced by
//!   dynamic programming (AMP, Metis): the field's pipeline planner.
//! - [`metis`]: METIS k-way, one part per GPU.
//! - [`mcmc`]: FlexFlow-style Metropolis search over group decisions.
//! - [`local_search`]: `local-search`, the search's polish alone, from `dp-subset`.
//! - [`list`]: the list-scheduling machinery shared by [`baechi`] (`m-topo`, `m-etf`, `m-sct`)
//!   and [`heft`].
//! - [`fastt`]: FastT's DPOS (critical-path GPU, insertion EFT, execution order) and OS-DPOS.
//! - [`celeritas`]: Celeritas's Order-Place and Adjusting Placement over its fused clusters.
//! - [`quickp`]: QuickP's co-location groups placed by list scheduling (no MILP).
//! - [`tag`]: what `place` runs ([`tag::tag_search`]): the heuristics, then TAG's MCTS over
//!   METIS op groups ([`crate::mcts`]) with the shipped GNN policy's priors (`tag`) or uniform
//!   priors (`tag-pure`), polished from the best starts.
//! - [`milp`]: `quickp-milp` and `moirai-milp`, the exact MILPs of [`crate::solve`] on HiGHS.
//! - [`heuristics`]: the placers that need no search, run together: the starts of TAG's search
//!   and the best other method `place` reports.

pub(crate) mod baechi;
pub(crate) mod celeritas;
pub mod compare;
pub(crate) mod dp;
pub(crate) mod dp_subset;
pub(crate) mod fastt;
pub(crate) mod heft;
pub mod heuristics;
pub(crate) mod list;
pub(crate) mod local_search;
pub(crate) mod mcmc;
pub(crate) mod metis;
pub(crate) mod milp;
pub(crate) mod pipeline;
pub(crate) mod quickp;
pub mod tag;

use std::time::Instant;

use crate::error::{Error, Result};
use crate::evaluate::Placement;
use crate::problem::Problem;

/// How much a search may spend. Fixed placers ignore it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Simulator calls a search may make.
    pub steps: usize,
    /// Wall-clock cap in seconds, if any (checked between steps).
    pub seconds: Option<f64>,
    /// Seed of the randomised placers (METIS partitions, MCMC and MCTS draws, MILP solver).
    pub seed: u64,
    /// When the placers without a budget of their own (the list schedulers) give up with
    /// [`crate::error::SearchError::OutOfTime`]: `place` runs them within a share of `--time`.
    pub deadline: Option<Instant>,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            steps: 100,
            seconds: None,
            seed: 0,
            deadline: None,
        }
    }
}

/// A placement method: given a problem (model, cluster, cost model) it answers a [`Placement`].
pub trait Placer {
    /// The method's registered name, as `--methods` and reports spell it (`dp-nccl`, `tag`, …).
    fn name(&self) -> &'static str;
    /// Place `p`'s ops within `budget`; the answer is judged by [`crate::evaluate::evaluate`].
    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement>;
}

/// Every placer, in the order reports list them.
pub fn registry() -> Vec<Box<dyn Placer>> {
    vec![
        Box::new(dp::Fixed::Single),
        Box::new(dp::Fixed::DpNccl),
        Box::new(dp::Fixed::DpNcclP),
        Box::new(dp::Fixed::Horovod),
        Box::new(dp_subset::DpSubset),
        Box::new(pipeline::PipelineDp),
        Box::new(metis::Metis),
        Box::new(mcmc::Mcmc),
        Box::new(local_search::LocalSearch),
        Box::new(baechi::Baechi::Topo),
        Box::new(baechi::Baechi::Etf),
        Box::new(baechi::Baechi::Sct),
        Box::new(heft::Heft),
        Box::new(fastt::Dpos),
        Box::new(fastt::OsDpos),
        Box::new(celeritas::Celeritas::OrderPlace),
        Box::new(celeritas::Celeritas::Adjusting),
        Box::new(quickp::Quickp),
        Box::new(tag::Tag::Shipped),
        Box::new(tag::Tag::Pure),
    ]
}

/// The exact MILP placers. They are named in `compare --methods` but left out of `all`: each
/// may spend its whole time limit (a minute by default) per model and cluster.
pub(crate) fn exact() -> Vec<Box<dyn Placer>> {
    vec![
        Box::new(milp::Milp(crate::solve::Formulation::Quickp)),
        Box::new(milp::Milp(crate::solve::Formulation::Moirai)),
    ]
}

/// Names of every registered placer.
pub fn names() -> Vec<&'static str> {
    registry().iter().map(|p| p.name()).collect()
}

/// The placer called `name`; an unknown name is an error listing the known ones.
pub fn placer(name: &str) -> Result<Box<dyn Placer>> {
    registry()
        .into_iter()
        .chain(exact())
        .find(|p| p.name() == name)
        .ok_or_else(|| {
            let exact: Vec<&str> = exact().iter().map(|p| p.name()).collect();
            Error::Unknown {
                kind: "placement method",
                name: name.to_string(),
                expected: format!("known: {}, {}", names().join(", "), exact.join(", ")),
            }
        })
}
