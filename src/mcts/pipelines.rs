//! Pipelines in the tree (beyond TAG, which names pipelining as its next option): besides op
//! group 0's actions, the root has one edge per pipeline frame ([`PipelineFrames`]: a stage
//! placement from `pipeline-dp`, its fastest simulated plans), and below a frame the tree decides
//! the micro-batch count and then each stage boundary's move, so pipelines and per-group
//! strategies compete for the same visits under one PUCT.
//!
//! - Frames are seeded like the device groups: each is backed up once with the time
//!   `pipeline-dp` simulated (no new simulation), and with a policy the frames faster than the
//!   start get the top root prior ([`super::lift_priors`]); the pipelines `pipeline-dp`
//!   simulated around a frame are cached. The GNN scores op-group actions only: a frame's prior
//!   before the lift is the uniform share, and the vertices below a frame rank their actions by
//!   distance from the frame's own ([`Mcts::pipeline_priors`]).
//! - A pipeline leaf costs a whole pipeline's simulation (every micro-batch's tasks), many times
//!   a per-group leaf's, so at most [`super::MctsConfig::pipeline_leaves`] new ones are
//!   simulated (then the frames' root edges are closed), each given up far behind the frames
//!   ([`GIVE_UP_PAST`]).
//! - A pipeline's key in the cache is its frame's root action followed by
//!   [`PipelineFrames::completed`]: the micro-batch count's index and the stage ends, the same
//!   for every path that reaches the same pipeline.

use std::sync::Arc;

use super::search::Mcts;
use super::tree::{Edge, Outcome};
use crate::error::Result;
use crate::evaluate::{Placement, timing_within};
use crate::pipeline_plan::PipelineFrames;
use crate::strategy::AllReducePacking;

/// A pipeline leaf past this many times the fastest fitting frame is given up.
pub(crate) const GIVE_UP_PAST: f64 = 1.5;

