//! Topological order, cycle detection and reachability of directed graphs given as a node count
//! and an edge list: petgraph's algorithms, in one place for every graph of the crate (the op
//! graph, coarse graphs of op groups, solver instances).

use petgraph::algo::{astar, toposort, tred};
use petgraph::graph::{DiGraph, NodeIndex};

/// The petgraph form of nodes `0..n` and `edges`.
fn digraph(n: usize, edges: impl IntoIterator<Item = (usize, usize)>) -> DiGraph<(), (), u32> {
    let mut g = DiGraph::with_capacity(n, 0);
    for _ in 0..n {
        g.add_node(());
    }
    for (a, b) in edges {
        g.add_edge(NodeIndex::new(a), NodeIndex::new(b), ());
    }
    g
}

/// The graph is not acyclic: `node` lies on a directed cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cycle {
    pub node: usize,
}

/// A topological order of nodes `0..n`, or a node on a cycle. When every edge points from a
/// lower to a higher index (every model the zoo builds and the exporters write: ops come in
/// execution order) the order is the index order itself, so orders do not depend on how a
/// sort breaks ties; otherwise petgraph's depth-first order.
pub(crate) fn topological_order<E>(n: usize, edges: E) -> Result<Vec<usize>, Cycle>
where
    E: IntoIterator<Item = (usize, usize)> + Clone,
{
    if edges.clone().into_iter().all(|(a, b)| a < b) {
        return Ok((0..n).collect());
    }
    toposort(&digraph(n, edges), None)
        .map(|order| order.into_iter().map(NodeIndex::index).collect())
        .map_err(|cycle| Cycle {
            node: cycle.node_id().index(),
        })
}

/// Whether the graph has no directed cycle.
pub(crate) fn is_acyclic<E>(n: usize, edges: E) -> bool
where
    E: IntoIterator<Item = (usize, usize)> + Clone,
{
    topological_order(n, edges).is_ok()
}

/// A directed cycle through `node` (first and last element `node`), if there is one: the
/// shortest way back from one of its successors, found by A* with unit edge costs.
pub(crate) fn cycle_through(
    n: usize,
    edges: impl IntoIterator<Item = (usize, usize)>,
    node: usize,
) -> Option<Vec<usize>> {
    let g = digraph(n, edges);
    let start = NodeIndex::new(node);
    g.neighbors(start)
        .filter_map(|next| astar(&g, next, |x| x == start, |_| 1u32, |_| 0u32))
        .min_by_key(|(length, _)| *length)
        .map(|(_, path)| {
            std::iter::once(node)
                .chain(path.into_iter().map(NodeIndex::index))
                .collect()
        })
}

/// The cycle through `node` ([`cycle_through`]) shown from its lowest-numbered node, the first
/// in the file, whichever node the search met it at; its first and last elements are that node.
pub(crate) fn cycle_from_first(
    n: usize,
    edges: impl IntoIterator<Item = (usize, usize)>,
    node: usize,
) -> Vec<usize> {
    let mut path = cycle_through(n, edges, node).unwrap_or_else(|| vec![node, node]);
    path.pop();
    let first = (0..path.len()).min_by_key(|&k| path[k]).unwrap_or(0);
    path.rotate_left(first);
    path.push(path[0]);
    path
}

/// `reach[i][j]`: a path of one or more edges leads from `i` to `j` in the acyclic graph whose
/// topological order is `order` (the transitive closure, by petgraph's `tred`).
pub(crate) fn reachability(
    n: usize,
    edges: impl IntoIterator<Item = (usize, usize)>,
    order: &[usize],
) -> Vec<Vec<bool>> {
    let g = digraph(n, edges);
    let order: Vec<NodeIndex> = order.iter().map(|&i| NodeIndex::new(i)).collect();
    let (sorted, _) = tred::dag_to_toposorted_adjacency_list::<_, u32>(&g, &order);
    let (_, closure) = tred::dag_transitive_reduction_closure(&sorted);
    let mut reach = vec![vec![false; n]; n];
    for edge in closure.edge_indices() {
        let (a, b) = closure
            .edge_endpoints(edge)
            .expect("an edge of the closure has endpoints");
        reach[order[a as usize].index()][order[b as usize].index()] = true;
    }
    reach
}
