//! Self-play training of the placement policy (TAG §4.2.2, "training"): recipes, self-play
//! games, the training loop, and durable checkpoints with per-step randomness.

pub(crate) mod batch;
pub(crate) mod checkpoint;
pub(crate) mod generation;
pub mod imitation;
pub mod layouts;
pub(crate) mod metrics;
pub(crate) mod recipe;
pub mod selfplay;
pub mod trainer;

pub use checkpoint::Checkpoints;
pub use checkpoint::step_seed;
pub use layouts::{GenerationReport, LayoutRecipe, train_layouts};
pub use recipe::{MAX_STEPS, Recipe};
pub use trainer::TrainOutcome;
pub(crate) use trainer::{TrainOptions, train};
