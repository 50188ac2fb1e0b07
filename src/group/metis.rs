//! TAG §4.1.1 op grouping with METIS, and the contiguous-chunk baseline.
//!
//! TAG partitions the op graph into at most 60 groups "by minimizing the tensor sizes on the cut
//! edges, while keeping the total computation time of each partition balanced with a balance
//! factor of 2", with tensor size as edge weight and computation time as vertex weight. Here:
//!
//! - the directed graph is made undirected; parallel and antiparallel edges between two ops are
//!   merged into one edge carrying the sum of their bytes;
//! - METIS wants integers: vertex weights are compute µs scaled so that the total is about 10⁸
//!   (at least 1 per op, so zero-time ops still count as a little load), edge weights are bytes
//!   scaled so that their total is about 10⁸ (at least 1, so zero-byte control edges still tie
//!   ops together); totals this size keep METIS's internal sums inside `i32`;
//! - balance factor 2 is METIS's load-imbalance tolerance `ufactor = 1000` (max part weight ≤
//!   (1 + ufactor/1000) × the mean part weight);
//! - k is clamped to the number of ops; METIS may leave parts empty, so the result can have fewer
//!   than k groups;
//! - METIS is seeded, so the same input gives the same grouping; calls are serialised because
//!   METIS keeps its random generator in process-wide state, and remembered (a search compiles
//!   the same model-parallel group on the same GPUs many times).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use metis::Idx;

use super::Grouping;
use crate::error::{MetisError, Result};
use crate::graph::{Graph, OpIdx};

/// TAG's balance factor: the heaviest group may weigh up to twice the mean.
pub(crate) const BALANCE_FACTOR: f64 = 2.0;
/// Held while METIS runs (see [`metis_partition`]).
static METIS_LOCK: Mutex<()> = Mutex::new(());
/// Scaled totals of vertex and edge weights (see the module docs).
const WEIGHT_SCALE_TOTAL: f64 = 1e8;

/// An undirected graph in METIS's compressed form (CSR), with integer weights.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct MetisGraph {
    pub xadj: Vec<Idx>,
    pub adjncy: Vec<Idx>,
    pub vwgt: Vec<Idx>,
    pub adjwgt: Vec<Idx>,
}

/// TAG grouping: METIS k-way on the whole graph. TAG uses 60 groups (the search's `DEFAULT_GROUPS`).
pub(crate) fn metis(graph: &Graph, weights: &[f64], k: usize, seed: u64) -> Result<Grouping> {
    let all: Vec<OpIdx> = (0..graph.len()).collect();
    let parts = partition_ops(graph, weights, &all, balanced_group_limit(weights, k), seed)?;
    Grouping::from_assignment(graph, weights, "metis", parts)
}

/// TAG asks for at most `k` groups balanced within [`BALANCE_FACTOR`]. The group holding the
/// heaviest op weighs at least that op, so when it exceeds the factor times the mean of `k`
/// groups (a vocabulary projection, a large convolution) no `k`-way split is balanced; fewer
/// groups are: the most groups whose mean is at least the heaviest op over the factor.
pub(crate) fn balanced_group_limit(weights: &[f64], k: usize) -> usize {
    let total: f64 = weights.iter().sum();
    let heaviest = weights.iter().copied().fold(0.0, f64::max);
    if heaviest <= 0.0 {
        return k;
    }
    let limit = (BALANCE_FACTOR * total / heaviest).floor() as usize;
    k.min(limit.max(1))
}

/// Split a subset of ops (for instance one op group that model parallelism divides among
/// devices) into at most `k` parts; `result[i]` is the part of `ops[i]`. Edges leaving the subset
/// are ignored.
pub(crate) fn partition_ops(
    graph: &Graph,
    weights: &[f64],
    ops: &[OpIdx],
    k: usize,
    seed: u64,
) -> Result<Vec<u32>> {
    if weights.len() != graph.len() {
        return Err(MetisError::WeightCount {
            weights: weights.len(),
            ops: graph.len(),
        }
        .into());
    }
    let mg = undirected_csr(graph, weights, ops);
    partition_csr(&mg, ops.len(), k, seed)
}

