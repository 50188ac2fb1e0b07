//! The heterogeneous graph the search scores its root from (nothing decided, DP-NCCL's
//! simulation as the runtime feedback, op group 0 next), for any model and cluster: what the
//! GNN's benchmarks time.

use super::config::MctsConfig;
use super::grouping::metis_groups;
use super::search::Mcts;
use crate::error::Result;
use crate::gnn::{GnnPolicy, HeteroGraph, Slice, features};
use crate::problem::Problem;

/// The root's graph with the slices of the cluster's actions.
pub struct StartGraph {
    /// The GNN input at the root: nothing decided, DP-NCCL's simulation as feedback.
    pub graph: HeteroGraph,
    /// The device groups and option of every action, in action order, for the decoder.
    pub slices: Vec<Slice>,
    /// The op group the priors are for (the root's: 0).
    pub next_group: usize,
}

/// The root of the search on `p` under `groups` METIS op groups (seed 0, the search's default),
/// built by the search itself.
pub fn start_graph(p: &Problem, groups: usize, policy: &GnnPolicy) -> Result<StartGraph> {
    let op_group = metis_groups(p, groups, 0)?;
    let search = Mcts::new(*p, op_group, MctsConfig::default())?.with_policy(policy)?;
    let root = search.vertex_target(&[], Vec::new())?;
    Ok(StartGraph {
        graph: root.graph,
        slices: features::slices(p.cluster, search.actions()),
        next_group: root.group,
    })
}
