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
//!   batch sees uniform priors there.
//! - Parallelism: each batch of leaves is selected sequentially with a virtual loss (so the
//!   batch spreads over the tree), evaluated in parallel with rayon, and backed up in selection
//!   order. The batch size is fixed, not the thread count, so a seed gives the same search on any
//!   machine.

use std::collections::HashMap;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;

use crate::baselines::{Placement, Problem, simulate};
use crate::cluster::Cluster;
use crate::compile::RouteTable;
use crate::error::{Error, Result};
use crate::gnn::{Feedback, GnnPolicy, HeteroGraph, VertexPriors};
use crate::group::{metis::metis, op_weights, reference_gpu};
use crate::sim::Evaluation;
use crate::strategy::{AllReducePacking, BatchSplit, GroupDecision, ReplicationOption, Strategy};

/// TAG's default number of op groups.
pub const DEFAULT_GROUPS: usize = 60;
/// Clusters with at most this many device groups get every subset as an action.
pub const FULL_SUBSETS_UP_TO: usize = 8;
/// Reward of a strategy that runs out of memory.
const OOM_REWARD: f64 = -1.0;

/// How the search runs.
#[derive(Debug, Clone, PartialEq)]
pub struct MctsConfig {
    /// Leaf evaluations (simulator calls, cache hits included).
    pub iterations: usize,
    /// Wall-clock cap, checked between batches.
    pub seconds: Option<f64>,
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
        }
    }
}

/// What the search found.
#[derive(Debug, Clone)]
pub struct SearchResult {
    /// The fastest strategy that fits; when none fits, the fastest one tried.
    pub strategy: Strategy,
    pub evaluation: Evaluation,
    /// Whether the strategy fits in memory.
    pub fits: bool,
    /// The chosen action of each op group, in search order (descending compute).
    pub decisions: Vec<GroupDecision>,
    /// Ops in each op group, in search order.
    pub group_ops: Vec<usize>,
    /// DP-NCCL's simulated iteration time, µs, and whether it fits.
    pub dp_us: f64,
    pub dp_fits: bool,
    /// The first iteration (1-based) whose strategy fit and beat DP-NCCL; 0 when the start,
    /// data parallelism with bucketed AllReduce (Horovod), already does.
    pub beat_dp_at: Option<usize>,
    pub iterations: usize,
    /// Distinct strategies simulated.
    pub simulated: usize,
    pub seconds: f64,
    pub actions: usize,
}

impl SearchResult {
    pub fn iteration_us(&self) -> f64 {
        self.evaluation.report.iteration_us
    }

    /// `T_DP / T − 1` over DP-NCCL; −1 when the strategy does not fit (the search's reward).
    pub fn speedup_over_dp(&self) -> f64 {
        if self.fits {
            self.dp_us / self.iteration_us() - 1.0
        } else {
            OOM_REWARD
        }
    }

