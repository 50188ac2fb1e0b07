//! Op grouping (graph coarsening): cut a training graph into groups of ops that the strategy
//! search then treats as single nodes.
//!
//! Four methods from the papers, plus a baseline:
//!
//! | method | module | paper | groups |
//! |---|---|---|---|
//! | `metis` | [`metis`] | TAG §4.1.1 | k-way METIS, K ≤ 60, edge weight = tensor bytes, vertex weight = compute time, balance factor 2 |
//! | `quickp` | [`quickp`] | QuickP §IV-B/C | Algorithm 1 fusion (threshold α), then co-location by critical-path rank (eq. 7) into weakly connected components |
//! | `moirai` | [`moirai`] | MOIRAI §III-B | GCOF: fusion rules over op types with the direct / multi-input / multi-output connection rules |
//! | `celeritas` | [`celeritas`] | Celeritas §5.1 | CPD-TOPO order, then optimal breakpoints (eqs. 4–6) into contiguous clusters |
//! | `chunks` | [`chunks::contiguous_chunks`] | — | topological order cut into k chunks of balanced compute |
//!
//! Every method takes the per-op compute times in µs as a slice indexed by op (the cost model
//! computes them; the grouping code does not care where they come from) and returns a
//! [`Grouping`]: every op in exactly one group, group ids dense `0..groups`, with per-group
//! totals, the coarse (group-level) edges and summary statistics.
//!
//! Communication times, where a method needs them (QuickP's ranks, Celeritas's levels, the CCR
//! statistic), are `bytes / bandwidth` with one documented bandwidth,
//! [`DEFAULT_BANDWIDTH_BYTES_PER_US`]; the papers either fix it to their testbed or leave it
//! open.
//!
//! Departures from the papers are documented in each method's module; in short:
//!
//! - QuickP: co-location groups become coarse-graph nodes here, so a tie whose merge would close
//!   a cycle is skipped (the paper only uses them as placement constraints and never needs an
//!   acyclic group graph); one bandwidth replaces the NVLink/Ethernet switch of eq. (7);
//!   Algorithm 1 is run to a fixed point in topological order (the paper gives no edge order).
//! - MOIRAI: the rule table is spelled in our TensorFlow op vocabulary and extended with the
//!   epilogue, attention and layer-norm patterns (plus one backward rule); rules grow from their
//!   first op (same fused groups as binding sub-rules, see the module); an opt-in
//!   training-graph variant (`moirai-training`) ignores consumers of another phase and checks
//!   every group for cycles.
//! - Celeritas: the memory limit M defaults to unlimited (the paper uses a quarter of a GPU's
//!   memory, unknown at grouping time); an op's memory is resident + output bytes.
//! - METIS: weights are scaled to integers; METIS calls are serialised for reproducibility.

pub(crate) mod celeritas;
pub(crate) mod chunks;
mod coarse;
pub(crate) mod metis;
pub(crate) mod moirai;
pub(crate) mod quickp;

pub(crate) use celeritas::CeleritasOptions;
pub(crate) use celeritas::celeritas;
pub(crate) use chunks::contiguous_chunks;
pub(crate) use metis::metis;

pub(crate) use moirai::moirai;

pub(crate) use quickp::quickp;

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::error::{Error, GroupingError, Result};
use crate::graph::{Graph, topo};
pub(crate) use moirai::default_rules;
pub(crate) use quickp::QuickpOptions;

/// 20 GB/s expressed in bytes per µs: QuickP's inter-server (Ethernet) bandwidth `b_en` (§V-C).
/// Used to turn tensor bytes into communication time when no cluster is known yet.
pub(crate) const DEFAULT_BANDWIDTH_BYTES_PER_US: f64 = 20_000.0;

/// The names accepted by [`group_by_name`], for the CLI and benchmarks.
pub fn method_names() -> &'static [&'static str] {
    &["metis", "quickp", "moirai", "celeritas", "chunks"]
}

