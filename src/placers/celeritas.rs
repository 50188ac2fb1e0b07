//! Celeritas (Xu et al.) placement over its coarse graph: ops in CPD-TOPO order fused into
//! clusters of consecutive ops (optimal operation fusion, [`crate::group::celeritas`], with the
//! paper's cluster memory limit of a quarter of the smallest GPU), then
//! - `order-place`: clusters in CPD-TOPO order fill the fastest GPU up to its memory, then the
//!   next fastest, and so on;
//! - `adjusting`: Alg. 2 — a cluster stays on the previous cluster's GPU unless another GPU's
//!   earliest start is earlier by more than the cost of sending its output back
//!   (`back_cost`); GPUs without room are skipped, and when none has room the one with the most
//!   free memory takes it (the paper's best-effort rule; the simulator then reports OOM).
//!   A GPU's earliest start queues the cluster's inputs from other GPUs on their links, as the
//!   schedule then sends them (§6.1: Celeritas models transfers as tasks to account for
//!   congestion); with contention-free estimates but contended finish times, a cluster that
//!   pulls many activations across one PCIe link looked as early on the far GPU as at home, and
//!   Inception-v3's whole backward pass drifted onto GPU 1 (917 ms planned vs Order-Place's 490).
//!
//! Within a cluster, ops run in CPD-TOPO order, inserted into idle gaps (the list machinery), and
//! the schedule's start times are the execution order.

use super::list::{Costs, Schedule};
use super::metis::devices_by_speed;
use super::{Budget, Placer};
use crate::error::Result;
use crate::evaluate::Placement;
use crate::graph::OpIdx;
use crate::group::celeritas::{CeleritasOptions, celeritas, cpd_topo_order};
use crate::group::{op_weights, reference_gpu};
use crate::problem::Problem;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Celeritas {
    OrderPlace,
    Adjusting,
}

impl Placer for Celeritas {
    fn name(&self) -> &'static str {
        match self {
            Celeritas::OrderPlace => "order-place",
            Celeritas::Adjusting => "adjusting",
        }
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let clusters = clusters(p)?;
        let costs = Costs::new(p, budget);
        let mut s = Schedule::new(*p, &costs);
        let note = match self {
            Celeritas::OrderPlace => {
                order_place(&mut s, &clusters, &devices_by_speed(p))?;
                "order-place: Celeritas clusters in CPD-TOPO order, GPUs filled in turn"
            }
            Celeritas::Adjusting => {
                adjusting(&mut s, &clusters, devices_by_speed(p)[0])?;
                "adjusting: Celeritas Alg. 2 over its fused clusters, best-effort on OOM"
            }
        };
        Ok(s.into_placement(note))
    }
}

/// The fused clusters, each a run of ops in CPD-TOPO order, in that order.
fn clusters(p: &Problem) -> Result<Vec<Vec<OpIdx>>> {
    let weights = op_weights(p.graph, reference_gpu(p.graph), p.cost);
    let smallest = p
        .cluster
        .devices
        .iter()
        .map(|d| d.memory_bytes)
        .fold(f64::INFINITY, f64::min);
    let opts = CeleritasOptions {
        memory_limit_bytes: 0.25 * smallest,
        ..CeleritasOptions::default()
    };
    let grouping = celeritas(p.graph, &weights, &opts)?;
    let order = cpd_topo_order(p.graph, &weights, opts.bandwidth_bytes_per_us);
    let mut out: Vec<Vec<OpIdx>> = vec![Vec::new(); grouping.num_groups()];
    for op in order {
        out[grouping.op_group[op] as usize].push(op);
    }
    out.retain(|c| !c.is_empty());
    Ok(out)
}

fn order_place(s: &mut Schedule, clusters: &[Vec<OpIdx>], by_speed: &[usize]) -> Result<()> {
    let mut k = 0;
    for c in clusters {
        s.within_deadline()?;
        while k + 1 < by_speed.len() && !s.unit_has_room(c, by_speed[k]) {
            k += 1;
        }
        let d = if s.unit_has_room(c, by_speed[k]) {
            by_speed[k]
        } else {
            s.most_free()
        };
        s.place_unit(c, d);
    }
    Ok(())
}

/// Eq. 8: the longest time to send one of the cluster's outputs from `from` to `to`.
fn back_cost(s: &Schedule, cluster: &[OpIdx], from: usize, to: usize) -> f64 {
    let g = s.p.graph;
    cluster
        .iter()
        .flat_map(|&op| g.out_edges(op).iter().map(|&e| g.edges()[e]))
        .filter(|edge| !cluster.contains(&edge.dst))
        .map(|edge| s.costs.cluster.transfer_us(from, to, edge.bytes))
        .fold(0.0, f64::max)
}

fn adjusting(s: &mut Schedule, clusters: &[Vec<OpIdx>], first: usize) -> Result<()> {
    let mut previous = first;
    for c in clusters {
        s.within_deadline()?;
        let est: Vec<f64> = (0..s.costs.devices)
            .map(|d| {
                if s.unit_has_room(c, d) {
                    s.unit_start_contended(c, d)
                } else {
                    f64::INFINITY
                }
            })
            .collect();
        let best = (0..est.len())
            .min_by(|&a, &b| est[a].total_cmp(&est[b]).then(a.cmp(&b)))
            .expect("there is a device");
        let d = if est[best].is_infinite() {
            s.most_free()
        } else if est[previous].is_infinite()
            || est[previous] - est[best] > back_cost(s, c, best, previous)
        {
            best
        } else {
            previous
        };
        s.place_unit(c, d);
        previous = d;
    }
    Ok(())
}
