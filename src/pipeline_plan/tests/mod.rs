//! Unit tests of the pipeline planner: the frames the tree search keeps beside its vertices, and
//! the refinement of a planned pipeline by simulation.

mod refine;
mod tree;

use crate::cluster::{Cluster, load_cluster};
use crate::graph::Graph;
use crate::zoo::{ZooOptions, build};

/// A cluster shipped in `configs/`, by name.
fn shipped(name: &str) -> Cluster {
    load_cluster(format!(
        "{}/configs/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// A zoo model rebuilt at `batch`.
fn model(name: &str, batch: u32) -> Graph {
    let opts = ZooOptions {
        batch_size: Some(batch),
        ..Default::default()
    };
    build(name, &opts).unwrap()
}