/// Run a method by name with its paper defaults; `k` is used by `metis` and `chunks` only.
pub fn group_by_name(graph: &Graph, weights: &[f64], method: &str, k: usize) -> Result<Grouping> {
    match method {
        "metis" => metis(graph, weights, k, 0),
        "quickp" => Ok(quickp(graph, weights, &QuickpOptions::default())?.colocated),
        "moirai" => moirai(graph, weights, &default_rules()),
        "celeritas" => celeritas(graph, weights, &CeleritasOptions::default()),
        "chunks" => contiguous_chunks(graph, weights, k),
        other => Err(Error::Unknown {
            kind: "grouping method",
            name: other.to_string(),
            expected: format!("expected one of {}", method_names().join(", ")),
        }),
    }
}

/// [`group_by_name`] given up at `deadline` (QuickP's fusion and co-location check it; they take
/// minutes on 10⁵ ops): the grouping, or an error saying the method did not end within
/// `limit_s` seconds.
pub fn group_within(
    graph: &Graph,
    weights: &[f64],
    method: &str,
    k: usize,
    deadline: std::time::Instant,
    limit_s: f64,
) -> Result<Grouping> {
    crate::sim::deadline::during(Some(deadline), || group_by_name(graph, weights, method, k))
        .map_err(|e| match e {
            Error::Search(crate::error::SearchError::OutOfTime) => GroupingError::OutOfTime {
                method: method.to_string(),
                model: graph.name.clone(),
                ops: graph.len(),
                seconds: limit_s,
            }
            .into(),
            e => e,
        })
}

/// Totals of one group.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GroupInfo {
    /// Number of ops in the group (at least one).
    pub ops: usize,
    /// Sum of the member ops' compute times, µs.
    pub compute_us: f64,
    /// Sum of the member ops' resident bytes (parameters, optimizer state).
    pub resident_bytes: f64,
    /// Sum of the member ops' trainable parameter elements.
    pub params: u64,
}

/// Tensor bytes flowing from group `src` to group `dst` (summed over the op edges between them).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CoarseEdge {
    /// Group the tensors come from.
    pub src: u32,
    /// Group the tensors go to.
    pub dst: u32,
    /// Total tensor bytes sent from `src` to `dst`.
    pub bytes: f64,
}

/// Summary of a grouping, as `topoplace group --json` prints it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GroupingStats {
    /// Name of the grouping method (`metis`, `quickp`, `moirai`, `celeritas`, `chunks`).
    pub method: String,
    /// Ops in the training graph.
    pub ops: usize,
    /// Groups the ops were cut into.
    pub groups: usize,
    /// Bytes of the op edges whose ends lie in different groups.
    pub cut_bytes: f64,
    /// Bytes of all op edges.
    pub total_edge_bytes: f64,
    /// Largest group compute time over the mean group compute time (1 = perfectly balanced).
    pub balance: f64,
    /// Celeritas eq. (1) on the op graph: Σ_edges c_ij / Σ_ops w_i with c = bytes / bandwidth.
    pub ccr_before: f64,
    /// Celeritas eq. (1) on the coarse graph: only edges between groups communicate, the group
    /// compute time is the sum of its ops', so this is cut time over total compute time.
    pub ccr_after: f64,
    /// The bandwidth (bytes/µs) used for both CCRs.
    pub bandwidth_bytes_per_us: f64,
    /// Sum of all op compute times, µs.
    pub total_compute_us: f64,
}

/// The result of a grouping method: which group each op is in, and what that means.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Grouping {
    /// Name of the grouping method that produced it (`metis`, `quickp`, …).
    pub method: String,
    /// `op_group[op]` is the group of op `op`; ids are dense `0..groups.len()`.
    pub op_group: Vec<u32>,
    /// Per-group totals (ops, compute µs, resident bytes, parameters), indexed by group id.
    pub groups: Vec<GroupInfo>,
    /// Edges of the coarse graph, sorted by (src, dst), no self-loops.
    pub coarse_edges: Vec<CoarseEdge>,
    /// Cut, balance and CCR figures of the grouping.
    pub stats: GroupingStats,
}

