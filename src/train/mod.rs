//! Self-play training of the placement policy (TAG §4.2.2, "training"): recipes, durable
//! checkpoints and per-step randomness. The training loop itself builds on the GNN.

pub mod checkpoint;
pub mod recipe;

pub use checkpoint::{Checkpoints, step_seed};
pub use recipe::Recipe;
