//! Compile + simulate + report: the one way a placement is measured.

use super::placement::Placement;
use super::sim_report::SimReport;
use crate::compile::{CompileOptions, Compiled, Replicas, compile_within};
use crate::error::{Error, Result, SearchError};
use crate::model_parallel;
use crate::problem::Problem;
use crate::sim::{Order, SimResult, Simulator, deadline};
use crate::strategy::Strategy;

/// A strategy compiled and simulated.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The strategy compiled into an execution graph of tasks.
    pub compiled: Compiled,
    /// The raw simulation of one iteration: per-task start/end times (µs), busy time, memory.
    pub result: SimResult,
    /// The simulation summarised per GPU, link and group, with any out-of-memory GPUs.
    pub report: SimReport,
}

/// Compile and simulate a placement. The placement's order, if any, becomes task priorities
/// simulated with [`Order::Priority`]; otherwise tasks run FIFO.
pub fn evaluate(p: &Problem, placement: &Placement) -> Result<Evaluation> {
    evaluate_placement(p, placement, Replicas::ByClass)
}

/// [`evaluate`] with a task for every replica on every GPU, never one per device class: the same
/// result, for traces, which show every GPU.
pub fn evaluate_every_replica(p: &Problem, placement: &Placement) -> Result<Evaluation> {
    evaluate_placement(p, placement, Replicas::Every)
}

fn evaluate_placement(
    p: &Problem,
    placement: &Placement,
    replicas: Replicas,
) -> Result<Evaluation> {
    let (priority, order) = priority_and_order(p, placement)?;
    simulate_strategy(p, &placement.strategy, priority, order, replicas)
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

/// [`evaluate`] a strategy without priorities under `order`.
pub fn evaluate_strategy(p: &Problem, strategy: &Strategy, order: Order) -> Result<Evaluation> {
    simulate_strategy(p, strategy, None, order, Replicas::ByClass)
}

/// Compile `strategy` (with per-op `priority`, if any) and simulate it under `order`: what
/// every other entry point here calls.
pub fn simulate_strategy(
    p: &Problem,
    strategy: &Strategy,
    priority: Option<&[f64]>,
    order: Order,
    replicas: Replicas,
) -> Result<Evaluation> {
    let how = CompileOptions { priority, replicas };
    let read = evaluation_of(p, strategy);
    let within = run_within(p, strategy, how, order, f64::INFINITY, read)?;
    Ok(within.expect("no simulation is past an infinite limit"))
}

/// What a search asks of a candidate: its iteration time and whether every GPU's memory held.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Simulated iteration time (the makespan), µs.
    pub iteration_us: f64,
    /// Whether every GPU's peak memory stayed within its capacity.
    pub fits: bool,
}

/// Whether a result of `time_us` (`fits`) beats one of `other_us` (`other_fits`): one that fits
/// in memory beats one that does not, and between two alike the faster wins.
pub(crate) fn beats(time_us: f64, fits: bool, other_us: f64, other_fits: bool) -> bool {
    (fits, -time_us) > (other_fits, -other_us)
}

/// The limit past which a candidate cannot beat a result of `time_us` (`fits`) ([`beats`]): any
/// time at all when the result ran out of memory, since a candidate that fits beats it however
/// slow.
pub(crate) fn limit_to_beat(time_us: f64, fits: bool) -> f64 {
    if fits { time_us } else { f64::INFINITY }
}

/// [`evaluate`], given up (`None`) once the simulated iteration is past `limit_us`: for a search
/// that asks only whether a placement beats one it has ([`limit_to_beat`]), a slow candidate
/// costs its compilation and its iteration up to the limit, not the rest.
pub fn evaluate_within(
    p: &Problem,
    placement: &Placement,
    limit_us: f64,
) -> Result<Option<Evaluation>> {
    let read = evaluation_of(p, &placement.strategy);
    placement_within(p, placement, limit_us, read)
}

