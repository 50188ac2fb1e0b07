//! Exact placement by mixed-integer programming on HiGHS (and, for MOIRAI, constraint programming
//! on pumpkin beside it).
//!
//! - [`milp`]: the solver layer (time limit, relative gap, threads, seed, warm start, status).
//! - [`instance`]: the scheduling instance built from a graph (or a coarsening of it), a cluster
//!   and the cost model; [`schedule`]: the timing rule everything shares, and a greedy schedule
//!   for the warm start and the big-M horizon.
//! - [`model`]: placement/scheduling variables common to both MILPs; [`quickp`]: QuickP P1/P2;
//!   [`moirai`]: MOIRAI with communication tasks, channel selection and congestion control.
//! - [`cp`]: the same model as a constraint program for pumpkin (lazy clause generation), run
//!   beside HiGHS on MOIRAI instances to prove optima the big-M relaxation cannot;
//! - `brute` (tests only): exhaustive search for tiny instances, the tests' reference optimum;
//!   [`improve`]: local search on the warm start; [`iterated`]: kicks and descents after it.
//! - [`align`]: the simulator configured as each formulation assumes (the alignment check).
//!
//! [`solve_problem`] is what the `solve` command and the `quickp-milp` / `moirai-milp` placers
//! call: build the instance, solve, and turn the plan into a [`Placement`] (one model-parallel
//! group per used GPU, the plan's order as priorities).

pub(crate) mod align;
#[cfg(test)]
pub(crate) mod brute;
pub(crate) mod cp;
pub(crate) mod improve;
pub(crate) mod instance;
pub(crate) mod iterated;
pub(crate) mod memory;
pub mod memory_watch;
pub(crate) mod model;
pub(crate) mod moirai;
pub(crate) mod optional_disjunctive;
pub(crate) mod quickp;
pub(crate) mod schedule;
pub(crate) mod size;
pub mod summary;
pub(crate) mod symmetry_breaking;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use crate::milp::SolveOptions;

pub(crate) use instance::Instance;
pub(crate) use schedule::Channels;
pub(crate) use schedule::Plan;

use crate::error::{Error, Result, SearchError, SolverError};
use crate::evaluate::Placement;
use crate::group::{self as grouping, QuickpOptions, default_rules, group_by_name, op_weights};
use crate::milp;
pub(crate) use crate::milp::SolveStatus;
use crate::problem::Problem;
use crate::strategy::Strategy;

/// Which MILP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Formulation {
    /// QuickP's MILP (P1 on ops, P2 on fused, co-located ops); transfers never congest.
    Quickp,
    /// MOIRAI's MILP with communication tasks, one channel per ordered device pair.
    Moirai,
}

impl Formulation {
    /// The formulation's name as the command line takes it (`quickp`, `moirai`).
    pub fn name(self) -> &'static str {
        match self {
            Formulation::Quickp => "quickp",
            Formulation::Moirai => "moirai",
        }
    }

    /// The network each formulation assumes.
    pub(crate) fn channels(self) -> Channels {
        match self {
            Formulation::Quickp => Channels::Unlimited,
            Formulation::Moirai => Channels::PerPair,
        }
    }
}

/// What one solve of an instance produced.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct InstanceResult {
    pub status: SolveStatus,
    /// Makespan of the incumbent, µs (null without one).
    pub objective_us: Option<f64>,
    /// Proven lower bound, µs.
    pub bound_us: Option<f64>,
    /// Relative gap (objective − bound) / objective.
    pub gap: Option<f64>,
    /// Makespan of the warm start (greedy earliest finish, or memory-first when that overflows a
    /// GPU), µs.
    pub heuristic_us: f64,
    pub variables: usize,
    pub rows: usize,
    pub build_seconds: f64,
    pub solve_seconds: f64,
    /// Which search established the status and the bound.
    pub prover: Prover,
    /// Whether a search was stopped early because memory neared `--memory-limit`
    /// ([`memory_watch`]).
    pub stopped_by_memory: bool,
    #[serde(skip)]
    pub plan: Option<Plan>,
}

