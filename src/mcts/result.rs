//! What a search returns: the best strategy, its evaluation, and the training targets and
//! progress it reports.

use super::config::OOM_REWARD;
use crate::evaluate::Evaluation;
use crate::gnn::HeteroGraph;
use crate::strategy::{BatchSplit, GroupDecision, Strategy};

/// What the search found.
#[derive(Debug, Clone)]
pub struct SearchResult {
    /// The fastest strategy that fits; when none fits, the fastest one tried.
    pub strategy: Strategy,
    /// Execution priorities when the result is a list scheduler's placement (see
    /// [`crate::evaluate::Placement::order`]).
    pub order: Option<Vec<f64>>,
    /// The strategy compiled and simulated.
    pub evaluation: Evaluation,
    /// Whether the strategy fits in memory.
    pub fits: bool,
    /// The chosen action of each op group, in search order (descending compute).
    pub decisions: Vec<GroupDecision>,
    /// Ops in each op group, in search order.
    pub group_ops: Vec<usize>,
    /// How each op group's replicas share the batch, in search order (where its option splits
    /// the batch).
    pub shares: Vec<BatchSplit>,
    /// DP-NCCL's simulated iteration time, µs, and whether it fits.
    pub dp_us: f64,
    /// Whether DP-NCCL fits in every GPU's memory.
    pub dp_fits: bool,
    /// The first iteration (1-based) whose strategy fit and beat DP-NCCL; 0 when the start,
    /// data parallelism with bucketed AllReduce (Horovod), already does.
    pub beat_dp_at: Option<usize>,
    /// Tree iterations run (leaf evaluations, cache hits included).
    pub iterations: usize,
    /// Distinct strategies simulated.
    pub simulated: usize,
    /// Of the tree iterations, the seed leaves simulated before PUCT picked any
    /// ([`super::MctsConfig::seed_device_groups`]).
    pub seeds: usize,
    /// Wall time of the search (for TAG's placer, its heuristics and the MILP warm starts included).
    pub seconds: f64,
    /// Size of the action space: the (device-group set, option) pairs each op group chooses from.
    pub actions: usize,
    /// Pipelines the tree simulated below its pipeline frames ([`super::pipelines`]).
    pub pipeline_leaves: usize,
    /// Whether the policy's forward passes ran past the time limit and the search went on
    /// with uniform priors.
    pub priors_abandoned: bool,
}

impl SearchResult {
    /// The strategy's simulated iteration time, µs.
    pub fn iteration_us(&self) -> f64 {
        self.evaluation.report.iteration_us
    }

    /// `T_DP / T − 1` over DP-NCCL; −1 when the strategy does not fit (the search's reward).
    pub(crate) fn speedup_over_dp(&self) -> f64 {
        if self.fits {
            self.dp_us / self.iteration_us() - 1.0
        } else {
            OOM_REWARD
        }
    }

    pub(crate) fn iterations_per_second(&self) -> f64 {
        self.iterations as f64 / self.seconds.max(1e-9)
    }
}

/// A search vertex's visit distribution with the GNN input it was scored from: TAG's training
/// target for the priors of the op group the vertex decides next.
#[derive(Debug, Clone)]
pub struct VertexTarget {
    pub graph: HeteroGraph,
    /// The op group the vertex decides next (its depth).
    pub group: usize,
    /// `(action, visits)` of every visited action, ascending by action.
    pub visits: Vec<(u16, u32)>,
}

impl VertexTarget {
    /// `π = softmax(ln N) = N / ΣN` over the visited actions.
    pub fn distribution(&self) -> Vec<(u16, f32)> {
        let total: u32 = self.visits.iter().map(|&(_, n)| n).sum();
        self.visits
            .iter()
            .map(|&(a, n)| (a, n as f32 / total.max(1) as f32))
            .collect()
    }
}

/// Progress reported after each batch.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub iterations: usize,
    pub best_us: Option<f64>,
    pub dp_us: f64,
}
