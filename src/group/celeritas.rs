//! Celeritas §5.1: CPD-TOPO ordering and optimal operation fusion (Algorithm 1, eqs. 2–6).
//!
//! - Communication time of an edge is c = bytes / bandwidth, with bandwidth
//!   [`CeleritasOptions::bandwidth_bytes_per_us`] (the paper does not fix one; the default is
//!   [`DEFAULT_BANDWIDTH_BYTES_PER_US`]).
//! - tlevel (eq. 2) is the longest path from a source to an op, excluding the op's own time;
//!   blevel (eq. 3) the longest path from the op to a sink, including it; cpath = tlevel + blevel.
//! - CPD-TOPO: start with the sources sorted by decreasing cpath; repeatedly output the head of
//!   the queue, delete its out-edges, and put each child that became ready at the head of the
//!   queue, children visited by increasing cpath — so the child on the critical path is output
//!   next. Ties are broken by op index so the order is deterministic.
//! - Optimal breakpoints: clusters are runs of consecutive ops in that order, which by Lemma 2
//!   can never form a cycle. S(j) = min_i S(i) + cost(i, j) over i ≥ j − R (eq. 6), where
//!   cost(i, j) (eq. 4) is the communication from the run [i, j) to every later op, and the run's
//!   memory must fit in M. cost(i, j) is computed by extending the run one op to the left at a
//!   time (equivalent to the recursion of eq. 5, which extends it to the right). A run of a single
//!   op is always allowed, even if that op alone exceeds M, so a solution always exists. On equal
//!   cost the longer run wins (fewer clusters).
//! - Defaults: R = 200 (the paper's choice). The paper sets M to a quarter of a GPU's memory;
//!   no device is known at grouping time, so M defaults to unlimited and the caller passes
//!   0.25 × device memory when it knows it. An op's memory is its resident bytes plus its output
//!   bytes ([`op_memory`]).

use std::collections::VecDeque;

use super::{DEFAULT_BANDWIDTH_BYTES_PER_US, Grouping, check_weights};
use crate::error::{GroupingError, Result};
use crate::graph::{Graph, Op, OpIdx};

/// Celeritas's knobs, with the paper's defaults where it gives them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CeleritasOptions {
    /// Exploration range R: the most ops in one cluster.
    pub range: usize,
    /// Memory limit M per cluster, bytes.
    pub memory_limit_bytes: f64,
    /// Turns edge bytes into communication time, bytes/µs.
    pub bandwidth_bytes_per_us: f64,
}

impl Default for CeleritasOptions {
    fn default() -> Self {
        CeleritasOptions {
            range: 200,
            memory_limit_bytes: f64::INFINITY,
            bandwidth_bytes_per_us: DEFAULT_BANDWIDTH_BYTES_PER_US,
        }
    }
}

/// Memory an op needs on its device: what stays resident plus the tensor it produces.
pub(crate) fn op_memory(op: &Op) -> f64 {
    op.resident_bytes + op.output_bytes
}

/// The cluster starts chosen by the DP and the total communication time they leave between
/// clusters (S(n), µs).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Breakpoints {
    /// Positions (in the given order) where clusters start; the first is always 0.
    pub starts: Vec<usize>,
    pub cost_us: f64,
}

/// Optimal operation fusion with the given options.
pub(crate) fn celeritas(
    graph: &Graph,
    weights: &[f64],
    opts: &CeleritasOptions,
) -> Result<Grouping> {
    check_weights(graph, weights)?;
    let bw = opts.bandwidth_bytes_per_us;
    if !(bw > 0.0 && bw.is_finite()) || opts.range == 0 || opts.memory_limit_bytes.is_nan() {
        return Err(GroupingError::CeleritasOptions {
            bandwidth: bw,
            range: opts.range,
            memory_limit: opts.memory_limit_bytes,
        }
        .into());
    }
    let order = cpd_topo_order(graph, weights, bw);
    let memory: Vec<f64> = graph.ops().iter().map(op_memory).collect();
    let bp = optimal_breakpoints(
        graph,
        &order,
        bw,
        opts.range,
        &memory,
        opts.memory_limit_bytes,
    );
    let mut group = vec![0u32; graph.len()];
    let mut cluster = 0u32;
    let mut next_start = bp.starts.iter().skip(1).peekable();
    for (pos, &op) in order.iter().enumerate() {
        if next_start.peek() == Some(&&pos) {
            next_start.next();
            cluster += 1;
        }
        group[op] = cluster;
    }
    Grouping::from_assignment_with_bandwidth(graph, weights, "celeritas", group, bw)
}