impl Grouping {
    /// Build a grouping from an op → group assignment, with the default bandwidth for the CCR.
    ///
    /// Ids need not be dense: they are renumbered `0..` in increasing order of the given ids, so
    /// a partitioner that leaves some parts empty can pass its raw output.
    pub(crate) fn from_assignment(
        graph: &Graph,
        weights: &[f64],
        method: &str,
        op_group: Vec<u32>,
    ) -> Result<Grouping> {
        Self::from_assignment_with_bandwidth(
            graph,
            weights,
            method,
            op_group,
            DEFAULT_BANDWIDTH_BYTES_PER_US,
        )
    }

    /// [`Grouping::from_assignment`] with an explicit bandwidth (bytes/µs) for the CCR figures.
    pub(crate) fn from_assignment_with_bandwidth(
        graph: &Graph,
        weights: &[f64],
        method: &str,
        op_group: Vec<u32>,
        bandwidth_bytes_per_us: f64,
    ) -> Result<Grouping> {
        check_weights(graph, weights)?;
        if op_group.len() != graph.len() {
            return Err(GroupingError::IdCount {
                ids: op_group.len(),
                ops: graph.len(),
            }
            .into());
        }
        if !(bandwidth_bytes_per_us > 0.0 && bandwidth_bytes_per_us.is_finite()) {
            return Err(GroupingError::Bandwidth(bandwidth_bytes_per_us).into());
        }
        let op_group = densify(&op_group);
        let groups = group_totals(graph, weights, &op_group);
        let coarse_edges = coarse_edges(graph, &op_group);
        let stats = compute_stats(
            graph,
            weights,
            method,
            &groups,
            &coarse_edges,
            bandwidth_bytes_per_us,
        );
        Ok(Grouping {
            method: method.to_string(),
            op_group,
            groups,
            coarse_edges,
            stats,
        })
    }

    /// Number of groups.
    pub fn num_groups(&self) -> usize {
        self.groups.len()
    }

    /// The ops of each group, in increasing op index.
    pub fn members(&self) -> Vec<Vec<usize>> {
        let mut m = vec![Vec::new(); self.groups.len()];
        for (op, &g) in self.op_group.iter().enumerate() {
            m[g as usize].push(op);
        }
        m
    }

    /// Whether the coarse graph (groups as nodes, cut edges between them) has no directed cycle.
    /// Strategies that schedule groups as units need this.
    pub fn is_acyclic(&self) -> bool {
        let edges = self
            .coarse_edges
            .iter()
            .map(|e| (e.src as usize, e.dst as usize));
        topo::is_acyclic(self.groups.len(), edges)
    }

    /// The coarse graph in Graphviz form: one box per group (ops, compute), edges labelled in MB.
    pub fn to_dot(&self) -> String {
        let mut s = String::new();
        let name = self.method.replace('"', "'");
        let _ = writeln!(s, "digraph \"{name}\" {{");
        let _ = writeln!(s, "  node [shape=box];");
        for (g, info) in self.groups.iter().enumerate() {
            let _ = writeln!(
                s,
                "  g{g} [label=\"g{g}\\n{} ops\\n{:.1} us\"];",
                info.ops, info.compute_us
            );
        }
        for e in &self.coarse_edges {
            let _ = writeln!(
                s,
                "  g{} -> g{} [label=\"{:.3} MB\"];",
                e.src,
                e.dst,
                e.bytes / 1e6
            );
        }
        s.push_str("}\n");
        s
    }
}

/// Weights must cover every op and be usable as times.
pub(crate) fn check_weights(graph: &Graph, weights: &[f64]) -> Result<()> {
    if weights.len() != graph.len() {
        return Err(GroupingError::WeightCount {
            weights: weights.len(),
            ops: graph.len(),
        }
        .into());
    }
    if let Some((i, w)) = weights
        .iter()
        .enumerate()
        .find(|(_, w)| !(w.is_finite() && **w >= 0.0))
    {
        return Err(GroupingError::BadWeight {
            op: i,
            name: graph.op(i).name.clone(),
            weight: *w,
        }
        .into());
    }
    Ok(())
}

/// Renumber ids to `0..m` keeping their relative order.
fn densify(ids: &[u32]) -> Vec<u32> {
    let mut map: BTreeMap<u32, u32> = ids.iter().map(|&g| (g, 0)).collect();
    for (dense, v) in map.values_mut().enumerate() {
        *v = dense as u32;
    }
    ids.iter().map(|g| map[g]).collect()
}

