//! Closed forms of gradient synchronisation: ring and tree AllReduce as NCCL runs them, and the
//! parameter server; plus the communication knobs of the cost model.

use crate::cluster::Cluster;

/// How collectives and transfers behave beyond the links' bandwidths.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommModel {
    /// Share of the links' bandwidth an NCCL AllReduce moves data at (its bus bandwidth over the
    /// link rate). Default 0.8: nccl-tests `all_reduce_perf` on large messages reaches about 80%
    /// of the NVLink or PCIe rate (docs/fidelity.md lists the measurements).
    pub nccl_efficiency: f64,
    /// Fixed cost of one collective, µs: NCCL's kernel launch and the framework's dispatch of the
    /// op (per-tensor AllReduce pays it once per gradient). Default 20 µs.
    pub collective_launch_us: f64,
    /// Share of a collective's duration by which it slows the compute of the GPUs taking part
    /// (NCCL's kernels occupy SMs and memory bandwidth while they run). Default 0.1.
    pub compute_interference: f64,
}

impl Default for CommModel {
    fn default() -> Self {
        CommModel {
            nccl_efficiency: 0.8,
            collective_launch_us: 20.0,
            compute_interference: 0.1,
        }
    }
}

impl CommModel {
    /// Links at their full rate, no fixed cost, no interference: the closed forms bare.
    pub fn ideal() -> CommModel {
        CommModel {
            nccl_efficiency: 1.0,
            collective_launch_us: 0.0,
            compute_interference: 0.0,
        }
    }

    /// An AllReduce of `bytes` among `d` devices whose ring runs at `bandwidth` (the links' rate,
    /// before the NCCL efficiency) with `latency_us` per step: the fixed cost plus the faster of
    /// NCCL's ring and tree algorithms (NCCL's tuner picks by the same predicted times).
    pub(crate) fn allreduce_us(
        &self,
        bytes: f64,
        d: usize,
        bandwidth: f64,
        latency_us: f64,
    ) -> f64 {
        if d <= 1 {
            return 0.0;
        }
        let b = bandwidth * self.nccl_efficiency;
        self.collective_launch_us
            + ring_allreduce_time_us(bytes, d, b, latency_us)
                .min(tree_allreduce_time_us(bytes, d, b, latency_us))
    }
}

/// Ring AllReduce of `bytes` among `d` devices: 2(d−1)/d · S / B + 2(d−1) · latency (reduce-scatter
/// then all-gather, each d−1 steps of S/d per device). Zero for d ≤ 1.
pub fn ring_allreduce_time_us(bytes: f64, d: usize, bandwidth: f64, latency_us: f64) -> f64 {
    if d <= 1 {
        return 0.0;
    }
    let steps = (d - 1) as f64;
    2.0 * steps / d as f64 * bytes / bandwidth + 2.0 * steps * latency_us
}

/// NCCL's (double binary) tree AllReduce: a reduce up and a broadcast down, each pipelined so
/// every device sends and receives about S once per phase: 2 · S / B + 2 · ⌈log₂ d⌉ · latency.
/// Its bandwidth term is a little worse than the ring's, its latency term far better at scale, so
/// NCCL uses it for small messages and many GPUs. Zero for d ≤ 1.
pub fn tree_allreduce_time_us(bytes: f64, d: usize, bandwidth: f64, latency_us: f64) -> f64 {
    if d <= 1 {
        return 0.0;
    }
    let depth = (d as f64).log2().ceil();
    2.0 * bytes / bandwidth + 2.0 * depth * latency_us
}

/// Ring AllReduce among `devices` of a cluster, the closed form on the cluster's pair links. The
/// ring visits the devices in index order, so each machine's devices are contiguous and the ring
/// crosses each NIC once per direction, as NCCL's topology-aware rings do. B is the slowest
/// neighbour bandwidth, latency the largest. (The compiler's collectives add the ports' lanes and
/// the NCCL knobs; this bare form serves estimates.)
pub(crate) fn ring_allreduce_us(cluster: &Cluster, devices: &[usize], bytes: f64) -> f64 {
    let mut ring = devices.to_vec();
    ring.sort_unstable();
    ring.dedup();
    let d = ring.len();
    if d <= 1 {
        return 0.0;
    }
    let hops = (0..d).map(|i| cluster.path(ring[i], ring[(i + 1) % d]));
    let (bandwidth, latency) = hops.fold((f64::INFINITY, 0.0f64), |(b, l), r| {
        (b.min(r.bandwidth), l.max(r.latency_us))
    });
    ring_allreduce_time_us(bytes, d, bandwidth, latency)
}

/// Parameter-server sync of `bytes` among `d` devices, one of which is the PS, when every worker's
/// traffic shares the PS's links: the d−1 pushes queue on the PS's incoming link, the d−1 pulls
/// on its outgoing one, and each direction pays one latency: (d−1)·S/B_in + (d−1)·S/B_out +
/// 2·latency. The PS's own replica exchanges nothing. Zero for d ≤ 1.
#[cfg(test)]
pub(crate) fn ps_time_us(bytes: f64, d: usize, b_in: f64, b_out: f64, latency_us: f64) -> f64 {
    if d <= 1 {
        return 0.0;
    }
    let workers = (d - 1) as f64;
    workers * bytes / b_in + workers * bytes / b_out + 2.0 * latency_us
}

/// Parameter-server sync among `devices` with `ps` as the server, on the cluster's links. Pushes
/// that enter the PS through the same link (its ingress port, or its NIC-in for remote machines)
/// share it: they take total / lanes, and never less than the longest one (an NVLink port serves
/// as many peers at once as it has lanes). The push phase lasts as long as the busiest PS ingress
/// link, the pull phase as the busiest egress link; each phase adds the largest latency once.
/// With every worker behind one single-lane link this is exactly [`ps_time_us`].
#[cfg(test)]
pub(crate) fn ps_sync_us(cluster: &Cluster, devices: &[usize], ps: usize, bytes: f64) -> f64 {
    let workers: Vec<usize> = devices.iter().copied().filter(|&w| w != ps).collect();
    if workers.is_empty() {
        return 0.0;
    }
    let push = busiest_link(
        cluster,
        workers.iter().map(|&w| {
            let r = cluster.path(w, ps);
            (
                *r.links.last().expect("distinct devices have a route"),
                bytes / r.bandwidth,
                r.latency_us,
            )
        }),
    );
    let pull = busiest_link(
        cluster,
        workers.iter().map(|&w| {
            let r = cluster.path(ps, w);
            // Inside a machine the route is [pair, egress port, ingress port]: the PS's port.
            let first = if r.links.len() == 3 {
                r.links[1]
            } else {
                r.links[0]
            };
            (first, bytes / r.bandwidth, r.latency_us)
        }),
    );
    push + pull
}

/// Given (link, transfer time, latency) per transfer: the busiest link's time (its total over its
/// lanes, at least its longest transfer) plus the largest latency.
#[cfg(test)]
fn busiest_link(cluster: &Cluster, transfers: impl Iterator<Item = (usize, f64, f64)>) -> f64 {
    let mut per_link = std::collections::BTreeMap::new();
    let mut latency = 0.0f64;
    for (link, t, l) in transfers {
        let (total, longest) = per_link.entry(link).or_insert((0.0, 0.0f64));
        *total += t;
        *longest = longest.max(t);
        latency = latency.max(l);
    }
    let busiest = per_link.iter().map(|(&link, &(total, longest))| {
        (total / f64::from(cluster.links[link].lanes)).max(longest)
    });
    busiest.fold(0.0f64, f64::max) + latency
}
