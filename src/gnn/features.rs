//! The heterogeneous graph the GNN reads (TAG §4.2.1, Table 1).
//!
//! Nodes: one per METIS op group and one per device group. Edges: op–op (tensors between
//! groups, both directions), device–device (every ordered pair of device groups), op–device (every
//! pair; the feature says whether the op group is placed there under the vertex's strategy).
//!
//! The four feature parts of Table 1:
//! 1. raw features — op group compute time and parameter size; device group GPU count, memory,
//!    speed and intra-group bandwidth; tensor bytes between op groups; bandwidth between device
//!    groups;
//! 2. the strategy encoding — the op group's option one-hot and placement edges;
//! 3. runtime feedback from simulating the (completed) strategy — per op group makespan and
//!    idle time before output transfer, per device group peak memory and idle share, per pair
//!    of device groups the idle share of the busiest link between them;
//! 4. the search progress — "decided" and "next" flags per op group.
//!
//! Normalisation, chosen so one set of weights transfers across models and clusters:
//! - times (compute, makespan, idle before transfer, the strategy's iteration time) are divided
//!   by DP-NCCL's simulated iteration time `T_DP` and mapped by `ln(1 + x)`;
//! - parameter bytes as a share of the model's parameters and, through `ln(1 + x)`, relative to
//!   the smallest GPU memory in the cluster;
//! - tensor bytes between op groups as the time to send them at the cluster's fastest bandwidth
//!   relative to `T_DP` (`ln(1 + x)`) and, on a log scale, relative to the largest such tensor;
//! - GPU counts relative to the cluster's GPUs, memory and matrix-product peak in the step's
//!   precision (FP32's in TAG's setting; TF32's or the 16-bit tensor cores' otherwise) relative to the cluster's
//!   largest, bandwidths relative to the cluster's fastest (linear and on a log scale, since
//!   NVLink and Ethernet differ by 100×);
//! - shares (idle, peak memory relative to capacity, flags) as they are, in `[0, 1]` (peak
//!   memory may exceed 1 when the strategy runs out of memory; clamped at 4).
//!
//! The log scale is [`log_unit`]: `1 + log10(x) / 6` clamped to `[0, 1]`, so six decades below
//! the reference map to 0. Nothing depends on node indices, so relabelling op groups or device
//! groups relabels the graph and nothing else.

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, GpuSpec};
use crate::evaluate::sim_report::op_group_feedback_by;
use crate::evaluate::{DeviceGroupFeedback, Evaluation, OpGroupFeedback};
use crate::graph::Dtype;
use crate::group::{op_weights, reference_gpu};
use crate::precision::Precision;
use crate::problem::Problem;
use crate::strategy::{GroupDecision, ReplicationOption};

/// Features per op-group node, in order: compute time, parameter share, parameter bytes / GPU
/// memory, option one-hot (4: all-reduce, PS, duplicate, model parallel), share of GPUs used,
/// makespan, idle before output transfer, decided, next, the strategy's iteration time, OOM.
pub const OP_FEATURES: usize = 14;
/// Features per device-group node, in order: GPU share, memory, matrix-product peak in the
/// step's precision (FP32 in TAG's), intra-group
/// bandwidth (log), peak memory share, idle share.
pub const DEV_FEATURES: usize = 6;
/// Features per edge, every edge type (unused slots are 0). Op–op: transfer time, log bytes,
/// forward direction. Device–device: bandwidth, log bandwidth, idle share of the busiest link.
/// Op–device: placed, decided.
pub const EDGE_FEATURES: usize = 3;
/// Replication options, the width of the option one-hot.
pub const OPTIONS: usize = ReplicationOption::ALL.len();

/// Edges of one type as parallel arrays: `src[e] → dst[e]` with `features[e * EDGE_FEATURES..]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EdgeList {
    /// Source node of each edge, an index among its type's source nodes.
    pub src: Vec<u32>,
    /// Destination node of each edge, an index among its type's destination nodes.
    pub dst: Vec<u32>,
    /// `edges × EDGE_FEATURES`, row-major.
    pub features: Vec<f32>,
}

impl EdgeList {
    /// Number of edges.
    pub fn len(&self) -> usize {
        self.src.len()
    }

    /// Whether there is no edge.
    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    fn push(&mut self, src: usize, dst: usize, features: [f32; EDGE_FEATURES]) {
        self.src.push(src as u32);
        self.dst.push(dst as u32);
        self.features.extend_from_slice(&features);
    }
}

/// The GNN's input for one search vertex. Row-major feature matrices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeteroGraph {
    /// `ops × OP_FEATURES`.
    pub op_features: Vec<f32>,
    /// `devs × DEV_FEATURES`.
    pub dev_features: Vec<f32>,
    /// Tensors between op groups, one edge each way (the third feature marks the forward one).
    pub op_op: EdgeList,
    /// Every ordered pair of device groups: bandwidth and idle share of the busiest link.
    pub dev_dev: EdgeList,
    /// Source = op group, destination = device group; the GNN also passes messages back along
    /// them with separate weights.
    pub op_dev: EdgeList,
}

