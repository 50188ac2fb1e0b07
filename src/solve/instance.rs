//! The scheduling instance both MILPs, the brute-force enumerator and the alignment simulation
//! share: nodes (single ops, or groups of a coarsening) with a compute time on every device and a
//! memory footprint, tensor edges with their bytes, per-device-pair transfer times, device
//! capacities, and optional co-location sets (QuickP P2). One instance, one cost model: that is
//! what makes "the MILP's optimum" and "the simulated time" comparable.

use super::memory;
use crate::cluster::catalog::gpu_types;
use crate::error::{GroupingError, Result, SearchError};
use crate::graph::{OpIdx, topo};
use crate::group::Grouping;
use crate::problem::Problem;
use crate::sim::deadline;

/// A schedulable unit: one op, or a group of ops placed and run together.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    /// Member ops in a topological order.
    pub ops: Vec<OpIdx>,
    /// Compute time on each device, µs (sum of the members').
    pub compute: Vec<f64>,
    /// Bytes the node keeps on its device through the peak ([`super::memory::static_bytes`]).
    pub memory: f64,
}

/// A tensor (or the sum of the tensors) flowing from node `src` to node `dst`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NodeEdge {
    pub src: usize,
    pub dst: usize,
    pub bytes: f64,
}

/// Everything a formulation needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Instance {
    pub nodes: Vec<Node>,
    pub edges: Vec<NodeEdge>,
    /// Device memory less the transient reserve ([`super::memory`]), bytes: what the nodes'
    /// static bytes may fill.
    pub capacity: Vec<f64>,
    /// `latency[k][l]` µs and `bandwidth[k][l]` bytes/µs of the route from device k to l.
    pub latency: Vec<Vec<f64>>,
    pub bandwidth: Vec<Vec<f64>>,
    /// Sets of nodes that must share a device (QuickP's co-location); singletons are omitted.
    pub colocate: Vec<Vec<usize>>,
}

impl Instance {
    pub(crate) fn devices(&self) -> usize {
        self.capacity.len()
    }

    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Time to move edge `e`'s bytes from device `k` to device `l` (0 on one device).
    pub(crate) fn comm(&self, e: usize, k: usize, l: usize) -> f64 {
        if k == l {
            0.0
        } else {
            self.latency[k][l] + self.edges[e].bytes / self.bandwidth[k][l]
        }
    }

    /// Node `i`'s compute time on its fastest device.
    pub(crate) fn fastest(&self, i: usize) -> f64 {
        self.nodes[i]
            .compute
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
    }

    /// The slowest transfer of edge `e` over any device pair.
    pub(crate) fn max_comm(&self, e: usize) -> f64 {
        let d = self.devices();
        (0..d)
            .flat_map(|k| (0..d).map(move |l| (k, l)))
            .map(|(k, l)| self.comm(e, k, l))
            .fold(0.0, f64::max)
    }

    /// A makespan no optimal schedule exceeds: everything in sequence on the slowest device
    /// with every transfer at its slowest. Used as the big-M horizon when nothing better is known.
    pub(crate) fn serial_horizon(&self) -> f64 {
        let compute: f64 = self
            .nodes
            .iter()
            .map(|n| n.compute.iter().copied().fold(0.0, f64::max))
            .sum();
        let comm: f64 = (0..self.edges.len()).map(|e| self.max_comm(e)).sum();
        compute + comm
    }

    /// `reach[i][j]`: a path of edges leads from node i to node j (i ≠ j).
    pub(crate) fn reachability(&self) -> Vec<Vec<bool>> {
        let order = self.topological_order();
        topo::reachability(
            self.len(),
            self.edges.iter().map(|e| (e.src, e.dst)),
            &order,
        )
    }

    /// Pairs (i < j) that no path orders: only these need an ordering decision on a device
    /// (QuickP's big-M constraints "only for parallelizable pairs").
    pub(crate) fn parallel_pairs(&self) -> Vec<(usize, usize)> {
        let reach = self.reachability();
        let n = self.len();
        (0..n)
            .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
            .filter(|&(i, j)| !reach[i][j] && !reach[j][i])
            .collect()
    }

    /// Pairs of edges (e < f) whose transfers could overlap in time: neither's consumer precedes
    /// the other's producer. Only these need an ordering decision on a channel (MOIRAI's
    /// congestion pairs).
    pub(crate) fn overlapping_transfers(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let reach = self.reachability();
        let ne = self.edges.len();
        (0..ne)
            .flat_map(move |e| (e + 1..ne).map(move |f| (e, f)))
            .filter(move |&(e, f)| {
                let (a, b) = (self.edges[e], self.edges[f]);
                let before = |x: usize, y: usize| x == y || reach[x][y];
                !before(a.dst, b.src) && !before(b.dst, a.src)
            })
    }

    /// A topological order of the nodes (the instance is acyclic by construction).
    pub(crate) fn topological_order(&self) -> Vec<usize> {
        topo::topological_order(self.len(), self.edges.iter().map(|e| (e.src, e.dst)))
            .expect("an instance is acyclic by construction")
    }

    /// The critical-path bound: the longest path at fastest times with free transfers.
    pub(crate) fn critical_path(&self) -> f64 {
        let through = self.longest_through();
        (0..self.len()).map(through).fold(0.0, f64::max)
    }

    /// The nodes on a longest path at fastest times with free transfers (`head + p + tail` equal
    /// to the critical-path bound).
    pub(crate) fn critical_nodes(&self) -> Vec<usize> {
        let through = self.longest_through();
        let longest = (0..self.len()).map(&through).fold(0.0, f64::max);
        (0..self.len())
            .filter(|&i| through(i) >= longest * (1.0 - 1e-9))
            .collect()
    }

