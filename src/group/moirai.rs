//! MOIRAI §III-B: graph coarsening with operator fusion (Algorithm 1, GCOF).
//!
//! A fusion rule is an ordered list of op types (MOIRAI Table I: conv∘bn, conv∘bn∘relu,
//! conv∘bn∘add∘relu); ops matching a whole rule along the graph are fused into one node. Of the
//! three connection types of the paper's Fig. 6, only the *direct* (pred has one output, succ one
//! input) and the *multi-input* (pred has one output, succ several inputs) connections may be
//! fused; a *multi-output* connection (pred feeds several ops) may not. So extending a fused
//! chain by an op v requires the chain's last op to have v as its only successor.
//!
//! Our reading of GCOF: ops are visited in topological order (the paper walks depth first from
//! the root; both visit every op after its producers). A partial match of a rule is *bound*
//! (tentatively fused); when the bound chain completes a rule it becomes *fused*; when a chain
//! can grow no further, the ops bound after its last complete match are released (`unbind`).
//! The paper's `is_sub_rule` accepts any contiguous piece of a rule (its example binds add∘relu
//! before conv∘bn joins it); growing chains only from a rule's first op gives the same fused
//! groups, since a piece that does not start a rule is kept only if a chain from the rule's start
//! later absorbs it. Where several producers of v could absorb it (multi-input), the longest
//! chain wins, then the smallest op index. An op bound into a chain that is later released is
//! not reconsidered as the start of another rule (a known simplification).
//!
//! **No cycles.** Every op of a fused chain except the last has its only successor inside the
//! chain, so every edge leaving a group leaves from its last op, which every member reaches. A
//! cycle of groups would then lift to a cycle of ops, which a DAG has none of.
//!
//! **Training graphs (option, not in the paper).** MOIRAI targets inference. In a training graph
//! a forward activation usually also feeds the backward op that needs it, which is a
//! multi-output connection, so the paper's rules fuse almost nothing (see the tests' figures).
//! [`MoiraiOptions::same_phase_consumers_only`] counts only consumers of the producer's own phase
//! when classifying a connection (the saved activation stays a tensor the fused kernel writes
//! out, as fused training kernels do). The no-cycle argument above no longer holds then, so each
//! fused group is checked on the contracted graph before it is accepted (a path leaving the
//! group and coming back rejects it; its ops stay on their own). Off by default.
//!
//! **Rule table.** Table I, spelled in our (TensorFlow) op vocabulary, plus the patterns named in
//! the project brief: conv + bias (+ relu), matmul + bias (+ relu / gelu), attention
//! (batch-matmul, optional scale / mask, softmax, batch-matmul), the variance chain of a
//! decomposed layer norm, and residual add + a fused layer norm. MOIRAI targets inference and
//! gives no backward rules; the one backward rule here is TensorFlow's fused batch-norm gradient
//! with its ReLU gradient (grappler's remapper fuses `ReluGrad` into `FusedBatchNormGrad`). In
//! training graphs a forward activation usually also feeds its backward op, which is a
//! multi-output connection, so far fewer rules fire than at inference.

use super::{Grouping, check_weights};
use crate::error::Result;
use crate::graph::{Graph, OpIdx};

/// An ordered list of op types fused into one node when matched along a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FusionRule {
    pub pattern: Vec<String>,
}

