//! topoplace: topology-aware deployment of DNN training graphs on heterogeneous GPU clusters.
//!
//! Data flows one way: graph → groups → strategy → compiled graph → simulation → report.
//! See `DESIGN.md`-style notes in the README for the modules and their conventions.

pub mod cluster;
pub mod cost;
pub mod error;
pub mod graph;
pub mod group;
pub mod units;
pub mod zoo;

pub use error::{Error, InputError, Result};
