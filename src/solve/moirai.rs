//! MOIRAI's MILP (eqs. 4–8): heterogeneous processing times, device memory and non-overlap of
//! nodes on a device come from the shared [`Core`]; every edge becomes a communication task
//! with its own start `T_e` that picks its channel through the placement of its ends:
//!
//! - `T_e ≥ F_src` and `S_dst ≥ T_e + Σ_{k≠l} c_e(k,l) z_e(k,l)` (channel selection: z says which
//!   ordered device pair, hence which channel, carries e; on one device the duration is 0);
//! - congestion control: for two edges e, f that could overlap in time (neither's consumer
//!   precedes the other's producer), `q_ef ≥ z_e(k,l) + z_f(k,l) − 1` for every channel (k,l)
//!   and, with `o_ef` ∈ {0,1}, `T_f ≥ T_e + dur_e − H(1 − o_ef) − H(1 − q_ef)` and
//!   `T_e ≥ T_f + dur_f − H o_ef − H(1 − q_ef)`: transfers on one channel never overlap.
//!
//! Transfer starts have windows from the critical-path bounds and each pair's big-M is the most
//! `T_e + dur_e − T_f` can be in that window, not the horizon.
//!
//! One channel per ordered device pair is MOIRAI's network model; the simulator matches it on
//! one machine, where the cluster has one link per ordered GPU pair.

use super::instance::Instance;
use super::model::{Core, blank};
use super::schedule::{Channels, Plan, semi_active};
use crate::milp::{Milp, MilpOutcome, Var};

pub(crate) struct MoiraiMilp {
    pub milp: Milp,
    core: Core,
    /// Transfer start of each edge.
    t: Vec<Var>,
    /// Per pair of edges that may overlap: `(e, f, o_ef, q_ef)`.
    pairs: Vec<(usize, usize, Var, Var)>,
}

impl MoiraiMilp {
    pub(crate) fn build(inst: &Instance, horizon: f64) -> MoiraiMilp {
        let mut milp = Milp::new();
        let core = Core::build(&mut milp, inst, horizon);
        let t: Vec<Var> = inst
            .edges
            .iter()
            .map(|edge| {
                let window = transfer_window(inst, &core, edge.src, edge.dst);
                milp.continuous(window.0, window.1, 0.0)
            })
            .collect();
        for (e, edge) in inst.edges.iter().enumerate() {
            let mut after_producer = core.neg_finish_terms(inst, edge.src);
            after_producer.push((t[e], 1.0));
            milp.ge(&after_producer, 0.0);
            let mut before_consumer = vec![(core.s[edge.dst], 1.0), (t[e], -1.0)];
            before_consumer.extend(core.comm_terms(inst, e).into_iter().map(|(v, c)| (v, -c)));
            milp.ge(&before_consumer, 0.0);
        }
        let pairs = congestion_rows(&mut milp, inst, &core, &t);
        if channel_cuts_fit(inst) {
            channel_energy_rows(&mut milp, inst, &core);
        }
        MoiraiMilp {
            milp,
            core,
            t,
            pairs,
        }
    }

    pub(crate) fn warm(&self, inst: &Instance, plan: &Plan) -> Vec<f64> {
        let mut values = blank(&self.milp);
        self.core.warm(inst, plan, &mut values);
        let start = |e: usize| {
            plan.transfer_start[e].unwrap_or_else(|| plan.finish(inst, inst.edges[e].src))
        };
        for e in 0..inst.edges.len() {
            values[self.t[e].0] = start(e);
        }
        let channel = |e: usize| {
            let edge = inst.edges[e];
            (plan.device[edge.src], plan.device[edge.dst])
        };
        for &(e, f, o, q) in &self.pairs {
            let (ce, cf) = (channel(e), channel(f));
            let same = ce == cf && ce.0 != ce.1;
            values[o.0] = f64::from(u8::from(start(e) <= start(f)));
            values[q.0] = f64::from(u8::from(same));
        }
        values
    }

    /// Placement, node order and transfer order of a solution, re-timed by the shared rule.
    pub(crate) fn plan(&self, inst: &Instance, out: &MilpOutcome) -> Plan {
        let device = self.core.devices(out);
        let raw = Plan {
            device: device.clone(),
            start: self.core.starts(out),
            transfer_start: inst
                .edges
                .iter()
                .enumerate()
                .map(|(e, edge)| {
                    (device[edge.src] != device[edge.dst]).then(|| out.value(self.t[e]).max(0.0))
                })
                .collect(),
            makespan: out.objective,
        };
        semi_active(inst, Channels::PerPair, &device, &raw.sequence(inst))
    }

    /// The program, and what reads a plan out of its solution.
    pub(crate) fn split(self) -> (Milp, MoiraiMilp) {
        let MoiraiMilp {
            milp,
            core,
            t,
            pairs,
        } = self;
        (
            milp,
            MoiraiMilp {
                milp: Milp::new(),
                core,
                t,
                pairs,
            },
        )
    }
}

/// When a transfer from `src` to `dst` can start: after `src` can finish at the earliest, and
/// no later than `dst` can start at the latest.
fn transfer_window(inst: &Instance, core: &Core, src: usize, dst: usize) -> (f64, f64) {
    let earliest = core.earliest_start[src] + inst.fastest(src);
    let latest = core.latest_finish[dst] - inst.fastest(dst);
    (earliest, latest.max(earliest))
}