impl Mcts<'_> {
    /// Search `frames` too, up to `config.pipeline_leaves` new pipeline leaves: one more root
    /// edge per frame.
    pub(super) fn with_frames(&mut self, frames: Arc<PipelineFrames>) {
        if frames.is_empty() || self.config.pipeline_leaves == 0 {
            return;
        }
        let edges = self.actions.len() + frames.len();
        self.tree.nodes[0].edges.resize(edges, Edge::default());
        self.frames = Some(frames);
    }

    /// The frame a path (or a cache key) starts with, if it starts with one.
    pub(super) fn frame_of(&self, path: &[u16]) -> Option<usize> {
        let a = *path.first()? as usize;
        a.checked_sub(self.actions.len())
    }

    fn frames(&self) -> &PipelineFrames {
        self.frames.as_deref().expect("a frame's path has frames")
    }

    /// How long a complete path is: a decision per op group, or a frame and its decisions.
    pub(super) fn depth_of(&self, path: &[u16]) -> usize {
        match self.frame_of(path) {
            Some(f) => 1 + self.frames().depth(f),
            None => self.groups,
        }
    }

    /// Edges of the vertex that `path` leads to.
    pub(super) fn edges_below(&self, path: &[u16]) -> usize {
        match self.frame_of(path) {
            None if path.is_empty() => {
                self.actions.len() + self.frames.as_ref().map_or(0, |f| f.len())
            }
            None => self.actions.len(),
            Some(_) => self.frames().actions_at(path.len() - 1),
        }
    }

    /// Priors of the vertex `path` leads to when it is below a frame: a decision's actions
    /// weighted `1 / (1 + distance)` from the frame's own (its micro-batch count, its boundary),
    /// so the tree tries the moves next to a plan already refined on the simulator before far
    /// ones, as the refinement does. `None` elsewhere.
    pub(super) fn pipeline_priors(&self, path: &[u16]) -> Option<Vec<f64>> {
        let f = self.frame_of(path)?;
        let frames = self.frames();
        let depth = path.len() - 1;
        if depth >= frames.depth(f) {
            return None;
        }
        let weights: Vec<f64> = (0..frames.actions_at(depth))
            .map(|a| 1.0 / (1 + frames.distance(f, depth, a)) as f64)
            .collect();
        let sum: f64 = weights.iter().sum();
        Some(weights.into_iter().map(|w| w / sum).collect())
    }

    /// The cache key of a pipeline path: its frame's edge, then what it completes to.
    pub(super) fn completed_pipeline(&self, f: usize, path: &[u16]) -> Vec<u16> {
        let mut key = vec![path[0]];
        key.extend(self.frames().completed(f, &path[1..]));
        key
    }

    /// Whether a new pipeline leaf may still be selected; selecting `path` spends one when its
    /// pipeline has not been simulated.
    pub(super) fn pipelines_open(&self) -> bool {
        self.frames.is_some() && self.pipeline_leaves < self.config.pipeline_leaves
    }

    pub(super) fn spend_pipeline_leaf(&mut self, path: &[u16]) {
        if let Some(f) = self.frame_of(path) {
            let key = self.completed_pipeline(f, path);
            if !self.cache.contains_key(&key) {
                self.pipeline_leaves += 1;
            }
        }
    }

    /// The placement of a pipeline key, its gradients packed by `packing`.
    pub(super) fn pipeline_placement(&self, key: &[u16], packing: AllReducePacking) -> Placement {
        let f = self.frame_of(key).expect("a pipeline key");
        let mut strategy = self.frames().strategy(&self.problem, f, &key[1..]);
        strategy.allreduce = packing;
        Placement::plain(strategy, "")
    }

    /// Simulate a pipeline key under its frame's packing, given up past [`GIVE_UP_PAST`] times
    /// the fastest fitting frame and scored at that time: an upper bound of its reward that
    /// still ranks it well below the frames, and it can never be the result. The pipelines far
    /// off are the slow ones to simulate (many micro-batches, a bad cut).
    pub(super) fn simulate_pipeline(&self, key: &[u16]) -> Result<Outcome> {
        let frames = self.frames();
        let f = self.frame_of(key).expect("a pipeline key");
        let packing = frames.packing(f);
        let placement = self.pipeline_placement(key, packing);
        let limit_us = (0..frames.len())
            .map(|f| frames.known(f))
            .filter(|&(_, fits)| fits)
            .map(|(t, _)| GIVE_UP_PAST * t)
            .fold(f64::INFINITY, f64::min);
        let timing = timing_within(&self.problem, &placement, limit_us)?;
        Ok(match timing {
            Some(t) => Outcome {
                time_us: t.iteration_us,
                fits: t.fits,
                packing,
            },
            None => Outcome {
                time_us: limit_us,
                fits: true,
                packing,
            },
        })
    }

    /// Back every frame up once as the pipeline it is, at the time `pipeline-dp` simulated (no
    /// simulation), counted in the budget; with a policy, the frames faster than the start get
    /// the top root prior. The pipelines `pipeline-dp` simulated around a frame (its refinement's
    /// moves) are cached, not visited: a leaf that reaches one costs no simulation.
    pub(super) fn seed_frames(&mut self) -> Result<()> {
        let Some(frames) = self.frames.clone() else {
            return Ok(());
        };
        let base = self.actions.len();
        let paths: Vec<Vec<u16>> = (0..frames.len())
            .take(self.config.iterations.saturating_sub(self.iterations))
            .map(|f| vec![(base + f) as u16])
            .collect();
        for (f, path) in paths.iter().enumerate() {
            let packing = frames.packing(f);
            let (time_us, fits) = frames.known(f);
            let own = (frames.completed(f, &[]), time_us, fits);
            for (key, time_us, fits) in std::iter::once(own).chain(frames.known_around(f)) {
                let mut key = key;
                key.insert(0, path[0]);
                if let std::collections::hash_map::Entry::Vacant(e) = self.cache.entry(key) {
                    e.insert(Outcome {
                        time_us,
                        fits,
                        packing,
                    });
                    self.pipelines_known += 1;
                }
            }
            self.enter(0, path);
        }
        self.evaluate_and_backup(&paths)?;
        let start = self.cache[&vec![0u16; self.groups]];
        let faster: Vec<u16> = paths
            .iter()
            .filter(|path| {
                // A frame abandoned at the time limit has no outcome.
                let completed = self.completed_pipeline(self.frame_of(path).unwrap(), path);
                let o = self.cache.get(&completed);
                o.is_some_and(|o| o.fits && o.better_than(&start))
            })
            .map(|path| path[0])
            .collect();
        if let Some(priors) = self.tree.nodes[0].priors.as_mut() {
            super::lift_priors(priors, &faster);
        }
        Ok(())
    }
}
