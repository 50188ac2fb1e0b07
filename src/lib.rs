//! topoplace: topology-aware deployment of DNN training graphs on heterogeneous GPU clusters.
//!
//! Data flows one way: graph → groups → strategy → compiled graph → simulation → report, and
//! imports between the modules run one way too: docs/architecture.md gives the layers (checked by
//! tests/architecture.rs), docs/modelling.md the modelling conventions they share.

pub mod assets;
pub mod baselines;
pub mod checksum;
pub mod cluster;
pub mod compile;
pub mod cost;
pub mod data_parallel;
pub mod error;
pub mod evaluate;
pub mod experiment;
pub mod fidelity;
pub mod gnn;
pub mod graph;
pub mod group;
pub mod headroom;
pub mod import;
pub mod inputs;
pub mod inspect;
pub mod mcts;
pub mod milp;
pub mod pipeline_plan;
pub mod place_summary;
pub mod report;
pub mod sfb;
pub mod sim;
pub mod solve;
pub mod strategy;
pub mod train;
pub mod units;
pub mod zoo;

pub use error::{Error, InputError, Result};
