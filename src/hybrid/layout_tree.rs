//! TAG's tree search over hybrid layouts: the decisions of a [`Layout`] taken one at a time — the
//! GPU types and their pipeline order, then each type's stage count and tensor-parallel degree,
//! the ZeRO stage, the micro-batch count — with PUCT (AlphaZero's rule, as TAG's tree uses it)
//! choosing among a decision's actions by their prior probability and the mean reward below them.
//!
//! Each walk ends at a complete layout, which is simulated once ([`Planner::judge`], each stage
//! with the cheapest recomputation that fits) and whose reward `ln(T_bound / T)` is backed up the
//! path; `T_bound` is the iteration if every GPU computed its share of the layers with nothing
//! else, and a plan that does not fit scores one less than its time would. The budget counts
//! simulated layouts, so priors that point at good layouts find them in fewer simulations; the
//! priors come from a [`LayoutPriors`] (a trained policy, or [`UniformPriors`]).

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::error::Result;
use crate::graph::Dtype;

use super::layout::{Layout, stage_counts};
use super::layout_features::{
    Decision, LAYOUT_FEATURES, LayoutContext, PartialLayout, PoolFacts, layout_features,
};
use super::plan::ZeroStage;
use super::planner::{Planned, Planner, Pool, divisors};

/// Prior probabilities over a decision's actions, each given by its features.
pub trait LayoutPriors {
    /// One probability per action, summing to 1.
    fn priors(&self, actions: &[[f32; LAYOUT_FEATURES]]) -> Vec<f64>;
}

/// Every action of a decision equally likely.
#[derive(Debug, Clone, Copy, Default)]
pub struct UniformPriors;

impl LayoutPriors for UniformPriors {
    fn priors(&self, actions: &[[f32; LAYOUT_FEATURES]]) -> Vec<f64> {
        vec![1.0 / actions.len().max(1) as f64; actions.len()]
    }
}

/// PUCT's exploration constant (rewards are log speed ratios).
const C_PUCT: f64 = 0.5;
/// The reward of a layout that cannot be built or simulated.
const INVALID: f64 = -6.0;
/// How much less a plan that does not fit scores than its time would.
const NOT_FITTING: f64 = 1.0;
/// Walks per simulation allowed before the search stops (a walk ending at a layout that cannot be
/// built costs no simulation, but it costs time).
const WALKS_PER_SIMULATION: usize = 20;

/// What a layout tree search found.
#[derive(Debug, Clone)]
pub struct LayoutSearch {
    /// The best plan simulated (fitting first, then fastest).
    pub best: Option<Planned>,
    /// The layout of `best`.
    pub layout: Option<PartialLayout>,
    /// Layouts simulated.
    pub simulated: usize,
}

/// One decision on the way to a layout, for training a policy: the features of every action and
/// the one taken.
#[derive(Debug, Clone, PartialEq)]
pub struct LayoutSample {
    /// Features of each action.
    pub actions: Vec<[f32; LAYOUT_FEATURES]>,
    /// The index of the action taken.
    pub taken: usize,
}

/// The tree's view of one planning problem: the pools, their facts and the decisions' actions.
pub(crate) struct LayoutSpace {
    pub(crate) pools: Vec<Pool>,
    pub(crate) context: LayoutContext,
    tp_degrees: Vec<usize>,
}

