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
//! The big-M is the horizon H: the makespan of a feasible heuristic schedule (no optimal
//! schedule ends later), else a serial bound.

use super::instance::Instance;
use super::schedule::Plan;
use crate::milp::{Milp, MilpOutcome, Var};

/// Handles of the shared variables.
pub struct Core {
    pub x: Vec<Vec<Var>>,
    pub s: Vec<Var>,
    pub c: Var,
    /// Per edge: `(k, l, z)` for every ordered pair of distinct devices.
    pub z: Vec<Vec<(usize, usize, Var)>>,
    /// Per parallelizable pair: `(i, j, o_ij, same_ij)`.
    pub pairs: Vec<(usize, usize, Var, Var)>,
    pub horizon: f64,
}

impl Core {
    pub fn build(m: &mut Milp, inst: &Instance, horizon: f64) -> Core {
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
        let s: Vec<Var> = (0..n)
            .map(|i| m.continuous(head[i].min(horizon), horizon, 0.0))
            .collect();
        let core_z = edge_indicators(m, inst, &x);
        let mut core = Core {
            x,
            s,
            c,
            z: core_z,
            pairs: Vec::new(),
            horizon,
        };
        core.assignment_rows(m, inst, &leader);
        core.makespan_rows(m, inst, &tail);
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

    fn overlap_rows(&self, m: &mut Milp, inst: &Instance) -> Vec<(usize, usize, Var, Var)> {
        let h = self.horizon;
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
            // S_j − F_i − H·o − H·same ≥ −2H
            let mut a = self.neg_finish_terms(inst, i);
            a.extend([(self.s[j], 1.0), (o, -h), (same, -h)]);
            m.ge(&a, -2.0 * h);
            // S_i − F_j + H·o − H·same ≥ −H
            let mut b = self.neg_finish_terms(inst, j);
            b.extend([(self.s[i], 1.0), (o, h), (same, -h)]);
            m.ge(&b, -h);
            pairs.push((i, j, o, same));
        }
        pairs
    }

    /// `F_i` as terms: `S_i + Σ_k p_ik x_ik`.
    pub fn finish_terms(&self, inst: &Instance, i: usize) -> Vec<(Var, f64)> {
        let mut t = vec![(self.s[i], 1.0)];
        t.extend(
            self.x[i]
                .iter()
                .zip(&inst.nodes[i].compute)
                .map(|(&v, &p)| (v, p)),
        );
        t
    }

    pub fn neg_finish_terms(&self, inst: &Instance, i: usize) -> Vec<(Var, f64)> {
        self.finish_terms(inst, i)
            .into_iter()
            .map(|(v, c)| (v, -c))
            .collect()
    }

    /// Transfer time of edge e as terms: `Σ c_e(k,l) z[e][k,l]`.
    pub fn comm_terms(&self, inst: &Instance, e: usize) -> Vec<(Var, f64)> {
        self.z[e]
            .iter()
            .map(|&(k, l, v)| (v, inst.comm(e, k, l)))
            .collect()
    }

    /// The shared variables' values for a plan (the warm start).
    pub fn warm(&self, inst: &Instance, plan: &Plan, values: &mut [f64]) {
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
    pub fn devices(&self, out: &MilpOutcome) -> Vec<usize> {
        self.x
            .iter()
            .map(|row| {
                (0..row.len())
                    .max_by(|&a, &b| out.value(row[a]).total_cmp(&out.value(row[b])))
                    .expect("a device")
            })
            .collect()
    }

    pub fn starts(&self, out: &MilpOutcome) -> Vec<f64> {
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
pub fn blank(m: &Milp) -> Vec<f64> {
    vec![0.0; m.num_vars()]
}
