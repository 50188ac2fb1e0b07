//! A graph under contraction: ops merged into super nodes, with the super-node adjacency kept up
//! to date so that fusion rules can look at degrees of the *current* graph, as QuickP's
//! Algorithm 1 and MOIRAI's GCOF do.

use std::collections::BTreeMap;

use crate::graph::{Graph, OpIdx, topo};

/// Super nodes are named by a representative op (their root). Neighbour maps hold the summed
/// bytes of the op edges between two super nodes; they are `BTreeMap`s so every iteration order,
/// and hence every result, is deterministic.
#[derive(Debug, Clone)]
pub(crate) struct Contraction {
    parent: Vec<usize>,
    succ: Vec<BTreeMap<usize, f64>>,
    pred: Vec<BTreeMap<usize, f64>>,
    weight: Vec<f64>,
    /// Scratch for the path search: `visited[v] == epoch` means seen in the current search.
    visited: Vec<u32>,
    epoch: u32,
}

impl Contraction {
    pub(crate) fn new(graph: &Graph, weights: &[f64]) -> Contraction {
        let n = graph.len();
        let mut succ = vec![BTreeMap::new(); n];
        let mut pred = vec![BTreeMap::new(); n];
        for e in graph.edges() {
            *succ[e.src].entry(e.dst).or_insert(0.0) += e.bytes;
            *pred[e.dst].entry(e.src).or_insert(0.0) += e.bytes;
        }
        Contraction {
            parent: (0..n).collect(),
            succ,
            pred,
            weight: weights.to_vec(),
            visited: vec![0; n],
            epoch: 0,
        }
    }

    /// The super node holding op `v` (union-find with path halving).
    pub(crate) fn find(&mut self, mut v: usize) -> usize {
        while self.parent[v] != v {
            self.parent[v] = self.parent[self.parent[v]];
            v = self.parent[v];
        }
        v
    }

    /// Distinct successor super nodes: parallel op edges between two super nodes count once,
    /// because what matters for cycles is how many *paths* leave a node, not how many tensors.
    pub(crate) fn out_degree(&self, root: usize) -> usize {
        self.succ[root].len()
    }

    pub(crate) fn in_degree(&self, root: usize) -> usize {
        self.pred[root].len()
    }

    pub(crate) fn weight(&self, root: usize) -> f64 {
        self.weight[root]
    }

    pub(crate) fn successors(&self, root: usize) -> &BTreeMap<usize, f64> {
        &self.succ[root]
    }

    /// Merge super node `b` into super node `a` (both roots, `a != b`); `a` stays the root.
    /// Edges between them vanish, the others are re-pointed at `a`.
    pub(crate) fn merge(&mut self, a: usize, b: usize) {
        debug_assert!(a != b && self.parent[a] == a && self.parent[b] == b);
        self.parent[b] = a;
        self.weight[a] += self.weight[b];
        let b_succ = std::mem::take(&mut self.succ[b]);
        let b_pred = std::mem::take(&mut self.pred[b]);
        self.succ[a].remove(&b);
        self.pred[a].remove(&b);
        for (s, bytes) in b_succ {
            self.pred[s].remove(&b);
            if s != a {
                *self.succ[a].entry(s).or_insert(0.0) += bytes;
                *self.pred[s].entry(a).or_insert(0.0) += bytes;
            }
        }
        for (p, bytes) in b_pred {
            self.succ[p].remove(&b);
            if p != a {
                *self.pred[a].entry(p).or_insert(0.0) += bytes;
                *self.succ[p].entry(a).or_insert(0.0) += bytes;
            }
        }
    }

    /// Whether merging roots `a` and `b` would close a cycle: true when a path of two or more
    /// hops joins them in either direction (Celeritas Theorem 1: merging the ends of an edge is
    /// safe iff that edge is the only path). Depth-first search over super nodes; the cost is the
    /// part of the graph reachable from the start, which is what makes it the last resort —
    /// the methods use degree arguments first and call this only where those do not apply.
    pub(crate) fn merge_creates_cycle(&mut self, a: usize, b: usize) -> bool {
        self.has_indirect_path(a, b) || self.has_indirect_path(b, a)
    }

    /// Whether merging all the roots in `set` into one node would close a cycle: true when a
    /// path leaves the set and comes back into it.
    pub(crate) fn set_creates_cycle(&mut self, set: &[usize]) -> bool {
        let epoch = self.next_epoch();
        let mut stack: Vec<usize> = Vec::new();
        for &r in set {
            for &s in self.succ[r].keys() {
                if !set.contains(&s) && self.visited[s] != epoch {
                    self.visited[s] = epoch;
                    stack.push(s);
                }
            }
        }
        while let Some(v) = stack.pop() {
            for &s in self.succ[v].keys() {
                if set.contains(&s) {
                    return true;
                }
                if self.visited[s] != epoch {
                    self.visited[s] = epoch;
                    stack.push(s);
                }
            }
        }
        false
    }

    fn next_epoch(&mut self) -> u32 {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.visited.fill(0);
            self.epoch = 1;
        }
        self.epoch
    }

    fn has_indirect_path(&mut self, from: usize, to: usize) -> bool {
        let epoch = self.next_epoch();
        let mut stack: Vec<usize> = self.succ[from]
            .keys()
            .copied()
            .filter(|&s| s != to)
            .collect();
        for &s in &stack {
            self.visited[s] = epoch;
        }
        while let Some(v) = stack.pop() {
            for &s in self.succ[v].keys() {
                if s == to {
                    return true;
                }
                if self.visited[s] != epoch {
                    self.visited[s] = epoch;
                    stack.push(s);
                }
            }
        }
        false
    }

    /// Super nodes in a topological order of the contracted graph.
    pub(crate) fn topological_roots(&mut self) -> Vec<usize> {
        let roots: Vec<usize> = (0..self.parent.len())
            .filter(|&v| self.parent[v] == v)
            .collect();
        let mut dense = vec![usize::MAX; self.parent.len()];
        for (i, &r) in roots.iter().enumerate() {
            dense[r] = i;
        }
        let edges: Vec<(usize, usize)> = roots
            .iter()
            .enumerate()
            .flat_map(|(i, &r)| {
                self.succ[r]
                    .keys()
                    .map(|&s| (i, dense[s]))
                    .collect::<Vec<_>>()
            })
            .collect();
        topo::topological_order(roots.len(), edges.iter().copied())
            .expect("contraction never creates a cycle")
            .into_iter()
            .map(|i| roots[i])
            .collect()
    }

    /// Op → super node, numbered by the smallest op index in each super node.
    pub(crate) fn assignment(&mut self) -> Vec<u32> {
        let n = self.parent.len();
        let mut id_of_root = vec![u32::MAX; n];
        let mut next = 0u32;
        let mut out = Vec::with_capacity(n);
        for v in 0..n {
            let r = self.find(v);
            if id_of_root[r] == u32::MAX {
                id_of_root[r] = next;
                next += 1;
            }
            out.push(id_of_root[r]);
        }
        out
    }
}

/// Union-find over ops, for grouping that does not need the contracted adjacency.
pub(crate) fn assignment_from_sets(n: usize, sets: &[Vec<OpIdx>]) -> Vec<u32> {
    let mut out = vec![u32::MAX; n];
    let mut next = 0u32;
    for set in sets {
        for &op in set {
            out[op] = next;
        }
        if !set.is_empty() {
            next += 1;
        }
    }
    for g in out.iter_mut() {
        if *g == u32::MAX {
            *g = next;
            next += 1;
        }
    }
    out
}