/// Like [`partition_ops`], balancing memory (`memory[op]` bytes) as a second constraint beside
/// compute: model parallelism splits a group across devices to fit memory (TAG §4.2), so both
/// must be balanced.
pub(crate) fn partition_ops_with_memory(
    graph: &Graph,
    weights: &[f64],
    memory: &[f64],
    ops: &[OpIdx],
    k: usize,
    seed: u64,
) -> Result<Vec<u32>> {
    if weights.len() != graph.len() || memory.len() != graph.len() {
        return Err(MetisError::WeightAndMemoryCount {
            weights: weights.len(),
            memory: memory.len(),
            ops: graph.len(),
        }
        .into());
    }
    // Ask only for as many parts as both constraints can balance: an op heavier than the factor
    // times a part's mean (compute or memory) leaves no balanced k-way split, and METIS then
    // bisects empty graphs. The same rule as the whole-graph grouping ([`metis`]).
    let compute: Vec<f64> = ops.iter().map(|&op| weights[op]).collect();
    let bytes: Vec<f64> = ops.iter().map(|&op| memory[op]).collect();
    let k = balanced_group_limit(&bytes, balanced_group_limit(&compute, k));
    let mut mg = undirected_csr(graph, weights, ops);
    let memory_scale = scale_for(ops.iter().map(|&op| memory[op]).sum());
    mg.vwgt = ops
        .iter()
        .zip(&mg.vwgt)
        .flat_map(|(&op, &time)| [time, to_idx(memory[op], memory_scale)])
        .collect();
    partition_csr(&mg, ops.len(), k, seed)
}

/// METIS on a graph built by [`undirected_csr`] (one or more balance constraints in `vwgt`).
fn partition_csr(mg: &MetisGraph, n: usize, k: usize, seed: u64) -> Result<Vec<u32>> {
    metis_partition(n, &mg.xadj, &mg.adjncy, &mg.vwgt, &mg.adjwgt, k, seed)
}

/// Build the METIS input for the ops in `ops` (local index = position in `ops`).
pub(crate) fn undirected_csr(graph: &Graph, weights: &[f64], ops: &[OpIdx]) -> MetisGraph {
    let mut local = vec![usize::MAX; graph.len()];
    for (i, &op) in ops.iter().enumerate() {
        local[op] = i;
    }
    // Neighbour lists with summed bytes: sorting then merging equal neighbours folds parallel and
    // antiparallel edges into one undirected edge.
    let mut nbrs: Vec<Vec<(usize, f64)>> = vec![Vec::new(); ops.len()];
    for e in graph.edges() {
        let (a, b) = (local[e.src], local[e.dst]);
        if a == usize::MAX || b == usize::MAX || a == b {
            continue;
        }
        nbrs[a].push((b, e.bytes));
        nbrs[b].push((a, e.bytes));
    }
    let mut merged: Vec<Vec<(usize, f64)>> = Vec::with_capacity(ops.len());
    for mut list in nbrs {
        list.sort_by_key(|&(v, _)| v);
        let mut out: Vec<(usize, f64)> = Vec::with_capacity(list.len());
        for (v, b) in list {
            match out.last_mut() {
                Some((last, sum)) if *last == v => *sum += b,
                _ => out.push((v, b)),
            }
        }
        merged.push(out);
    }
    // Each undirected edge appears twice in the lists, so halve the total for the scale.
    let total_bytes: f64 = merged.iter().flatten().map(|&(_, b)| b).sum::<f64>() / 2.0;
    let total_time: f64 = ops.iter().map(|&op| weights[op]).sum();
    let byte_scale = scale_for(total_bytes);
    let time_scale = scale_for(total_time);

    let mut mg = MetisGraph {
        xadj: Vec::with_capacity(ops.len() + 1),
        ..MetisGraph::default()
    };
    mg.xadj.push(0);
    for (i, list) in merged.iter().enumerate() {
        for &(v, b) in list {
            mg.adjncy.push(v as Idx);
            mg.adjwgt.push(to_idx(b, byte_scale));
        }
        mg.xadj.push(mg.adjncy.len() as Idx);
        mg.vwgt.push(to_idx(weights[ops[i]], time_scale));
    }
    mg
}

/// Units per integer step so that `total` maps to about [`WEIGHT_SCALE_TOTAL`].
fn scale_for(total: f64) -> f64 {
    if total > 0.0 {
        total / WEIGHT_SCALE_TOTAL
    } else {
        1.0
    }
}

fn to_idx(value: f64, scale: f64) -> Idx {
    ((value / scale).round() as Idx).max(1)
}