impl LayoutSpace {
    /// The space of `planner`'s model, cluster and batch.
    pub(crate) fn new(planner: &mut Planner) -> Result<LayoutSpace> {
        let pools = planner.pools()?;
        let batch = planner.global_batch;
        let precision = planner.precision();
        let dtype = if precision.is_mixed() {
            Dtype::Half
        } else {
            Dtype::F32
        };
        let facts = pools
            .iter()
            .map(|p| {
                let spec = &planner.cluster.devices[p.groups[0][0]].gpu;
                PoolFacts {
                    gpus: p.groups.iter().map(Vec::len).sum(),
                    memory_bytes: spec.memory_gib * (1u64 << 30) as f64,
                    peak_tflops: precision.matmul_tflops(dtype, spec),
                    per_machine: p.per_machine(),
                }
            })
            .collect();
        let tp_degrees = [1, 2, 4, 8]
            .into_iter()
            .filter(|&t| planner.tp_splits_evenly(t))
            .collect();
        let layers = planner.layers();
        let model = planner.model(batch)?;
        let params = model.params();
        let context = LayoutContext {
            pools: facts,
            layers,
            batch,
            seq: model.seq(),
            params,
            hidden: (params / (12.0 * layers.max(1) as f64)).sqrt(),
            states: model.states,
        };
        Ok(LayoutSpace {
            pools,
            context,
            tp_degrees,
        })
    }

    /// The layouts each action of `p`'s next decision leads to.
    pub(crate) fn children(&self, p: &PartialLayout) -> Vec<PartialLayout> {
        let Some(decision) = p.next() else {
            return Vec::new();
        };
        let with = |change: &dyn Fn(&mut PartialLayout)| {
            let mut c = p.clone();
            change(&mut c);
            c
        };
        match decision {
            Decision::Types => type_orders(self.pools.len())
                .into_iter()
                .map(|types| with(&|c| c.types = types.clone()))
                .collect(),
            Decision::Stages(t) => {
                let depth: usize = p.types.iter().map(|&u| p.stages[u]).sum();
                stage_counts(&self.pools[t], self.context.layers)
                    .into_iter()
                    .filter(|&k| depth + k <= self.context.layers)
                    .map(|k| with(&|c| c.stages[t] = k))
                    .collect()
            }
            Decision::Tp(t) => {
                let pool = &self.context.pools[t];
                let per = pool.gpus / p.stages[t].max(1);
                let fitting: Vec<usize> = self
                    .tp_degrees
                    .iter()
                    .copied()
                    .filter(|&d| {
                        per.is_multiple_of(d) && (d == 1 || pool.per_machine.is_multiple_of(d))
                    })
                    .collect();
                fitting
                    .into_iter()
                    .map(|d| with(&|c| c.tp[t] = d))
                    .collect()
            }
            Decision::Zero => [
                ZeroStage::None,
                ZeroStage::Optimizer,
                ZeroStage::Gradients,
                ZeroStage::Parameters,
            ]
            .into_iter()
            .map(|z| with(&|c| c.zero = Some(z)))
            .collect(),
            Decision::MicroBatches => divisors(self.context.batch)
                .into_iter()
                .map(|m| with(&|c| c.micro_batches = m))
                .collect(),
        }
    }

    /// The features of each of `children`, reached from a layout whose next decision is
    /// `decision`.
    fn features(
        &self,
        children: &[PartialLayout],
        decision: Decision,
    ) -> Vec<[f32; LAYOUT_FEATURES]> {
        children
            .iter()
            .map(|c| layout_features(&self.context, c, decision))
            .collect()
    }

    /// The decisions that lead to `target` (a complete layout), each with its actions' features,
    /// as far as the tree's actions can reach it.
    pub(crate) fn path_to(&self, target: &Layout) -> Vec<LayoutSample> {
        let mut p = PartialLayout::empty(self.pools.len());
        let mut samples = Vec::new();
        while let Some(decision) = p.next() {
            let children = self.children(&p);
            let on_path = |c: &PartialLayout| match decision {
                Decision::Types => c.types == target.types,
                Decision::Stages(t) => c.stages[t] == target.stages[t],
                Decision::Tp(t) => c.tp[t] == target.tp[t],
                Decision::Zero => c.zero == Some(target.zero),
                Decision::MicroBatches => c.micro_batches == target.micro_batches,
            };
            let Some(taken) = children.iter().position(on_path) else {
                break;
            };
            samples.push(LayoutSample {
                actions: self.features(&children, decision),
                taken,
            });
            p = children[taken].clone();
        }
        samples
    }
}

