//! Adam's batches: targets drawn uniformly (with replacement) from the replay buffer and, with
//! expert iteration's `optimizer.teacher_share`, from the warm start's teacher games, and the
//! mean cross-entropy between the GNN's priors and them.

use std::collections::VecDeque;

use burn::prelude::*;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::gnn::{self, GnnModel};

use super::selfplay::GameRecord;

/// A drawn target: its game and the sample's index in it.
pub(crate) type Picked<'g> = (&'g GameRecord, usize);

/// `size` targets drawn uniformly, with replacement, from every target of `games` with `seed`;
/// none when there are no targets.
pub(crate) fn draw(games: &VecDeque<GameRecord>, size: usize, seed: u64) -> Vec<Picked<'_>> {
    let all: Vec<Picked> = games
        .iter()
        .flat_map(|game| (0..game.samples.len()).map(move |s| (game, s)))
        .collect();
    if all.is_empty() {
        return Vec::new();
    }
    let mut rng = StdRng::seed_from_u64(seed);
    (0..size)
        .map(|_| all[rng.random_range(0..all.len())])
        .collect()
}

/// A batch of `size` with `round(share · size)` targets from `teacher` (seeded by
/// `teacher_seed`) and the rest from `replay` (by `seed`); all from `replay` when the teacher
/// has none or `share` is 0 (then exactly [`draw`]'s batch).
pub(crate) fn mixed<'g>(
    replay: &'g VecDeque<GameRecord>,
    teacher: &'g VecDeque<GameRecord>,
    size: usize,
    share: f64,
    seeds: (u64, u64),
) -> Vec<Picked<'g>> {
    let from_teacher = draw(teacher, (share * size as f64).round() as usize, seeds.1);
    let mut batch = draw(replay, size - from_teacher.len(), seeds.0);
    batch.extend(from_teacher);
    batch
}

/// The mean cross-entropy over `batch` (a graph to differentiate) and the targets' mean
/// entropy; none for an empty batch.
pub(crate) fn loss(model: &GnnModel, batch: &[Picked]) -> Option<(Tensor<1>, f64)> {
    let mut total: Option<Tensor<1>> = None;
    let mut entropy = 0.0;
    for &(game, s) in batch {
        let sample = &game.samples[s];
        let target = sample.dense_target(game.slices.len());
        entropy += target
            .iter()
            .filter(|&&p| p > 0.0)
            .map(|&p| -(p as f64) * (p as f64).ln())
            .sum::<f64>();
        let term = gnn::cross_entropy(
            model,
            &sample.graph,
            sample.group as usize,
            &game.slices,
            &target,
        );
        total = Some(match total {
            None => term,
            Some(l) => l + term,
        });
    }
    let n = batch.len() as f64;
    total.map(|l| (l / n, entropy / n))
}
