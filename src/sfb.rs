//! Sufficient factor broadcasting (TAG §4.2.3, Table 2): for one gradient of a replicated op
//! group, decide which ops around it to duplicate (compute on every replica from broadcast
//! inputs) so that the broadcast tensors — the cut, the sufficient factors — replace the
//! gradient's AllReduce, when that is cheaper.
//!
//! The ILP is TAG's, solved with HiGHS:
//!
//! ```text
//! min (D−1) Σ_i α_i T_i + D(D−1) Σ_(j,i) b_ji L_ji / τ − 2 α_g (D−1)/D · L_gl / τ
//! s.t. α_k ≤ Σ_(k,i)∈E α_i   for k ∈ V \ {g}    (a duplicated op feeds a duplicated op)
//!      b_ji ≥ α_i − α_j                          (a tensor into the duplicated part is cut)
//! ```
//!
//! with `T_i` the op's time on its replica share (the slowest replica), `L_ji` the bytes one
//! replica holds of tensor (j, i) (a batch slice for batch-scaled producers), `τ` the bottleneck
//! bandwidth among the D replica devices, and `L_gl` the whole gradient. Choices made here:
//! V is the ancestors of g inside its op group up to [`SfbOptions::depth`] hops (TAG: "the
//! subgraph around a gradient"); a tensor from outside V into a duplicated op is always cut; a
//! parameter's tensor is free, because every replica already holds the parameter. SFB is used
//! when the optimum is negative (cheaper than AllReduce).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use serde::Serialize;

use crate::cluster::Cluster;
use crate::cost::CostModel;
use crate::error::Result;
use crate::graph::{Graph, OpIdx, Phase};
use crate::milp::{Milp, SolveOptions, Var};
use crate::strategy::{BatchSplit, Strategy};

/// Knobs of the per-gradient ILP.
#[derive(Debug, Clone, PartialEq)]
pub struct SfbOptions {
    /// How many hops above the gradient op the candidate subgraph reaches.
    pub depth: usize,
    /// HiGHS options for each gradient's ILP (default: 5 s limit, proven optimum).
    pub solver: SolveOptions,
    /// When the whole check must end: an ILP gets at most the time left, and a gradient whose
    /// ILP would start later keeps its AllReduce ([`SfbDecision::solved`] false). Deep subgraphs
    /// of large models take minutes otherwise.
    pub deadline: Option<Instant>,
}

impl Default for SfbOptions {
    fn default() -> SfbOptions {
        SfbOptions {
            depth: 3,
            solver: SolveOptions {
                time_limit_s: 5.0,
                mip_rel_gap: 0.0,
                feasibility_jump: false,
                ..SolveOptions::default()
            },
            deadline: None,
        }
    }
}

/// One gradient's question: its ops, its replicas' count and bandwidth.
#[derive(Debug, Clone, PartialEq)]
pub struct SfbQuestion {
    /// The gradient op whose synchronisation SFB may replace.
    pub grad: OpIdx,
    /// The optimizer op the gradient feeds (the gradient link's destination).
    pub optimizer: OpIdx,
    /// Replicas D (≥ 2).
    pub replicas: usize,
    /// Bottleneck bandwidth τ among the replica devices, bytes/µs.
    pub bandwidth: f64,
    /// Compute time of each op on one replica's share, µs (the slowest replica); shared by the
    /// gradients of one op group.
    pub time: Arc<[f64]>,
    /// Ops allowed in the duplicated subgraph (the gradient's op group).
    pub allowed: Option<Arc<HashSet<OpIdx>>>,
}

/// The answer for one gradient.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SfbDecision {
    /// The gradient op decided on.
    pub grad: OpIdx,
    /// The optimizer op the gradient feeds.
    pub optimizer: OpIdx,
    /// Replicas D of the gradient (≥ 2).
    pub replicas: usize,
    /// Whether SFB replaces the gradient's synchronisation.
    pub use_sfb: bool,
    /// Ops duplicated (empty without SFB).
    pub duplicated: Vec<OpIdx>,
    /// The sufficient factors: edges (src, dst) whose tensors are broadcast.
    pub cut: Vec<(OpIdx, OpIdx)>,
    /// Extra computation (D−1)·ΣT of the duplicated ops, µs.
    pub extra_compute_us: f64,
    /// Broadcast cost D(D−1)·ΣL/τ of the cut, µs.
    pub broadcast_us: f64,
    /// Ring AllReduce cost 2(D−1)/D·L_gl/τ that SFB saves, µs.
    pub allreduce_us: f64,
    /// False when the deadline passed before the gradient's ILP ran: it keeps its AllReduce.
    pub solved: bool,
}

