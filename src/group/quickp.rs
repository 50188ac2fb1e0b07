//! QuickP §IV-B/C: operator fusion (Algorithm 1) and co-location by critical-path rank (eq. 7).
//!
//! **Fusion.** For an edge (i, j) of the *current* graph, j is fused into i when
//! - not (out_degree(i) ≥ 2 and in_degree(j) ≥ 2) — by Theorem 2 this alone rules out cycles,
//!   since with either degree equal to one the edge is the only path from i to j; and
//! - out_degree(i) = 1 and in_degree(j) = 1 (a straight line, no parallelism lost), or
//!   (p_i ≤ α and out_degree(i) = 1) or (p_j ≤ α and in_degree(j) = 1).
//!
//! α defaults to the 90th percentile of the non-zero op times (the paper's setting, §V-C), taken
//! by the nearest-rank method: the ⌈0.9·m⌉-th smallest of the m non-zero times. Degrees count
//! distinct neighbouring nodes of the contracted graph (two tensors between the same pair of
//! fused nodes are one path). p of a fused node is the sum of its ops' times. The paper does not
//! say in which order edges are visited; here nodes are visited in topological order, each
//! absorbing successors while the rule allows, and passes repeat until nothing changes, so the
//! result is a fixed point of Algorithm 1.
//!
//! **Co-location.** On the fused graph, ranks follow eq. (7):
//! r_i = p_i + max_{j ∈ succ(i)} (r_j + t_ij / b), with t_ij the bytes between the fused nodes and
//! one bandwidth b (the paper switches between NVLink and Ethernet by device count; no devices are
//! known here, so b is a parameter, by default [`DEFAULT_BANDWIDTH_BYTES_PER_US`], QuickP's
//! Ethernet figure). Every node with more than one successor is tied to the successor maximising
//! r_j + t_ij / b; the weakly connected components of those ties are the co-location groups, and
//! untied nodes stay groups of their own.
//!
//! **Departure.** The paper's co-location groups are placement constraints, not graph nodes, so
//! it never needs the group graph to be acyclic; a WCC can contain i → j and k → l with a path
//! j ⇝ k outside the group, which makes the coarse graph cyclic. Our groups are nodes of a
//! coarse graph, so ties are applied in decreasing order of the tying node's rank (most critical
//! first) and a tie whose merge would close a cycle is skipped (counted in
//! [`QuickpResult::skipped_ties`]).

use super::coarse::Contraction;
use super::{DEFAULT_BANDWIDTH_BYTES_PER_US, Grouping, check_weights};
use crate::error::{GroupingError, Result, SearchError};
use crate::graph::Graph;
use crate::sim::deadline;

/// QuickP's knobs, with the paper's defaults.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QuickpOptions {
    /// Merging threshold α in µs; `None` takes the `percentile` of the non-zero op times.
    pub alpha_us: Option<f64>,
    /// Percentile (0–1] of the non-zero op times used for α when `alpha_us` is `None`.
    pub percentile: f64,
    /// Bandwidth b of eq. (7), bytes/µs.
    pub bandwidth_bytes_per_us: f64,
}

impl Default for QuickpOptions {
    fn default() -> Self {
        QuickpOptions {
            alpha_us: None,
            percentile: 0.9,
            bandwidth_bytes_per_us: DEFAULT_BANDWIDTH_BYTES_PER_US,
        }
    }
}

/// Both stages, so the op count after fusion (QuickP Table I) can be reported too.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QuickpResult {
    /// After Algorithm 1 only (method `quickp-fusion`).
    pub fused: Grouping,
    /// After fusion and co-location (method `quickp`): the grouping to use.
    pub colocated: Grouping,
    /// The α used, µs.
    pub alpha_us: f64,
    /// Co-location ties chosen by eq. (7).
    pub ties: usize,
    /// Ties not applied because they would have made the coarse graph cyclic.
    pub skipped_ties: usize,
    /// Co-location groups spanning two or more fused nodes (QuickP Table I, "# of WCC groups").
    pub wcc_groups: usize,
}

/// Nearest-rank percentile of the non-zero values: the ⌈q·m⌉-th smallest of the m non-zero
/// values (0 when all are zero).
pub(crate) fn alpha_percentile(weights: &[f64], q: f64) -> f64 {
    let mut nz: Vec<f64> = weights.iter().copied().filter(|&w| w > 0.0).collect();
    if nz.is_empty() {
        return 0.0;
    }
    nz.sort_by(f64::total_cmp);
    let rank = (q * nz.len() as f64).ceil() as usize;
    nz[rank.clamp(1, nz.len()) - 1]
}

