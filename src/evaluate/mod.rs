//! Judging a placement: compile it, simulate one iteration and report what the simulator saw.
//! Every placer, the search and the command line measure strategies through [`evaluate`], so
//! every method is judged the same way.

pub mod evaluation;
pub mod problem;
pub mod report;
pub mod summary;
pub mod thin_batch;

pub use evaluation::{
    Evaluation, Timing, beats, busy_within, evaluate, evaluate_every_replica, evaluate_strategy,
    evaluate_within, limit_to_beat, simulate_strategy, timing_within,
};
pub use problem::{Placement, Problem};
pub use report::{DeviceGroupFeedback, OpGroupFeedback, SimReport};
pub use summary::SimulationSummary;
pub use thin_batch::thin_batch_warning;
