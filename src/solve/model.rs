//! The variables and rows QuickP's and MOIRAI's MILPs share: where each node runs, when it
//! starts, the makespan, the communication indicators, and non-overlap of the nodes on a device.
//!
//! - `x[i][k]` ∈ {0,1}: node i on device k; `Σ_k x[i][k] = 1`; `Σ_i m_i x[i][k] ≤ cap_k`;
//!   co-located nodes share their `x` rows.
//! - `S_i` ∈ [head_i, H] start, `F_i = S_i + Σ_k p_ik x[i][k]`, `C ≥ F_i + tail_i`, and
//!   `C ≥ Σ_i p_ik x[i][k]` per device. head/tail are the longest paths before/after i at each
//!   node's fastest time with free transfers: valid bounds that give the LP the critical path,
//!   which big-M rows alone do not.
//! - `z[e][k,l] ≥ x[src][k] + x[dst][l] − 1` (k ≠ l), `z ≥ 0`: the linearisation of the product
//!   x·x that says edge e crosses from k to l. Minimisation never lets z exceed the product where
//!   that would help, so the lower bounds alone are exact; the transfer time of e is
//!   `Σ_{k≠l} c_e(k,l) z[e][k,l]`.
//! - Parallelizable pairs only (no path between them, QuickP's refinement): `same_ij ≥ x_ik +
//!   x_jk − 1` for every k, and with `o_ij` ∈ {0,1} the big-M disjunction
//!   `S_j ≥ F_i − H(1 − o_ij) − H(1 − same_ij)`, `S_i ≥ F_j − H o_ij − H(1 − same_ij)`.
//!
//! The horizon H is the makespan of a feasible heuristic schedule (no optimal schedule ends
//! later), else a serial bound. It bounds every node's window: `S_i ≥ head_i` and
//! `F_i ≤ H − tail_i`, so the big-M of a pair is `M_ij = (H − tail_i) − head_j`, the most
//! `F_i − S_j` can be, rather than H (much tighter for nodes deep in the graph).
//! Interchangeable GPUs get symmetry-breaking rows ([`super::symmetry`]).

use super::instance::Instance;
use super::schedule::Plan;
use super::symmetry_breaking::symmetry_rows;
use crate::milp::{Milp, MilpOutcome, Var};

/// The largest instance that gets the energetic cuts (their non-zeros grow as n²).
pub(crate) const ENERGY_CUT_MAX_NODES: usize = 256;

/// Handles of the shared variables.
pub(crate) struct Core {
    pub x: Vec<Vec<Var>>,
    pub s: Vec<Var>,
    pub c: Var,
    /// Per edge: `(k, l, z)` for every ordered pair of distinct devices.
    pub z: Vec<Vec<(usize, usize, Var)>>,
    /// Per parallelizable pair: `(i, j, o_ij, same_ij)`.
    pub pairs: Vec<(usize, usize, Var, Var)>,
    /// Earliest start of each node and the latest finish no optimal schedule exceeds.
    pub earliest_start: Vec<f64>,
    pub latest_finish: Vec<f64>,
}

impl Core {
    pub(crate) fn build(m: &mut Milp, inst: &Instance, horizon: f64) -> Core {
        let n = inst.len();
        let d = inst.devices();
        let c = m.continuous(0.0, horizon, 1.0);
        let leader = inst.colocation_leader();
        let mut x: Vec<Vec<Var>> = Vec::with_capacity(n);
        for i in 0..n {
            // A co-located node reuses its leader's columns: equal placement by construction.
            let row = if leader[i] != i {
                x[leader[i]].clone()
            } else {
                (0..d).map(|_| m.binary(0.0)).collect()
            };
            x.push(row);
        }
        let (head, tail) = inst.heads_and_tails();
        let earliest_start: Vec<f64> = head.iter().map(|&h| h.min(horizon)).collect();
        // F_i + tail_i ≤ C ≤ H in every schedule at least as good as the horizon's.
        let latest_finish: Vec<f64> = (0..n)
            .map(|i| (horizon - tail[i]).max(earliest_start[i] + inst.fastest(i)))
            .collect();
        let s: Vec<Var> = (0..n)
            .map(|i| {
                let latest_start = latest_finish[i] - inst.fastest(i);
                m.continuous(earliest_start[i], latest_start, 0.0)
            })
            .collect();
        let core_z = edge_indicators(m, inst, &x);
        let mut core = Core {
            x,
            s,
            c,
            z: core_z,
            pairs: Vec::new(),
            earliest_start,
            latest_finish,
        };
        core.assignment_rows(m, inst, &leader);
        symmetry_rows(m, inst, &core.x, &leader);
        core.makespan_rows(m, inst, &tail);
        core.energy_rows(m, inst);
        core.pairs = core.overlap_rows(m, inst);
        core
    }