/// The search behind a solve's status and bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Prover {
    /// HiGHS's branch and bound on the MILP.
    Milp,
    /// Pumpkin's lazy clause generation on the same model ([`cp`]).
    Cp,
    /// Nothing: HiGHS overran the time limit and was abandoned, and the warm start's
    /// heuristics gave the answer.
    Abandoned,
}

impl Prover {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Prover::Milp => "HiGHS on the MILP",
            Prover::Cp => "pumpkin on the CP model",
            Prover::Abandoned => "the warm start; HiGHS overran the time limit and was abandoned",
        }
    }
}

/// Share of the time limit the warm start's local search ([`improve`]) may take.
pub(crate) const IMPROVE_SHARE: f64 = 0.05;

/// Share of the time limit the iterated local search ([`iterated`]) may take after it.
pub(crate) const ITERATED_SHARE: f64 = 0.1;

/// Solve `inst` with `formulation`, warm-started from the greedy schedule. On a MOIRAI instance
/// small enough for it, the CP proof ([`cp`]) runs beside HiGHS on a second thread until the time
/// limit (or until HiGHS proves the optimum, which ends it; its proof interrupts HiGHS in turn):
/// whichever proves first sets the status, the better incumbent and the larger bound are kept.
/// With [`SolveOptions::heuristics_only`] the warm start (after its iterated local search) is
/// the answer, and neither runs.
pub(crate) fn solve_instance(
    inst: &Instance,
    formulation: Formulation,
    opts: &SolveOptions,
) -> Result<InstanceResult> {
    let started = Instant::now();
    // Refused before any work: the warm start alone takes a share of the time limit. The
    // heuristics alone build no model.
    let milp_bytes = match opts.heuristics_only {
        Some(_) => 0.0,
        None => check_size(inst, formulation, opts)?,
    };
    let channels = formulation.channels();
    let limit = Duration::from_secs_f64(opts.time_limit_s.max(0.0));
    // Heuristics alone: the work counted for their own seconds, the whole limit only a cap.
    let (improve_until, kick_for, kick_until) = match opts.heuristics_only {
        Some(seconds) => (
            started + limit,
            seconds.max(0.0) * ITERATED_SHARE,
            started + limit,
        ),
        None => {
            let improve_for = limit.mul_f64(IMPROVE_SHARE);
            let kick_for = limit.mul_f64(ITERATED_SHARE);
            let until = started + improve_for;
            (until, kick_for.as_secs_f64(), until + kick_for)
        }
    };
    let mut heuristic = warm_start(inst, channels, improve_until);
    heuristic = iterated::iterated(
        inst,
        channels,
        heuristic,
        u64::from(opts.seed.unsigned_abs()),
        iterated::rounds_for(inst, kick_for),
        kick_until,
    );
    // The warm start must obey the symmetry-breaking rows; relabelling keeps its schedule.
    heuristic.device = symmetry_breaking::canonical_devices(inst, &heuristic.device);
    let admissible = heuristic.admissible(inst);
    if obviously_infeasible(inst) {
        return Ok(without_milp(
            SolveStatus::Infeasible,
            heuristic,
            false,
            started,
        ));
    }
    if opts.heuristics_only.is_some() {
        // The counted heuristics' schedule is the answer when it fits.
        let status = if admissible {
            SolveStatus::Feasible
        } else {
            SolveStatus::TimedOut
        };
        return Ok(without_milp(status, heuristic, admissible, started));
    }
    // The CP's memory shares the limit with the MILP's.
    let left_by_milp = opts.memory_limit_bytes * memory_watch::CP_SHARE - milp_bytes;
    let with_cp =
        formulation == Formulation::Moirai && admissible && cp::fits(inst, channels, left_by_milp);
    let deadline = started + Duration::from_secs_f64(opts.time_limit_s.max(0.0));
    // `stop` ends the CP (HiGHS has finished, or memory reached the CP's share); `interrupt`
    // ends HiGHS (the CP proved, or memory reached HiGHS's share); `done` ends the watcher.
    let stop = Arc::new(AtomicBool::new(false));
    let interrupt = Arc::new(AtomicBool::new(false));
    let done = AtomicBool::new(false);
    let wires = [
        memory_watch::Tripwire {
            cap: opts.memory_limit_bytes * memory_watch::CP_SHARE,
            flag: &stop,
        },
        memory_watch::Tripwire {
            cap: opts.memory_limit_bytes * memory_watch::MILP_SHARE,
            flag: &interrupt,
        },
    ];
    let cp = if with_cp {
        let gap = opts.mip_rel_gap;
        Some(spawn_cp(
            inst, channels, &heuristic, gap, deadline, &stop, &interrupt,
        )?)
    } else {
        None
    };
    let (milp, proof, stopped_by_memory) = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| memory_watch::watch(&done, &wires));
        let job = MilpJob {
            inst: inst.clone(),
            formulation,
            opts: opts.clone(),
            heuristic: heuristic.clone(),
            started,
        };
        let milp = solve_milp_within(Arc::new(job), &interrupt);
        if milp
            .as_ref()
            .is_ok_and(|r| r.status != SolveStatus::Feasible)
            || milp.is_err()
        {
            stop.store(true, Ordering::Relaxed);
        }
        let proof = cp.map(|answer| wait_for_proof(&answer, deadline + ABANDON_GRACE, &stop));
        done.store(true, Ordering::Relaxed);
        watcher.thread().unpark();
        (milp, proof, watcher.join().unwrap_or(false))
    });
    let proof = proof.transpose()?.flatten();
    let mut result = milp?;
    result.stopped_by_memory = stopped_by_memory;
    if let Some(proof) = proof {
        merge_proof(&mut result, proof);
    }
    Ok(result)
}