impl HeteroGraph {
    /// Number of op-group nodes.
    pub fn ops(&self) -> usize {
        self.op_features.len() / OP_FEATURES
    }

    /// Number of device-group nodes.
    pub fn devs(&self) -> usize {
        self.dev_features.len() / DEV_FEATURES
    }
}

/// One strategy slice `(P_i, O_i)` the decoder scores: which device groups and which option.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    /// 0/1 per device group.
    pub placement: Vec<f32>,
    /// Index into [`ReplicationOption::ALL`].
    pub option: usize,
}

/// The slices of a list of actions: an action's device groups are those holding its devices.
pub fn slices(cluster: &Cluster, actions: &[GroupDecision]) -> Vec<Slice> {
    actions
        .iter()
        .map(|a| {
            let mut placement = vec![0.0; cluster.groups.len()];
            for &d in &a.devices {
                placement[cluster.devices[d].group] = 1.0;
            }
            Slice {
                placement,
                option: option_index(a.option),
            }
        })
        .collect()
}

fn option_index(o: ReplicationOption) -> usize {
    ReplicationOption::ALL
        .iter()
        .position(|&x| x == o)
        .expect("every option is in ALL")
}

/// `1 + log10(x) / 6` clamped to `[0, 1]`: six decades below the reference map to 0.
pub(crate) fn log_unit(x: f64) -> f32 {
    if x.is_nan() || x <= 0.0 {
        return 0.0;
    }
    (1.0 + x.log10() / 6.0).clamp(0.0, 1.0) as f32
}

/// `ln(1 + x)` for a non-negative ratio (NaN and negatives read as 0).
fn ln1p(x: f64) -> f32 {
    if x.is_finite() && x > 0.0 {
        x.ln_1p() as f32
    } else if x == f64::INFINITY {
        f32::MAX.ln()
    } else {
        0.0
    }
}

/// The runtime feedback of one simulated complete strategy, per METIS op group.
#[derive(Debug, Clone, PartialEq)]
pub struct Feedback {
    /// Makespan and idle time before output transfer, per METIS op group.
    pub op_groups: Vec<OpGroupFeedback>,
    /// Peak memory share and idle share, per cluster device group.
    pub device_groups: Vec<DeviceGroupFeedback>,
    /// Busy share of every cluster link.
    pub link_busy: Vec<f64>,
    /// The completed strategy's simulated iteration time, µs.
    pub iteration_us: f64,
    /// Whether the completed strategy fit in every GPU's memory.
    pub fits: bool,
}

impl Feedback {
    /// Read the feedback off an evaluation; `op_group` maps ops to `groups` METIS groups.
    pub(crate) fn new(op_group: &[u32], groups: usize, e: &Evaluation) -> Feedback {
        Feedback {
            op_groups: op_group_feedback_by(
                groups,
                |op| op_group[op] as usize,
                &e.compiled,
                &e.result,
            ),
            device_groups: e.report.device_groups.clone(),
            link_busy: e.report.links.iter().map(|l| l.busy_share).collect(),
            iteration_us: e.report.iteration_us,
            fits: e.report.oom.is_empty(),
        }
    }
}

/// What does not change during a search: the raw features and the normalisers.
#[derive(Debug, Clone)]
pub(crate) struct StaticFeatures {
    groups: usize,
    /// Per op group: `[ln(1 + compute / T_DP), parameter share, ln(1 + param bytes / memory)]`.
    op_raw: Vec<[f32; 3]>,
    /// Per device group: `[GPUs / all GPUs, memory / max, matrix-product peak / max, log
    /// bandwidth]`.
    dev_raw: Vec<[f32; 4]>,
    /// Op–op edges with their two raw features.
    op_edges: Vec<(usize, usize, [f32; 2])>,
    /// Per ordered pair of device groups: `[bandwidth / max, log bandwidth]` and the links of
    /// the route between their first GPUs.
    dev_edges: Vec<(usize, usize, [f32; 2], Vec<u32>)>,
    /// The device groups each action uses, by action index.
    pub slices: Vec<Slice>,
    /// Devices per action over all devices.
    action_share: Vec<f32>,
    action_option: Vec<usize>,
    dp_us: f64,
}