/// Bytes one replica holds of the tensor on edge `e`.
fn replica_bytes(g: &Graph, e: usize, replicas: usize) -> f64 {
    let edge = g.edges()[e];
    if g.op(edge.src).scales_with_batch() {
        edge.bytes / replicas as f64
    } else {
        edge.bytes
    }
}

/// Candidate ops: ancestors of `grad` within `depth` hops (inside `allowed`), `grad` first, in
/// the order they are reached.
fn candidates(g: &Graph, q: &SfbQuestion, depth: usize) -> Vec<OpIdx> {
    let mut order: Vec<OpIdx> = vec![q.grad];
    let mut seen: HashSet<OpIdx> = HashSet::from([q.grad]);
    let mut frontier = vec![q.grad];
    for _ in 0..depth {
        let mut next = Vec::new();
        for &v in &frontier {
            for u in g.predecessors(v) {
                let ok = q.allowed.as_ref().is_none_or(|a| a.contains(&u))
                    && !matches!(g.op(u).phase, Phase::Optimizer | Phase::Input);
                if ok && seen.insert(u) {
                    order.push(u);
                    next.push(u);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    order
}

/// The decision for a gradient whose ILP did not run in time: its AllReduce stays.
fn unsolved(q: &SfbQuestion, allreduce_us: f64) -> SfbDecision {
    SfbDecision {
        grad: q.grad,
        optimizer: q.optimizer,
        replicas: q.replicas,
        use_sfb: false,
        duplicated: Vec::new(),
        cut: Vec::new(),
        extra_compute_us: 0.0,
        broadcast_us: 0.0,
        allreduce_us,
        solved: false,
    }
}

/// Solve TAG's SFB ILP for one gradient.
pub fn solve_gradient(g: &Graph, q: &SfbQuestion, opts: &SfbOptions) -> Result<SfbDecision> {
    let d = q.replicas as f64;
    let grad_edge = g
        .out_edges(q.grad)
        .iter()
        .copied()
        .find(|&e| g.edges()[e].dst == q.optimizer);
    let grad_bytes = grad_edge.map_or(0.0, |e| g.edges()[e].bytes);
    let allreduce_us = 2.0 * (d - 1.0) / d * grad_bytes / q.bandwidth;
    let mut solver = opts.solver.clone();
    if let Some(deadline) = opts.deadline {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64();
        if left <= 0.0 {
            return Ok(unsolved(q, allreduce_us));
        }
        solver.time_limit_s = solver.time_limit_s.min(left);
    }
    let v = candidates(g, q, opts.depth);
    let index: HashMap<OpIdx, usize> = v.iter().enumerate().map(|(k, &op)| (op, k)).collect();
    let mut m = Milp::new();
    let alpha: Vec<Var> = v
        .iter()
        .map(|&op| m.binary((d - 1.0) * q.time[op]))
        .collect();
    // The saving term, on α_g.
    let ag = alpha[0];
    let mut cut_vars: Vec<(usize, Var)> = Vec::new();
    for (k, &op) in v.iter().enumerate() {
        for &e in g.in_edges(op) {
            let src = g.edges()[e].src;
            if g.op(src).phase == Phase::Parameter {
                continue;
            }
            let cost = d * (d - 1.0) * replica_bytes(g, e, q.replicas) / q.bandwidth;
            let b = m.binary(cost);
            match index.get(&src) {
                Some(&j) => m.ge(&[(b, 1.0), (alpha[k], -1.0), (alpha[j], 1.0)], 0.0),
                None => m.ge(&[(b, 1.0), (alpha[k], -1.0)], 0.0),
            }
            cut_vars.push((e, b));
        }
        if k > 0 {
            // α_k ≤ Σ α of its consumers inside V.
            let mut terms = vec![(alpha[k], 1.0)];
            terms.extend(
                g.successors(op)
                    .filter_map(|s| index.get(&s))
                    .map(|&i| (alpha[i], -1.0)),
            );
            m.le(&terms, 0.0);
        }
    }
    // The objective's −2α_g(D−1)/D·L/τ: a separate binary tied to α_g keeps the Milp API plain.
    let saving = m.binary(-allreduce_us);
    m.eq(&[(saving, 1.0), (ag, -1.0)], 0.0);
    let out = m.solve(&solver, None)?;
    let chosen = |var: Var| out.status.has_solution() && out.value(var) > 0.5;
    let use_sfb = chosen(ag) && out.objective < -1e-9;
    let duplicated: Vec<OpIdx> = if use_sfb {
        v.iter()
            .zip(&alpha)
            .filter(|&(_, &a)| chosen(a))
            .map(|(&op, _)| op)
            .collect()
    } else {
        Vec::new()
    };
    let cut: Vec<(OpIdx, OpIdx)> = if use_sfb {
        cut_vars
            .iter()
            .filter(|&&(_, b)| chosen(b))
            .map(|&(e, _)| (g.edges()[e].src, g.edges()[e].dst))
            .collect()
    } else {
        Vec::new()
    };
    let extra_compute_us = crate::units::total(duplicated.iter().map(|&op| (d - 1.0) * q.time[op]));
    let broadcast_us = if use_sfb {
        cut_vars
            .iter()
            .filter(|&&(_, b)| chosen(b))
            .map(|&(e, _)| d * (d - 1.0) * replica_bytes(g, e, q.replicas) / q.bandwidth)
            .sum()
    } else {
        0.0
    };
    Ok(SfbDecision {
        grad: q.grad,
        optimizer: q.optimizer,
        replicas: q.replicas,
        use_sfb,
        duplicated,
        cut,
        extra_compute_us,
        broadcast_us,
        allreduce_us,
        solved: true,
    })
}

/// What the questions of one op group's gradients share: replica times, bottleneck bandwidth,
/// the group's ops.
type GroupQuestion = (Arc<[f64]>, f64, Arc<HashSet<OpIdx>>);

/// The question for gradient link `(grad, optimizer)` replicated on `devices` with even shares.
pub fn question(
    g: &Graph,
    cluster: &Cluster,
    cost: &CostModel,
    grad: OpIdx,
    optimizer: OpIdx,
    devices: &[usize],
    allowed: Option<HashSet<OpIdx>>,
) -> SfbQuestion {
    SfbQuestion {
        grad,
        optimizer,
        replicas: devices.len(),
        bandwidth: bottleneck_bandwidth(cluster, devices),
        time: replica_times(
            g,
            cluster,
            cost,
            devices,
            &BatchSplit::Even.shares(cluster, devices),
        ),
        allowed: allowed.map(Arc::new),
    }
}

/// Each op's time on its share of the batch over `devices` (`shares` in their order), µs: the
/// slowest replica's.
fn replica_times(
    g: &Graph,
    cluster: &Cluster,
    cost: &CostModel,
    devices: &[usize],
    shares: &[f64],
) -> Arc<[f64]> {
    // Replicas of one GPU type with one share take one time: asked once per such class, not
    // once per GPU (10⁵ ops over 1,024 GPUs were 10⁸ estimates, 5 s past any time limit).
    let mut classes: Vec<(&crate::cluster::GpuSpec, f64)> = Vec::new();
    for (&dv, &share) in devices.iter().zip(shares) {
        let gpu = &cluster.devices[dv].gpu;
        if !classes.iter().any(|(g, s)| *g == gpu && *s == share) {
            classes.push((gpu, share));
        }
    }
    g.ops()
        .iter()
        .map(|op| {
            classes
                .iter()
                .map(|&(gpu, share)| cost.compute_time_us(op, gpu, share))
                .fold(0.0, f64::max)
        })
        .collect()
}

/// The lowest bandwidth between two of `devices`, bytes/µs.
fn bottleneck_bandwidth(cluster: &Cluster, devices: &[usize]) -> f64 {
    let mut bandwidth = f64::INFINITY;
    for &a in devices {
        for &b in devices.iter().filter(|&&b| b != a) {
            bandwidth = bandwidth.min(cluster.path(a, b).bandwidth);
        }
    }
    bandwidth
}

/// TAG's double check: every gradient of a group the strategy replicates (AllReduce or PS on two
/// or more GPUs) gets the ILP; the decisions say where SFB pays.
pub fn check_strategy(
    g: &Graph,
    cluster: &Cluster,
    cost: &CostModel,
    strategy: &Strategy,
    opts: &SfbOptions,
) -> Result<Vec<SfbDecision>> {
    let members = strategy.members();
    // What a question needs of its op group (times on the group's replicas, their bandwidth,
    // the group's ops) is worked out once per group, not once per gradient: BERT-large has
    // hundreds of gradients in one group.
    let mut of_group: HashMap<usize, GroupQuestion> = HashMap::new();
    let mut questions = Vec::new();
    for link in g.gradients() {
        let group = strategy.group_of(link.grad);
        let decision = strategy.decision(group);
        if !decision.synchronises_gradients() {
            continue;
        }
        let (time, bandwidth, allowed) = of_group.entry(group).or_insert_with(|| {
            (
                replica_times(
                    g,
                    cluster,
                    cost,
                    &decision.devices,
                    &strategy.split_of(group).shares(cluster, &decision.devices),
                ),
                bottleneck_bandwidth(cluster, &decision.devices),
                Arc::new(members[group].iter().copied().collect()),
            )
        });
        questions.push(SfbQuestion {
            grad: link.grad,
            optimizer: link.optimizer,
            replicas: decision.devices.len(),
            bandwidth: *bandwidth,
            time: Arc::clone(time),
            allowed: Some(Arc::clone(allowed)),
        });
    }
    questions
        .par_iter()
        .map(|q| solve_gradient(g, q, opts))
        .collect()
}

/// The ops SFB duplicates where it pays: what [`Strategy::sfb_duplicated`] holds once TAG's
/// double check ([`check_strategy`]) has run, sorted and without repeats.
pub fn duplicated_ops(
    g: &Graph,
    cluster: &Cluster,
    cost: &CostModel,
    strategy: &Strategy,
    opts: &SfbOptions,
) -> Result<Vec<OpIdx>> {
    let decisions = check_strategy(g, cluster, cost, strategy, opts)?;
    let mut ops: Vec<OpIdx> = decisions
        .iter()
        .filter(|d| d.use_sfb)
        .flat_map(|d| d.duplicated.iter().copied())
        .collect();
    ops.sort_unstable();
    ops.dedup();
    Ok(ops)
}

/// How often each op type is duplicated over a set of decisions (TAG Table 6).
pub fn duplicated_op_types(g: &Graph, decisions: &[SfbDecision]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for d in decisions {
        for &op in &d.duplicated {
            *counts.entry(g.op(op).op_type.clone()).or_insert(0) += 1;
        }
    }
    counts
}

/// What `topoplace sfb` prints.
#[derive(Debug, Clone, Serialize)]
pub struct SfbReport {
    /// The model (graph) name.
    pub model: String,
    /// Replicated gradients considered.
    pub gradients: usize,
    /// Gradients for which SFB pays and replaces the AllReduce.
    pub sfb_gradients: usize,
    /// Communication saved minus duplication paid, µs, summed over SFB gradients.
    pub saving_us: f64,
    /// Duplicated ops by type (TAG Table 6).
    pub duplicated_op_types: BTreeMap<String, usize>,
    /// Gradients left to their AllReduce because the time limit passed before their ILP ran.
    pub unsolved: usize,
    /// The decision for every gradient considered, SFB or not.
    pub decisions: Vec<SfbDecision>,
}

impl SfbReport {
    /// Summarise the per-gradient `decisions` for graph `g`.
    pub fn new(g: &Graph, decisions: &[SfbDecision]) -> SfbReport {
        let used: Vec<&SfbDecision> = decisions.iter().filter(|d| d.use_sfb).collect();
        SfbReport {
            model: g.name.clone(),
            gradients: decisions.len(),
            sfb_gradients: used.len(),
            saving_us: crate::units::total(
                used.iter()
                    .map(|d| d.allreduce_us - d.broadcast_us - d.extra_compute_us),
            ),
            duplicated_op_types: duplicated_op_types(g, decisions),
            unsolved: decisions.iter().filter(|d| !d.solved).count(),
            decisions: decisions.to_vec(),
        }
    }

    /// The report as `topoplace sfb` prints it: the saving (ms) and the duplicated op types.
    pub fn render_text(&self) -> String {
        let mut s = format!(
            "{}: SFB pays for {} of {} replicated gradients, saving {:.3} ms of synchronisation\n",
            self.model,
            self.sfb_gradients,
            self.gradients,
            crate::units::no_negative_zero(self.saving_us / 1e3, 3)
        );
        let mut types: Vec<(&String, &usize)> = self.duplicated_op_types.iter().collect();
        types.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let listed: Vec<String> = types.iter().map(|(t, n)| format!("{t} {n}")).collect();
        let listed = if listed.is_empty() {
            "none".to_string()
        } else {
            listed.join(", ")
        };
        s.push_str(&format!("duplicated op types: {listed}\n"));
        if self.unsolved > 0 {
            s.push_str(&format!(
                "{} gradients were not decided within the time limit and keep their AllReduce\n",
                self.unsolved
            ));
        }
        s
    }
}
