//! How a search runs: its budget, PUCT constant, group order and batch shares.

use super::noise::RootNoise;

/// TAG's default number of op groups.
pub const DEFAULT_GROUPS: usize = 60;
/// Clusters with at most this many device groups get every subset as an action.
pub(crate) const FULL_SUBSETS_UP_TO: usize = 8;

/// Simulations the polishing local search may make from each start by default: enough for it to
/// reach a local optimum on most TAG instances (measured: 130–1,850 from dp-subset), bounded so
/// `place` stays within seconds.
pub const DEFAULT_POLISH: usize = 2000;

/// New pipeline leaves a search may simulate by default ([`MctsConfig::pipeline_leaves`]): a
/// pipeline's simulation runs every micro-batch's tasks, several times a per-group leaf's on
/// BERT-large, so they are capped. 16 since pipeline simulations reuse their expansion: on 40
/// random instances it was faster than 8 on 3 (GPT on seed 2,000,013 by 1.5%) and slower on none,
/// at a cost within two cores' noise (the pipeline leaves take iterations from per-group ones).
pub const PIPELINE_LEAVES: usize = 16;

/// Reward of a strategy that runs out of memory.
pub(crate) const OOM_REWARD: f64 = -1.0;

/// How the search runs.
#[derive(Debug, Clone, PartialEq)]
pub struct MctsConfig {
    /// Leaf evaluations (simulator calls, cache hits included).
    pub iterations: usize,
    /// Wall-clock cap, checked between batches.
    pub seconds: Option<f64>,
    /// Seed of the METIS grouping, the tree's random draws (tie-breaks, root noise) and TAG's
    /// MILP warm starts.
    pub seed: u64,
    /// Exploration constant `c` of PUCT.
    pub exploration: f64,
    /// Leaves selected (with virtual loss) and evaluated together.
    pub batch: usize,
    /// The order in which the tree decides the op groups.
    pub group_order: GroupOrder,
    /// How replicas share the batch in the strategies the search simulates.
    pub batch_split: SearchSplit,
    /// Double-check the result's replicated gradients with the SFB ILP (TAG §4.2.3).
    pub sfb_check: bool,
    /// Simulations of the local search that polishes the result after the tree, from each of its
    /// starts ([`crate::mcts::polish`]: the best data parallelism, the best heuristic and the
    /// tree's best); 0 returns the tree's best as TAG does (self-play, whose targets are the
    /// tree's).
    pub polish: usize,
    /// Exploration noise on the root's priors (self-play's expert iteration; needs a policy).
    pub root_noise: Option<RootNoise>,
    /// Spend the first leaves on data parallelism inside each device group alone (every op
    /// group all-reduced over its GPUs, then with a parameter server there), then over every GPU
    /// of one type where the type spans several device groups, before PUCT picks any (beyond
    /// TAG): what an engineer tries first on a heterogeneous cluster, so the tree's statistics
    /// start from where the fastest machine alone (or the fastest type) is, whatever the priors
    /// rank first. Counted in the budget. With a policy, the seeds that simulate faster than the
    /// start get the policy's top prior at the root ([`super::lift_priors`]).
    pub seed_device_groups: bool,
    /// With [`Self::seed_device_groups`], also seed each device group with every op group
    /// duplicated on its GPUs (one GPU's step, with no gradient to synchronise) where one GPU's
    /// op compute alone is shorter than the fastest leaf so far; default on. On today's clusters
    /// in bf16 one H100 can beat a PCIe machine of them, a plan no other seed and no trained
    /// prior leads to; where one GPU cannot win (TAG's clusters) nothing is simulated.
    pub seed_one_gpu: bool,
    /// New pipeline leaves the tree may simulate below the pipeline frames it is given
    /// ([`crate::mcts::Starts::pipelines`]); 0 leaves the frames out of the tree.
    pub pipeline_leaves: usize,
}

/// The order in which the search decides op groups (the tree's depth order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupOrder {
    /// Descending compute on the reference GPU (TAG §4.2.2).
    #[default]
    Compute,
    /// Descending compute plus the time a ring AllReduce of the group's parameters over the
    /// whole cluster takes (beyond TAG). Parameter-heavy groups with little compute (VGG's
    /// fully-connected layers, embeddings) are then decided near the root instead of at a depth
    /// a few hundred iterations never reach, and they are where placements beat data
    /// parallelism.
    Impact,
}

/// Batch shares of the replicas in the searched strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchSplit {
    /// Equal shares, as TAG.
    #[default]
    Even,
    /// Whichever of equal and speed-proportional shares makes data parallelism faster on this
    /// cluster (one extra simulation before the search; beyond TAG). The reward stays relative
    /// to DP-NCCL with equal shares.
    Auto,
}

impl Default for MctsConfig {
    fn default() -> MctsConfig {
        MctsConfig {
            iterations: 300,
            seconds: None,
            seed: 0,
            exploration: 10.0,
            batch: 8,
            group_order: GroupOrder::Compute,
            batch_split: SearchSplit::Even,
            sfb_check: true,
            polish: DEFAULT_POLISH,
            root_noise: None,
            seed_device_groups: true,
            seed_one_gpu: true,
            pipeline_leaves: PIPELINE_LEAVES,
        }
    }
}
