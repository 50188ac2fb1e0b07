//! Discrete-event simulation of an execution graph: iteration time, per-resource busy time and
//! reference-counted peak memory (TAG §4.3.2), and the report built from them.

pub mod engine;
pub mod exec;
pub mod report;
pub mod summary;
pub mod trace;

pub use engine::{Oom, Order, SimError, SimResult, Simulator};
pub use exec::{ExecGraph, TaskId, TaskKind, TaskSpec};
pub use report::{DeviceGroupFeedback, OpGroupFeedback, SimReport};
pub use trace::{ChromeTrace, TraceEvent, chrome_trace};

use crate::cluster::Cluster;
use crate::compile::{Compiled, compile};
use crate::cost::CostModel;
use crate::graph::Graph;
use crate::strategy::Strategy;

/// A strategy compiled and simulated.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub compiled: Compiled,
    pub result: SimResult,
    pub report: SimReport,
}

/// Compile `strategy` and simulate one iteration.
pub fn evaluate(
    graph: &Graph,
    cluster: &Cluster,
    strategy: &Strategy,
    cost: &CostModel,
    order: Order,
) -> Result<Evaluation, SimError> {
    let mut compiled = compile(graph, cluster, strategy, cost);
    let result = Simulator::new().run(&mut compiled.exec, order)?.clone();
    let report = SimReport::new(cluster, strategy, &compiled, &result);
    Ok(Evaluation {
        compiled,
        result,
        report,
    })
}