/// METIS k-way with TAG's balance factor on a CSR graph of `n` vertices; returns the part of
/// each vertex (raw METIS part ids, possibly with empty parts). `k` is clamped to `1..=n`.
pub(crate) fn metis_partition(
    n: usize,
    xadj: &[Idx],
    adjncy: &[Idx],
    vwgt: &[Idx],
    adjwgt: &[Idx],
    k: usize,
    seed: u64,
) -> Result<Vec<u32>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    // One weight per vertex and balance constraint, interleaved (METIS's `ncon`).
    let ncon = vwgt.len() / n;
    if xadj.len() != n + 1 || ncon == 0 || vwgt.len() != n * ncon || adjwgt.len() != adjncy.len() {
        return Err(MetisError::InconsistentCsr {
            n,
            xadj: xadj.len(),
            vwgt: vwgt.len(),
            adjncy: adjncy.len(),
            adjwgt: adjwgt.len(),
        }
        .into());
    }
    let k = k.clamp(1, n);
    if k == n {
        // One op per part: nothing to optimise, and METIS complains about such requests.
        return Ok((0..n as u32).collect());
    }
    if n < 2 * k {
        // Too few vertices for METIS's multilevel k-way, which leaves parts empty: balance the
        // first weight directly.
        return Ok(longest_first(
            &vwgt.iter().step_by(ncon).copied().collect::<Vec<_>>(),
            k,
        ));
    }
    let input = MetisInput {
        k,
        seed,
        csr: [xadj, adjncy, vwgt, adjwgt].map(<[Idx]>::to_vec),
    };
    if let Some(part) = remembered(&input) {
        return Ok(part);
    }
    let mut part: Vec<Idx> = vec![0; n];
    if k > 1 {
        // METIS draws from one process-wide random generator, so two partitions running at
        // once on different threads perturb each other and the seed no longer makes the result
        // reproducible. Serialise the calls.
        let _guard = METIS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let _quiet = StdoutSilenced::new();
        let ufactor = ((BALANCE_FACTOR - 1.0) * 1000.0).round() as Idx;
        metis::Graph::new(ncon as Idx, k as Idx, xadj, adjncy)
            .map_err(|e| MetisError::BadInput(format!("{e:?}")))?
            .set_vwgt(vwgt)
            .set_adjwgt(adjwgt)
            .set_option(metis::option::UFactor(ufactor))
            .set_option(metis::option::Seed((seed % (Idx::MAX as u64)) as Idx))
            .part_kway(&mut part)
            .map_err(|e| MetisError::Failed(format!("{e:?}")))?;
    }
    let part: Vec<u32> = part.into_iter().map(|p| p as u32).collect();
    remember(input, &part);
    Ok(part)
}

/// Everything a METIS partition depends on: seeded, it is a function of this.
#[derive(PartialEq, Eq, Hash)]
struct MetisInput {
    k: usize,
    seed: u64,
    /// `xadj`, `adjncy`, `vwgt`, `adjwgt`.
    csr: [Vec<Idx>; 4],
}

/// Partitions already found, by input. A search compiles the same model-parallel group on the
/// same GPUs again and again (GPT on TAG's testbed: METIS was 6% of `place`'s time), and the
/// calls are serialised besides. Cleared when full; a partition found again is the same.
static METIS_MEMO: LazyLock<Mutex<HashMap<MetisInput, Vec<u32>>>> = LazyLock::new(Default::default);
/// Partitions [`METIS_MEMO`] holds at most.
const METIS_MEMO_ENTRIES: usize = 256;

fn remembered(input: &MetisInput) -> Option<Vec<u32>> {
    let memo = METIS_MEMO.lock().unwrap_or_else(|e| e.into_inner());
    memo.get(input).cloned()
}

fn remember(input: MetisInput, part: &[u32]) {
    let mut memo = METIS_MEMO.lock().unwrap_or_else(|e| e.into_inner());
    if memo.len() >= METIS_MEMO_ENTRIES {
        memo.clear();
    }
    memo.insert(input, part.to_vec());
}

/// While alive, the process's standard output goes to /dev/null. METIS reports some conditions
/// (an empty bisection on unbalanceable inputs) with `printf` on stdout, which would corrupt
/// `--json` output; the result it returns is still usable. Held only under [`METIS_LOCK`] and
/// only around the METIS call: the CLI writes its output after the search, on one thread.
struct StdoutSilenced {
    #[cfg(unix)]
    saved: libc::c_int,
}