/// The largest `T_e + dur_e − T_f`: e ends before its consumer starts, f starts after its
/// producer finishes. The big-M that switches off "f after e" on a shared channel.
fn transfer_big_m(inst: &Instance, core: &Core, e: usize, f: usize) -> f64 {
    let (a, b) = (inst.edges[e], inst.edges[f]);
    let e_done = transfer_window(inst, core, a.src, a.dst).1;
    let f_start = transfer_window(inst, core, b.src, b.dst).0;
    (e_done - f_start).max(0.0)
}

/// Pairs of edges whose transfers could overlap, with their non-overlap rows.
fn congestion_rows(
    m: &mut Milp,
    inst: &Instance,
    core: &Core,
    t: &[Var],
) -> Vec<(usize, usize, Var, Var)> {
    let mut pairs = Vec::new();
    for (e, f) in inst.overlapping_transfers() {
        let o = m.binary(0.0);
        let q = m.continuous(0.0, 1.0, 0.0);
        for (&(k, l, ze), &(k2, l2, zf)) in core.z[e].iter().zip(&core.z[f]) {
            debug_assert!(k == k2 && l == l2);
            m.ge(&[(q, 1.0), (ze, -1.0), (zf, -1.0)], -1.0);
        }
        // T_f − T_e − dur_e − M·o − M·q ≥ −2M, M = M_ef
        let mef = transfer_big_m(inst, core, e, f);
        let mut r1 = vec![(t[f], 1.0), (t[e], -1.0), (o, -mef), (q, -mef)];
        r1.extend(core.comm_terms(inst, e).into_iter().map(|(v, c)| (v, -c)));
        m.ge(&r1, -2.0 * mef);
        // T_e − T_f − dur_f + M·o − M·q ≥ −M, M = M_fe
        let mfe = transfer_big_m(inst, core, f, e);
        let mut r2 = vec![(t[e], 1.0), (t[f], -1.0), (o, mfe), (q, -mfe)];
        r2.extend(core.comm_terms(inst, f).into_iter().map(|(v, c)| (v, -c)));
        m.ge(&r2, -mfe);
        pairs.push((e, f, o, q));
    }
    pairs
}

/// The most non-zeros the channel energetic cuts may add (they grow as nodes × channels × edges).
pub(crate) const CHANNEL_CUT_MAX_NONZEROS: f64 = 2e6;

/// Whether `inst` gets [`channel_energy_rows`]: small enough for their non-zeros.
pub(crate) fn channel_cuts_fit(inst: &Instance) -> bool {
    let d = inst.devices() as f64;
    let nonzeros = 2.0 * inst.len() as f64 * d * (d - 1.0) * (inst.edges.len() as f64 + 2.0);
    inst.len() <= super::model::ENERGY_CUT_MAX_NODES && nonzeros <= CHANNEL_CUT_MAX_NONZEROS
}

/// Energetic cuts on the channels, valid because one channel carries one transfer at a time:
/// the transfers of the edges that leave i or a node after it all start at or after `S_i`, so
/// those on channel (k,l) end no earlier than `S_i + Σ c_e(k,l) z_e(k,l)`, and each consumer
/// still has its fastest time and tail to run: `C ≥ S_i + Σ c z + min (p_dst + tail_dst)`. The
/// edges into i or a node before it start after their producers can finish and end before
/// `S_i`: `S_i ≥ min (head_src + p_src) + Σ c z`. Without them the LP overlaps every transfer
/// of a channel, and the congestion big-Ms only bite deep in the branch-and-bound tree.
fn channel_energy_rows(m: &mut Milp, inst: &Instance, core: &Core) {
    let (head, tail) = inst.heads_and_tails();
    let ready = |e: usize| head[inst.edges[e].src] + inst.fastest(inst.edges[e].src);
    let rest = |e: usize| inst.fastest(inst.edges[e].dst) + tail[inst.edges[e].dst];
    let channels = core.z.first().map_or(0, Vec::len);
    for (i, (after, before)) in edges_around(inst).into_iter().enumerate() {
        for ch in 0..channels {
            let load = |edges: &[usize]| -> Vec<(Var, f64)> {
                edges
                    .iter()
                    .map(|&e| {
                        let (k, l, z) = core.z[e][ch];
                        (z, inst.comm(e, k, l))
                    })
                    .collect()
            };
            if !after.is_empty() {
                let least_rest = after.iter().map(|&e| rest(e)).fold(f64::INFINITY, f64::min);
                let mut terms = load(&after);
                terms.extend([(core.s[i], 1.0), (core.c, -1.0)]);
                m.le(&terms, -least_rest);
            }
            if !before.is_empty() {
                let least_ready = before
                    .iter()
                    .map(|&e| ready(e))
                    .fold(f64::INFINITY, f64::min);
                let mut terms = load(&before);
                terms.push((core.s[i], -1.0));
                m.le(&terms, -least_ready);
            }
        }
    }
}

/// Per node i: the edges leaving i or a node after it, and the edges into i or a node before it.
pub(crate) fn edges_around(inst: &Instance) -> Vec<(Vec<usize>, Vec<usize>)> {
    let reach = inst.reachability();
    let edges = &inst.edges;
    (0..inst.len())
        .map(|i| {
            let after = (0..edges.len())
                .filter(|&e| edges[e].src == i || reach[i][edges[e].src])
                .collect();
            let before = (0..edges.len())
                .filter(|&e| edges[e].dst == i || reach[edges[e].dst][i])
                .collect();
            (after, before)
        })
        .collect()
}