impl FusionRule {
    pub(crate) fn new(pattern: &[&str]) -> FusionRule {
        FusionRule {
            pattern: pattern.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// Every combination of the alternatives at each position, as rules.
fn expand(slots: &[&[&str]]) -> Vec<FusionRule> {
    let mut out: Vec<Vec<&str>> = vec![Vec::new()];
    for alternatives in slots {
        out = out
            .iter()
            .flat_map(|prefix| {
                alternatives.iter().map(move |t| {
                    let mut p = prefix.clone();
                    p.push(t);
                    p
                })
            })
            .collect();
    }
    out.iter().map(|p| FusionRule::new(p)).collect()
}

/// The default rule table (see the module docs).
pub(crate) fn default_rules() -> Vec<FusionRule> {
    const CONV: &[&str] = &["Conv2D", "DepthwiseConv2dNative"];
    const BN: &[&str] = &["FusedBatchNorm", "FusedBatchNormV3"];
    const ADD: &[&str] = &["Add", "AddV2"];
    const RELU: &[&str] = &["Relu", "Relu6"];
    const BMM: &[&str] = &["BatchMatMul", "BatchMatMulV2"];
    let mut rules = Vec::new();
    // MOIRAI Table I.
    rules.extend(expand(&[CONV, BN]));
    rules.extend(expand(&[CONV, BN, RELU]));
    rules.extend(expand(&[CONV, BN, ADD, RELU]));
    // Bias and activation epilogues.
    rules.extend(expand(&[CONV, &["BiasAdd"]]));
    rules.extend(expand(&[CONV, &["BiasAdd"], RELU]));
    rules.extend(expand(&[&["MatMul"], &["BiasAdd"]]));
    rules.extend(expand(&[
        &["MatMul"],
        &["BiasAdd"],
        &["Relu", "Relu6", "Gelu", "Tanh"],
    ]));
    // Attention core: scores, optional scale and mask, softmax, weighted sum.
    rules.extend(expand(&[BMM, &["Softmax"], BMM]));
    rules.extend(expand(&[BMM, &["Mul", "RealDiv"], &["Softmax"], BMM]));
    rules.extend(expand(&[BMM, &["Mul", "RealDiv"], ADD, &["Softmax"], BMM]));
    // Layer norm: the variance chain of the decomposed form, or residual add + fused op.
    rules.extend(expand(&[
        &["SquaredDifference"],
        &["Mean"],
        ADD,
        &["Rsqrt"],
        &["Mul"],
    ]));
    rules.extend(expand(&[ADD, &["LayerNorm"]]));
    // Backward: batch-norm gradient fused with the ReLU gradient.
    rules.extend(expand(&[
        &["ReluGrad"],
        &["FusedBatchNormGrad", "FusedBatchNormGradV3"],
    ]));
    rules
}

/// How GCOF classifies connections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MoiraiOptions {
    /// Count only consumers of the producer's own phase (see the module docs); `false` is the
    /// paper's rule.
    pub same_phase_consumers_only: bool,
}

/// GCOF with the given rules and the paper's connection rules; ops no rule covers stay groups
/// of their own.
pub(crate) fn moirai(graph: &Graph, weights: &[f64], rules: &[FusionRule]) -> Result<Grouping> {
    moirai_with(graph, weights, rules, &MoiraiOptions::default())
}

/// [`moirai`] with options; the method is named `moirai-training` when
/// `same_phase_consumers_only` is set.
pub(crate) fn moirai_with(
    graph: &Graph,
    weights: &[f64],
    rules: &[FusionRule],
    opts: &MoiraiOptions,
) -> Result<Grouping> {
    check_weights(graph, weights)?;
    let mut chains = fused_chains_with(graph, rules, opts);
    let method = if opts.same_phase_consumers_only {
        chains = acyclic_subset(graph, weights, chains);
        "moirai-training"
    } else {
        "moirai"
    };
    let assignment = super::coarse::assignment_from_sets(graph.len(), &chains);
    Grouping::from_assignment(graph, weights, method, assignment)
}

/// Accept the groups one by one, each only if merging it keeps the contracted graph acyclic.
fn acyclic_subset(graph: &Graph, weights: &[f64], chains: Vec<Vec<OpIdx>>) -> Vec<Vec<OpIdx>> {
    let mut c = super::coarse::Contraction::new(graph, weights);
    chains
        .into_iter()
        .filter(|chain| {
            if c.set_creates_cycle(chain) {
                return false;
            }
            for &op in &chain[1..] {
                c.merge(chain[0], op);
            }
            true
        })
        .collect()
}

/// A chain being grown: its ops in order and how many of them form a complete rule.
struct Chain {
    ops: Vec<OpIdx>,
    committed: usize,
}

/// The fused groups (each with at least two ops), in order of their first op's visit, with the
/// paper's connection rules.
#[cfg(test)]
pub(crate) fn fused_chains(graph: &Graph, rules: &[FusionRule]) -> Vec<Vec<OpIdx>> {
    fused_chains_with(graph, rules, &MoiraiOptions::default())
}

/// Consumers of `p` that count for the connection type.
fn consumers(graph: &Graph, p: OpIdx, opts: &MoiraiOptions) -> usize {
    if opts.same_phase_consumers_only {
        let phase = graph.op(p).phase;
        graph
            .successors(p)
            .filter(|&s| graph.op(s).phase == phase)
            .count()
    } else {
        graph.out_edges(p).len()
    }
}

/// [`fused_chains`] with options. With `same_phase_consumers_only` the chains may still close
/// cycles; [`moirai_with`] filters them.
pub(crate) fn fused_chains_with(
    graph: &Graph,
    rules: &[FusionRule],
    opts: &MoiraiOptions,
) -> Vec<Vec<OpIdx>> {
    let mut chains: Vec<Chain> = Vec::new();
    // chain_at_tail[op] = the chain whose last op is `op`.
    let mut chain_at_tail: Vec<Option<usize>> = vec![None; graph.len()];
    for v in graph.topological_order() {
        let ty = graph.op(v).op_type.as_str();
        let mut best: Option<(usize, usize)> = None; // (chain, its length)
        for p in graph.predecessors(v) {
            let Some(c) = chain_at_tail[p] else { continue };
            // Direct or multi-input connection only: p's one and only (counted) consumer is v.
            let same_phase = graph.op(p).phase == graph.op(v).phase;
            if consumers(graph, p, opts) != 1 || (opts.same_phase_consumers_only && !same_phase) {
                continue;
            }
            let len = chains[c].ops.len();
            if match_state(graph, &chains[c].ops, ty, rules).is_none() {
                continue;
            }
            if best.is_none_or(|(bc, bl)| {
                len > bl || (len == bl && chains[c].ops[0] < chains[bc].ops[0])
            }) {
                best = Some((c, len));
            }
        }
        if let Some((c, _)) = best {
            let complete = match_state(graph, &chains[c].ops, ty, rules) == Some(true);
            let tail = *chains[c].ops.last().unwrap();
            chain_at_tail[tail] = None;
            chains[c].ops.push(v);
            if complete {
                chains[c].committed = chains[c].ops.len();
            }
            chain_at_tail[v] = Some(c);
        } else if let Some(complete) = match_state(graph, &[], ty, rules) {
            chains.push(Chain {
                ops: vec![v],
                committed: usize::from(complete),
            });
            chain_at_tail[v] = Some(chains.len() - 1);
        }
    }
    // unbind: keep each chain's longest complete match, release the rest.
    chains
        .into_iter()
        .filter(|c| c.committed >= 2)
        .map(|mut c| {
            c.ops.truncate(c.committed);
            c.ops
        })
        .collect()
}

/// Whether the types of `ops` followed by `next` start some rule (`Some(false)`), or are a whole
/// rule (`Some(true)`), or neither (`None`).
fn match_state(graph: &Graph, ops: &[OpIdx], next: &str, rules: &[FusionRule]) -> Option<bool> {
    let len = ops.len() + 1;
    let mut prefix = false;
    for rule in rules {
        if rule.pattern.len() < len {
            continue;
        }
        let head_matches = ops
            .iter()
            .zip(&rule.pattern)
            .all(|(&op, t)| graph.op(op).op_type == *t);
        if head_matches && rule.pattern[len - 1] == next {
            if rule.pattern.len() == len {
                return Some(true);
            }
            prefix = true;
        }
    }
    prefix.then_some(false)
}
