//! What a placer is asked to place: a training graph, a cluster and the cost model that times
//! the graph's ops on the cluster's GPUs.

use crate::cluster::Cluster;
use crate::cost::CostModel;
use crate::graph::Graph;

/// What a placer is asked to place.
#[derive(Clone, Copy)]
pub struct Problem<'a> {
    /// The training graph whose ops are placed.
    pub graph: &'a Graph,
    /// The cluster whose devices receive the ops.
    pub cluster: &'a Cluster,
    /// The cost model timing each op on each GPU type.
    pub cost: &'a CostModel,
}

impl<'a> Problem<'a> {
    /// `graph` on `cluster`, timed by `cost`.
    pub fn new(graph: &'a Graph, cluster: &'a Cluster, cost: &'a CostModel) -> Problem<'a> {
        Problem {
            graph,
            cluster,
            cost,
        }
    }
}
