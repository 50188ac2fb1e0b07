//! A thin MILP layer over HiGHS (the `highs` crate): variables and rows are added one at a time,
//! the solve honours a time limit, a relative MIP gap, a thread count and a random seed, accepts a
//! warm start, and reports what HiGHS proved — optimal, feasible with a gap, infeasible, or out of
//! time — together with the dual bound, which `good_lp` does not expose.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use highs::{HighsModelStatus, RowProblem, Sense};
use serde::Serialize;

use crate::error::{Result, SolverError};

/// How a solve may spend its effort.
#[derive(Debug, Clone, PartialEq)]
pub struct SolveOptions {
    /// Wall-clock limit in seconds.
    pub time_limit_s: f64,
    /// Stop once (incumbent − bound) / incumbent is at most this.
    pub mip_rel_gap: f64,
    /// HiGHS threads; 1 makes runs reproducible.
    pub threads: u32,
    /// HiGHS's random seed (fixed so that runs are reproducible).
    pub seed: i32,
    /// Print HiGHS's log to stdout.
    pub verbose: bool,
    /// Run HiGHS's feasibility-jump heuristic before branching (its default). Off for the SFB
    /// ILPs: hundreds of tiny closure problems per check, whose LP relaxation is already
    /// integral, where the heuristic took most of the solve time.
    pub feasibility_jump: bool,
    /// Largest model (estimated bytes, [`crate::solve::size`]) to build; larger ones are refused
    /// before building.
    pub memory_limit_bytes: f64,
    /// Run HiGHS's RINS and RENS heuristics (its default). Each solves sub-MIPs on its own copy
    /// of the model, nested, and a sub-MIP polls no interrupt: on BERT-Small inference ×
    /// moirai-inter they took 90 s of a 150-s solve, ten deep, and 1.5 GB more memory at the
    /// root, so neither the CP's proof nor the memory watch could end HiGHS. Off where the CP
    /// proof runs beside HiGHS (MOIRAI), whose warm start and proof supply the incumbents.
    pub sub_mips: bool,
    /// `Some(seconds)`: only the counted heuristics of [`crate::solve::solve_instance`], the
    /// warm start's local search and the iterated local search, with the passes and rounds
    /// counted for a time limit of `seconds`, run to their end (the time limit only caps them);
    /// neither the MILP is built (nor refused for its size) nor the CP proof run. The answer
    /// then depends on the instance, the options
    /// and the seed alone, where the incumbent HiGHS holds at a time limit, and which of HiGHS
    /// and the CP proves first, depend on the machine's speed and load.
    pub heuristics_only: Option<f64>,
}

/// Default model memory limit: 4 GiB.
pub(crate) const DEFAULT_MEMORY_LIMIT_BYTES: f64 = 4.0 * 1024.0 * 1024.0 * 1024.0;

impl Default for SolveOptions {
    fn default() -> SolveOptions {
        SolveOptions {
            time_limit_s: 60.0,
            mip_rel_gap: 1e-4,
            threads: 1,
            seed: 0,
            verbose: false,
            feasibility_jump: true,
            memory_limit_bytes: DEFAULT_MEMORY_LIMIT_BYTES,
            sub_mips: true,
            heuristics_only: None,
        }
    }
}

/// What the solver proved about its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SolveStatus {
    /// Optimal within the requested relative gap.
    Optimal,
    /// A solution, stopped by the time limit before closing the gap.
    Feasible,
    /// No placement satisfies the constraints (e.g. the model fits on no device set).
    Infeasible,
    /// The time limit passed before any solution was found.
    TimedOut,
}

impl SolveStatus {
    /// The status as printed and serialised: `optimal`, `feasible`, `infeasible`, `timed-out`.
    pub fn name(self) -> &'static str {
        match self {
            SolveStatus::Optimal => "optimal",
            SolveStatus::Feasible => "feasible",
            SolveStatus::Infeasible => "infeasible",
            SolveStatus::TimedOut => "timed-out",
        }
    }

    /// Whether a solution (values) comes with this status.
    pub(crate) fn has_solution(self) -> bool {
        matches!(self, SolveStatus::Optimal | SolveStatus::Feasible)
    }
}

/// A variable of a [`Milp`] (its column index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Var(pub usize);

/// What one solve returned.
#[derive(Debug, Clone)]
pub(crate) struct MilpOutcome {
    pub status: SolveStatus,
    /// Objective of the incumbent (NaN without one).
    pub objective: f64,
    /// Best proven lower bound (minimisation).
    pub bound: f64,
    /// Relative gap (objective − bound) / objective; 0 when optimal, NaN without a solution.
    pub gap: f64,
    /// Value of every variable (empty without a solution).
    pub values: Vec<f64>,
    pub seconds: f64,
}