/// The pipeline orders of GPU types the tree tries (pools are numbered fastest first): every
/// subset fastest first and, with more than one type, slowest first; above four types only each
/// type alone and the fastest `k` for every `k`.
fn type_orders(pools: usize) -> Vec<Vec<usize>> {
    let subsets: Vec<Vec<usize>> = if pools <= 4 {
        (1..1usize << pools)
            .map(|mask| (0..pools).filter(|t| mask & (1 << t) != 0).collect())
            .collect()
    } else {
        (0..pools)
            .map(|t| vec![t])
            .chain((2..=pools).map(|k| (0..k).collect()))
            .collect()
    };
    let mut orders = Vec::with_capacity(2 * subsets.len());
    for s in subsets {
        if s.len() > 1 {
            orders.push(s.iter().rev().copied().collect());
        }
        orders.push(s);
    }
    orders
}

/// The complete layout `p` as the joint search's [`Layout`].
pub(crate) fn complete(p: &PartialLayout) -> Layout {
    Layout {
        types: p.types.clone(),
        stages: p.stages.clone(),
        tp: p.tp.clone(),
        zero: p.zero.unwrap_or(ZeroStage::None),
        micro_batches: p.micro_batches,
    }
}

/// One node of the tree: a partial layout's actions with their statistics.
struct Node {
    children: Vec<PartialLayout>,
    priors: Vec<f64>,
    visits: Vec<u32>,
    rewards: Vec<f64>,
    next: Vec<Option<usize>>,
    /// Actions whose every layout below has been simulated: walks no longer take them, so each
    /// walk ends at a layout not yet simulated.
    done: Vec<bool>,
}

impl Node {
    fn exhausted(&self) -> bool {
        self.done.iter().all(|&d| d)
    }

    fn visits(&self) -> u32 {
        self.visits.iter().sum()
    }

    /// PUCT's choice; unvisited actions are valued at the node's mean reward, ties broken by
    /// `rng`.
    fn select(&self, rng: &mut StdRng) -> usize {
        let n = self.visits();
        let mean = if n == 0 {
            0.0
        } else {
            self.rewards.iter().sum::<f64>() / n as f64
        };
        let sqrt_n = (n as f64 + 1.0).sqrt();
        let scores: Vec<f64> = (0..self.children.len())
            .map(|a| {
                if self.done[a] {
                    return f64::NEG_INFINITY;
                }
                let v = self.visits[a];
                let q = if v == 0 {
                    mean
                } else {
                    self.rewards[a] / v as f64
                };
                q + C_PUCT * self.priors[a] * sqrt_n / (1.0 + v as f64)
            })
            .collect();
        let best = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let ties: Vec<usize> = (0..scores.len())
            .filter(|&a| scores[a] >= best - 1e-12)
            .collect();
        ties[rng.random_range(0..ties.len())]
    }
}

/// The layout tree over `planner`'s problem with `priors`, until `budget` layouts are simulated
/// or the planner's deadline passes; ties among actions are broken by `seed`.
pub fn layout_search(
    planner: &mut Planner,
    priors: &dyn LayoutPriors,
    budget: usize,
    seed: u64,
) -> Result<LayoutSearch> {
    let space = LayoutSpace::new(planner)?;
    Ok(search_in(planner, &space, priors, budget, seed))
}

/// [`layout_search`] over a space already built from `planner`.
pub(crate) fn search_in(
    planner: &mut Planner,
    space: &LayoutSpace,
    priors: &dyn LayoutPriors,
    budget: usize,
    seed: u64,
) -> LayoutSearch {
    let mut tree = Tree {
        space,
        priors,
        nodes: Vec::new(),
        rewards: HashMap::new(),
        rng: StdRng::seed_from_u64(seed),
        bound_us: bound_us(space),
        found: LayoutSearch {
            best: None,
            layout: None,
            simulated: 0,
        },
    };
    let root = tree.expand(PartialLayout::empty(space.pools.len()));
    let mut walks = 0;
    while tree.found.simulated < budget
        && walks < WALKS_PER_SIMULATION * budget.max(1)
        && !tree.nodes[root].exhausted()
        && !planner.out_of_time()
    {
        tree.walk(planner, root);
        walks += 1;
    }
    tree.found
}

