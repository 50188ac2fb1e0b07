//! The search tree: vertices, their action edges and statistics, PUCT selection at a vertex,
//! the backup of a reward, and the outcome of a simulated leaf.

use rand::RngExt;
use rand::rngs::StdRng;

use crate::evaluate::beats;
use crate::strategy::AllReducePacking;

/// Statistics of one action out of a vertex.
#[derive(Debug, Clone, Copy)]
pub(super) struct Edge {
    pub(super) visits: u32,
    /// Sum of backed-up rewards.
    pub(super) total: f64,
    /// Visits of selections still being evaluated.
    pub(super) virtual_visits: u32,
    pub(super) child: u32,
}

pub(super) const NO_CHILD: u32 = u32::MAX;

impl Default for Edge {
    fn default() -> Edge {
        Edge {
            visits: 0,
            total: 0.0,
            virtual_visits: 0,
            child: NO_CHILD,
        }
    }
}

pub(super) struct Node {
    pub(super) edges: Vec<Edge>,
    /// The policy's priors over the actions; `None`: uniform.
    pub(super) priors: Option<Vec<f64>>,
    /// Whether the first selection here follows the priors. TAG's vertices leave it to chance:
    /// with no visit yet PUCT's exploration term is 0 for every action, so the first is a tie
    /// broken at random; the vertices below a pipeline frame count the visit that reached them
    /// instead (AlphaZero's √N of the parent), so their first leaf is the move their priors rank
    /// first, not any of them.
    pub(super) first_by_prior: bool,
}

impl Node {
    pub(super) fn new(actions: usize) -> Node {
        Node {
            priors: None,
            first_by_prior: false,
            edges: vec![Edge::default(); actions],
        }
    }
}

/// One simulated complete strategy.
#[derive(Clone, Copy)]
pub(super) struct Outcome {
    pub(super) time_us: f64,
    pub(super) fits: bool,
    pub(super) packing: AllReducePacking,
}

impl Outcome {
    /// Fitting first, then faster.
    pub(super) fn better_than(&self, other: &Outcome) -> bool {
        beats(self.time_us, self.fits, other.time_us, other.fits)
    }
}

/// The vertices (the root first) and the range of the rewards backed up through them.
pub(super) struct Tree {
    pub(super) nodes: Vec<Node>,
    /// Lowest and highest reward backed up (DP-NCCL's 0 included).
    pub(super) reward_range: (f64, f64),
}

impl Tree {
    /// A root with `actions` edges and nothing backed up.
    pub(super) fn new(actions: usize) -> Tree {
        Tree {
            nodes: vec![Node::new(actions)],
            reward_range: (0.0, 0.0),
        }
    }

    /// Widen the reward range to hold `reward`.
    pub(super) fn note_reward(&mut self, reward: f64) {
        self.reward_range = (
            self.reward_range.0.min(reward),
            self.reward_range.1.max(reward),
        );
    }

    /// Mean reward of every backed-up iteration (0, DP-NCCL's, before any).
    pub(super) fn root_q(&self) -> f64 {
        let (n, total) = self.nodes[0]
            .edges
            .iter()
            .fold((0, 0.0), |(n, t), e| (n + e.visits, t + e.total));
        if n == 0 { 0.0 } else { total / n as f64 }
    }

    /// The PUCT argmax over the first `open` edges of `node`, ties broken uniformly at random.
    /// `parent_q` is the mean reward through `node`, the first-play value of its unvisited
    /// actions.
    pub(super) fn pick(
        &self,
        node: usize,
        parent_q: f64,
        open: usize,
        exploration: f64,
        rng: &mut StdRng,
    ) -> usize {
        let edges = &self.nodes[node].edges;
        let priors = self.nodes[node].priors.as_deref();
        let uniform = 1.0 / edges.len() as f64;
        let total: u32 = edges.iter().map(|e| e.visits + e.virtual_visits).sum();
        let reached = u32::from(self.nodes[node].first_by_prior);
        let sqrt_total = (total.max(reached) as f64).sqrt();
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
        for (a, e) in edges.iter().enumerate().take(open) {
            let n = e.visits + e.virtual_visits;
            // An unvisited action is assumed as good as its parent; a virtual visit counts as
            // the worst reward seen.
            let q = if n == 0 {
                first_play
            } else {
                scale((e.total + low * e.virtual_visits as f64) / n as f64)
            };
            let prior = priors.map_or(uniform, |p| p[a]);
            let u = q + exploration * prior * sqrt_total / (1.0 + n as f64);
            if u > best_u {
                (best, best_u, ties) = (a, u, 1);
            } else if u == best_u {
                // Reservoir sampling over the tied actions.
                ties += 1;
                if rng.random_range(0..ties) == 0 {
                    best = a;
                }
            }
        }
        best
    }

    /// Back up `reward` along `path`, removing its virtual visits.
    pub(super) fn backup(&mut self, path: &[u16], reward: f64) {
        let mut node = 0usize;
        for &a in path {
            let e = &mut self.nodes[node].edges[a as usize];
            e.virtual_visits -= 1;
            e.visits += 1;
            e.total += reward;
            node = e.child as usize;
        }
    }
}
