//! TAG §4.1.1 graph simplification (filled in below).

use super::Graph;

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SimplifyStats {
    pub removed_identity: usize,
    pub removed_dangling: usize,
}

pub fn simplify(g: &Graph) -> (Graph, SimplifyStats) {
    (g.clone(), SimplifyStats::default())
}
