//! A lower bound on the iteration from the layouts alone, found before any task is built: the
//! busiest GPU's op compute (a GPU's compute stream runs one kernel at a time, and every replica
//! takes the duration the compiler gives it). It is the simulator's busiest-resource bound
//! ([`crate::sim::MakespanBound`]) over the GPUs, without the wiring. A search asking only "is
//! this faster than my best?" then learns "no" without building, sealing and bounding the
//! execution graph, which cost about a third of `place`'s time. (The chain of ops at their
//! fastest replicas was tried too: on the pipeline instances at batch 32 it settled 4 of about 3,700 candidates,
//! the transfers between ops making the compiled chain far longer.)

use std::rc::Rc;

use super::layout::{Layout, LayoutKind};
use crate::cluster::Cluster;
use crate::cost::CostModel;
use crate::graph::{Graph, Op};
use crate::sim::MakespanBound;

/// Each replica of `o` under `layout`: its device, batch share and duration (µs). Replicas on
/// GPUs of one type with one share take the same time, so a run of them is costed once.
pub(super) fn replica_durations<'a>(
    cluster: &'a Cluster,
    cost: &'a CostModel,
    o: &'a Op,
    layout: &'a Layout,
) -> impl Iterator<Item = (u32, f64, f64)> + 'a {
    let mut last: Option<(&str, f64, f64)> = None;
    layout.devices.iter().enumerate().map(move |(i, &d)| {
        let share = if layout.kind == LayoutKind::Full {
            1.0
        } else {
            layout.shares[i]
        };
        let gpu = &cluster.devices[d as usize].gpu;
        let duration = match last {
            // Catalog names are static: equal types share the pointer (no string compare).
            Some((name, s, t)) if std::ptr::eq(name, gpu.name) && s == share => t,
            _ => cost.compute_time_us(o, gpu, share),
        };
        last = Some((gpu.name, share, duration));
        (d, share, duration)
    })
}

/// Whether some GPU's op compute under `layouts` (one per op of `graph`) runs past `limit_us`
/// in every schedule.
pub(super) fn compute_exceeds(
    graph: &Graph,
    cluster: &Cluster,
    cost: &CostModel,
    layouts: &[Rc<Layout>],
    limit_us: f64,
) -> bool {
    if !limit_us.is_finite() {
        return false;
    }
    let mut load = vec![0.0; cluster.devices.len()];
    for (op, layout) in layouts.iter().enumerate() {
        for (d, _, duration) in replica_durations(cluster, cost, graph.op(op), layout) {
            load[d as usize] += duration;
        }
    }
    load.into_iter()
        .any(|l| MakespanBound::load_exceeds(l, limit_us))
}