impl MilpOutcome {
    pub(crate) fn value(&self, v: Var) -> f64 {
        self.values[v.0]
    }
}

/// A minimisation MILP under construction.
#[derive(Default)]
pub(crate) struct Milp {
    problem: RowProblem,
    columns: Vec<highs::Col>,
    rows: usize,
}

impl Milp {
    pub(crate) fn new() -> Milp {
        Milp::default()
    }

    /// A 0/1 variable with objective coefficient `cost`.
    pub(crate) fn binary(&mut self, cost: f64) -> Var {
        let col = self.problem.add_integer_column(cost, 0.0..=1.0);
        self.push(col)
    }

    /// A continuous variable in `[lo, hi]` with objective coefficient `cost`.
    pub(crate) fn continuous(&mut self, lo: f64, hi: f64, cost: f64) -> Var {
        let col = self.problem.add_column(cost, lo..=hi);
        self.push(col)
    }

    fn push(&mut self, col: highs::Col) -> Var {
        self.columns.push(col);
        Var(self.columns.len() - 1)
    }

    /// `lo ≤ Σ coef·var ≤ hi`.
    /// A variable may appear several times (co-located nodes share columns): its coefficients
    /// are summed, as HiGHS accepts one entry per column.
    pub(crate) fn row(&mut self, lo: f64, hi: f64, terms: &[(Var, f64)]) {
        let mut merged: std::collections::BTreeMap<usize, f64> = Default::default();
        for &(v, c) in terms {
            *merged.entry(v.0).or_insert(0.0) += c;
        }
        let factors: Vec<(highs::Col, f64)> = merged
            .into_iter()
            .filter(|(_, c)| *c != 0.0)
            .map(|(v, c)| (self.columns[v], c))
            .collect();
        self.problem.add_row(lo..=hi, factors);
        self.rows += 1;
    }

    pub(crate) fn le(&mut self, terms: &[(Var, f64)], rhs: f64) {
        self.row(f64::NEG_INFINITY, rhs, terms);
    }

    pub(crate) fn ge(&mut self, terms: &[(Var, f64)], rhs: f64) {
        self.row(rhs, f64::INFINITY, terms);
    }

    pub(crate) fn eq(&mut self, terms: &[(Var, f64)], rhs: f64) {
        self.row(rhs, rhs, terms);
    }

    pub(crate) fn num_vars(&self) -> usize {
        self.columns.len()
    }

    pub(crate) fn num_rows(&self) -> usize {
        self.rows
    }

    /// Solve, starting from `warm` (a value per variable) when given. HiGHS checks the warm
    /// start and ignores it when infeasible, so a wrong one costs time, never correctness.
    pub(crate) fn solve(self, opts: &SolveOptions, warm: Option<&[f64]>) -> Result<MilpOutcome> {
        self.solve_until(opts, warm, None)
    }