    pub fn iterations_per_second(&self) -> f64 {
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

/// METIS op groups (at most `k`, fewer on small graphs), renumbered by descending compute.
pub fn metis_groups(p: &Problem, k: usize, seed: u64) -> Result<Vec<u32>> {
    ordered_groups(p, k, seed, GroupOrder::Compute)
}

/// METIS op groups (weighted by compute), renumbered in the search order `order`.
pub fn ordered_groups(p: &Problem, k: usize, seed: u64, order: GroupOrder) -> Result<Vec<u32>> {
    let weights = op_weights(p.graph, reference_gpu(p.graph), p.cost);
    // METIS refuses parts of a vertex or two, as in the MCMC baseline.
    let k = k.min(p.graph.len() / 4).max(1);
    let grouping = metis(p.graph, &weights, k, seed)?;
    let rank = match order {
        GroupOrder::Compute => weights,
        GroupOrder::Impact => impact_weights(p, weights),
    };
    Ok(order_by_compute(&grouping.op_group, &rank))
}

/// Compute weights plus, on parameter ops, a ring AllReduce of their bytes over every device of
/// the cluster (ring in device order, its slowest hop).
fn impact_weights(p: &Problem, mut weights: Vec<f64>) -> Vec<f64> {
    let all: Vec<usize> = (0..p.cluster.devices.len()).collect();
    for (w, op) in weights.iter_mut().zip(p.graph.ops()) {
        if op.phase == crate::graph::Phase::Parameter && op.resident_bytes > 0.0 {
            *w += crate::cost::ring_allreduce_us(p.cluster, &all, op.resident_bytes);
        }
    }
    weights
}

/// Renumber groups so group 0 has the most compute (ties: lower old id first).
pub fn order_by_compute(op_group: &[u32], weights: &[f64]) -> Vec<u32> {
    let n = op_group.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
    let mut compute = vec![0.0; n];
    for (op, &g) in op_group.iter().enumerate() {
        compute[g as usize] += weights[op];
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| compute[b].total_cmp(&compute[a]).then(a.cmp(&b)));
    let mut rank = vec![0u32; n];
    for (r, &g) in order.iter().enumerate() {
        rank[g] = r as u32;
    }
    op_group.iter().map(|&g| rank[g as usize]).collect()
}

/// Sets of device groups an action may use. Up to [`FULL_SUBSETS_UP_TO`] device groups: every
/// non-empty subset. Beyond, the (2^M − 1) subsets are too many, so the search is restricted to
/// one or two device groups, each machine's device groups, and all of them.
pub fn device_group_sets(cluster: &Cluster) -> Vec<Vec<usize>> {
    let m = cluster.groups.len();
    if m <= FULL_SUBSETS_UP_TO {
        return (1u32..(1 << m))
            .map(|mask| (0..m).filter(|&g| mask >> g & 1 == 1).collect())
            .collect();
    }
    let mut sets: Vec<Vec<usize>> = (0..m).map(|g| vec![g]).collect();
    for a in 0..m {
        sets.extend((a + 1..m).map(|b| vec![a, b]));
    }
    for machine in &cluster.machines {
        let mut g = machine.groups.clone();
        g.sort_unstable();
        if g.len() > 2 && !sets.contains(&g) {
            sets.push(g);
        }
    }
    sets.push((0..m).collect());
    sets
}

/// Every action: each device-group set with each option, as a decision over its GPUs. The
/// all-GPU all-reduce action (DP-NCCL's) comes first.
pub fn actions(cluster: &Cluster) -> Vec<GroupDecision> {
    let mut sets = device_group_sets(cluster);
    // Largest set first so DP's action is index 0.
    sets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = Vec::new();
    for set in sets {
        let mut devices: Vec<usize> = set
            .iter()
            .flat_map(|&g| cluster.groups[g].devices.iter().copied())
            .collect();
        devices.sort_unstable();
        for option in ReplicationOption::ALL {
            out.push(GroupDecision {
                devices: devices.clone(),
                option,
            });
        }
    }
    out
}

/// How a searched strategy's AllReduce groups synchronise: each leaf is simulated with both and
/// keeps the faster (an extension of TAG's action space, which fixes one scheme). Gradients in 64 MiB buckets overlap the backward pass (Horovod's fusion, the
/// overlap TAG's per-group strategies have); one pack per strategy group after the backward pass
/// wins where many small AllReduces would each pay the ring latency.
pub const PACKINGS: [AllReducePacking; 2] = [
    AllReducePacking::Buckets(crate::strategy::HOROVOD_FUSION_BYTES),
    AllReducePacking::Packed,
];

/// The strategy that gives op group `g` the decision `actions[choice[g]]`, synchronised by
/// `packing`. Groups with the same action share one strategy group, so every group on action 0
/// with [`AllReducePacking::Packed`] is exactly DP-NCCL and scores 0.
pub fn build_strategy(
    op_group: &[u32],
    actions: &[GroupDecision],
    choice: &[u16],
    packing: AllReducePacking,
    devices: usize,
) -> Result<Strategy> {
    let mut slot = vec![u32::MAX; actions.len()];
    let mut decisions = Vec::new();
    for &a in choice {
        if slot[a as usize] == u32::MAX {
            slot[a as usize] = decisions.len() as u32;
            decisions.push(actions[a as usize].clone());
        }
    }
    let ops = op_group
        .iter()
        .map(|&g| slot[choice[g as usize] as usize])
        .collect();
    let mut s = Strategy::new(
        "mcts",
        ops,
        decisions,
        BatchSplit::Even,
        op_group.len(),
        devices,
    )?;
    s.allreduce = packing;
    Ok(s)
}

/// Statistics of one action out of a vertex.
#[derive(Debug, Clone, Copy)]
struct Edge {
    visits: u32,
    /// Sum of backed-up rewards.
    total: f64,
    /// Visits of selections still being evaluated.
    virtual_visits: u32,
    child: u32,
}

const NO_CHILD: u32 = u32::MAX;

struct Node {
    edges: Vec<Edge>,
    /// The policy's priors over the actions; `None`: uniform.
    priors: Option<Vec<f64>>,
}

impl Node {
    fn new(actions: usize) -> Node {
        Node {
            priors: None,
            edges: vec![
                Edge {
                    visits: 0,
                    total: 0.0,
                    virtual_visits: 0,
                    child: NO_CHILD,
                };
                actions
            ],
        }
    }
}

/// One simulated complete strategy.
#[derive(Clone, Copy)]
struct Outcome {
    time_us: f64,
    fits: bool,
    packing: AllReducePacking,
}

impl Outcome {
    /// Fitting first, then faster.
    fn better_than(&self, other: &Outcome) -> bool {
        (self.fits, -self.time_us) > (other.fits, -other.time_us)
    }
}

/// The search state: tree, evaluation cache and best strategy so far.
pub struct Mcts<'a> {
    problem: Problem<'a>,
    routes: RouteTable,
    op_group: Vec<u32>,
    groups: usize,
    actions: Vec<GroupDecision>,
    config: MctsConfig,
    nodes: Vec<Node>,
    cache: HashMap<Vec<u16>, Outcome>,
    rng: StdRng,
    dp: Outcome,
    /// Best (by fit, then time) complete choice seen.
    best: Option<(Vec<u16>, Outcome)>,
    beat_dp_at: Option<usize>,
    iterations: usize,
    /// Lowest and highest reward backed up (DP-NCCL's 0 included).
    reward_range: (f64, f64),
    /// The GNN that gives new vertices their priors, if any.
    policy: Option<VertexPriors<'a>>,
    /// Runtime feedback of each simulated complete choice (only with a policy).
    feedback: HashMap<Vec<u16>, Feedback>,
    /// Vertices created in this batch that wait for priors: node index and path.
    pending: Vec<(usize, Vec<u16>)>,
    /// Batch shares of the simulated strategies (DP-NCCL's reference always splits evenly).
    split: BatchSplit,
}

impl<'a> Mcts<'a> {
    /// A search over the given op groups (ids dense, 0 = decided first).
    pub fn new(problem: Problem<'a>, op_group: Vec<u32>, config: MctsConfig) -> Result<Mcts<'a>> {
        let groups = op_group.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
        if groups == 0 {
            return Err(Error::Other("the graph has no ops to place".into()));
        }
        let actions = actions(problem.cluster);
        if actions.len() > u16::MAX as usize {
            return Err(Error::Other(format!(
                "{} actions is too many",
                actions.len()
            )));
        }
        let mut search = Mcts {
            routes: RouteTable::new(problem.cluster),
            problem,
            op_group,
            groups,
            nodes: vec![Node::new(actions.len())],
            actions,
            cache: HashMap::new(),
            rng: StdRng::seed_from_u64(config.seed),
            config,
            dp: Outcome {
                time_us: 0.0,
                fits: false,
                packing: AllReducePacking::Packed,
            },
            best: None,
            beat_dp_at: None,
            iterations: 0,
            reward_range: (0.0, 0.0),
            policy: None,
            feedback: HashMap::new(),
            pending: Vec::new(),
            split: BatchSplit::Even,
        };
        // DP-NCCL is action 0 everywhere: simulating it first sets the reward's scale and
        // makes it the incumbent, so the search never returns anything slower that fits.
        let dp_choice = vec![0u16; search.groups];
        search.dp = search.outcome(&dp_choice, AllReducePacking::Packed)?;
        search.best = Some((dp_choice.clone(), search.dp));
        // The same choice under the best packing (bucketed: Horovod) is the search's start:
        // backed into the tree as one visit of the root's DP edge, so once worse strategies
        // pull the root's mean down, that edge is preferred and its children, data parallelism
        // with one group changed, are tried. It is iteration 0, not counted in the budget.
        let (start, _) = search.simulate(&dp_choice)?;
        let start = search.choose_split(&dp_choice, start)?;
        search.cache.insert(dp_choice.clone(), start);
        search.record(&dp_choice, start);
        let reward = search.reward(start);
        search.reward_range = (reward.min(0.0), reward.max(0.0));
        search.nodes[0].edges[0].virtual_visits = 1;
        search.nodes[0].edges[0].child = 1;
        search.nodes.push(Node::new(search.actions.len()));
        search.backup(&[0], reward);
        Ok(search)
    }

    /// A search over `groups` METIS op groups of `problem`, numbered in `config`'s group order
    /// (METIS seeded by `config.seed`): the grouping every search of the crate starts from.
    pub fn grouped(problem: Problem<'a>, groups: usize, config: MctsConfig) -> Result<Mcts<'a>> {
        let op_group = ordered_groups(&problem, groups, config.seed, config.group_order)?;
        Mcts::new(problem, op_group, config)
    }

    pub fn actions(&self) -> &[GroupDecision] {
        &self.actions
    }

    /// With [`SearchSplit::Auto`], keep speed-proportional batch shares for the whole search
    /// when they make data parallelism (`dp_choice`) faster than `even` does; the start under
    /// the chosen shares.
    fn choose_split(&mut self, dp_choice: &[u16], even: Outcome) -> Result<Outcome> {
        if self.config.batch_split == SearchSplit::Even {
            return Ok(even);
        }
        self.split = BatchSplit::Proportional;
        let (proportional, _) = self.simulate(dp_choice)?;
        if proportional.better_than(&even) {
            return Ok(proportional);
        }
        self.split = BatchSplit::Even;
        Ok(even)
    }

    /// Take priors from `policy` instead of uniform ones. The root (nothing decided) and the
    /// start vertex (group 0 on DP) get theirs from the start's simulation, DP everywhere.
    pub fn with_policy(mut self, policy: &'a GnnPolicy) -> Result<Mcts<'a>> {
        self.policy = Some(VertexPriors::new(
            policy,
            &self.problem,
            &self.routes,
            &self.op_group,
            &self.actions,
            self.dp.time_us,
        ));
        let dp_choice = vec![0u16; self.groups];
        let (_, feedback) = self.simulate(&dp_choice)?;
        self.feedback
            .insert(dp_choice, feedback.expect("a policy is set"));
        self.pending = vec![(0, Vec::new()), (1, vec![0])];
        self.assign_priors();
        Ok(self)
    }

    /// DP-NCCL's simulated iteration time, µs: the reward's reference.
    pub fn dp_us(&self) -> f64 {
        self.dp.time_us
    }

    /// Op groups, decided in id order.
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// The simulated iteration time (µs) of a complete choice under its better packing, with
    /// the search's batch split; infinite when it runs out of memory. Takes `&self` so a
    /// teacher can score many choices in parallel (nothing is cached).
    pub fn choice_time(&self, choice: &[u16]) -> Result<f64> {
        let (o, _) = self.simulate(choice)?;
        Ok(if o.fits { o.time_us } else { f64::INFINITY })
    }

    /// A training target for the vertex `path` from outside the tree (a teacher's decision):
    /// the GNN input the search would score that vertex from (its completion, simulated for
    /// the runtime feedback) and `visits` as its distribution. Needs a policy.
    pub fn vertex_target(&self, path: &[u16], visits: Vec<(u16, u32)>) -> Result<VertexTarget> {
        let Some(policy) = self.policy.as_ref() else {
            return Err(Error::Other(
                "training targets need a search with a policy".into(),
            ));
        };
        let choice = self.complete_or_dp(path);
        let (_, feedback) = self.simulate(&choice)?;
        Ok(VertexTarget {
            graph: policy.graph(&choice, path.len(), &feedback.expect("a policy is set")),
            group: path.len(),
            visits,
        })
    }

    /// The priors of the root's actions (`None`: uniform).
    pub fn root_priors(&self) -> Option<&[f64]> {
        self.nodes[0].priors.as_deref()
    }

    /// Give every pending vertex the policy's priors for its next op group (in parallel).
    fn assign_priors(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        let Some(policy) = &self.policy else { return };
        // The model is Sync and each vertex's forward pass is independent; collecting keeps the
        // creation order, so the result does not depend on the thread count.
        let priors: Vec<(usize, Vec<f64>)> = pending
            .into_par_iter()
            .filter(|(_, path)| path.len() < self.groups)
            .map(|(node, path)| {
                let choice = self.complete_or_dp(&path);
                let feedback = &self.feedback[&choice];
                (node, policy.priors(&choice, path.len(), feedback))
            })
            .collect();
        for (node, p) in priors {
            self.nodes[node].priors = Some(p);
        }
    }

    /// The completion of `path`; the root (empty path) completes to DP everywhere.
    fn complete_or_dp(&self, path: &[u16]) -> Vec<u16> {
        if path.is_empty() {
            vec![0; self.groups]
        } else {
            self.complete(path)
        }
    }

    /// Run the search to its budget, calling `progress` after every batch.
    pub fn run(mut self, progress: impl FnMut(Progress)) -> Result<SearchResult> {
        let seconds = self.search(progress)?;
        self.finish(seconds)
    }

    /// Run the search, then read off TAG's training targets: every vertex with at least
    /// `min_visits` visits gives its visit distribution `π = softmax(ln N) = N / ΣN` with the
    /// GNN input it was scored from. Needs a policy ([`Mcts::with_policy`]): the input graph
    /// carries the runtime feedback only a policy makes the search keep.
    pub fn run_with_targets(
        mut self,
        min_visits: u32,
        progress: impl FnMut(Progress),
    ) -> Result<(SearchResult, Vec<VertexTarget>)> {
        if self.policy.is_none() {
            return Err(Error::Other(
                "training targets need a search with a policy".into(),
            ));
        }
        let seconds = self.search(progress)?;
        let targets = self.targets(min_visits);
        Ok((self.finish(seconds)?, targets))
    }

    /// The vertices with at least `min_visits` visits, depth first in action order.
    fn targets(&self, min_visits: u32) -> Vec<VertexTarget> {
        let policy = self.policy.as_ref().expect("checked by the caller");
        let mut out = Vec::new();
        let mut stack = vec![(0usize, Vec::<u16>::new())];
        while let Some((node, path)) = stack.pop() {
            let edges = &self.nodes[node].edges;
            let total: u32 = edges.iter().map(|e| e.visits).sum();
            if total < min_visits || path.len() >= self.groups {
                continue;
            }
            let choice = self.complete_or_dp(&path);
            if let Some(feedback) = self.feedback.get(&choice) {
                out.push(VertexTarget {
                    graph: policy.graph(&choice, path.len(), feedback),
                    group: path.len(),
                    visits: edges
                        .iter()
                        .enumerate()
                        .filter(|(_, e)| e.visits > 0)
                        .map(|(a, e)| (a as u16, e.visits))
                        .collect(),
                });
            }
            // Reverse so the stack pops children in ascending action order.
            for (a, e) in edges.iter().enumerate().rev() {
                if e.child != NO_CHILD && e.visits >= min_visits {
                    let mut child = path.clone();
                    child.push(a as u16);
                    stack.push((e.child as usize, child));
                }
            }
        }
        out
    }

    /// The search loop to the budget; the seconds it took.
    fn search(&mut self, mut progress: impl FnMut(Progress)) -> Result<f64> {
        let began = Instant::now();
        while self.iterations < self.config.iterations {
            if self
                .config
                .seconds
                .is_some_and(|s| began.elapsed().as_secs_f64() >= s)
            {
                break;
            }
            let room = self.config.iterations - self.iterations;
            self.batch(self.config.batch.max(1).min(room))?;
            progress(Progress {
                iterations: self.iterations,
                best_us: self
                    .best
                    .as_ref()
                    .filter(|(_, o)| o.fits)
                    .map(|(_, o)| o.time_us),
                dp_us: self.dp.time_us,
            });
        }
        Ok(began.elapsed().as_secs_f64())
    }

    /// Select `n` leaves with virtual loss, evaluate the new ones in parallel, back up in order.
    fn batch(&mut self, n: usize) -> Result<()> {
        let paths: Vec<Vec<u16>> = (0..n).map(|_| self.select()).collect();
        let complete: Vec<Vec<u16>> = paths.iter().map(|p| self.complete(p)).collect();
        let mut fresh: Vec<&Vec<u16>> = complete
            .iter()
            .filter(|c| !self.cache.contains_key(*c))
            .collect();
        fresh.sort();
        fresh.dedup();
        let this = &*self;
        let outcomes: Vec<Result<(Outcome, Option<Feedback>)>> =
            fresh.par_iter().map(|c| this.simulate(c)).collect();
        for (c, o) in fresh.into_iter().zip(outcomes) {
            let (o, feedback) = o?;
            self.cache.insert(c.clone(), o);
            if let Some(f) = feedback {
                self.feedback.insert(c.clone(), f);
            }
        }
        self.assign_priors();
        for (path, c) in paths.iter().zip(&complete) {
            let outcome = self.cache[c];
            self.iterations += 1;
            self.record(c, outcome);
            let reward = self.reward(outcome);
            self.reward_range = (
                self.reward_range.0.min(reward),
                self.reward_range.1.max(reward),
            );
            self.backup(path, reward);
        }
        Ok(())
    }

    /// Walk down by PUCT, adding virtual visits, until an edge with no child (expanded here)
    /// or a complete strategy.
    fn select(&mut self) -> Vec<u16> {
        let mut path = Vec::new();
        let mut node = 0usize;
        let mut parent_q = self.root_q();
        while path.len() < self.groups {
            let a = self.pick(node, parent_q);
            path.push(a as u16);
            let edge = &mut self.nodes[node].edges[a];
            edge.virtual_visits += 1;
            if edge.child == NO_CHILD {
                let child = self.nodes.len() as u32;
                self.nodes[node].edges[a].child = child;
                self.nodes.push(Node::new(self.actions.len()));
                if self.policy.is_some() {
                    self.pending.push((child as usize, path.clone()));
                }
                break;
            }
            if edge.visits > 0 {
                parent_q = edge.total / edge.visits as f64;
            }
            node = edge.child as usize;
        }
        path
    }

    /// Mean reward of every backed-up iteration (0, DP-NCCL's, before any).
    fn root_q(&self) -> f64 {
        let (n, total) = self.nodes[0]
            .edges
            .iter()
            .fold((0, 0.0), |(n, t), e| (n + e.visits, t + e.total));
        if n == 0 { 0.0 } else { total / n as f64 }
    }

    /// The PUCT argmax at `node`, ties broken uniformly at random. `parent_q` is the mean reward
    /// through `node`, the first-play value of its unvisited actions.
    fn pick(&mut self, node: usize, parent_q: f64) -> usize {
        let edges = &self.nodes[node].edges;
        let priors = self.nodes[node].priors.as_deref();
        let uniform = 1.0 / edges.len() as f64;
        let total: u32 = edges.iter().map(|e| e.visits + e.virtual_visits).sum();
        let sqrt_total = (total as f64).sqrt();
        let (low, high) = self.reward_range;
        // Rewards are unbounded above (T_DP / T − 1), so Q is rescaled to [0, 1] by the range
        // seen so far (as in MuZero) to keep the exploration constant meaningful.
        let scale = |q: f64| {
            if high > low {
                (q - low) / (high - low)
            } else {
                0.5
            }
        };
        let first_play = scale(parent_q);
        let (mut best, mut best_u, mut ties) = (0, f64::NEG_INFINITY, 0u32);
        for (a, e) in edges.iter().enumerate() {
            let n = e.visits + e.virtual_visits;
            // An unvisited action is assumed as good as its parent; a virtual visit counts as
            // the worst reward seen.
            let q = if n == 0 {
                first_play
            } else {
                scale((e.total + low * e.virtual_visits as f64) / n as f64)
            };
            let prior = priors.map_or(uniform, |p| p[a]);
            let u = q + self.config.exploration * prior * sqrt_total / (1.0 + n as f64);
            if u > best_u {
                (best, best_u, ties) = (a, u, 1);
            } else if u == best_u {
                // Reservoir sampling over the tied actions.
                ties += 1;
                if self.rng.random_range(0..ties) == 0 {
                    best = a;
                }
            }
        }
        best
    }

    /// Back up `reward` along `path`, removing its virtual visits.
    fn backup(&mut self, path: &[u16], reward: f64) {
        let mut node = 0usize;
        for &a in path {
            let e = &mut self.nodes[node].edges[a as usize];
            e.virtual_visits -= 1;
            e.visits += 1;
            e.total += reward;
            node = e.child as usize;
        }
    }

    /// Undecided groups take the first group's decision (TAG footnote 2).
    fn complete(&self, path: &[u16]) -> Vec<u16> {
        let mut c = path.to_vec();
        c.resize(self.groups, path[0]);
        c
    }

    fn reward(&self, o: Outcome) -> f64 {
        if o.fits {
            self.dp.time_us / o.time_us - 1.0
        } else {
            OOM_REWARD
        }
    }

    fn record(&mut self, choice: &[u16], o: Outcome) {
        if o.fits && self.dp.fits && o.time_us < self.dp.time_us && self.beat_dp_at.is_none() {
            self.beat_dp_at = Some(self.iterations);
        }
        let better = self.best.as_ref().is_none_or(|(_, b)| o.better_than(b));
        if better {
            self.best = Some((choice.to_vec(), o));
        }
    }

    fn evaluate(
        &self,
        choice: &[u16],
        packing: AllReducePacking,
    ) -> Result<(Strategy, Evaluation)> {
        let mut s = build_strategy(
            &self.op_group,
            &self.actions,
            choice,
            packing,
            self.problem.cluster.devices.len(),
        )?;
        s.batch_split = self.split;
        let e = simulate(
            &self.problem,
            &self.routes,
            &Placement::plain(s.clone(), ""),
        )?;
        Ok((s, e))
    }

    /// Simulate `choice` under each packing and keep the better (so the all-DP choice is
    /// Horovod-style when bucketing wins); with a policy, also the better one's runtime feedback.
    fn simulate(&self, choice: &[u16]) -> Result<(Outcome, Option<Feedback>)> {
        let mut best: Option<(Outcome, Evaluation)> = None;
        for packing in PACKINGS {
            let (_, e) = self.evaluate(choice, packing)?;
            let o = outcome_of(&e, packing);
            if best.as_ref().is_none_or(|(b, _)| o.better_than(b)) {
                best = Some((o, e));
            }
        }
        let (o, e) = best.expect("at least one packing");
        let feedback = self.policy.as_ref().map(|p| p.feedback(&e));
        Ok((o, feedback))
    }

    fn outcome(&self, choice: &[u16], packing: AllReducePacking) -> Result<Outcome> {
        let (_, e) = self.evaluate(choice, packing)?;
        Ok(outcome_of(&e, packing))
    }

    fn finish(self, seconds: f64) -> Result<SearchResult> {
        let started = Instant::now();
        let (choice, best) = self.best.clone().expect("DP is evaluated first");
        let (strategy, evaluation) = self.evaluate(&choice, best.packing)?;
        let (strategy, evaluation) = if self.config.sfb_check {
            self.with_sfb_if_faster(strategy, evaluation)?
        } else {
            (strategy, evaluation)
        };
        let seconds = seconds + started.elapsed().as_secs_f64();
        let mut group_ops = vec![0; self.groups];
        for &g in &self.op_group {
            group_ops[g as usize] += 1;
        }
        Ok(SearchResult {
            strategy,
            evaluation,
            fits: best.fits,
            decisions: choice
                .iter()
                .map(|&a| self.actions[a as usize].clone())
                .collect(),
            group_ops,
            dp_us: self.dp.time_us,
            dp_fits: self.dp.fits,
            beat_dp_at: self.beat_dp_at,
            iterations: self.iterations,
            simulated: self.cache.len(),
            seconds,
            actions: self.actions.len(),
        })
    }

    /// TAG's double check of replicated groups (§4.2.3): compile `strategy` again with
    /// sufficient-factor broadcasting wherever the SFB ILP says it beats AllReduce, and keep that
    /// version when it fits and is faster. Done once, on the search's result: the ILP takes
    /// 0.3–2 s on a zoo model, too long for every leaf.
    fn with_sfb_if_faster(
        &self,
        strategy: Strategy,
        evaluation: Evaluation,
    ) -> Result<(Strategy, Evaluation)> {
        let mut sfb = strategy.clone();
        sfb.sfb = true;
        let e = simulate(
            &self.problem,
            &self.routes,
            &Placement::plain(sfb.clone(), ""),
        )?;
        let before = outcome_of(&evaluation, strategy.allreduce);
        if outcome_of(&e, strategy.allreduce).better_than(&before) {
            Ok((sfb, e))
        } else {
            Ok((strategy, evaluation))
        }
    }
}

fn outcome_of(e: &Evaluation, packing: AllReducePacking) -> Outcome {
    Outcome {
        time_us: e.report.iteration_us,
        fits: e.result.oom.is_empty(),
        packing,
    }
}

/// Group with METIS and search: what `topoplace place` and the `tag` placer run.
pub fn search(
    p: &Problem,
    groups: usize,
    config: MctsConfig,
    progress: impl FnMut(Progress),
) -> Result<SearchResult> {
    search_with(p, groups, config, None, progress)
}

/// [`search`] with priors from `policy` (`None`: uniform).
pub fn search_with(
    p: &Problem,
    groups: usize,
    config: MctsConfig,
    policy: Option<&GnnPolicy>,
    progress: impl FnMut(Progress),
) -> Result<SearchResult> {
    let mut mcts = Mcts::grouped(*p, groups, config)?;
    if let Some(policy) = policy {
        mcts = mcts.with_policy(policy)?;
    }
    mcts.run(progress)
}