fn group_totals(graph: &Graph, weights: &[f64], op_group: &[u32]) -> Vec<GroupInfo> {
    let n_groups = op_group.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
    let mut groups = vec![GroupInfo::default(); n_groups];
    for (i, op) in graph.ops().iter().enumerate() {
        let g = &mut groups[op_group[i] as usize];
        g.ops += 1;
        g.compute_us += weights[i];
        g.resident_bytes += op.resident_bytes;
        g.params = g.params.saturating_add(op.params);
    }
    groups
}

fn coarse_edges(graph: &Graph, op_group: &[u32]) -> Vec<CoarseEdge> {
    let mut sums: BTreeMap<(u32, u32), f64> = BTreeMap::new();
    for e in graph.edges() {
        let (a, b) = (op_group[e.src], op_group[e.dst]);
        if a != b {
            *sums.entry((a, b)).or_insert(0.0) += e.bytes;
        }
    }
    sums.into_iter()
        .map(|((src, dst), bytes)| CoarseEdge { src, dst, bytes })
        .collect()
}

fn compute_stats(
    graph: &Graph,
    weights: &[f64],
    method: &str,
    groups: &[GroupInfo],
    coarse: &[CoarseEdge],
    bandwidth: f64,
) -> GroupingStats {
    let total_compute: f64 = weights.iter().sum();
    // Folded from +0.0: `Sum` for floats starts from -0.0, so a graph without edges, or a
    // grouping without cut edges, would report bytes (and CCRs) of -0, which JSON prints "-0.0".
    let total_edge_bytes: f64 = graph
        .edges()
        .iter()
        .map(|e| e.bytes)
        .fold(0.0, |a, b| a + b);
    let cut_bytes: f64 = coarse.iter().map(|e| e.bytes).fold(0.0, |a, b| a + b);
    let max_group = groups.iter().map(|g| g.compute_us).fold(0.0, f64::max);
    let mean_group = total_compute / groups.len().max(1) as f64;
    GroupingStats {
        method: method.to_string(),
        ops: graph.len(),
        groups: groups.len(),
        cut_bytes,
        total_edge_bytes,
        balance: if mean_group > 0.0 {
            max_group / mean_group
        } else {
            1.0
        },
        ccr_before: ccr(total_edge_bytes, bandwidth, total_compute),
        ccr_after: ccr(cut_bytes, bandwidth, total_compute),
        bandwidth_bytes_per_us: bandwidth,
        total_compute_us: total_compute,
    }
}

/// Celeritas eq. (1). A graph with no compute at all reports 0 rather than an infinity that JSON
/// cannot carry.
fn ccr(bytes: f64, bandwidth: f64, compute_us: f64) -> f64 {
    if compute_us > 0.0 {
        bytes / bandwidth / compute_us
    } else {
        0.0
    }
}

/// The per-op weights every method takes: compute time in µs at the full batch on `gpu` (TAG
/// §4.1.1 balances METIS parts by computation time).
pub fn op_weights(
    graph: &Graph,
    gpu: &crate::cluster::GpuSpec,
    cost: &crate::cost::CostModel,
) -> Vec<f64> {
    graph
        .ops()
        .iter()
        .map(|op| cost.compute_time_us(op, gpu, 1.0))
        .collect()
}

/// The GPU whose times weight the ops when none is named: the one GPU type the graph carries
/// profiled times for (an imported profile), else a V100-SXM2-32GB.
pub fn reference_gpu(graph: &Graph) -> &'static crate::cluster::GpuSpec {
    use crate::cluster::catalog::find_gpu;
    let mut profiled = graph
        .ops()
        .iter()
        .flat_map(|op| op.profiled_us.keys())
        .filter_map(|name| find_gpu(name));
    if let Some(first) = profiled.next()
        && profiled.all(|g| g.name == first.name)
    {
        return first;
    }
    find_gpu("V100-SXM2-32GB").expect("the catalog has the V100")
}

#[cfg(test)]
mod tests;
