//! Expert iteration's second kind of target (Anthony et al.'s ExIt, AlphaZero's improved policy):
//! besides the tree's visit distributions, the decisions of the improved result — the strategy
//! the search returns after its polish — as a one-hot target at every vertex on its path. The
//! visit distributions of a few hundred leaves only reach the shallow vertices and sharpen round
//! the policy's own choices; the polished strategy decides every op group and is, by
//! construction, at least as fast as the tree's best, so it is the expert the policy should move
//! towards.

use rayon::prelude::*;

use super::result::{SearchResult, VertexTarget};
use super::search::Mcts;
use crate::error::Result;

impl Mcts<'_> {
    /// The actions of `found` per op group in search order, when every decision is one of the
    /// search's actions; a start with one decision for the whole model (data parallelism over
    /// the best subset) is that action in every group. A start the space does not express (a
    /// list scheduler's per-op placement) has none.
    pub(crate) fn result_path(&self, found: &SearchResult) -> Option<Vec<u16>> {
        let action = |d| self.actions().iter().position(|a| a == d).map(|a| a as u16);
        match found.decisions.len() {
            n if n == self.groups() => found.decisions.iter().map(action).collect(),
            1 => action(&found.decisions[0]).map(|a| vec![a; self.groups()]),
            _ => None,
        }
    }

    /// A one-hot target at each vertex on `path` (the vertex `path[..i]` takes action
    /// `path[i]`), with the GNN input the search would score that vertex from. Needs a policy.
    pub(crate) fn path_targets(&self, path: &[u16]) -> Result<Vec<VertexTarget>> {
        (0..path.len())
            .into_par_iter()
            .map(|depth| self.vertex_target(&path[..depth], vec![(path[depth], 1)]))
            .collect()
    }
}
