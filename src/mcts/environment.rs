//! TAG's tree as an episodic decision process, for learning research outside the search: an
//! episode decides the op groups one by one, in the search's order, each step taking one of the
//! tree's actions (a set of device groups and a replication option); the observation is the
//! heterogeneous graph the GNN scores at that vertex, and the reward at the last step is the
//! search's: DP-NCCL's time over the strategy's, less one (−1 when it runs out of memory).
//!
//! It holds no borrow of the problem: each call is given it, so an owner (the Python package)
//! can keep the inputs and the environment side by side.

use super::actions::{PACKINGS, Shares, actions, build_strategy};
use super::config::OOM_REWARD;
use super::grouping::metis_groups;
use super::measure::under_best_packing;
use crate::error::{InputError, Result};
use crate::evaluate::{Evaluation, Placement, evaluate_strategy};
use crate::gnn::features::{Feedback, StaticFeatures};
use crate::gnn::{GnnPolicy, HeteroGraph, Slice};
use crate::problem::Problem;
use crate::sim::Order;
use crate::strategy::{AllReducePacking, BatchSplit, GroupDecision, Strategy};

/// What the agent sees before a step.
pub struct Observation {
    /// The GNN's input at the vertex: op groups and device groups with their features, the
    /// undecided groups completed with the first group's action (TAG's footnote 2), the
    /// completion's simulation as runtime feedback.
    pub graph: HeteroGraph,
    /// The op group this step decides.
    pub group: usize,
}

/// What a step returns.
pub struct Transition {
    /// The next vertex; `None` once every group is decided.
    pub observation: Option<Observation>,
    /// 0 before the last step; then the search's reward.
    pub reward: f64,
    /// The simulated iteration time of the completed choice after this step, µs.
    pub iteration_us: f64,
    /// Whether that completion fits in every GPU's memory.
    pub fits: bool,
}

/// An episode's state: the op groups, the actions, and the choices made so far.
pub struct Environment {
    op_group: Vec<u32>,
    groups: usize,
    actions: Vec<GroupDecision>,
    features: StaticFeatures,
    dp_us: f64,
    split: BatchSplit,
    packings: Vec<AllReducePacking>,
    choice: Vec<u16>,
}

impl Environment {
    /// An environment over `groups` METIS op groups of `p` (seed 0, as `place` groups), whose
    /// replicas share the batch as `split` says, their gradients synchronised by `packing`
    /// (`None`: the faster of the tree's two, [`PACKINGS`], as the search does). The reward's
    /// reference is DP-NCCL, with even shares, whatever the split.
    pub fn new(
        p: &Problem,
        groups: usize,
        split: BatchSplit,
        packing: Option<AllReducePacking>,
    ) -> Result<Environment> {
        let op_group = metis_groups(p, groups, 0)?;
        let groups = op_group.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
        let actions = actions(p.cluster);
        let dp = vec![0u16; groups];
        let even = BatchSplit::Even;
        let strategy = strategy_of(p, &op_group, &actions, &dp, AllReducePacking::Packed, even)?;
        let dp_us = evaluate_strategy(p, &strategy, Order::Fifo)?
            .report
            .iteration_us;
        let features = StaticFeatures::new(p, &op_group, &actions, dp_us);
        Ok(Environment {
            op_group,
            groups,
            actions,
            features,
            dp_us,
            split,
            packings: packing.map_or(PACKINGS.to_vec(), |p| vec![p]),
            choice: Vec::new(),
        })
    }

    /// The op groups an episode decides.
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// The tree's actions, by index.
    pub fn actions(&self) -> &[GroupDecision] {
        &self.actions
    }

    /// The device groups and option of every action, as the GNN's decoder scores them.
    pub fn slices(&self) -> &[Slice] {
        &self.features.slices
    }

    /// The METIS op group of every op.
    pub fn op_group(&self) -> &[u32] {
        &self.op_group
    }

    /// DP-NCCL's simulated iteration time, µs: the reward's reference.
    pub fn dp_us(&self) -> f64 {
        self.dp_us
    }

    /// The actions chosen so far, by op group.
    pub fn choice(&self) -> &[u16] {
        &self.choice
    }

    /// Starts an episode: nothing decided.
    pub fn reset(&mut self, p: &Problem) -> Result<Observation> {
        self.choice.clear();
        let (_, e) = self.simulate(p, &vec![0; self.groups])?;
        Ok(self.observe(&vec![0; self.groups], &e))
    }

    /// Decides the next op group with action `action`.
    pub fn step(&mut self, p: &Problem, action: usize) -> Result<Transition> {
        if self.choice.len() == self.groups {
            return Err(InputError::new("<env>", "step", "the episode is over: reset it").into());
        }
        if action >= self.actions.len() {
            let why = format!(
                "{action} is not an action (0 to {})",
                self.actions.len() - 1
            );
            return Err(InputError::new("<env>", "action", why).into());
        }
        self.choice.push(action as u16);
        let completed = self.completed();
        let (_, e) = self.simulate(p, &completed)?;
        let fits = e.report.oom.is_empty();
        let iteration_us = e.report.iteration_us;
        let done = self.choice.len() == self.groups;
        let reward = match (done, fits) {
            (false, _) => 0.0,
            (true, true) => self.dp_us / iteration_us - 1.0,
            (true, false) => OOM_REWARD,
        };
        Ok(Transition {
            observation: (!done).then(|| self.observe(&completed, &e)),
            reward,
            iteration_us,
            fits,
        })
    }

    /// `policy`'s priors over every action at the vertex `observation` shows (what the search
    /// gives a new vertex's edges).
    pub fn priors(&self, policy: &GnnPolicy, observation: &Observation) -> Vec<f32> {
        policy.priors(&observation.graph, observation.group, &self.features.slices)
    }

    /// The strategy of the choice so far, completed, under the AllReduce packing that
    /// simulates faster (or the one asked for): what the search would return for it.
    pub fn strategy(&self, p: &Problem) -> Result<Strategy> {
        Ok(self.simulate(p, &self.completed())?.0)
    }

    /// The choice so far with the undecided groups on the first group's action (all on DP
    /// before any step).
    fn completed(&self) -> Vec<u16> {
        let mut c = self.choice.clone();
        c.resize(self.groups, self.choice.first().copied().unwrap_or(0));
        c
    }

    fn observe(&self, completed: &[u16], e: &Evaluation) -> Observation {
        let feedback = Feedback::new(&self.op_group, self.groups, e);
        let decided = self.choice.len();
        Observation {
            graph: self.features.graph(completed, decided, &feedback),
            group: decided,
        }
    }

    /// `choice` under the faster of the packings, as the search measures a leaf.
    fn simulate(&self, p: &Problem, choice: &[u16]) -> Result<(Strategy, Evaluation)> {
        let (groups, actions) = (&self.op_group, &self.actions);
        let mut strategy = strategy_of(p, groups, actions, choice, self.packings[0], self.split)?;
        let (packing, e) =
            under_best_packing(p, Placement::plain(strategy.clone(), ""), &self.packings)?;
        strategy.allreduce = packing;
        Ok((strategy, e))
    }
}

fn strategy_of(
    p: &Problem,
    op_group: &[u32],
    actions: &[GroupDecision],
    choice: &[u16],
    packing: AllReducePacking,
    split: BatchSplit,
) -> Result<Strategy> {
    let shares = Shares { split, other: &[] };
    let devices = p.cluster.devices.len();
    build_strategy(op_group, actions, choice, packing, shares, devices)
}