/// The CP's answer: a proof, or what its thread said when it panicked.
type CpAnswer = mpsc::Receiver<std::result::Result<cp::CpProof, String>>;

/// Starts MOIRAI's CP proof on a thread of its own, which owns what it works on: it may still be
/// building its model at the deadline (pumpkin checks the deadline only while it searches), and
/// is then left to finish in the background, as an overrunning HiGHS is
/// ([`solve_milp_within`]). A proof raises `interrupt`, which ends HiGHS.
fn spawn_cp(
    inst: &Instance,
    channels: Channels,
    heuristic: &Plan,
    gap: f64,
    deadline: Instant,
    stop: &Arc<AtomicBool>,
    interrupt: &Arc<AtomicBool>,
) -> Result<CpAnswer> {
    let (sender, receiver) = mpsc::channel();
    let (inst, heuristic) = (inst.clone(), heuristic.clone());
    let (stop, interrupt) = (Arc::clone(stop), Arc::clone(interrupt));
    let work = move || {
        let proving = || cp::prove(&inst, channels, &heuristic, gap, deadline, &stop);
        let proof = std::panic::catch_unwind(std::panic::AssertUnwindSafe(proving))
            .map_err(|payload| panic_text(payload.as_ref()));
        if proof.as_ref().is_ok_and(|p| p.proved) {
            interrupt.store(true, Ordering::Relaxed);
        }
        // The receiver is gone when the proof was abandoned; the proof is not wanted.
        let _ = sender.send(proof);
    };
    std::thread::Builder::new()
        .name("cp".into())
        .stack_size(CP_STACK_BYTES)
        .spawn(work)
        .map_err(|e| SolverError::Prover(e.to_string()))?;
    Ok(receiver)
}

/// The CP's proof if it comes by `give_up_at`; `None` (and the CP told to stop) when it does not.
fn wait_for_proof(
    answer: &CpAnswer,
    give_up_at: Instant,
    stop: &AtomicBool,
) -> Result<Option<cp::CpProof>> {
    let wait = give_up_at.saturating_duration_since(Instant::now());
    match answer.recv_timeout(wait) {
        Ok(Ok(proof)) => Ok(Some(proof)),
        Ok(Err(said)) => Err(SolverError::Prover(said).into()),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            stop.store(true, Ordering::Relaxed);
            Ok(None)
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(SolverError::Prover("the proof's thread stopped".into()).into())
        }
    }
}