impl StaticFeatures {
    /// `op_group` maps each op to its METIS group (dense ids); `dp_us` is DP-NCCL's iteration
    /// time, the time unit of every time feature.
    pub(crate) fn new(
        p: &Problem,
        op_group: &[u32],
        actions: &[GroupDecision],
        dp_us: f64,
    ) -> StaticFeatures {
        let groups = op_group.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
        let cluster = p.cluster;
        let dp_us = if dp_us > 0.0 && dp_us.is_finite() {
            dp_us
        } else {
            1.0
        };
        let max_bw = max_bandwidth(cluster);
        StaticFeatures {
            groups,
            op_raw: op_raw(p, op_group, groups, dp_us),
            dev_raw: dev_raw(cluster, max_bw, p.cost.precision),
            op_edges: op_edges(p, op_group, max_bw, dp_us),
            dev_edges: dev_edges(cluster, max_bw),
            slices: slices(cluster, actions),
            action_share: actions
                .iter()
                .map(|a| a.devices.len() as f32 / cluster.devices.len().max(1) as f32)
                .collect(),
            action_option: actions.iter().map(|a| option_index(a.option)).collect(),
            dp_us,
        }
    }

    pub(crate) fn groups(&self) -> usize {
        self.groups
    }

    /// The graph of a vertex: `choice` is the completed strategy (an action per op group),
    /// `decided` how many groups the vertex has decided (the next one is `decided`, if any),
    /// `feedback` the simulation of `choice`.
    pub(crate) fn graph(&self, choice: &[u16], decided: usize, feedback: &Feedback) -> HeteroGraph {
        HeteroGraph {
            op_features: self.op_nodes(choice, decided, feedback),
            dev_features: self.dev_nodes(feedback),
            op_op: self.op_op(),
            dev_dev: self.dev_dev(feedback),
            op_dev: self.op_dev(choice, decided),
        }
    }

    fn op_nodes(&self, choice: &[u16], decided: usize, fb: &Feedback) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.groups * OP_FEATURES);
        let iteration = ln1p(fb.iteration_us / self.dp_us);
        for (g, raw) in self.op_raw.iter().enumerate() {
            let a = choice[g] as usize;
            let mut onehot = [0.0f32; OPTIONS];
            onehot[self.action_option[a]] = 1.0;
            let f = fb.op_groups.get(g).cloned().unwrap_or_default();
            out.extend_from_slice(raw);
            out.extend_from_slice(&onehot);
            out.extend_from_slice(&[
                self.action_share[a],
                ln1p(f.makespan_us / self.dp_us),
                ln1p(f.idle_before_transfer_us / self.dp_us),
                flag(g < decided),
                flag(g == decided),
                iteration,
                flag(!fb.fits),
            ]);
        }
        debug_assert_eq!(out.len(), self.groups * OP_FEATURES);
        out
    }

    fn dev_nodes(&self, fb: &Feedback) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.dev_raw.len() * DEV_FEATURES);
        for (j, raw) in self.dev_raw.iter().enumerate() {
            let f = fb.device_groups.get(j).cloned().unwrap_or_default();
            out.extend_from_slice(raw);
            out.push(finite_or(f.peak_memory_share, 0.0).clamp(0.0, 4.0) as f32);
            out.push(finite_or(f.idle_share, 0.0).clamp(0.0, 1.0) as f32);
        }
        out
    }

    fn op_op(&self) -> EdgeList {
        let mut e = EdgeList::default();
        for &(a, b, [t, rel]) in &self.op_edges {
            e.push(a, b, [t, rel, 1.0]);
            e.push(b, a, [t, rel, 0.0]);
        }
        e
    }

    fn dev_dev(&self, fb: &Feedback) -> EdgeList {
        let mut e = EdgeList::default();
        for (a, b, [bw, log_bw], links) in &self.dev_edges {
            let busy = links
                .iter()
                .map(|&l| fb.link_busy.get(l as usize).copied().unwrap_or(0.0))
                .fold(0.0, f64::max);
            e.push(*a, *b, [*bw, *log_bw, (1.0 - busy).clamp(0.0, 1.0) as f32]);
        }
        e
    }

    fn op_dev(&self, choice: &[u16], decided: usize) -> EdgeList {
        let mut e = EdgeList::default();
        for (g, &a) in choice.iter().enumerate().take(self.groups) {
            let placement = &self.slices[a as usize].placement;
            for (j, &placed) in placement.iter().enumerate() {
                e.push(g, j, [placed, flag(g < decided), 0.0]);
            }
        }
        e
    }
}

fn flag(b: bool) -> f32 {
    if b { 1.0 } else { 0.0 }
}

fn finite_or(x: f64, default: f64) -> f64 {
    if x.is_finite() { x } else { default }
}

/// The fastest bandwidth between two GPUs of the cluster (intra or inter machine), B/µs.
fn max_bandwidth(cluster: &Cluster) -> f64 {
    let mut best = 0.0f64;
    for g in &cluster.groups {
        if g.devices.len() > 1 && g.intra_bandwidth.is_finite() {
            best = best.max(g.intra_bandwidth);
        }
    }
    for a in &cluster.groups {
        for b in &cluster.groups {
            if a.index != b.index {
                let bw = cluster.bandwidth(a.devices[0], b.devices[0]);
                if bw.is_finite() {
                    best = best.max(bw);
                }
            }
        }
    }
    if best > 0.0 { best } else { 1.0 }
}

