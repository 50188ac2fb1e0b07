//! The exact baselines: QuickP's P2 and MOIRAI's MILP ([`crate::solve`]) as placers, on their
//! own coarsenings by default (QuickP fusion + co-location, MOIRAI's fusion rules). The budget's
//! `seconds` is the solver's time limit (default [`DEFAULT_TIME_LIMIT_S`]); the answer is the
//! incumbent when the limit stops the solver, and the note says optimal or the gap.

use super::{Budget, Placer};
use crate::error::Result;
use crate::evaluate::{Placement, Problem};
use crate::solve::{Coarsen, Formulation, SolveOptions, SolveStatus, solve_problem};

/// Time limit when the budget has none, seconds.
pub const DEFAULT_TIME_LIMIT_S: f64 = 60.0;

pub struct Milp(pub Formulation);

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
        let (_, label, result, mut placement) = solve_problem(p, self.0, &Coarsen::Auto, &opts)?;
        let proof = match (result.status, result.gap) {
            (SolveStatus::Optimal, _) => "optimal within 5%".to_string(),
            (_, Some(gap)) => format!("gap {:.1}% at the time limit", gap * 100.0),
            _ => result.status.name().to_string(),
        };
        placement.note = format!("{}: HiGHS on {label}, {proof}", self.name());
        Ok(placement)
    }
}
