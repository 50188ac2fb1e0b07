//! topoplace: topology-aware deployment of DNN training graphs on heterogeneous GPU clusters.
//!
//! Data flows one way: graph → groups → strategy → compiled graph → simulation → report, and
//! imports between the modules run one way too: docs/architecture.md gives the layers (checked by
//! tests/architecture.rs), docs/modelling.md the modelling conventions they share.
//!
//! # Example
//!
//! Load a zoo model and a shipped cluster, measure data parallelism over every GPU on the
//! simulator, then place the model with one of the placers (`dp-subset`, the best data
//! parallelism over subsets of device groups) and check it is no slower:
//!
//! ```
//! use topoplace::cost::CostModel;
//! use topoplace::evaluate::{Placement, evaluate, evaluate_strategy};
//! use topoplace::placers::{Budget, Placer, placer};
//! use topoplace::problem::Problem;
//! use topoplace::resolve::{load_model, load_named_cluster};
//! use topoplace::sim::Order;
//! use topoplace::strategy::Reference;
//!
//! let graph = load_model("mlp", Some(64))?;
//! let cluster = load_named_cluster("tag-testbed", "cluster")?;
//! let cost = CostModel::default();
//! let problem = Problem::new(&graph, &cluster, &cost);
//!
//! let dp = Reference::Dp.strategy(&graph, &cluster);
//! let dp_ms = evaluate_strategy(&problem, &dp, Order::Fifo)?.report.iteration_us / 1e3;
//!
//! let placed: Placement = placer("dp-subset")?.place(&problem, &Budget::default())?;
//! let placed_ms = evaluate(&problem, &placed)?.report.iteration_us / 1e3;
//! assert!(placed_ms <= dp_ms * (1.0 + 1e-9));
//! # Ok::<(), topoplace::Error>(())
//! ```

#![warn(missing_docs)]

pub mod api;
pub mod assets;
pub mod autocast;
pub mod checksum;
mod choice;
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
pub mod hybrid;
pub mod import;
pub mod inspect;
pub mod interrupt;
pub mod io;
pub mod layout_priors;
pub mod mcts;
pub mod milp;
pub mod model_parallel;
pub mod pipeline_plan;
pub mod place_summary;
pub mod placers;
pub mod precision;
pub mod problem;
pub mod reference_best;
pub mod render;
pub mod resolve;
pub mod sfb;
pub mod sim;
pub mod solve;
pub mod strategy;
pub mod train;
pub mod units;
pub mod zoo;

pub use error::Error;
pub use error::InputError;
pub use error::Result;
