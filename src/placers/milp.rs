//! The exact baselines: QuickP's P2 and MOIRAI's MILP ([`crate::solve`]) as placers, on their
//! own coarsenings by default (QuickP fusion + co-location, MOIRAI's fusion rules). The budget's
//! `seconds` is the solver's time limit (default [`DEFAULT_TIME_LIMIT_S`]); the answer is the
//! incumbent when the limit stops the solver, and the note says optimal or the gap.

use super::{Budget, Placer};
use crate::error::{Error, Result, SolverError};
use crate::evaluate::Placement;
use crate::problem::Problem;
use crate::solve::{Coarsen, Formulation, SolveOptions, SolveStatus, solve_problem};
use crate::solve::{Instance, InstanceResult};

/// Group counts of contiguous chunks in topological order (acyclic, as the MILPs need) tried, in
/// order, when the formulation's own coarsening gives a model over
/// the memory limit.
const FALLBACK_GROUPS: [usize; 4] = [60, 30, 15, 8];

/// Solve on the formulation's own coarsening, or, when its model would exceed the memory limit,
/// on the first chunking of [`FALLBACK_GROUPS`] whose model fits.
pub(super) fn solve_fitting(
    p: &Problem,
    formulation: Formulation,
    opts: &SolveOptions,
) -> Result<(Instance, String, InstanceResult, Placement)> {
    let mut last = match solve_problem(p, formulation, &Coarsen::Auto, 60, opts) {
        Err(Error::Solver(e @ SolverError::TooLarge { .. })) => e,
        other => return other,
    };
    for k in FALLBACK_GROUPS {
        let chunks = Coarsen::Method("chunks".to_string());
        match solve_problem(p, formulation, &chunks, k, opts) {
            Err(Error::Solver(e @ SolverError::TooLarge { .. })) => last = e,
            Ok((inst, label, result, placement)) => {
                let label = format!("{label} (k = {k}: the own coarsening's model is too large)");
                return Ok((inst, label, result, placement));
            }
            other => return other,
        }
    }
    Err(last.into())
}

/// Time limit when the budget has none, seconds.
pub(crate) const DEFAULT_TIME_LIMIT_S: f64 = 60.0;

pub(crate) struct Milp(pub Formulation);

impl Placer for Milp {
    fn name(&self) -> &'static str {
        match self.0 {
            Formulation::Quickp => "quickp-milp",
            Formulation::Moirai => "moirai-milp",
        }
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let opts = SolveOptions {
            time_limit_s: budget.seconds.unwrap_or(DEFAULT_TIME_LIMIT_S),
            mip_rel_gap: 0.05,
            seed: budget.seed as i32,
            ..SolveOptions::default()
        };
        let (_, label, result, mut placement) = solve_fitting(p, self.0, &opts)?;
        let stopped_at = if result.stopped_by_memory {
            "when memory neared the limit"
        } else {
            "at the time limit"
        };
        let proof = match (result.status, result.gap) {
            (SolveStatus::Optimal, _) => "optimal within 5%".to_string(),
            (_, Some(gap)) => format!("gap {:.1}% {stopped_at}", gap * 100.0),
            _ => result.status.name().to_string(),
        };
        let solver = match result.prover {
            crate::solve::Prover::Milp => "HiGHS",
            crate::solve::Prover::Cp => "HiGHS and a CP proof (pumpkin)",
            crate::solve::Prover::Abandoned => "the warm start (HiGHS overran the time limit)",
        };
        placement.note = format!("{}: {solver} on {label}, {proof}", self.name());
        Ok(placement)
    }
}
