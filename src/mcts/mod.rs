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
pub(crate) mod config;
mod environment;
pub(crate) mod expert;
pub(crate) mod finish;
pub(crate) mod grouping;
mod known;
pub(crate) mod measure;
pub mod noise;
pub(crate) mod pipelines;
pub(crate) mod polish;
pub(crate) mod reserve;
pub(crate) mod result;
pub mod search;
pub(crate) mod seeds;
pub mod start_graph;
pub(crate) mod tree;

pub use actions::PACKINGS;
pub use actions::Shares;
pub use actions::actions;
pub use actions::build_strategy;
pub(crate) use actions::check_action_space;
pub use config::DEFAULT_GROUPS;
pub use config::DEFAULT_POLISH;
pub use config::GroupOrder;
pub use config::MctsConfig;
pub use config::PIPELINE_LEAVES;
pub use config::SearchSplit;
pub use environment::{Environment, Observation, Transition};
pub use grouping::metis_groups;
pub use grouping::ordered_groups;
pub use noise::RootNoise;
pub(crate) use result::Progress;
pub use result::SearchResult;
pub use search::Mcts;
pub(crate) use search::Starts;
pub use search::search;
pub(crate) use search::search_from;
pub use search::search_with;
pub use seeds::lift_priors;
pub use start_graph::StartGraph;
pub use start_graph::start_graph;
