//! Celeritas (Xu et al.) placement over its coarse graph: ops in CPD-TOPO order fused into
//! clusters of consecutive ops (optimal operation fusion, [`crate::group::celeritas`], with the
//! paper's cluster memory limit of a quarter of the smallest GPU), then
//! - `order-place`: clusters in CPD-TOPO order fill the fastest GPU up to its memory, then the
//!   next fastest, and so on;
//! - `adjusting`: Alg. 2 — a cluster stays on the previous cluster's GPU unless another GPU's
//!   earliest start is earlier by more than the cost of sending its output back
//!   (`back_cost`); GPUs without room are skipped, and when none has room the one with the most
//!   free memory takes it (the paper's best-effort rule; the simulator then reports OOM).
//!
//! Within a cluster, ops run in CPD-TOPO order, inserted into idle gaps (the list machinery), and
//! the schedule's start times are the execution order.

use super::list::{Costs, Schedule};
use super::metis::devices_by_speed;
use super::{Budget, Placement, Placer, Problem};
use crate::error::Result;
use crate::graph::OpIdx;
use crate::group::celeritas::{CeleritasOptions, celeritas, cpd_topo_order};
use crate::group::{op_weights, reference_gpu};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Celeritas {
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

    fn place(&self, p: &Problem, _budget: &Budget) -> Result<Placement> {
        let clusters = clusters(p)?;
        let costs = Costs::new(p);
        let mut s = Schedule::new(*p, &costs);
        let note = match self {
            Celeritas::OrderPlace => {
                order_place(&mut s, &clusters, &devices_by_speed(p));
                "order-place: Celeritas clusters in CPD-TOPO order, GPUs filled in turn"
            }
            Celeritas::Adjusting => {
                adjusting(&mut s, &clusters, devices_by_speed(p)[0]);
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

fn cluster_bytes(s: &Schedule, cluster: &[OpIdx]) -> f64 {
    cluster.iter().map(|&op| s.costs.own_bytes[op]).sum()
}

fn has_room(s: &Schedule, cluster: &[OpIdx], d: usize) -> bool {
    s.memory[d] + cluster_bytes(s, cluster) <= s.costs.capacity[d]
}

/// Assign the cluster's ops to `d`; the schedule stops claiming to fit if the conservative
/// estimate (inputs received included) overflows `d`.
fn place_cluster(s: &mut Schedule, cluster: &[OpIdx], d: usize) {
    for &op in cluster {
        s.assign(op, d, true);
    }
    if s.memory[d] > s.costs.capacity[d] {
        s.fits = false;
    }
}

/// The GPU with the most free memory (the best-effort target).
fn most_free(s: &Schedule) -> usize {
    (0..s.costs.devices)
        .max_by(|&a, &b| {
            let free = |d: usize| s.costs.capacity[d] - s.memory[d];
            free(a).total_cmp(&free(b)).then(b.cmp(&a))
        })
        .expect("there is a device")
}

fn order_place(s: &mut Schedule, clusters: &[Vec<OpIdx>], by_speed: &[usize]) {
    let mut k = 0;
    for c in clusters {
        while k + 1 < by_speed.len() && !has_room(s, c, by_speed[k]) {
            k += 1;
        }
        let d = if has_room(s, c, by_speed[k]) {
            by_speed[k]
        } else {
            most_free(s)
        };
        place_cluster(s, c, d);
    }
}

/// Earliest start of a cluster on `d`: its inputs from outside the cluster have arrived and `d`
/// has an idle slot as long as the whole cluster.
fn cluster_est(s: &Schedule, cluster: &[OpIdx], d: usize) -> f64 {
    let g = s.p.graph;
    let mut ready: f64 = 0.0;
    for &op in cluster {
        for &e in g.in_edges(op) {
            let edge = g.edges()[e];
            if let Some(from) = s.device[edge.src] {
                let arrive = s.finish[edge.src] + s.costs.routes.transfer_us(from, d, edge.bytes);
                ready = ready.max(arrive);
            }
        }
    }
    let total: f64 = cluster.iter().map(|&op| s.costs.compute[op][d]).sum();
    s.gap_after(d, ready, total)
}

/// Eq. 8: the longest time to send one of the cluster's outputs from `from` to `to`.
fn back_cost(s: &Schedule, cluster: &[OpIdx], from: usize, to: usize) -> f64 {
    let g = s.p.graph;
    cluster
        .iter()
        .flat_map(|&op| g.out_edges(op).iter().map(|&e| g.edges()[e]))
        .filter(|edge| !cluster.contains(&edge.dst))
        .map(|edge| s.costs.routes.transfer_us(from, to, edge.bytes))
        .fold(0.0, f64::max)
}

fn adjusting(s: &mut Schedule, clusters: &[Vec<OpIdx>], first: usize) {
    let mut previous = first;
    for c in clusters {
        let est: Vec<f64> = (0..s.costs.devices)
            .map(|d| {
                if has_room(s, c, d) {
                    cluster_est(s, c, d)
                } else {
                    f64::INFINITY
                }
            })
            .collect();
        let best = (0..est.len())
            .min_by(|&a, &b| est[a].total_cmp(&est[b]).then(a.cmp(&b)))
            .expect("there is a device");
        let d = if est[best].is_infinite() {
            most_free(s)
        } else if est[previous].is_infinite()
            || est[previous] - est[best] > back_cost(s, c, best, previous)
        {
            best
        } else {
            previous
        };
        place_cluster(s, c, d);
        previous = d;
    }
}
