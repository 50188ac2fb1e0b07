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
    let (priority, order) = priority_and_order(p, placement)?;
    simulate_strategy(p, routes, &placement.strategy, priority, order, replicas)
}

/// The placement's execution order as task priorities simulated with [`Order::Priority`], or
/// none and FIFO; an order that does not have one entry per op is an error.
fn priority_and_order<'a>(
    p: &Problem,
    placement: &'a Placement,
) -> Result<(Option<&'a [f64]>, Order)> {
    match placement.order.as_deref() {
        Some(order) if order.len() != p.graph.len() => Err(Error::OrderLength {
            entries: order.len(),
            ops: p.graph.len(),
        }),
        Some(order) => Ok((Some(order), Order::Priority)),
        None => Ok((None, Order::Fifo)),
    }
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
    let within = simulate_within(
        p,
        routes,
        strategy,
        priority,
        order,
        replicas,
        f64::INFINITY,
    )?;
    Ok(within.expect("no simulation is past an infinite limit"))
}

/// What a search asks of a candidate: its iteration time and whether every GPU's memory held.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    pub iteration_us: f64,
    pub fits: bool,
}

/// The limit past which a candidate cannot beat a result of `time_us` (`fits`): any time at all
/// when the result ran out of memory, since a candidate that fits beats it however slow.
pub fn limit_to_beat(time_us: f64, fits: bool) -> f64 {
    if fits { time_us } else { f64::INFINITY }
}

/// [`evaluate`], given up (`None`) once the simulated iteration is past `limit_us`: for a search
/// that asks only whether a placement beats one it has ([`limit_to_beat`]), a slow candidate
/// costs its compilation and its iteration up to the limit, not the rest.
pub fn evaluate_within(
    p: &Problem,
    routes: &RouteTable,
    placement: &Placement,
    limit_us: f64,
) -> Result<Option<Evaluation>> {
    let (priority, order) = priority_and_order(p, placement)?;
    let s = &placement.strategy;
    simulate_within(p, routes, s, priority, order, Replicas::ByClass, limit_us)
}

/// [`evaluate_within`] read for its [`Timing`] alone (no report, no copy of each task's times):
/// what the polish's moves and the pipeline planner's candidates are judged by.
pub fn timing_within(
    p: &Problem,
    routes: &RouteTable,
    placement: &Placement,
    limit_us: f64,
) -> Result<Option<Timing>> {
    let (priority, order) = priority_and_order(p, placement)?;
    let compiled = compiled(p, routes, &placement.strategy, priority, Replicas::ByClass);
    let mut simulator = Simulator::new();
    let within = simulator.run_sealed_within(&compiled.exec, order, limit_us)?;
    // A representative's OOM stands for its class: the verdict is the full simulation's.
    Ok(within.map(|r| Timing {
        iteration_us: r.makespan,
        fits: r.oom.is_empty(),
    }))
}

fn simulate_within(
    p: &Problem,
    routes: &RouteTable,
    strategy: &Strategy,
    priority: Option<&[f64]>,
    order: Order,
    replicas: Replicas,
    limit_us: f64,
) -> Result<Option<Evaluation>> {
    let compiled = compiled(p, routes, strategy, priority, replicas);
    let mut simulator = Simulator::new();
    let Some(result) = simulator.run_sealed_within(&compiled.exec, order, limit_us)? else {
        return Ok(None);
    };
    let mut result = result.clone();
    compiled.expand(&mut result);
    let report = SimReport::new(p.cluster, strategy, &compiled, &result);
    Ok(Some(Evaluation {
        compiled,
        result,
        report,
    }))
}

/// `strategy` compiled, its execution graph sealed for the simulator.
fn compiled(
    p: &Problem,
    routes: &RouteTable,
    strategy: &Strategy,
    priority: Option<&[f64]>,
    replicas: Replicas,
) -> Compiled {
    let mut compiled = compile(
        p.graph, p.cluster, routes, strategy, p.cost, priority, replicas,
    );
    compiled.exec.seal();
    compiled
}