    fn assignment_rows(&self, m: &mut Milp, inst: &Instance, leader: &[usize]) {
        for i in (0..inst.len()).filter(|&i| leader[i] == i) {
            let terms: Vec<(Var, f64)> = self.x[i].iter().map(|&v| (v, 1.0)).collect();
            m.eq(&terms, 1.0);
        }
        for k in 0..inst.devices() {
            let terms: Vec<(Var, f64)> = (0..inst.len())
                .map(|i| (self.x[i][k], inst.nodes[i].memory))
                .collect();
            m.le(&terms, inst.capacity[k]);
        }
    }

    fn makespan_rows(&self, m: &mut Milp, inst: &Instance, tail: &[f64]) {
        for (i, &t) in tail.iter().enumerate() {
            // C ≥ F_i + tail_i: the work that must follow i, at its fastest, with free transfers.
            let mut terms = self.finish_terms(inst, i);
            terms.push((self.c, -1.0));
            m.le(&terms, -t);
        }
        for k in 0..inst.devices() {
            let mut terms: Vec<(Var, f64)> = (0..inst.len())
                .map(|i| (self.x[i][k], inst.nodes[i].compute[k]))
                .collect();
            terms.push((self.c, -1.0));
            m.le(&terms, 0.0);
        }
    }

    /// The largest `F_i − S_j` any schedule within the horizon has: the big-M that switches
    /// off "j after i" (tighter than the horizon, which is what lets the LP see the rows).
    pub(crate) fn big_m(&self, i: usize, j: usize) -> f64 {
        (self.latest_finish[i] - self.earliest_start[j]).max(0.0)
    }

    /// Energetic precedence cuts, valid because a device runs one node at a time: the nodes
    /// that follow i (i included) all start at or after `S_i`, so the work of those on device k
    /// ends no earlier than `S_i + Σ p_jk x_jk`, which bounds C; the nodes that precede i all end
    /// by `F_i`, so `F_i ≥ Σ p_jk x_jk` over them. The LP otherwise spreads a chain over every
    /// device as if its links could run side by side. O(n²·devices) non-zeros: only while
    /// the instance is small (they matter most where an exact answer is expected).
    fn energy_rows(&self, m: &mut Milp, inst: &Instance) {
        if inst.len() > ENERGY_CUT_MAX_NODES {
            return;
        }
        let reach = inst.reachability();
        for (i, reach_from_i) in reach.iter().enumerate() {
            let after: Vec<usize> = (0..inst.len())
                .filter(|&j| j == i || reach_from_i[j])
                .collect();
            let before: Vec<usize> = (0..inst.len()).filter(|&j| j == i || reach[j][i]).collect();
            for k in 0..inst.devices() {
                let work = |nodes: &[usize]| -> Vec<(Var, f64)> {
                    nodes
                        .iter()
                        .map(|&j| (self.x[j][k], inst.nodes[j].compute[k]))
                        .collect()
                };
                let mut terms = work(&after);
                terms.extend([(self.s[i], 1.0), (self.c, -1.0)]);
                m.le(&terms, 0.0);
                let mut terms = work(&before);
                terms.extend(self.neg_finish_terms(inst, i));
                m.le(&terms, 0.0);
            }
        }
    }

