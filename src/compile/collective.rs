//! How NCCL runs an AllReduce on the cluster's links: the resources it holds and the bandwidth its
//! rings reach.
//!
//! NCCL builds one ring per channel; on an NVLink mesh it builds as many rings as each GPU's port
//! has lanes (links to distinct peers), so the ring's bandwidth is lanes × pair bandwidth and the
//! collective holds every lane of each GPU's ports while it runs. Between machines every channel
//! crosses the one NIC, which bounds the whole ring. The ring visits devices in index order, so it
//! crosses each NIC once per direction (NCCL's topology-aware ring). The time is
//! [`crate::cost::CommModel::allreduce_us`]: the faster of ring and tree, plus a fixed cost.

use crate::cluster::Cluster;

/// Resources an AllReduce holds, with the lanes it takes of each, and its ring's figures.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RingPlan {
    /// Link indices (of the cluster) and lanes taken of each.
    pub links: Vec<(usize, u32)>,
    /// Rate of the slowest hop with all channels, B/µs (before NCCL's efficiency).
    pub bandwidth: f64,
    /// Largest latency of one hop, µs.
    pub latency_us: f64,
}

/// The plan of a ring AllReduce among `ring` (device indices, in ring order, at least two).
pub(crate) fn ring_plan(cluster: &Cluster, ring: &[u32]) -> RingPlan {
    let n = ring.len();
    let channels = channels(cluster, ring);
    let mut links: Vec<(usize, u32)> = Vec::new();
    let mut bandwidth = f64::INFINITY;
    let mut latency_us: f64 = 0.0;
    for k in 0..n {
        let (a, b) = (ring[k] as usize, ring[(k + 1) % n] as usize);
        let same_machine = cluster.devices[a].machine == cluster.devices[b].machine;
        let hop_channels = if same_machine { channels } else { 1 };
        bandwidth = bandwidth.min(cluster.bandwidth(a, b) * f64::from(hop_channels));
        latency_us = latency_us.max(cluster.latency(a, b));
        for &l in cluster.route_links(a, b).iter() {
            let l = l as usize;
            let lanes = cluster.links[l].lanes.min(hop_channels).max(1);
            links.push((l, lanes));
        }
    }
    links.sort_unstable();
    links.dedup_by(|x, y| {
        // The same link twice (a two-device ring): keep the larger lane count.
        x.0 == y.0 && {
            y.1 = y.1.max(x.1);
            true
        }
    });
    RingPlan {
        links,
        bandwidth,
        latency_us,
    }
}

/// Rings NCCL runs at once: the fewest port lanes of any device with a ring neighbour on its own
/// machine (1 when every hop crosses machines).
fn channels(cluster: &Cluster, ring: &[u32]) -> u32 {
    let n = ring.len();
    (0..n)
        .filter(|&k| {
            let (a, b) = (ring[k] as usize, ring[(k + 1) % n] as usize);
            cluster.devices[a].machine == cluster.devices[b].machine
        })
        .flat_map(|k| {
            let (a, b) = (ring[k] as usize, ring[(k + 1) % n] as usize);
            [
                cluster.links[cluster.devices[a].port_out].lanes,
                cluster.links[cluster.devices[b].port_in].lanes,
            ]
        })
        .min()
        .unwrap_or(1)
}
