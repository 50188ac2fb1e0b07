//! Pipeline frames: the space of pipelines TAG's tree searches (beyond TAG, whose closing section
//! names pipelining as its next option). A frame is one of `pipeline-dp`'s fastest simulated
//! plans with its stage placement — which units (device groups) run the stages, in which order,
//! folded or not, under which schedule, its gradients' packing. Below it the tree decides, as
//! actions, the micro-batch count (any count dividing the batch up to [`super::MAX_MICRO_BATCHES`])
//! and then each stage boundary's move from the frame's cut ([`BOUNDARY_MOVES`], in chunks). A
//! decision left open keeps the frame's own (its count, its boundary): the completion of a path.

use std::fmt;

use super::chunks::Chunks;
use super::plan::{Plan, Tried, micro_batch_counts};
use super::simulated_plan::strategy;
use crate::problem::Problem;
use crate::strategy::{AllReducePacking, Strategy};

/// Most frames: the fastest plan (refined) and the fastest of other stage placements.
pub(crate) const FRAMES: usize = 4;

/// The moves of one stage boundary an action makes, in chunks (action `i` moves it by
/// `BOUNDARY_MOVES[i]`; 0 keeps the frame's). A boundary is clamped so that every stage keeps at
/// least one chunk.
pub(crate) const BOUNDARY_MOVES: [i32; 5] = [0, -1, 1, -2, 2];

/// A simulated plan as a frame: how its gradients are packed, its simulated time and fit, and
/// the plans of the same stage placement simulated around it (its refinement's moves).
pub(super) struct Frame {
    pub(super) plan: Plan,
    pub(super) packing: AllReducePacking,
    pub(super) time_us: f64,
    pub(super) fits: bool,
    pub(super) known: Vec<Tried>,
}

/// The frames of one problem with the chunks they cut and the micro-batch counts (dividing the
/// batch) the first decision below any of them chooses among.
pub struct PipelineFrames {
    chunks: Chunks,
    frames: Vec<Frame>,
    counts: Vec<u32>,
}

impl fmt::Debug for PipelineFrames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipelineFrames")
            .field("frames", &self.frames.len())
            .finish()
    }
}

impl PipelineFrames {
    /// Frames from simulated plans (fastest first), for a batch of `batch`.
    pub(super) fn new(chunks: Chunks, frames: Vec<Frame>, batch: u32) -> PipelineFrames {
        PipelineFrames {
            chunks,
            frames,
            counts: micro_batch_counts(batch, 1),
        }
    }

    /// Number of frames (at most [`FRAMES`]), fastest first.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether no frame is known yet.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Decisions below frame `f`: the micro-batch count, then each boundary between its stages
    /// (as many in all as it has stages).
    pub fn depth(&self, f: usize) -> usize {
        self.frames[f].plan.ends.len()
    }

    /// Actions of the decision at `depth` below any frame (0: the micro-batch count).
    pub(crate) fn actions_at(&self, depth: usize) -> usize {
        if depth == 0 {
            self.counts.len()
        } else {
            BOUNDARY_MOVES.len()
        }
    }

    /// How frame `f`'s stages pack their gradients.
    pub(crate) fn packing(&self, f: usize) -> AllReducePacking {
        self.frames[f].packing
    }

    /// The simulated iteration time (µs) of frame `f` as it is, and whether it fits.
    pub fn known(&self, f: usize) -> (f64, bool) {
        (self.frames[f].time_us, self.frames[f].fits)
    }

    /// The pipelines of frame `f`'s stage placement simulated around it, as keys
    /// ([`Self::completed`]) with their time (µs; a lower bound for a move given up) and fit.
    pub(crate) fn known_around(&self, f: usize) -> Vec<(Vec<u16>, f64, bool)> {
        self.frames[f]
            .known
            .iter()
            .filter_map(|(plan, time_us, fits)| {
                let count = self.count_index(plan.micro_batches)?;
                Some((key(count, &plan.ends), *time_us, *fits))
            })
            .collect()
    }