    fn overlap_rows(&self, m: &mut Milp, inst: &Instance) -> Vec<(usize, usize, Var, Var)> {
        let mut pairs = Vec::new();
        for (i, j) in inst.parallel_pairs() {
            let o = m.binary(0.0);
            let same = m.continuous(0.0, 1.0, 0.0);
            for k in 0..inst.devices() {
                m.ge(
                    &[(same, 1.0), (self.x[i][k], -1.0), (self.x[j][k], -1.0)],
                    -1.0,
                );
            }
            // S_j − F_i − M·o − M·same ≥ −2M, M = M_ij
            let mij = self.big_m(i, j);
            let mut a = self.neg_finish_terms(inst, i);
            a.extend([(self.s[j], 1.0), (o, -mij), (same, -mij)]);
            m.ge(&a, -2.0 * mij);
            // S_i − F_j + M·o − M·same ≥ −M, M = M_ji
            let mji = self.big_m(j, i);
            let mut b = self.neg_finish_terms(inst, j);
            b.extend([(self.s[i], 1.0), (o, mji), (same, -mji)]);
            m.ge(&b, -mji);
            pairs.push((i, j, o, same));
        }
        pairs
    }

    /// `F_i` as terms: `S_i + Σ_k p_ik x_ik`.
    pub(crate) fn finish_terms(&self, inst: &Instance, i: usize) -> Vec<(Var, f64)> {
        let mut t = vec![(self.s[i], 1.0)];
        t.extend(
            self.x[i]
                .iter()
                .zip(&inst.nodes[i].compute)
                .map(|(&v, &p)| (v, p)),
        );
        t
    }

    pub(crate) fn neg_finish_terms(&self, inst: &Instance, i: usize) -> Vec<(Var, f64)> {
        self.finish_terms(inst, i)
            .into_iter()
            .map(|(v, c)| (v, -c))
            .collect()
    }

    /// Transfer time of edge e as terms: `Σ c_e(k,l) z[e][k,l]`.
    pub(crate) fn comm_terms(&self, inst: &Instance, e: usize) -> Vec<(Var, f64)> {
        self.z[e]
            .iter()
            .map(|&(k, l, v)| (v, inst.comm(e, k, l)))
            .collect()
    }

    /// The shared variables' values for a plan (the warm start).
    pub(crate) fn warm(&self, inst: &Instance, plan: &Plan, values: &mut [f64]) {
        values[self.c.0] = plan.makespan;
        for i in 0..inst.len() {
            for (k, v) in self.x[i].iter().enumerate() {
                values[v.0] = f64::from(u8::from(plan.device[i] == k));
            }
            values[self.s[i].0] = plan.start[i];
        }
        for (e, zs) in self.z.iter().enumerate() {
            let edge = inst.edges[e];
            for &(k, l, v) in zs {
                let on = plan.device[edge.src] == k && plan.device[edge.dst] == l;
                values[v.0] = f64::from(u8::from(on));
            }
        }
        for &(i, j, o, same) in &self.pairs {
            values[o.0] = f64::from(u8::from(plan.start[i] <= plan.start[j]));
            values[same.0] = f64::from(u8::from(plan.device[i] == plan.device[j]));
        }
    }

    /// The device of every node in a solution.
    pub(crate) fn devices(&self, out: &MilpOutcome) -> Vec<usize> {
        self.x
            .iter()
            .map(|row| {
                (0..row.len())
                    .max_by(|&a, &b| out.value(row[a]).total_cmp(&out.value(row[b])))
                    .expect("a device")
            })
            .collect()
    }

    pub(crate) fn starts(&self, out: &MilpOutcome) -> Vec<f64> {
        self.s.iter().map(|&v| out.value(v).max(0.0)).collect()
    }
}

/// The z variables and their linearisation rows.
fn edge_indicators(m: &mut Milp, inst: &Instance, x: &[Vec<Var>]) -> Vec<Vec<(usize, usize, Var)>> {
    let d = inst.devices();
    inst.edges
        .iter()
        .map(|edge| {
            let mut zs = Vec::new();
            for k in 0..d {
                for l in (0..d).filter(|&l| l != k) {
                    let z = m.continuous(0.0, 1.0, 0.0);
                    m.ge(
                        &[(z, 1.0), (x[edge.src][k], -1.0), (x[edge.dst][l], -1.0)],
                        -1.0,
                    );
                    zs.push((k, l, z));
                }
            }
            zs
        })
        .collect()
}

/// A value vector of the right length to fill with a warm start.
pub(crate) fn blank(m: &Milp) -> Vec<f64> {
    vec![0.0; m.num_vars()]
}