/// tlevel (eq. 2) and blevel (eq. 3) of every op.
pub(crate) fn levels(graph: &Graph, weights: &[f64], bw: f64) -> (Vec<f64>, Vec<f64>) {
    let order = graph.topological_order();
    let n = graph.len();
    let mut tlevel = vec![0.0f64; n];
    let mut blevel = vec![0.0f64; n];
    for &v in &order {
        for &e in graph.in_edges(v) {
            let edge = &graph.edges()[e];
            let via = tlevel[edge.src] + weights[edge.src] + edge.bytes / bw;
            tlevel[v] = tlevel[v].max(via);
        }
    }
    for &v in order.iter().rev() {
        let tail = graph
            .out_edges(v)
            .iter()
            .map(|&e| {
                let edge = &graph.edges()[e];
                blevel[edge.dst] + edge.bytes / bw
            })
            .fold(0.0, f64::max);
        blevel[v] = weights[v] + tail;
    }
    (tlevel, blevel)
}

/// The CPD-TOPO order of the ops (a topological order favouring critical paths).
pub(crate) fn cpd_topo_order(graph: &Graph, weights: &[f64], bw: f64) -> Vec<OpIdx> {
    let (t, b) = levels(graph, weights, bw);
    let cpath: Vec<f64> = t.iter().zip(&b).map(|(x, y)| x + y).collect();
    let n = graph.len();
    let mut indegree: Vec<usize> = (0..n).map(|v| graph.in_edges(v).len()).collect();
    let mut sources: Vec<OpIdx> = (0..n).filter(|&v| indegree[v] == 0).collect();
    sources.sort_by(|&a, &b| cpath[b].total_cmp(&cpath[a]).then(a.cmp(&b)));
    let mut queue: VecDeque<OpIdx> = sources.into();
    let mut order = Vec::with_capacity(n);
    while let Some(v) = queue.pop_front() {
        order.push(v);
        let mut children: Vec<OpIdx> = graph.successors(v).collect();
        // Increasing cpath, so the largest ends up at the head; among equals the smallest index
        // is pushed last and comes out first.
        children.sort_by(|&a, &b| cpath[a].total_cmp(&cpath[b]).then(b.cmp(&a)));
        for c in children {
            indegree[c] -= 1;
            if indegree[c] == 0 {
                queue.push_front(c);
            }
        }
    }
    debug_assert_eq!(order.len(), n);
    order
}

/// The DP of eqs. (4)–(6) over ops in `order` (which must be topological, so every edge points
/// forward): clusters of at most `range` consecutive ops whose `memory` sums to at most `limit`
/// (single ops always allowed), minimising the communication time between clusters.
pub(crate) fn optimal_breakpoints(
    graph: &Graph,
    order: &[OpIdx],
    bw: f64,
    range: usize,
    memory: &[f64],
    limit: f64,
) -> Breakpoints {
    let n = order.len();
    let mut pos = vec![0usize; graph.len()];
    for (p, &op) in order.iter().enumerate() {
        pos[op] = p;
    }
    // Out-edges by position: (destination position, communication time).
    let out: Vec<Vec<(usize, f64)>> = order
        .iter()
        .map(|&op| {
            graph
                .out_edges(op)
                .iter()
                .map(|&e| {
                    let edge = &graph.edges()[e];
                    (pos[edge.dst], edge.bytes / bw)
                })
                .collect()
        })
        .collect();
    let mut mem_prefix = vec![0.0f64; n + 1];
    for p in 0..n {
        mem_prefix[p + 1] = mem_prefix[p] + memory[order[p]];
    }
    let range = range.max(1);
    let mut s = vec![f64::INFINITY; n + 1];
    let mut prev = vec![0usize; n + 1];
    s[0] = 0.0;
    for j in 1..=n {
        // cost = communication from the run [i, j) to positions ≥ j, grown as i moves left.
        let mut cost = 0.0;
        let lowest = j.saturating_sub(range);
        for i in (lowest..j).rev() {
            if i + 1 < j && mem_prefix[j] - mem_prefix[i] > limit {
                break; // memory only grows as the run extends left
            }
            cost += out[i]
                .iter()
                .filter(|&&(d, _)| d >= j)
                .map(|&(_, c)| c)
                .sum::<f64>();
            let candidate = s[i] + cost;
            if candidate <= s[j] {
                s[j] = candidate;
                prev[j] = i;
            }
        }
    }
    let mut starts = Vec::new();
    let mut j = n;
    while j > 0 {
        j = prev[j];
        starts.push(j);
    }
    starts.reverse();
    Breakpoints {
        starts,
        cost_us: s[n],
    }
}