    /// The index of `micro_batches` among the first decision's actions.
    fn count_index(&self, micro_batches: u32) -> Option<usize> {
        self.counts.iter().position(|&m| m == micro_batches)
    }

    /// The index of frame `f`'s own micro-batch count among the first decision's actions.
    pub(crate) fn own_count(&self, f: usize) -> usize {
        self.count_index(self.frames[f].plan.micro_batches)
            .expect("the frame's count divides the batch")
    }

    /// How far action `a` of the decision at `depth` below frame `f` moves from the frame: steps
    /// from its micro-batch count, or chunks a boundary moves.
    pub(crate) fn distance(&self, f: usize, depth: usize, a: usize) -> usize {
        if depth == 0 {
            a.abs_diff(self.own_count(f))
        } else {
            BOUNDARY_MOVES[a].unsigned_abs() as usize
        }
    }

    /// The pipeline that `decided` (the first decisions below frame `f`, in order) stands for,
    /// the rest kept at the frame's own: `[micro-batch count index, each stage's end chunk]`, the
    /// same for every path that reaches the same pipeline.
    pub(crate) fn completed(&self, f: usize, decided: &[u16]) -> Vec<u16> {
        let count = decided.first().map_or(self.own_count(f), |&a| a as usize);
        let moves: Vec<i32> = (1..self.depth(f))
            .map(|d| decided.get(d).map_or(0, |&a| BOUNDARY_MOVES[a as usize]))
            .collect();
        key(count, &moved_ends(&self.frames[f].plan.ends, &moves))
    }

    /// The strategy of frame `f` at `key` ([`Self::completed`]).
    pub fn strategy(&self, p: &Problem, f: usize, key: &[u16]) -> Strategy {
        let frame = &self.frames[f];
        let mut plan = frame.plan.clone();
        plan.micro_batches = self.counts[key[0] as usize];
        for (end, &k) in plan.ends.iter_mut().zip(&key[1..]) {
            *end = k as usize;
        }
        strategy(p, &self.chunks, &plan, frame.packing)
    }
}

/// A pipeline's key: its micro-batch count's index, then each stage's end chunk.
fn key(count: usize, ends: &[usize]) -> Vec<u16> {
    std::iter::once(count)
        .chain(ends.iter().copied())
        .map(|k| k as u16)
        .collect()
}

/// Stage ends (exclusive, the last the chunk count) with each boundary but the last moved by
/// `moves`, clamped so that every stage keeps at least one chunk, in order: a boundary can go no
/// earlier than one past the one before it, nor so late that the stages after it lack a chunk.
fn moved_ends(ends: &[usize], moves: &[i32]) -> Vec<usize> {
    let stages = ends.len();
    let chunks = ends[stages - 1];
    let mut out = Vec::with_capacity(stages);
    for s in 0..stages - 1 {
        let earliest = out.last().map_or(1, |&e| e + 1);
        let latest = chunks - (stages - 1 - s);
        let moved = ends[s] as i64 + moves[s] as i64;
        out.push((moved.max(earliest as i64) as usize).min(latest));
    }
    out.push(chunks);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_move_keeps_the_cut() {
        assert_eq!(moved_ends(&[3, 7, 10], &[0, 0]), vec![3, 7, 10]);
        assert_eq!(moved_ends(&[3, 7, 10], &[-1, 2]), vec![2, 9, 10]);
    }

    #[test]
    fn every_stage_keeps_a_chunk_whatever_the_moves() {
        let ends = [1, 2, 3, 5];
        for a in BOUNDARY_MOVES {
            for b in BOUNDARY_MOVES {
                for c in BOUNDARY_MOVES {
                    let out = moved_ends(&ends, &[a, b, c]);
                    assert_eq!(out.len(), 4);
                    assert_eq!(out[3], 5);
                    let mut start = 0;
                    for &e in &out {
                        assert!(e > start, "{out:?} from moves {a} {b} {c}");
                        start = e;
                    }
                }
            }
        }
    }
}