/// [`evaluate_within`] read for its [`Timing`] alone (no report, no copy of each task's times):
/// what the polish's moves and the pipeline planner's candidates are judged by.
pub fn timing_within(p: &Problem, placement: &Placement, limit_us: f64) -> Result<Option<Timing>> {
    let read = |_: Compiled, r: &SimResult| timing_of(r);
    placement_within(p, placement, limit_us, read)
}

/// A simulation's iteration time and memory verdict (a representative's OOM stands for its
/// class: the verdict is the full simulation's).
fn timing_of(r: &SimResult) -> Timing {
    Timing {
        iteration_us: r.makespan,
        fits: r.oom.is_empty(),
    }
}

/// [`timing_within`] with each GPU's busy time (µs on its compute stream, every replica's):
/// what the pipeline planner's refinement finds the slowest stage by.
pub fn busy_within(
    p: &Problem,
    placement: &Placement,
    limit_us: f64,
) -> Result<Option<(Timing, Vec<f64>)>> {
    let read = |compiled: Compiled, r: &SimResult| (timing_of(r), compiled.device_busy(r));
    placement_within(p, placement, limit_us, read)
}

/// The full evaluation of `strategy` from its compilation and its representatives' simulation.
fn evaluation_of<'a>(
    p: &'a Problem,
    strategy: &'a Strategy,
) -> impl FnOnce(Compiled, &SimResult) -> Evaluation + 'a {
    move |compiled, r| {
        let mut result = r.clone();
        compiled.expand(&mut result);
        let report = SimReport::new(p.cluster, strategy, &compiled, &result);
        Evaluation {
            compiled,
            result,
            report,
        }
    }
}

/// [`run_within`] for a placement: its execution order, if any, as priorities, by class.
fn placement_within<T>(
    p: &Problem,
    placement: &Placement,
    limit_us: f64,
    read: impl FnOnce(Compiled, &SimResult) -> T,
) -> Result<Option<T>> {
    let (priority, order) = priority_and_order(p, placement)?;
    let how = CompileOptions {
        priority,
        replicas: Replicas::ByClass,
    };
    run_within(p, &placement.strategy, how, order, limit_us, read)
}

/// `strategy` compiled and simulated, the result read by `read`; `None` once the iteration is
/// past `limit_us`, and [`SearchError::Abandoned`] once this thread's wall-clock
/// [`deadline`] has passed.
fn run_within<T>(
    p: &Problem,
    strategy: &Strategy,
    how: CompileOptions,
    order: Order,
    limit_us: f64,
    read: impl FnOnce(Compiled, &SimResult) -> T,
) -> Result<Option<T>> {
    let strategy = model_parallel::decided(p.graph, p.cluster, strategy, p.cost);
    let abandoned_or_past = || {
        if deadline::passed() {
            Err(SearchError::Abandoned.into())
        } else {
            Ok(None)
        }
    };
    let Some(mut compiled) = compile_within(p, &strategy, how, limit_us) else {
        return abandoned_or_past();
    };
    compiled.exec.seal();
    SIMULATOR.with_borrow_mut(|simulator| {
        match simulator.run_sealed_within(&compiled.exec, order, limit_us)? {
            Some(r) => Ok(Some(read(compiled, r))),
            None => abandoned_or_past(),
        }
    })
}

/// `job` (a measurement through [`evaluate_within`] or its kin) under the wall-clock `deadline`:
/// its result, or `None` when it was abandoned there ([`SearchError::Abandoned`]). The one place
/// a search turns an abandoned measurement back into "no answer".
pub(crate) fn until<T>(
    deadline: Option<std::time::Instant>,
    job: impl FnOnce() -> Result<T>,
) -> Result<Option<T>> {
    match deadline::during(deadline, job) {
        Err(Error::Search(SearchError::Abandoned)) => Ok(None),
        done => done.map(Some),
    }
}

thread_local! {
    /// Each thread's simulator: its buffers (a few arrays per task, megabytes for a pipeline's
    /// 10⁵ tasks) serve every simulation the thread runs instead of being allocated, faulted in
    /// and zeroed again for each.
    static SIMULATOR: std::cell::RefCell<Simulator> = std::cell::RefCell::new(Simulator::new());
}
