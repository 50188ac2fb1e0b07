//! What a placer answers: a strategy, and optionally an execution order, a prediction and a
//! memory claim.

use crate::strategy::Strategy;

/// A placer's answer.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The op groups and the replication/device decision of each.
    pub strategy: Strategy,
    /// Per-op dispatch priority (lower first), evaluated with
    /// [`crate::sim::Order::Priority`]; `None` runs FIFO like TensorFlow's executor.
    pub order: Option<Vec<f64>>,
    /// What the placement is and any stand-in it uses.
    pub note: String,
    /// The placer's own prediction of the iteration time, µs (list schedulers).
    pub predicted_us: Option<f64>,
    /// Whether the placer believes every GPU's memory suffices (`None`: it does not check).
    pub fits: Option<bool>,
    /// The iteration time `evaluate` gives this placement, µs, when the placer already simulated
    /// it so (`dp-subset`, `pipeline-dp`: `fits` is then the simulation's verdict): a caller need
    /// not simulate it again. `None` for a placement whose strategy was changed after.
    pub simulated_us: Option<f64>,
}

impl Placement {
    /// A placement with no order, prediction or memory claim.
    pub fn plain(strategy: Strategy, note: impl Into<String>) -> Placement {
        Placement {
            strategy,
            order: None,
            note: note.into(),
            predicted_us: None,
            fits: None,
            simulated_us: None,
        }
    }
}