#[allow(unsafe_code)]
impl StdoutSilenced {
    fn new() -> StdoutSilenced {
        #[cfg(unix)]
        {
            use std::io::Write;
            let _ = std::io::stdout().flush();
            // SAFETY: plain descriptor calls; every failure leaves stdout as it was.
            unsafe {
                libc::fflush(std::ptr::null_mut());
                let saved = libc::dup(1);
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
                if saved >= 0 && null >= 0 {
                    libc::dup2(null, 1);
                }
                if null >= 0 {
                    libc::close(null);
                }
                StdoutSilenced { saved }
            }
        }
        #[cfg(not(unix))]
        StdoutSilenced {}
    }
}

#[allow(unsafe_code)]
impl Drop for StdoutSilenced {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: restores the descriptor saved in `new` (C's buffer is flushed to /dev/null
        // first, so nothing METIS printed reaches the real stdout later).
        unsafe {
            libc::fflush(std::ptr::null_mut());
            if self.saved >= 0 {
                libc::dup2(self.saved, 1);
                libc::close(self.saved);
            }
        }
    }
}

/// Longest-processing-time-first: vertices by descending weight, each to the lightest part so
/// far (ties to the lower part); a 4/3-approximation of the most balanced split.
fn longest_first(weights: &[Idx], k: usize) -> Vec<u32> {
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by_key(|&v| (std::cmp::Reverse(weights[v]), v));
    let mut load = vec![0 as Idx; k];
    let mut part = vec![0u32; weights.len()];
    for v in order {
        let lightest = (0..k).min_by_key(|&p| (load[p], p)).expect("k ≥ 1");
        load[lightest] += weights[v];
        part[v] = lightest as u32;
    }
    part
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain of `n` vertices in CSR form with unit edge weights.
    fn chain(n: usize) -> (Vec<Idx>, Vec<Idx>, Vec<Idx>) {
        let mut xadj = vec![0];
        let mut adjncy = Vec::new();
        for v in 0..n {
            if v > 0 {
                adjncy.push(v as Idx - 1);
            }
            if v + 1 < n {
                adjncy.push(v as Idx + 1);
            }
            xadj.push(adjncy.len() as Idx);
        }
        let adjwgt = vec![1; adjncy.len()];
        (xadj, adjncy, adjwgt)
    }

    /// A chain of `n` ops with unit compute; `memory[op]` bytes each.
    fn chain_graph(n: usize) -> Graph {
        let mut b = crate::graph::GraphBuilder::new();
        for i in 0..n as u64 {
            let v = b.add_op(crate::graph::Op::new(
                i,
                format!("op{i}"),
                "MatMul",
                crate::graph::Phase::Forward,
            ));
            if i > 0 {
                b.add_edge(v - 1, v, 1.0);
            }
        }
        b.finish("<test>", "chain", 1).unwrap()
    }

    #[test]
    fn a_heavy_memory_vertex_limits_the_parts_to_what_can_be_balanced() {
        let n = 40;
        let g = chain_graph(n);
        let ops: Vec<OpIdx> = (0..n).collect();
        let compute = vec![1.0; n];
        // Memory 1 each but op 0 holds 100: total 139, so at most ⌊2 · 139 / 100⌋ = 2 parts
        // balance memory within the factor 2.
        let memory: Vec<f64> = (0..n).map(|v| if v == 0 { 100.0 } else { 1.0 }).collect();
        let parts = partition_ops_with_memory(&g, &compute, &memory, &ops, 8, 0).unwrap();
        let used: std::collections::BTreeSet<u32> = parts.iter().copied().collect();
        assert!(used.len() <= 2, "{used:?}");
        // Without the heavy op METIS is asked for all 8 (it may leave some empty).
        let parts = partition_ops_with_memory(&g, &compute, &compute, &ops, 8, 0).unwrap();
        let used: std::collections::BTreeSet<u32> = parts.iter().copied().collect();
        assert!(used.len() > 2, "{used:?}");
    }

    #[test]
    fn tiny_subsets_are_split_longest_first() {
        let (xadj, adjncy, adjwgt) = chain(5);
        let vwgt: Vec<Idx> = vec![5, 4, 3, 3, 3];
        let parts = metis_partition(5, &xadj, &adjncy, &vwgt, &adjwgt, 3, 0).unwrap();
        let mut load = [0; 3];
        for (v, &p) in parts.iter().enumerate() {
            load[p as usize] += vwgt[v];
        }
        // LPT: 5 | 4 | 3, then 3 → part 2 (load 3), 3 → part 1 (load 4): loads 5, 7, 6.
        assert_eq!(load, [5, 7, 6]);
    }
}