/// Fusion then co-location. Under a deadline ([`crate::sim::deadline`]: a placer's or a solve's
/// time limit) both give up past it with [`SearchError::OutOfTime`]: on a graph of 10⁵ ops the
/// co-location's cycle checks alone take seconds.
pub(crate) fn quickp(graph: &Graph, weights: &[f64], opts: &QuickpOptions) -> Result<QuickpResult> {
    check_weights(graph, weights)?;
    if !(opts.percentile > 0.0 && opts.percentile <= 1.0) {
        return Err(GroupingError::QuickpPercentile(opts.percentile).into());
    }
    let bw = opts.bandwidth_bytes_per_us;
    let alpha = opts
        .alpha_us
        .unwrap_or_else(|| alpha_percentile(weights, opts.percentile));
    let mut fused = fuse(graph, weights, alpha).ok_or(SearchError::OutOfTime)?;
    let fused_assignment = fused.assignment();
    let ties = colocation_ties(&mut fused, bw);
    let n_ties = ties.len();
    let skipped = apply_ties(&mut fused, &ties).ok_or(SearchError::OutOfTime)?;
    let colocated_assignment = fused.assignment();
    let wcc_groups = count_multi_node_groups(&fused_assignment, &colocated_assignment);
    Ok(QuickpResult {
        fused: Grouping::from_assignment_with_bandwidth(
            graph,
            weights,
            "quickp-fusion",
            fused_assignment,
            bw,
        )?,
        colocated: Grouping::from_assignment_with_bandwidth(
            graph,
            weights,
            "quickp",
            colocated_assignment,
            bw,
        )?,
        alpha_us: alpha,
        ties: n_ties,
        skipped_ties: skipped,
        wcc_groups,
    })
}

/// How many co-located groups hold more than one fused node.
fn count_multi_node_groups(fused: &[u32], colocated: &[u32]) -> usize {
    let groups = colocated.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
    // First fused node seen in each group, and whether a second one showed up.
    let mut first: Vec<Option<u32>> = vec![None; groups];
    let mut multi = vec![false; groups];
    for (&f, &c) in fused.iter().zip(colocated) {
        match first[c as usize] {
            None => first[c as usize] = Some(f),
            Some(x) if x != f => multi[c as usize] = true,
            Some(_) => {}
        }
    }
    multi.iter().filter(|&&m| m).count()
}

/// Algorithm 1 applied to a fixed point; returns the contracted graph (`None`: this thread's
/// deadline passed first).
pub(crate) fn fuse(graph: &Graph, weights: &[f64], alpha: f64) -> Option<Contraction> {
    let mut c = Contraction::new(graph, weights);
    let order = graph.topological_order();
    loop {
        let mut merged_any = false;
        for (k, &u) in order.iter().enumerate() {
            if k % deadline::ASK_EVERY == 0 && deadline::passed() {
                return None;
            }
            // Fused nodes keep the id of their first op (j merges into i), so each live node is
            // visited once per pass, at its own position in the order.
            if c.find(u) != u {
                continue;
            }
            while let Some(j) = first_fusable_successor(&c, u, alpha) {
                c.merge(u, j);
                merged_any = true;
            }
        }
        if !merged_any {
            return Some(c);
        }
    }
}

fn first_fusable_successor(c: &Contraction, i: usize, alpha: f64) -> Option<usize> {
    c.successors(i).keys().copied().find(|&j| {
        algorithm1(
            c.out_degree(i),
            c.in_degree(j),
            c.weight(i),
            c.weight(j),
            alpha,
        )
    })
}

/// QuickP Algorithm 1: whether j should merge into i over edge (i, j).
pub(crate) fn algorithm1(out_i: usize, in_j: usize, p_i: f64, p_j: f64, alpha: f64) -> bool {
    if out_i >= 2 && in_j >= 2 {
        return false;
    }
    if out_i == 1 && in_j == 1 {
        return true;
    }
    (p_i <= alpha && out_i == 1) || (p_j <= alpha && in_j == 1)
}

/// Eq. (7) ranks on the contracted graph, then one tie per node with two or more successors:
/// (node, chosen successor, node's rank).
fn colocation_ties(c: &mut Contraction, bw: f64) -> Vec<(usize, usize, f64)> {
    let topo = c.topological_roots();
    let mut rank = vec![0.0f64; topo.iter().copied().max().map_or(0, |m| m + 1)];
    for &i in topo.iter().rev() {
        let tail = c
            .successors(i)
            .iter()
            .map(|(&j, &bytes)| rank[j] + bytes / bw)
            .fold(0.0, f64::max);
        rank[i] = c.weight(i) + tail;
    }
    let mut ties = Vec::new();
    for &i in &topo {
        if c.out_degree(i) < 2 {
            continue;
        }
        // Ties between equal scores go to the smaller node id (BTreeMap order, strict >).
        let mut best: Option<(usize, f64)> = None;
        for (&j, &bytes) in c.successors(i) {
            let score = rank[j] + bytes / bw;
            if best.is_none_or(|(_, s)| score > s) {
                best = Some((j, score));
            }
        }
        if let Some((j, _)) = best {
            ties.push((i, j, rank[i]));
        }
    }
    ties
}

/// Merge tied nodes, most critical first, skipping merges that would close a cycle. Returns how
/// many were skipped (`None`: this thread's deadline passed first; each tie's cycle check may
/// search the whole graph, so the clock is read at every tie).
fn apply_ties(c: &mut Contraction, ties: &[(usize, usize, f64)]) -> Option<usize> {
    let mut ordered: Vec<&(usize, usize, f64)> = ties.iter().collect();
    ordered.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    let mut skipped = 0;
    for &&(i, j, _) in &ordered {
        if deadline::passed() {
            return None;
        }
        let (a, b) = (c.find(i), c.find(j));
        if a == b {
            continue;
        }
        if c.merge_creates_cycle(a, b) {
            skipped += 1;
            continue;
        }
        c.merge(a, b);
    }
    Some(skipped)
}
