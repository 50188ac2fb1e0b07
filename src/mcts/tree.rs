//! The search tree: vertices, their action edges, and the outcome of a simulated leaf.

use rand::RngExt;

use super::search::Mcts;
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

/// PUCT selection with virtual loss, and the backup of a leaf's reward.
impl Mcts<'_> {
    /// Walk down by PUCT, adding virtual visits, until an edge with no child (expanded here)
    /// or a complete strategy (a pipeline's leaf spends one of the pipeline leaves left).
    pub(super) fn select(&mut self) -> Vec<u16> {
        let path = self.walk_down();
        self.spend_pipeline_leaf(&path);
        path
    }

    fn walk_down(&mut self) -> Vec<u16> {
        let mut path = Vec::new();
        let mut node = 0usize;
        let mut parent_q = self.root_q();
        while path.is_empty() || path.len() < self.depth_of(&path) {
            let a = self.pick(node, parent_q);
            path.push(a as u16);
            let Some(child) = self.enter(node, &path) else {
                break;
            };
            let edge = &self.nodes[node].edges[a];
            if edge.visits > 0 {
                parent_q = edge.total / edge.visits as f64;
            }
            node = child;
        }
        path
    }

    /// Take the edge of `path`'s last action out of `node` (one virtual visit); its child when it
    /// had one, else `None` after creating it (a new vertex, waiting for priors).
    pub(super) fn enter(&mut self, node: usize, path: &[u16]) -> Option<usize> {
        let a = *path.last().expect("a path of at least one action") as usize;
        let edge = &mut self.nodes[node].edges[a];
        edge.virtual_visits += 1;
        if edge.child != NO_CHILD {
            return Some(edge.child as usize);
        }
        let child = self.nodes.len() as u32;
        self.nodes[node].edges[a].child = child;
        let mut vertex = Node::new(self.edges_below(path));
        vertex.priors = self.pipeline_priors(path);
        vertex.first_by_prior = vertex.priors.is_some();
        self.nodes.push(vertex);
        if self.policy.is_some() {
            self.pending.push((child as usize, path.to_vec()));
        }
        None
    }

    /// Mean reward of every backed-up iteration (0, DP-NCCL's, before any).
    pub(super) fn root_q(&self) -> f64 {
        let (n, total) = self.nodes[0]
            .edges
            .iter()
            .fold((0, 0.0), |(n, t), e| (n + e.visits, t + e.total));
        if n == 0 { 0.0 } else { total / n as f64 }
    }

    /// The PUCT argmax at `node`, ties broken uniformly at random. `parent_q` is the mean reward
    /// through `node`, the first-play value of its unvisited actions. The root's pipeline frames
    /// are closed once no pipeline leaf is left.
    pub(super) fn pick(&mut self, node: usize, parent_q: f64) -> usize {
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
        let open = if node == 0 && !self.pipelines_open() {
            self.actions.len()
        } else {
            edges.len()
        };
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