/// What a panicking thread said, for an error instead of a swallowed panic.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "an internal error".to_string())
}

/// An answer reached without building the MILP: `status`, with `heuristic` as the solution
/// when `solved` (its makespan as the objective), no bound.
fn without_milp(
    status: SolveStatus,
    heuristic: Plan,
    solved: bool,
    started: Instant,
) -> InstanceResult {
    InstanceResult {
        status,
        objective_us: solved.then_some(heuristic.makespan),
        bound_us: None,
        gap: None,
        heuristic_us: heuristic.makespan,
        variables: 0,
        rows: 0,
        build_seconds: started.elapsed().as_secs_f64(),
        solve_seconds: 0.0,
        prover: Prover::Milp,
        stopped_by_memory: false,
        plan: solved.then_some(heuristic),
    }
}

/// Stack of the CP thread (pumpkin's conflict analysis on deep implication graphs).
const CP_STACK_BYTES: usize = 64 << 20;

/// How long past the time limit [`solve_milp_within`] waits for HiGHS before it gives up on it.
const ABANDON_GRACE: Duration = Duration::from_millis(250);

/// Between two looks at the outside interrupt while waiting for HiGHS.
const RELAY_POLL: Duration = Duration::from_millis(10);

/// What [`solve_milp`] works on, owned: the solve may outlive the caller's borrow when abandoned.
struct MilpJob {
    inst: Instance,
    formulation: Formulation,
    opts: SolveOptions,
    heuristic: Plan,
    started: Instant,
}

