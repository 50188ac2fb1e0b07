//! The three jobs as calls: `simulate` a strategy or a hybrid plan, `place` a model, `compare`
//! methods, each from the names a user gives (a zoo model or a graph file, a shipped cluster or a
//! config file), answered with the summaries the command line prints. The command line and the
//! Python package are both written over this.
//!
//! # Example
//!
//! ```
//! use topoplace::api::{SimulateRequest, Numerics, simulate};
//!
//! let request = SimulateRequest {
//!     model: "mlp",
//!     batch: Some(64),
//!     cluster: "tag-testbed",
//!     strategy: "dp",
//!     numerics: Numerics::default(),
//!     order: None,
//!     every_replica: false,
//! };
//! let simulated = simulate(&request)?;
//! // The strategy is DP-NCCL itself: its speed-up over DP-NCCL is one.
//! assert!((simulated.summary.speedup_over_dp - 1.0).abs() < 1e-9);
//! # Ok::<(), topoplace::Error>(())
//! ```

mod compare;
mod numerics;
mod place;
mod progress;
mod simulate;

pub use compare::{CompareRequest, Comparison, cluster_label};
pub use numerics::{
    Loaded, Numerics, at_least_one, check_seconds, one_to_at_most, strategy_named, write_trace,
};
pub use place::{
    Baseline, HybridPlaced, PlaceRequest, Placed, PlannerChoice, TagPlaced, load_policy, place,
    place_showing_progress,
};
pub use progress::{BAR, progress_bar};
pub use simulate::{PlanSimulated, SimulateRequest, Simulated, simulate, simulate_plan};
