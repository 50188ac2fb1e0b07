//! Baseline placers (issue 5): the methods TAG and its peers compare against, behind one
//! [`Placer`] trait, and the single helper ([`simulate`]) that judges any [`Placement`] with the
//! simulator, so every method is measured the same way.
//!
//! - [`dp`]: `single`, `dp-nccl`, `dp-nccl-p`, `horovod` — fixed strategies.
//! - [`metis`]: METIS k-way, one part per GPU.
//! - [`mcmc`]: FlexFlow-style Metropolis search over group decisions.
//! - [`list`]: the list-scheduling machinery shared by [`baechi`] (`m-topo`, `m-etf`, `m-sct`)
//!   and [`heft`].
//! - [`fastt`]: FastT's DPOS (critical-path GPU, insertion EFT, execution order) and OS-DPOS.
//! - [`celeritas`]: Celeritas's Order-Place and Adjusting Placement over its fused clusters.
//! - [`quickp`]: QuickP's co-location groups placed by list scheduling (no MILP).
//! - [`tag`]: TAG's MCTS over METIS op groups ([`crate::mcts`]), uniform priors for now.
//! - [`milp`]: `quickp-milp` and `moirai-milp`, the exact MILPs of [`crate::solve`] on HiGHS.

pub mod baechi;
pub mod celeritas;
pub mod compare;
pub mod dp;
pub mod fastt;
pub mod heft;
pub mod list;
pub mod mcmc;
pub mod metis;
pub mod milp;
pub mod quickp;
pub mod tag;

use crate::cluster::Cluster;
use crate::compile::{RouteTable, compile_ordered};
use crate::cost::CostModel;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::sim::{Evaluation, Order, SimReport, Simulator};
use crate::strategy::Strategy;

/// What a placer is asked to place.
#[derive(Clone, Copy)]
pub struct Problem<'a> {
    pub graph: &'a Graph,
    pub cluster: &'a Cluster,
    pub cost: &'a CostModel,
}

/// How much a search may spend. Fixed placers ignore it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Simulator calls a search may make.
    pub steps: usize,
    /// Wall-clock cap in seconds, if any (checked between steps).
    pub seconds: Option<f64>,
    pub seed: u64,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            steps: 100,
            seconds: None,
            seed: 0,
        }
    }
}

/// A placer's answer.
#[derive(Debug, Clone)]
pub struct Placement {
    pub strategy: Strategy,
    /// Per-op dispatch priority (lower first), evaluated with [`Order::Priority`]; `None` runs
    /// FIFO like TensorFlow's executor.
    pub order: Option<Vec<f64>>,
    /// What the placement is and any stand-in it uses.
    pub note: String,
    /// The placer's own prediction of the iteration time, µs (list schedulers).
    pub predicted_us: Option<f64>,
    /// Whether the placer believes every GPU's memory suffices (`None`: it does not check).
    pub fits: Option<bool>,
}

impl Placement {
    /// A placement with no order, prediction or memory claim.
    pub fn plain(strategy: Strategy, note: impl Into<String>) -> Placement {
        Placement {
            strategy,
            order: None,
            note: note.into(),
            predicted_us: None,
            fits: None,
        }
    }
}

pub trait Placer {
    fn name(&self) -> &'static str;
    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement>;
}

/// Every placer, in the order reports list them.
pub fn registry() -> Vec<Box<dyn Placer>> {
    vec![
        Box::new(dp::Fixed::Single),
        Box::new(dp::Fixed::DpNccl),
        Box::new(dp::Fixed::DpNcclP),
        Box::new(dp::Fixed::Horovod),
        Box::new(metis::Metis),
        Box::new(mcmc::Mcmc),
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
pub fn exact() -> Vec<Box<dyn Placer>> {
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
            Error::Other(format!(
                "unknown placement method \"{name}\" (known: {}, {})",
                names().join(", "),
                exact.join(", ")
            ))
        })
}

/// Compile and simulate a placement: the one way every baseline is judged. The placement's order,
/// if any, becomes task priorities simulated with [`Order::Priority`]; otherwise FIFO.
pub fn simulate(p: &Problem, routes: &RouteTable, placement: &Placement) -> Result<Evaluation> {
    let priority = placement.order.as_deref();
    if let Some(order) = priority
        && order.len() != p.graph.len()
    {
        return Err(Error::Other(format!(
            "placement order has {} entries for {} ops",
            order.len(),
            p.graph.len()
        )));
    }
    let mut compiled = compile_ordered(
        p.graph,
        p.cluster,
        routes,
        &placement.strategy,
        p.cost,
        priority,
    );
    let order = if priority.is_some() {
        Order::Priority
    } else {
        Order::Fifo
    };
    let result = Simulator::new()
        .run(&mut compiled.exec, order)
        .map_err(|e| Error::Other(e.to_string()))?
        .clone();
    let report = SimReport::new(p.cluster, &placement.strategy, &compiled, &result);
    Ok(Evaluation {
        compiled,
        result,
        report,
    })
}
