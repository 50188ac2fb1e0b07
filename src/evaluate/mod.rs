//! Judging a placement: compile it, simulate one iteration and report what the simulator saw.
//! Every placer, the search and the command line measure strategies through [`evaluate`], so
//! every method is judged the same way.

pub(crate) mod evaluation;
pub(crate) mod placement;
pub(crate) mod sim_report;
pub mod summary;
pub(crate) mod thin_batch;

pub use evaluation::Evaluation;
pub use evaluation::Timing;
pub(crate) use evaluation::beats;
pub use evaluation::busy_within;
pub use evaluation::evaluate;
pub use evaluation::evaluate_every_replica;
pub use evaluation::evaluate_strategy;
pub use evaluation::evaluate_within;
pub(crate) use evaluation::limit_to_beat;
pub use evaluation::simulate_strategy;
pub use evaluation::timing_within;
pub(crate) use evaluation::until;
pub use placement::Placement;
pub(crate) use sim_report::{DeviceGroupFeedback, OpGroupFeedback};
pub use summary::SimulationSummary;
pub use thin_batch::thin_batch_warning;