    /// Per node, the longest path through it: `head + fastest + tail`.
    fn longest_through(&self) -> impl Fn(usize) -> f64 + '_ {
        let (head, tail) = self.heads_and_tails();
        move |i| head[i] + self.fastest(i) + tail[i]
    }

    /// Longest paths of fastest compute times (transfers free) ending before each node (head)
    /// and starting after it (tail): lower bounds on its start and on what follows its finish.
    pub(crate) fn heads_and_tails(&self) -> (Vec<f64>, Vec<f64>) {
        let n = self.len();
        let fastest: Vec<f64> = (0..n).map(|i| self.fastest(i)).collect();
        let order = self.topological_order();
        let mut head = vec![0.0; n];
        let mut tail = vec![0.0; n];
        let mut succ = vec![Vec::new(); n];
        let mut pred = vec![Vec::new(); n];
        for e in &self.edges {
            succ[e.src].push(e.dst);
            pred[e.dst].push(e.src);
        }
        for &i in &order {
            head[i] = pred[i]
                .iter()
                .map(|&j| head[j] + fastest[j])
                .fold(0.0, f64::max);
        }
        for &i in order.iter().rev() {
            tail[i] = succ[i]
                .iter()
                .map(|&j| fastest[j] + tail[j])
                .fold(0.0, f64::max);
        }
        (head, tail)
    }

    /// The device each node is forced onto with the others of its co-location set: a map from
    /// node to the set's first node (itself when free).
    pub(crate) fn colocation_leader(&self) -> Vec<usize> {
        let mut leader: Vec<usize> = (0..self.len()).collect();
        for set in &self.colocate {
            for &i in set {
                leader[i] = set[0];
            }
        }
        leader
    }
}

/// The instance of a placement problem: one node per op, or one per group of `grouping`.
/// A grouping whose coarse graph has a cycle cannot be scheduled node by node and is an error.
pub(crate) fn build(p: &Problem, grouping: Option<&Grouping>) -> Result<Instance> {
    let g = p.graph;
    let devices = p.cluster.devices.len();
    let op_group: Vec<usize> = match grouping {
        Some(gr) => {
            if !gr.is_acyclic() {
                return Err(GroupingError::CyclicGroups {
                    model: g.name.clone(),
                    method: gr.method.clone(),
                }
                .into());
            }
            gr.op_group.iter().map(|&x| x as usize).collect()
        }
        None => (0..g.len()).collect(),
    };
    let k = op_group.iter().map(|&x| x + 1).max().unwrap_or(0);
    // The nodes' compute table is k × GPUs (800 MB for 10⁵ nodes on 1,024 GPUs, a second to
    // fault in): made with an eye on the limit.
    let mut nodes = Vec::with_capacity(k);
    for i in 0..k {
        if i % deadline::ASK_EVERY == 0 && deadline::passed() {
            return Err(SearchError::OutOfTime.into());
        }
        nodes.push(Node {
            ops: Vec::new(),
            compute: vec![0.0; devices],
            memory: 0.0,
        });
    }
    // Devices of one GPU type take one time: estimated once per type (10⁵ ops over 1,024 GPUs
    // were 10⁸ estimates, seconds past the time limit).
    let (types, type_of) = gpu_types(p.cluster.devices.iter().map(|d| &d.gpu));
    let mut per_type = vec![0.0; types.len()];
    for (i, op) in g.topological_order().into_iter().enumerate() {
        if i % deadline::ASK_EVERY == 0 && deadline::passed() {
            return Err(SearchError::OutOfTime.into());
        }
        let node = &mut nodes[op_group[op]];
        node.ops.push(op);
        node.memory += memory::static_bytes(g, op);
        for (time, gpu) in per_type.iter_mut().zip(&types) {
            *time = p.cost.compute_time_us(g.op(op), gpu, 1.0);
        }
        for (d, &t) in type_of.iter().enumerate() {
            node.compute[d] += per_type[t];
        }
    }
    let mut bytes = std::collections::BTreeMap::new();
    for e in g.edges() {
        let (a, b) = (op_group[e.src], op_group[e.dst]);
        if a != b {
            *bytes.entry((a, b)).or_insert(0.0) += e.bytes;
        }
    }
    let edges = bytes
        .into_iter()
        .map(|((src, dst), bytes)| NodeEdge { src, dst, bytes })
        .collect();
    let reserve = memory::transient_reserve(p)?;
    let table = |f: &dyn Fn(usize, usize) -> f64| -> Vec<Vec<f64>> {
        (0..devices)
            .map(|a| (0..devices).map(|b| f(a, b)).collect())
            .collect()
    };
    Ok(Instance {
        nodes,
        edges,
        capacity: p
            .cluster
            .devices
            .iter()
            .map(|d| d.memory_bytes - reserve)
            .collect(),
        latency: table(&|a, b| p.cluster.latency(a, b)),
        bandwidth: table(&|a, b| p.cluster.bandwidth(a, b)),
        colocate: Vec::new(),
    })
}

/// QuickP P2's instance: the fused graph's nodes, tied by the co-location groups.
pub(crate) fn build_p2(p: &Problem, fused: &Grouping, colocated: &Grouping) -> Result<Instance> {
    let mut inst = build(p, Some(fused))?;
    let mut sets: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
    for (i, node) in inst.nodes.iter().enumerate() {
        let first = node.ops[0];
        sets.entry(colocated.op_group[first]).or_default().push(i);
    }
    inst.colocate = sets.into_values().filter(|s| s.len() > 1).collect();
    Ok(inst)
}