    /// [`Milp::solve`] that also ends, as at its time limit, once `interrupt` is raised (another
    /// search proved the optimum first).
    pub(crate) fn solve_until(
        self,
        opts: &SolveOptions,
        warm: Option<&[f64]>,
        interrupt: Option<&AtomicBool>,
    ) -> Result<MilpOutcome> {
        let started = Instant::now();
        let n = self.columns.len();
        let mut model = self
            .problem
            .try_optimise(Sense::Minimise)
            .map_err(|e| SolverError::Rejected(format!("{e:?}")))?;
        if !opts.verbose {
            model.make_quiet();
        }
        let threads = opts.threads.max(1) as i32;
        set(&mut model, "time_limit", opts.time_limit_s.max(0.0))?;
        set(&mut model, "mip_rel_gap", opts.mip_rel_gap.max(0.0))?;
        set(&mut model, "random_seed", opts.seed)?;
        set(&mut model, "threads", threads)?;
        set(
            &mut model,
            "mip_heuristic_run_feasibility_jump",
            opts.feasibility_jump,
        )?;
        if threads == 1 {
            set(&mut model, "parallel", "off")?;
        }
        set(&mut model, "mip_heuristic_run_rins", opts.sub_mips)?;
        set(&mut model, "mip_heuristic_run_rens", opts.sub_mips)?;
        if let Some(flag) = interrupt {
            interrupt_on(&mut model, flag);
        }
        if let Some(w) = warm.filter(|w| w.len() == n) {
            model
                .try_set_solution(Some(w), None, None, None)
                .map_err(|e| SolverError::WarmStart(format!("{e:?}")))?;
        }
        let solved = model
            .try_solve()
            .map_err(|e| SolverError::Failed(format!("{e:?}")))?;
        let seconds = started.elapsed().as_secs_f64();
        let has_solution = solved.primal_solution_status() == highs::HighsSolutionStatus::Feasible;
        let status = match solved.status() {
            HighsModelStatus::Optimal
            | HighsModelStatus::ObjectiveBound
            | HighsModelStatus::ObjectiveTarget => SolveStatus::Optimal,
            HighsModelStatus::Infeasible | HighsModelStatus::UnboundedOrInfeasible => {
                SolveStatus::Infeasible
            }
            HighsModelStatus::ReachedTimeLimit
            | HighsModelStatus::ReachedIterationLimit
            | HighsModelStatus::ReachedSolutionLimit
            | HighsModelStatus::ReachedInterrupt
            | HighsModelStatus::ReachedMemoryLimit
            | HighsModelStatus::Unknown => {
                if has_solution {
                    SolveStatus::Feasible
                } else {
                    SolveStatus::TimedOut
                }
            }
            other => return Err(SolverError::Ended(format!("{other:?}")).into()),
        };
        if !status.has_solution() || !has_solution {
            let status = if status.has_solution() {
                SolveStatus::TimedOut
            } else {
                status
            };
            return Ok(MilpOutcome {
                status,
                objective: f64::NAN,
                bound: solved
                    .double_info_value(c"mip_dual_bound")
                    .unwrap_or(f64::NAN),
                gap: f64::NAN,
                values: Vec::new(),
                seconds,
            });
        }
        let objective = solved.objective_value();
        let bound = solved
            .double_info_value(c"mip_dual_bound")
            .unwrap_or(objective);
        let bound = if bound.is_finite() { bound } else { 0.0 };
        let gap = relative_gap(objective, bound);
        Ok(MilpOutcome {
            status,
            objective,
            bound,
            gap,
            values: solved.get_solution().columns().to_vec(),
            seconds,
        })
    }
}

/// (objective − bound) / |objective|, 0 when they agree (also at 0).
pub(crate) fn relative_gap(objective: f64, bound: f64) -> f64 {
    let diff = (objective - bound).max(0.0);
    if diff <= 1e-9 * objective.abs().max(1.0) {
        0.0
    } else {
        diff / objective.abs().max(1e-12)
    }
}

fn set<V: highs::HighsOptionValue>(model: &mut highs::Model, key: &str, value: V) -> Result<()> {
    model.try_set_option(key, value).map_err(|e| {
        SolverError::Option {
            key: key.to_string(),
            message: format!("{e:?}"),
        }
        .into()
    })
}

/// Have HiGHS poll `flag` in its simplex, interior-point and branch-and-bound loops and stop
/// (`ReachedInterrupt`) once it is raised. `flag` is borrowed for the whole solve that follows.
#[allow(unsafe_code)]
fn interrupt_on(model: &mut highs::Model, flag: &AtomicBool) {
    let data = std::ptr::from_ref(flag).cast_mut().cast::<c_void>();
    let highs = model.as_mut_ptr();
    // SAFETY: `highs` is the live instance the model owns (the solve moves the wrapper, not the
    // instance); `data` points to an AtomicBool that outlives the solve, and the callback only
    // reads it.
    unsafe {
        highs_sys::Highs_setCallback(highs, Some(poll_interrupt), data);
        for kind in [
            highs_sys::kHighsCallbackSimplexInterrupt,
            highs_sys::kHighsCallbackIpmInterrupt,
            highs_sys::kHighsCallbackMipInterrupt,
        ] {
            highs_sys::Highs_startCallback(highs, kind);
        }
    }
}

/// The callback [`interrupt_on`] registers: ask HiGHS to stop while the flag is raised.
#[allow(unsafe_code)]
unsafe extern "C" fn poll_interrupt(
    _kind: c_int,
    _message: *const c_char,
    _out: *const highs_sys::HighsCallbackDataOut,
    data_in: *mut highs_sys::HighsCallbackDataIn,
    flag: *mut c_void,
) {
    // SAFETY: `flag` is the AtomicBool registered by `interrupt_on`, alive during the solve;
    // `data_in` is HiGHS's own input block for this call (checked for null).
    unsafe {
        let raised = (*flag.cast::<AtomicBool>()).load(Ordering::Relaxed);
        if raised && !data_in.is_null() {
            (*data_in).user_interrupt = 1;
        }
    }
}
