//! TAG's strategy search (§4.2.2): Monte-Carlo tree search over per-op-group decisions.
//!
//! - Op groups come from METIS (weights = compute times on the reference GPU) and are ordered by
//!   descending compute, so the tree decides the expensive groups first.
//! - A vertex at depth `i` is a partial strategy: decisions for the first `i` groups. An action
//!   is a (non-empty set of device groups, replication option) pair; see [`actions`] for how the
//!   set is restricted on large clusters.
//! - A leaf is completed by giving every undecided group the first group's decision (TAG
//!   footnote 2), compiled and simulated; its reward is `T_DP / T − 1` (DP-NCCL scores 0), or −1
//!   when it runs out of memory.
//! - Selection by PUCT, `U = Q + c·G·√ΣN / (1 + N)`. Expansion adds one level per iteration.
//! - Priors `G`: uniform, or with a GNN policy ([`Mcts::with_policy`]) the GNN's softmax over the
//!   actions of the vertex's next op group, computed once per new vertex from the heterogeneous
//!   graph of its completed, simulated strategy (the leaf the expansion evaluates anyway, so the
//!   runtime feedback costs no extra simulation). Priors arrive after the batch that created the
//!   vertex is evaluated (the batch's new vertices in parallel); a later selection in that same
//!   batch sees uniform priors there. Self-play may temper the root's priors and mix in
//!   Dirichlet noise ([`noise`], [`MctsConfig::root_noise`]).
//! - First leaves (beyond TAG, [`seeds`]): data parallelism inside each device group alone and
//!   over every GPU of one type; those faster than the start get the policy's top root prior.
//! - Pipelines (beyond TAG, [`pipelines`]): given `pipeline-dp`'s frames, each is a root action
//!   beside op group 0's, below which the tree decides the micro-batch count and each stage
//!   boundary's move; a pipeline leaf is that pipeline simulated, on the same reward.
//! - After the tree (beyond TAG, [`polish`]): the better of the tree's best and the best data
//!   parallelism over device-group subsets is polished by local search, so the result is never
//!   slower than `dp-subset`.
//! - Parallelism: each batch of leaves is selected sequentially with a virtual loss (so the
//!   batch spreads over the tree), evaluated in parallel with rayon, and backed up in selection
//!   order. The batch size is fixed, not the thread count, so a seed gives the same search on any
//!   machine.

pub mod actions;
pub mod config;
pub mod expert;
pub mod finish;
pub mod grouping;
mod known;
pub mod measure;
pub mod noise;
pub mod pipelines;
pub mod polish;
pub mod reserve;
pub mod result;
pub mod search;
pub mod seeds;
pub mod start_graph;
pub mod tree;

pub use actions::{PACKINGS, Shares, actions, build_strategy, device_group_sets};
pub use config::{
    DEFAULT_GROUPS, DEFAULT_POLISH, FULL_SUBSETS_UP_TO, GroupOrder, MctsConfig, PIPELINE_LEAVES,
    SearchSplit,
};
pub use grouping::{metis_groups, order_by_compute, ordered_groups};
pub use noise::RootNoise;
pub use result::{Progress, SearchResult, VertexTarget};
pub use search::{KnownPlacement, Mcts, Starts, search, search_from, search_with};
pub use seeds::lift_priors;
pub use start_graph::{StartGraph, start_graph};
