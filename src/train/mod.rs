//! Self-play training of the placement policy (TAG §4.2.2, "training"): recipes, self-play
//! games, the training loop, and durable checkpoints with per-step randomness.

pub mod batch;
pub mod checkpoint;
pub mod generation;
pub mod imitation;
pub mod metrics;
pub mod recipe;
pub mod selfplay;
pub mod trainer;

pub use checkpoint::{Checkpoints, step_seed};
pub use recipe::Recipe;
pub use trainer::{TrainOptions, TrainOutcome, train};
