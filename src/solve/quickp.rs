//! QuickP's MILP (§III). P1 places and schedules single ops: the shared [`Core`] plus, for every
//! edge (i, j), `S_j ≥ F_i + Σ_{k≠l} c_ij(k,l) z_ij(k,l)` — communication is a delay with no
//! congestion, as QuickP assumes. P2 is the same program over QuickP's fused operators with its
//! co-location groups sharing placement columns (the instance carries both, see
//! [`super::instance::build_p2`]); the formulation is identical.

use super::instance::Instance;
use super::model::{Core, blank};
use super::schedule::{Channels, Plan, Task, semi_active};
use crate::milp::{Milp, MilpOutcome};

pub(crate) struct QuickpMilp {
    pub milp: Milp,
    pub core: Core,
}

impl QuickpMilp {
    pub(crate) fn build(inst: &Instance, horizon: f64) -> QuickpMilp {
        let mut milp = Milp::new();
        let core = Core::build(&mut milp, inst, horizon);
        for (e, edge) in inst.edges.iter().enumerate() {
            // S_j − F_i − comm_e ≥ 0
            let mut terms = core.neg_finish_terms(inst, edge.src);
            terms.push((core.s[edge.dst], 1.0));
            terms.extend(core.comm_terms(inst, e).into_iter().map(|(v, c)| (v, -c)));
            milp.ge(&terms, 0.0);
        }
        QuickpMilp { milp, core }
    }

    /// Variable values reproducing `plan` (a warm start).
    pub(crate) fn warm(&self, inst: &Instance, plan: &Plan) -> Vec<f64> {
        let mut values = blank(&self.milp);
        self.core.warm(inst, plan, &mut values);
        values
    }
}

/// Placement and node order of a solution, re-timed by the shared rule (never later than the
/// MILP's own times).
pub(crate) fn plan_of(core: &Core, inst: &Instance, out: &MilpOutcome) -> Plan {
    let device = core.devices(out);
    let raw = Plan {
        transfer_start: vec![None; inst.edges.len()],
        device: device.clone(),
        start: core.starts(out),
        makespan: out.objective,
    };
    let sequence: Vec<Task> = raw.sequence(inst);
    semi_active(inst, Channels::Unlimited, &device, &sequence)
}
