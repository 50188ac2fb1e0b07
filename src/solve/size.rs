//! The size of a formulation's MILP before it is built, so an instance too large for the memory
//! limit is refused up front (or coarsened further) instead of growing until the kernel kills
//! the process.
//!
//! Counted from the formulations' own loops ([`super::model::Core`], [`super::moirai`]): per
//! edge one `z` column and row per ordered device pair; per pair of nodes that may run in
//! parallel an order binary and a row per device; MOIRAI adds, per pair of edges that may overlap
//! in time, a row per channel (ordered device pair) and two big-M rows over the channels, and on
//! small instances energetic cuts per node and channel; both add the energetic cuts of small
//! instances and the symmetry-breaking rows. The
//! rows are exact for MOIRAI (vgg19 on tag-testbed: 7,554,910 estimated and built). The bytes
//! are what the process holds: our row problem, HiGHS's copies of the matrix column- and
//! row-wise and its working copies. Fitted to the peak resident memory of three solves with a
//! 3-second limit (2 cores, 2026-11-28): transformer × tag-testbed under QuickP (4.9e6 rows,
//! 2.4e7 nonzeros: 4.16 GB), gpt × tag-testbed under QuickP (1.7e6, 8.3e6: 1.57 GB) and vgg19 ×
//! tag-testbed under MOIRAI (7.6e6, 3.8e7: 5.37 GB), less the 0.2 GB the process holds before
//! building: 60 bytes per nonzero and 400 per row or column. The row and column terms dominate;
//! the earlier 80 + 200 fitted to the MOIRAI instance alone under-counted QuickP's models by a
//! third, so `--memory-limit 3GiB` let a 4 GB solve through.

use super::Formulation;
use super::instance::Instance;

/// Rows, columns and nonzeros of a MILP, estimated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ModelSize {
    pub rows: f64,
    pub columns: f64,
    pub nonzeros: f64,
}

impl ModelSize {
    /// Bytes HiGHS needs for the model, roughly, with its working copies ([`HIGHS_WORKING`]).
    pub(crate) fn bytes(&self) -> f64 {
        HIGHS_WORKING * (60.0 * self.nonzeros + 400.0 * (self.rows + self.columns))
    }
}

/// How much more than the model itself HiGHS holds while it builds, presolves and runs the root
/// LP, none of which its callbacks interrupt, so the memory watch cannot stop them. Measured on
/// resnet50 × `tag-testbed` with `quickp` (a model estimated at 0.80 GiB): 1.05–1.19 GiB resident
/// 8–20 s in, still in the root LP. Without it `--memory-limit "900 MiB"` admitted the instance
/// and the process reached 1,042 MiB.
const HIGHS_WORKING: f64 = 1.5;

/// A lower bound on the size of either formulation's MILP for `inst` from its node, edge and
/// GPU counts alone: [`estimate`] less the rows of node pairs, which need the graph's
/// reachability, n² bytes (40 GB at 200,000 nodes) and seconds to compute. An instance whose
/// floor is already over the memory limit is refused without it.
pub(crate) fn floor(inst: &Instance) -> ModelSize {
    let d = inst.devices() as f64;
    let channels = d * (d - 1.0);
    let (n, e) = (inst.len() as f64, inst.edges.len() as f64);
    ModelSize {
        rows: n + e * channels + n,
        columns: n * d + n + e * channels,
        nonzeros: n * d + 3.0 * e * channels,
    }
}

/// Bytes of the reachability matrix [`estimate`] and the formulations build: one per node pair.
pub(crate) fn reachability_bytes(inst: &Instance) -> f64 {
    (inst.len() as f64).powi(2)
}

/// The size of `formulation`'s MILP for `inst`.
pub(crate) fn estimate(inst: &Instance, formulation: Formulation) -> ModelSize {
    let d = inst.devices() as f64;
    let channels = d * (d - 1.0);
    let (n, e) = (inst.len() as f64, inst.edges.len() as f64);
    let node_pairs = inst.parallel_pairs().len() as f64;
    let mut size = ModelSize {
        rows: n + e * channels + node_pairs * (d + 2.0) + n,
        columns: n * d + n + e * channels + 2.0 * node_pairs,
        nonzeros: n * d + 3.0 * e * channels + node_pairs * (3.0 * d + 2.0 * (d + 4.0)),
    };
    add_cut_rows(inst, &mut size);
    if formulation == Formulation::Moirai {
        let edge_pairs = inst.overlapping_transfers().count() as f64;
        size.rows += e * 2.0 + edge_pairs * (channels + 2.0);
        size.columns += e + 2.0 * edge_pairs;
        size.nonzeros += e * (2.0 * channels + 4.0) + edge_pairs * (5.0 * channels + 8.0);
        add_channel_cut_rows(inst, channels, &mut size);
    }
    size
}

/// MOIRAI's energetic cuts on the channels (small instances only): per node and channel one row
/// over the edges after it and one over the edges before it, where there are any.
fn add_channel_cut_rows(inst: &Instance, channels: f64, size: &mut ModelSize) {
    if !super::moirai::channel_cuts_fit(inst) {
        return;
    }
    for (after, before) in super::moirai::edges_around(inst) {
        for (edges, extra) in [(after.len(), 2.0), (before.len(), 1.0)] {
            if edges > 0 {
                size.rows += channels;
                size.nonzeros += channels * (edges as f64 + extra);
            }
        }
    }
}

/// The energetic precedence cuts (small instances only) and the symmetry-breaking rows.
fn add_cut_rows(inst: &Instance, size: &mut ModelSize) {
    let (n, d) = (inst.len() as f64, inst.devices() as f64);
    if inst.len() <= super::model::ENERGY_CUT_MAX_NODES {
        let ordered_pairs = inst.reachability().iter().flatten().filter(|&&r| r).count() as f64;
        size.rows += 2.0 * n * d;
        size.nonzeros += d * (2.0 * (n + ordered_pairs) + n * (3.0 + d));
    }
    let leaders = inst.colocation_leader();
    let l = (0..inst.len()).filter(|&i| leaders[i] == i).count() as f64;
    let linked = super::symmetry_breaking::interchangeable_with_previous(inst).len() as f64;
    size.rows += linked * l;
    size.nonzeros += linked * (l + l * (l - 1.0) / 2.0);
}
