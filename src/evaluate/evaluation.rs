//! Compile + simulate + report: the one way a placement is measured.

use super::problem::{Placement, Problem};
use super::report::SimReport;
use crate::cluster::RouteTable;
use crate::compile::{Compiled, Replicas, compile};
use crate::error::{Error, Result};
use crate::sim::{Order, SimResult, Simulator};
use crate::strategy::Strategy;

/// A strategy compiled and simulated.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub compiled: Compiled,
    pub result: SimResult,
    pub report: SimReport,
}

/// Compile and simulate a placement. The placement's order, if any, becomes task priorities
/// simulated with [`Order::Priority`]; otherwise tasks run FIFO.
pub fn evaluate(p: &Problem, routes: &RouteTable, placement: &Placement) -> Result<Evaluation> {
    evaluate_placement(p, routes, placement, Replicas::ByClass)
}

/// [`evaluate`] with a task for every replica on every GPU, never one per device class: the same
/// result, for traces, which show every GPU.
pub fn evaluate_every_replica(
    p: &Problem,
    routes: &RouteTable,
    placement: &Placement,
) -> Result<Evaluation> {
    evaluate_placement(p, routes, placement, Replicas::Every)
}

fn evaluate_placement(
    p: &Problem,
    routes: &RouteTable,
    placement: &Placement,
    replicas: Replicas,
) -> Result<Evaluation> {
    let priority = placement.order.as_deref();
    if let Some(order) = priority
        && order.len() != p.graph.len()
    {
        return Err(Error::OrderLength {
            entries: order.len(),
            ops: p.graph.len(),
        });
    }
    let order = if priority.is_some() {
        Order::Priority
    } else {
        Order::Fifo
    };
    simulate_strategy(p, routes, &placement.strategy, priority, order, replicas)
}

/// [`evaluate`] a strategy without priorities under `order`, with the cluster's routes computed
/// here: for one-off evaluations (the command line, tests); searches keep one [`RouteTable`]
/// per cluster.
pub fn evaluate_strategy(p: &Problem, strategy: &Strategy, order: Order) -> Result<Evaluation> {
    simulate_strategy(
        p,
        &RouteTable::new(p.cluster),
        strategy,
        None,
        order,
        Replicas::ByClass,
    )
}

/// Compile `strategy` (with per-op `priority`, if any) and simulate it under `order`: what
/// every other entry point here calls.
pub fn simulate_strategy(
    p: &Problem,
    routes: &RouteTable,
    strategy: &Strategy,
    priority: Option<&[f64]>,
    order: Order,
    replicas: Replicas,
) -> Result<Evaluation> {
    let mut compiled = compile(
        p.graph, p.cluster, routes, strategy, p.cost, priority, replicas,
    );
    let mut result = Simulator::new().run(&mut compiled.exec, order)?.clone();
    compiled.expand(&mut result);
    let report = SimReport::new(p.cluster, strategy, &compiled, &result);
    Ok(Evaluation {
        compiled,
        result,
        report,
    })
}