/// The iteration if every GPU computed its share of the layers and nothing else, µs.
fn bound_us(space: &LayoutSpace) -> f64 {
    let rate: f64 = space
        .pools
        .iter()
        .zip(&space.context.pools)
        .map(|(p, f)| f.gpus as f64 / p.layer_us)
        .sum();
    space.context.layers as f64 / rate.max(1e-12)
}

struct Tree<'a> {
    space: &'a LayoutSpace,
    priors: &'a dyn LayoutPriors,
    nodes: Vec<Node>,
    rewards: HashMap<PartialLayout, f64>,
    rng: StdRng,
    bound_us: f64,
    found: LayoutSearch,
}

impl Tree<'_> {
    fn expand(&mut self, p: PartialLayout) -> usize {
        let children = self.space.children(&p);
        let priors = match p.next() {
            Some(d) if !children.is_empty() => {
                self.priors.priors(&self.space.features(&children, d))
            }
            _ => Vec::new(),
        };
        let a = children.len();
        self.nodes.push(Node {
            children,
            priors,
            visits: vec![0; a],
            rewards: vec![0.0; a],
            next: vec![None; a],
            done: vec![false; a],
        });
        self.nodes.len() - 1
    }

    /// One walk from `root` to a layout not simulated yet (or a dead end), backing up its
    /// reward and marking what it exhausted.
    fn walk(&mut self, planner: &mut Planner, root: usize) {
        let mut path: Vec<(usize, usize)> = Vec::new();
        let mut node = root;
        let reward = loop {
            if self.nodes[node].exhausted() {
                break INVALID;
            }
            let a = self.nodes[node].select(&mut self.rng);
            path.push((node, a));
            let child = self.nodes[node].children[a].clone();
            if child.next().is_none() {
                self.nodes[node].done[a] = true;
                break self.reward(planner, child);
            }
            node = match self.nodes[node].next[a] {
                Some(n) => n,
                None => {
                    let n = self.expand(child);
                    self.nodes[node].next[a] = Some(n);
                    n
                }
            };
        };
        for &(n, a) in path.iter().rev() {
            self.nodes[n].visits[a] += 1;
            self.nodes[n].rewards[a] += reward;
            if let Some(c) = self.nodes[n].next[a]
                && self.nodes[c].exhausted()
            {
                self.nodes[n].done[a] = true;
            }
        }
    }

    /// The reward of the complete layout `p`, simulated once.
    fn reward(&mut self, planner: &mut Planner, p: PartialLayout) -> f64 {
        if let Some(&r) = self.rewards.get(&p) {
            return r;
        }
        let layout = complete(&p);
        let planned = layout
            .plan(
                &self.space.pools,
                self.space.context.layers,
                self.space.context.batch,
            )
            .and_then(|plan| {
                self.found.simulated += 1;
                planner.judge(plan)
            });
        let r = match planned {
            None => INVALID,
            Some(planned) => {
                let t = planned.report.iteration_us;
                let penalty = if planned.report.fits() {
                    0.0
                } else {
                    NOT_FITTING
                };
                let r = (self.bound_us / t).ln() - penalty;
                if planned.beats(self.found.best.as_ref()) {
                    self.found.best = Some(planned);
                    self.found.layout = Some(p.clone());
                }
                if r.is_finite() {
                    r.max(INVALID)
                } else {
                    INVALID
                }
            }
        };
        self.rewards.insert(p, r);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::parse_cluster;
    use crate::cost::CostModel;
    use crate::precision::Precision;
    use crate::zoo::{Framework, ZooOptions};

    #[test]
    fn type_orders_cover_every_subset_both_ways() {
        let orders = type_orders(2);
        assert_eq!(orders, vec![vec![0], vec![1], vec![1, 0], vec![0, 1]]);
        assert_eq!(type_orders(3).len(), 7 + 4);
        // Above four types: each alone, then the fastest k both ways for k = 2..=5.
        assert_eq!(type_orders(5).len(), 5 + 2 * 4);
    }

    /// Two machines of different GPU types: a space of a few hundred layouts.
    fn two_types() -> crate::cluster::Cluster {
        parse_cluster(
            "name = \"two\"\n[[machine]]\nname = \"a\"\ngpu = \"A100-80GB\"\ngpus = 4\n\
             intra_bandwidth = \"300 GB/s\"\ninterconnect = \"nvswitch\"\nnic = \"200 Gbps\"\n\
             [[machine]]\nname = \"b\"\ngpu = \"A100-40GB\"\ngpus = 2\n\
             intra_bandwidth = \"16 GB/s\"\nnic = \"100 Gbps\"\n",
            "<test>",
        )
        .unwrap()
    }

    fn every_layout(space: &LayoutSpace, p: PartialLayout, out: &mut Vec<PartialLayout>) {
        if p.next().is_none() {
            out.push(p);
            return;
        }
        for c in space.children(&p) {
            every_layout(space, c, out);
        }
    }

    #[test]
    fn a_budget_past_the_space_finds_the_brute_force_best_simulating_each_layout_once() {
        let cluster = two_types();
        let cost = CostModel {
            precision: Precision::Bf16,
            ..CostModel::default()
        };
        let opts = ZooOptions {
            framework: Framework::Pytorch,
            seq: Some(512),
            ..ZooOptions::default()
        };
        let mut planner =
            Planner::new("llama-1b", &opts, Precision::Bf16, &cluster, &cost, 8).unwrap();
        let space = LayoutSpace::new(&mut planner).unwrap();
        let mut all = Vec::new();
        every_layout(&space, PartialLayout::empty(space.pools.len()), &mut all);
        let (layers, batch) = (space.context.layers, space.context.batch);
        let mut brute: Option<Planned> = None;
        let mut buildable = 0;
        for l in &all {
            if let Some(plan) = complete(l).plan(&space.pools, layers, batch) {
                buildable += 1;
                if let Some(p) = planner.judge(plan)
                    && p.beats(brute.as_ref())
                {
                    brute = Some(p);
                }
            }
        }
        assert!(buildable > 100, "{buildable} layouts");
        let found = layout_search(&mut planner, &UniformPriors, 100_000, 3).unwrap();
        assert_eq!(found.simulated, buildable);
        let (tree, brute) = (found.best.unwrap(), brute.unwrap());
        assert!(tree.report.fits());
        assert_eq!(tree.report.iteration_us, brute.report.iteration_us);
        // A budget below the space is kept to.
        let found = layout_search(&mut planner, &UniformPriors, 25, 3).unwrap();
        assert_eq!(found.simulated, 25);
    }

    #[test]
    fn the_path_to_a_layout_retraces_it_and_every_feature_is_bounded() {
        let cluster = two_types();
        let cost = CostModel::default();
        let opts = ZooOptions {
            seq: Some(256),
            ..ZooOptions::default()
        };
        let mut planner =
            Planner::new("llama-1b", &opts, Precision::Fp32, &cluster, &cost, 16).unwrap();
        let found = layout_search(&mut planner, &UniformPriors, 60, 1).unwrap();
        let target = complete(&found.layout.unwrap());
        let space = LayoutSpace::new(&mut planner).unwrap();
        let samples = space.path_to(&target);
        let mut p = PartialLayout::empty(space.pools.len());
        for s in &samples {
            let children = space.children(&p);
            assert_eq!(s.actions.len(), children.len());
            assert!(
                s.actions
                    .iter()
                    .flatten()
                    .all(|x| x.is_finite() && (0.0..=1.5).contains(x))
            );
            p = children[s.taken].clone();
        }
        assert!(p.next().is_none(), "the path stops short at {p:?}");
        assert_eq!(complete(&p), target);
    }
}