fn op_raw(p: &Problem, op_group: &[u32], groups: usize, dp_us: f64) -> Vec<[f32; 3]> {
    let weights = op_weights(p.graph, reference_gpu(p.graph), p.cost);
    let mut compute = vec![0.0f64; groups];
    let mut params = vec![0.0f64; groups];
    for (op, &g) in op_group.iter().enumerate() {
        compute[g as usize] += weights[op];
        params[g as usize] += p.graph.op(op).params as f64;
    }
    let total_params: f64 = params.iter().sum();
    let min_memory = p
        .cluster
        .devices
        .iter()
        .map(|d| d.memory_bytes)
        .fold(f64::INFINITY, f64::min);
    (0..groups)
        .map(|g| {
            let share = if total_params > 0.0 {
                params[g] / total_params
            } else {
                0.0
            };
            // 4-byte FP32 parameters.
            [
                ln1p(compute[g] / dp_us),
                share as f32,
                ln1p(4.0 * params[g] / min_memory),
            ]
        })
        .collect()
}

/// A GPU's peak for the matrix products of a step in `precision`: the FP32 peak in TAG's FP32
/// (so the shipped policy's features there are what it was trained on), the TF32 or 16-bit
/// tensor-core peak otherwise. The ratio between GPU types is what the feature carries, and it
/// moves most with the precision: an H100 is 3.4× an A100 in FP32 and 3.2× in bf16, but a V100
/// is 0.8× an A100 in FP32 and 0.4× in 16 bits.
fn matmul_peak(gpu: &GpuSpec, precision: Precision) -> f64 {
    let dtype = if precision.is_mixed() {
        Dtype::Half
    } else {
        Dtype::F32
    };
    precision.matmul_tflops(dtype, gpu)
}

fn dev_raw(cluster: &Cluster, max_bw: f64, precision: Precision) -> Vec<[f32; 4]> {
    let gpus = cluster.devices.len().max(1) as f64;
    let max_memory = cluster
        .devices
        .iter()
        .map(|d| d.memory_bytes)
        .fold(0.0, f64::max);
    let max_flops = cluster
        .groups
        .iter()
        .map(|g| matmul_peak(&g.gpu, precision))
        .fold(0.0, f64::max);
    cluster
        .groups
        .iter()
        .map(|g| {
            let memory = g
                .devices
                .iter()
                .map(|&d| cluster.devices[d].memory_bytes)
                .fold(f64::INFINITY, f64::min);
            // A lone GPU has no intra-group link; it reads as the fastest (nothing to cross).
            let bw = if g.devices.len() > 1 && g.intra_bandwidth.is_finite() {
                g.intra_bandwidth / max_bw
            } else {
                1.0
            };
            [
                (g.devices.len() as f64 / gpus) as f32,
                (memory / max_memory.max(1.0)) as f32,
                (matmul_peak(&g.gpu, precision) / max_flops.max(1e-9)) as f32,
                log_unit(bw),
            ]
        })
        .collect()
}

/// Tensor bytes between distinct op groups, one entry per unordered-by-direction pair `a → b`.
fn op_edges(
    p: &Problem,
    op_group: &[u32],
    max_bw: f64,
    dp_us: f64,
) -> Vec<(usize, usize, [f32; 2])> {
    let mut bytes = std::collections::BTreeMap::<(usize, usize), f64>::new();
    for e in p.graph.edges() {
        let (a, b) = (op_group[e.src] as usize, op_group[e.dst] as usize);
        if a != b {
            *bytes.entry((a, b)).or_default() += e.bytes;
        }
    }
    let largest = bytes.values().copied().fold(0.0, f64::max).max(1.0);
    bytes
        .into_iter()
        .map(|((a, b), v)| (a, b, [ln1p(v / max_bw / dp_us), log_unit(v / largest)]))
        .collect()
}

fn dev_edges(cluster: &Cluster, max_bw: f64) -> Vec<(usize, usize, [f32; 2], Vec<u32>)> {
    let mut out = Vec::new();
    for a in &cluster.groups {
        for b in &cluster.groups {
            if a.index == b.index {
                continue;
            }
            let (da, db) = (a.devices[0], b.devices[0]);
            let bw = finite_or(cluster.bandwidth(da, db) / max_bw, 1.0);
            out.push((
                a.index,
                b.index,
                [bw.min(1.0) as f32, log_unit(bw)],
                cluster.route_links(da, db).to_vec(),
            ));
        }
    }
    out
}
