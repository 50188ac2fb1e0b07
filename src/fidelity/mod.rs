//! The simulator against published measurements: the scenarios, simulating each as it was
//! measured, the table, and the calibration of the kernel efficiencies.

pub mod calibrate;
pub mod measure;
pub mod scenarios;
pub(crate) mod table;

pub use calibrate::calibrate;
pub use scenarios::Metric;
pub use scenarios::Role;

pub use scenarios::scenarios;
pub use table::fidelity_table;
pub use table::render_markdown;
