//! The simulator against published measurements: the scenarios, simulating each as it was
//! measured, the table, and the calibration of the kernel efficiencies.

pub mod calibrate;
pub mod measure;
pub mod scenarios;
pub mod table;

pub use calibrate::{Calibration, calibrate, single_gpu_us};
pub use measure::{Outcome, bus_bandwidth_gbs, simulate};
pub use scenarios::{Metric, Role, Scenario, scenarios};
pub use table::{FidelityRow, fidelity_table, render_markdown};