/// [`solve_milp`] on a thread of its own, abandoned if it is still running [`ABANDON_GRACE`]
/// after the time limit. HiGHS checks its time limit and its interrupt callback only now and
/// then: building the model and handing it over take seconds on large instances, and presolve
/// and the root LP overran 3-second limits by 1 to 20 s (transformer × tag-testbed under
/// QuickP: 25 s). An abandoned solve has its interrupt raised and finishes in the background,
/// holding its memory until it does; the warm start is then the answer.
fn solve_milp_within(job: Arc<MilpJob>, interrupt: &AtomicBool) -> Result<InstanceResult> {
    let limit = Duration::from_secs_f64(job.opts.time_limit_s.max(0.0));
    let give_up_at = job.started + limit + ABANDON_GRACE;
    let own = Arc::new(AtomicBool::new(false));
    let (sender, receiver) = std::sync::mpsc::channel();
    let worker = {
        let (job, own) = (Arc::clone(&job), Arc::clone(&own));
        move || {
            let j = &*job;
            let result = solve_milp(
                &j.inst,
                j.formulation,
                &j.opts,
                &j.heuristic,
                j.started,
                &own,
            );
            // The receiver is gone when the solve was abandoned; the result is not wanted.
            let _ = sender.send(result);
        }
    };
    std::thread::Builder::new()
        .name("highs".into())
        .spawn(worker)
        .map_err(|e| SolverError::Failed(format!("cannot start the solver's thread: {e}")))?;
    loop {
        if interrupt.load(Ordering::Relaxed) {
            own.store(true, Ordering::Relaxed);
        }
        match receiver.recv_timeout(RELAY_POLL) {
            Ok(result) => return result,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(SolverError::Failed("the solver's thread stopped".into()).into());
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if Instant::now() >= give_up_at => {
                own.store(true, Ordering::Relaxed);
                return Ok(abandoned(&job.inst, job.heuristic.clone(), job.started));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
}

/// The answer when HiGHS was abandoned: the warm start, if it fits; no bound.
fn abandoned(inst: &Instance, heuristic: Plan, started: Instant) -> InstanceResult {
    let admissible = heuristic.admissible(inst);
    let status = if admissible {
        SolveStatus::Feasible
    } else {
        SolveStatus::TimedOut
    };
    InstanceResult {
        prover: Prover::Abandoned,
        ..without_milp(status, heuristic, admissible, started)
    }
}

/// Build the formulation's MILP around the warm start and run HiGHS on it.
fn solve_milp(
    inst: &Instance,
    formulation: Formulation,
    opts: &SolveOptions,
    heuristic: &Plan,
    started: Instant,
    interrupt: &AtomicBool,
) -> Result<InstanceResult> {
    let admissible = heuristic.admissible(inst);
    // A feasible schedule bounds the optimum; a tiny slack keeps its own warm start feasible
    // after rounding.
    let horizon = if admissible {
        heuristic.makespan * (1.0 + 1e-9) + 1e-6
    } else {
        inst.serial_horizon() + 1e-6
    };
    type Reader = Box<dyn Fn(&milp::MilpOutcome) -> Plan>;
    let (milp, warm, reader): (milp::Milp, Vec<f64>, Reader) = match formulation {
        Formulation::Quickp => {
            let m = quickp::QuickpMilp::build(inst, horizon);
            let warm = m.warm(inst, heuristic);
            let quickp::QuickpMilp { milp, core } = m;
            let inst2 = inst.clone();
            let reader: Reader =
                Box::new(move |out: &milp::MilpOutcome| quickp::plan_of(&core, &inst2, out));
            (milp, warm, reader)
        }
        Formulation::Moirai => {
            let m = moirai::MoiraiMilp::build(inst, horizon);
            let warm = m.warm(inst, heuristic);
            let (milp, rest) = m.split();
            let inst2 = inst.clone();
            let reader: Reader = Box::new(move |out: &milp::MilpOutcome| rest.plan(&inst2, out));
            (milp, warm, reader)
        }
    };
    let variables = milp.num_vars();
    let rows = milp.num_rows();
    let build_seconds = started.elapsed().as_secs_f64();
    let remaining = SolveOptions {
        time_limit_s: (opts.time_limit_s - build_seconds).max(0.0),
        // The CP's proof must be able to end HiGHS (see `SolveOptions::sub_mips`).
        sub_mips: opts.sub_mips && formulation != Formulation::Moirai,
        ..opts.clone()
    };
    let warm = admissible.then_some(warm.as_slice());
    let out = milp.solve_until(&remaining, warm, Some(interrupt))?;
    let plan = out.status.has_solution().then(|| reader(&out));
    let some = |x: f64| x.is_finite().then_some(x);
    Ok(InstanceResult {
        status: out.status,
        objective_us: some(out.objective),
        bound_us: some(out.bound),
        gap: some(out.gap),
        heuristic_us: heuristic.makespan,
        variables,
        rows,
        build_seconds,
        solve_seconds: out.seconds,
        prover: Prover::Milp,
        stopped_by_memory: false,
        plan,
    })
}

/// Fold the CP's result into HiGHS's: the better incumbent, the larger bound, and the CP's
/// "optimal" where HiGHS did not prove it.
fn merge_proof(result: &mut InstanceResult, proof: cp::CpProof) {
    if result.objective_us.is_none_or(|o| proof.plan.makespan < o) {
        result.objective_us = Some(proof.plan.makespan);
        result.plan = Some(proof.plan);
        if !result.status.has_solution() {
            result.status = SolveStatus::Feasible;
        }
    }
    if proof.proved && result.status != SolveStatus::Optimal {
        result.status = SolveStatus::Optimal;
        result.prover = Prover::Cp;
    }
    let bound = result.bound_us.unwrap_or(0.0).max(proof.bound);
    if let Some(objective) = result.objective_us {
        let bound = bound.min(objective);
        result.bound_us = Some(bound);
        result.gap = Some((objective - bound) / objective.max(f64::MIN_POSITIVE));
    }
}

/// The best of the greedy and the critical-path-first schedules, each improved by local search
/// (the time shared); the memory-first fill when neither fits.
fn warm_start(inst: &Instance, channels: Channels, deadline: Instant) -> Plan {
    let fits = |plans: Vec<Plan>| -> Vec<Plan> {
        plans.into_iter().filter(|p| p.admissible(inst)).collect()
    };
    let mut starts = fits(vec![
        schedule::greedy(inst, channels),
        schedule::critical_path_first(inst, channels),
    ]);
    if starts.is_empty() {
        let filled = schedule::memory_first(inst, channels);
        if !filled.admissible(inst) {
            return filled;
        }
        starts.push(filled);
    }
    let now = Instant::now();
    let half = deadline.saturating_duration_since(now) / 2;
    starts
        .into_iter()
        .enumerate()
        .map(|(at, plan)| {
            let until = now + half * (at as u32 + 1);
            improve::improve(inst, channels, plan, until)
        })
        .min_by(|a, b| a.makespan.total_cmp(&b.makespan))
        .expect("a start")
}

/// Refuse an instance whose model would exceed the memory limit, before building it; else the
/// model's estimated bytes.
pub(crate) fn check_size(
    inst: &Instance,
    formulation: Formulation,
    opts: &SolveOptions,
) -> Result<f64> {
    // The floor first: the full estimate needs the reachability matrix, which on a large graph
    // costs more time and memory than the limits allow.
    let floor = size::floor(inst);
    let (size, bytes, about) = match floor.bytes() + size::reachability_bytes(inst) {
        first if first > opts.memory_limit_bytes => (floor, first, "at least"),
        _ => {
            let size = size::estimate(inst, formulation);
            let bytes = size.bytes();
            (size, bytes, "about")
        }
    };
    if bytes <= opts.memory_limit_bytes {
        return Ok(bytes);
    }
    Err(crate::error::SolverError::TooLarge {
        formulation: formulation.name(),
        nodes: inst.len(),
        devices: inst.devices(),
        rows: size.rows,
        nonzeros: size.nonzeros,
        needed: crate::render::bytes(bytes),
        limit: crate::render::bytes(opts.memory_limit_bytes),
        about,
    }
    .into())
}

/// A node larger than every device, or more bytes than the whole cluster holds.
fn obviously_infeasible(inst: &Instance) -> bool {
    let biggest = inst.capacity.iter().copied().fold(0.0, f64::max);
    let total: f64 = inst.nodes.iter().map(|n| n.memory).sum();
    inst.nodes.iter().any(|n| n.memory > biggest) || total > inst.capacity.iter().sum::<f64>()
}

/// How to coarsen before solving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coarsen {
    /// The formulation's own: QuickP P2 (fusion + co-location), MOIRAI's fusion rules.
    Auto,
    /// Single ops (QuickP P1; MOIRAI on the op graph).
    None,
    /// A grouping method by name (`topoplace group --method`), its groups as nodes.
    Method(String),
}

impl Coarsen {
    /// Read `--coarsen`: `auto`, `none`, or any other text as a grouping method name.
    pub fn parse(name: &str) -> Coarsen {
        match name {
            "auto" => Coarsen::Auto,
            "none" => Coarsen::None,
            other => Coarsen::Method(other.to_string()),
        }
    }
}

/// The instance a formulation solves for a problem, and what it is called (P1, P2, ...).
pub(crate) fn instance_for(
    p: &Problem,
    formulation: Formulation,
    coarsen: &Coarsen,
    k: usize,
) -> Result<(Instance, String)> {
    let weights = op_weights(p.graph, crate::group::reference_gpu(p.graph), p.cost);
    match (formulation, coarsen) {
        (_, Coarsen::None) => {
            let label = match formulation {
                Formulation::Quickp => "P1 (ops)",
                Formulation::Moirai => "MOIRAI (ops)",
            };
            Ok((instance::build(p, None)?, label.into()))
        }
        (Formulation::Quickp, Coarsen::Auto) => {
            let r = grouping::quickp(p.graph, &weights, &QuickpOptions::default())?;
            let inst = instance::build_p2(p, &r.fused, &r.colocated)?;
            Ok((inst, "P2 (fusion + co-location)".into()))
        }
        (Formulation::Moirai, Coarsen::Auto) => {
            let g = grouping::moirai(p.graph, &weights, &default_rules())?;
            Ok((instance::build(p, Some(&g))?, "MOIRAI (GCOF fusion)".into()))
        }
        (_, Coarsen::Method(m)) => {
            let g = group_by_name(p.graph, &weights, m, k)?;
            let label = format!("{} over {m} groups", formulation.name());
            Ok((instance::build(p, Some(&g))?, label))
        }
    }
}

/// The placement a plan stands for: one model-parallel group per used GPU, every op of a node
/// on the node's GPU, and op priorities that follow the plan's node order (members of a node in
/// topological order).
pub(crate) fn to_placement(
    p: &Problem,
    inst: &Instance,
    plan: &Plan,
    note: String,
) -> Result<Placement> {
    let n_ops = p.graph.len();
    let mut op_device = vec![usize::MAX; n_ops];
    let mut priority = vec![0.0; n_ops];
    let nodes_in_order = plan.sequence(inst).into_iter().filter_map(|t| match t {
        schedule::Task::Node(i) => Some(i),
        schedule::Task::Transfer(_) => None,
    });
    for (rank, i) in nodes_in_order.enumerate() {
        let ops = &inst.nodes[i].ops;
        for (pos, &op) in ops.iter().enumerate() {
            op_device[op] = plan.device[i];
            priority[op] = rank as f64 + pos as f64 / (ops.len() + 1) as f64;
        }
    }
    let devices = p.cluster.devices.len();
    let strategy = Strategy::from_op_devices("milp plan", &op_device, devices)?;
    Ok(Placement {
        strategy,
        order: Some(priority),
        note,
        predicted_us: Some(plan.makespan),
        fits: Some(plan.admissible(inst)),
        simulated_us: None,
    })
}

/// Build, solve and map back: the `solve` command and the MILP placers in one call. No
/// solution (infeasible, or out of time before the first one) is an error naming the model.
pub(crate) fn solve_problem(
    p: &Problem,
    formulation: Formulation,
    coarsen: &Coarsen,
    k: usize,
    opts: &SolveOptions,
) -> Result<(Instance, String, InstanceResult, Placement)> {
    // The coarsening counts against the time limit: QuickP's takes seconds on 10⁵ ops.
    let began = Instant::now();
    let limit = Duration::try_from_secs_f64(opts.time_limit_s.max(0.0)).unwrap_or(Duration::MAX);
    let until = began.checked_add(limit);
    let built = crate::sim::deadline::during(until, || instance_for(p, formulation, coarsen, k));
    let (inst, label) = built.map_err(|e| match e {
        Error::Search(SearchError::OutOfTime) => SolverError::NoSolution(format!(
            "the coarsening of {} did not end within the {} s time limit",
            p.graph.name, opts.time_limit_s
        ))
        .into(),
        e => e,
    })?;
    let remaining = SolveOptions {
        time_limit_s: (opts.time_limit_s - began.elapsed().as_secs_f64()).max(0.0),
        ..opts.clone()
    };
    let result = solve_instance(&inst, formulation, &remaining)?;
    let Some(plan) = result.plan.as_ref() else {
        let why = match result.status {
            SolveStatus::Infeasible => format!(
                "no placement of {} fits the memory of cluster {}",
                p.graph.name, p.cluster.name
            ),
            _ => format!(
                "no placement of {} on {} found within the {} s time limit",
                p.graph.name, p.cluster.name, opts.time_limit_s
            ),
        };
        return Err(SolverError::NoSolution(why).into());
    };
    let proved_by = match result.prover {
        Prover::Cp => " (CP proof)",
        Prover::Milp => "",
        Prover::Abandoned => " (warm start; HiGHS overran the time limit)",
    };
    let status = result.status.name();
    let note = format!("{} {label}, {status}{proved_by}", formulation.name());
    let placement = to_placement(p, &inst, plan, note)?;
    Ok((inst, label, result, placement))
}

#[cfg(test)]
mod tests;
