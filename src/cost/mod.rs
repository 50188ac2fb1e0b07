//! The cost model: compute time of an op on a GPU, transfer time between devices, and the time
//! of gradient synchronisation (ring AllReduce, parameter server).
//!
//! Compute time (docs/modelling.md, "Modelling conventions"): the profiled time when the op
//! carries one for the device type, scaled linearly in the batch share (TAG §4.1.2); otherwise a
//! roofline estimate `launch overhead + max(FLOPs / (peak · compute_efficiency · algorithm
//! speed-up), bytes / (memory bandwidth · memory_efficiency))`, where the algorithm speed-up is
//! Winograd's for 3x3 stride-1 convolutions and 1 otherwise. Ops that do not depend on the batch
//! (parameters, optimizer) are not scaled. Transfers cost latency + bytes / bottleneck bandwidth of the route.

pub mod fit;

pub use fit::{LinearBatchModel, SegmentedLinear, fit_segmented, least_squares, profile_sizes};

use crate::cluster::{Cluster, GpuSpec};
use crate::graph::Op;

/// Knobs of the compute-time estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct CostModel {
    /// Fraction of peak FLOP rate real kernels reach. Default 0.6: dense convolutions and GEMMs in
    /// cuDNN/cuBLAS typically run at 50–70% of peak in FP32.
    pub compute_efficiency: f64,
    /// Fraction of peak memory bandwidth reached by memory-bound kernels. Default 0.8 (what
    /// STREAM-like copies reach on HBM2 / GDDR).
    pub memory_efficiency: f64,
    /// Fixed cost of launching one kernel, µs. Default 5 µs (CUDA launch plus framework dispatch).
    pub launch_overhead_us: f64,
    /// Use the tensor-core peak where the GPU has one. Default false: TAG trains in FP32.
    pub use_tensor_cores: bool,
    /// How much faster than its nominal FLOPs a Winograd-eligible convolution (3x3, stride 1;
    /// forward and both gradients) runs. Default 2.0: Winograd's F(2x2, 3x3) does 2.25× fewer
    /// multiplications than direct convolution (Lavin & Gray, CVPR 2016) and F(4x4, 3x3) 4×, of
    /// which the input/output transforms give some back. It is what makes VGG's stacks of 3x3
    /// convolutions run at about twice ResNet's rate per nominal FLOP, as every published
    /// training benchmark shows (`tests/cost.rs` checks the published ratios). 1.0 disables it.
    pub winograd_speedup: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            compute_efficiency: 0.6,
            memory_efficiency: 0.8,
            launch_overhead_us: 5.0,
            use_tensor_cores: false,
            winograd_speedup: 2.0,
        }
    }
}

impl CostModel {
    /// Time in µs of `op` on `gpu` when it processes `fraction` ∈ (0, 1] of the graph's batch.
    pub fn compute_time_us(&self, op: &Op, gpu: &GpuSpec, fraction: f64) -> f64 {
        match profiled_us(op, gpu) {
            Some(t) => self.scale_profiled(op, t, fraction),
            None => self.roofline_us(op, gpu, fraction),
        }
    }

    /// [`compute_time_us`](Self::compute_time_us) on a device of a cluster.
    pub fn device_time_us(&self, op: &Op, cluster: &Cluster, device: usize, fraction: f64) -> f64 {
        self.compute_time_us(op, &cluster.devices[device].gpu, fraction)
    }

    /// A profiled full-batch time scaled to a batch share with the one-point linear batch model:
    /// the launch overhead stays fixed, the rest is proportional to the batch.
    fn scale_profiled(&self, op: &Op, full_batch_us: f64, fraction: f64) -> f64 {
        if !op.scales_with_batch() {
            return full_batch_us;
        }
        LinearBatchModel::from_single(1.0, full_batch_us, self.launch_overhead_us).eval(fraction)
    }

    /// Roofline estimate in µs: the slower of compute and memory traffic, plus the launch overhead.
    pub fn roofline_us(&self, op: &Op, gpu: &GpuSpec, fraction: f64) -> f64 {
        let share = if op.scales_with_batch() {
            fraction
        } else {
            1.0
        };
        let flops = op.flops * share / self.algorithm_speedup(op);
        self.kernel_us(gpu, flops, op.bytes_accessed * share)
    }

    /// The factor by which the kernel's algorithm beats the op's nominal FLOP count.
    fn algorithm_speedup(&self, op: &Op) -> f64 {
        match op.conv_window {
            Some(w) if w.winograd_eligible() => self.winograd_speedup,
            _ => 1.0,
        }
    }

    /// Roofline time of one kernel doing `flops` with `bytes` of memory traffic: also what the
    /// compiler charges for the Concat and AddN ops it inserts.
    pub fn kernel_us(&self, gpu: &GpuSpec, flops: f64, bytes: f64) -> f64 {
        let compute = flops / (self.peak_flops_per_us(gpu) * self.compute_efficiency);
        let memory = bytes / (gpu.mem_bandwidth() * self.memory_efficiency);
        self.launch_overhead_us + compute.max(memory)
    }

    /// Peak FLOPs per µs the roofline uses on `gpu`.
    pub fn peak_flops_per_us(&self, gpu: &GpuSpec) -> f64 {
        if self.use_tensor_cores && gpu.tensor_tflops > 0.0 {
            gpu.tensor_flops_per_us()
        } else {
            gpu.fp32_flops_per_us()
        }
    }

    /// Time in µs to send `bytes` from device `a` to device `b` (0 for a device to itself).
    pub fn transfer_us(&self, cluster: &Cluster, a: usize, b: usize, bytes: f64) -> f64 {
        transfer_us(cluster, a, b, bytes)
    }
}

/// The op's profiled full-batch time on `gpu`, looked up by the GPU's name or any alias.
pub fn profiled_us(op: &Op, gpu: &GpuSpec) -> Option<f64> {
    op.profiled_us
        .iter()
        .find(|(key, _)| gpu.matches(key))
        .map(|(_, &t)| t)
}

/// latency + bytes / bandwidth.
pub fn transfer_time_us(bytes: f64, bandwidth: f64, latency_us: f64) -> f64 {
    latency_us + bytes / bandwidth
}

/// Time in µs to send `bytes` from device `a` to device `b` over the cluster's route.
pub fn transfer_us(cluster: &Cluster, a: usize, b: usize, bytes: f64) -> f64 {
    if a == b {
        return 0.0;
    }
    let route = cluster.path(a, b);
    transfer_time_us(bytes, route.bandwidth, route.latency_us)
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

/// Ring AllReduce among `devices` of a cluster. The ring visits the devices in index order, so
/// each machine's devices are contiguous and the ring crosses each NIC once per direction, as
/// NCCL's topology-aware rings do. B is the slowest neighbour bandwidth, latency the largest.
pub fn ring_allreduce_us(cluster: &Cluster, devices: &[usize], bytes: f64) -> f64 {
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
pub fn ps_time_us(bytes: f64, d: usize, b_in: f64, b_out: f64, latency_us: f64) -> f64 {
    if d <= 1 {
        return 0.0;
    }
    let workers = (d - 1) as f64;
    workers * bytes / b_in + workers * bytes / b_out + 2.0 * latency_us
}

/// Parameter-server sync among `devices` with `ps` as the server, on the cluster's links. Pushes
/// that enter the PS through the same link (its NIC-in for remote machines) queue one after the
/// other; those on different links (intra-machine pair links) run side by side. The push phase
/// lasts as long as the busiest PS ingress link, the pull phase as the busiest egress link; each
/// phase adds the largest latency once. With every worker behind one shared link this is exactly
/// [`ps_time_us`].
pub fn ps_sync_us(cluster: &Cluster, devices: &[usize], ps: usize, bytes: f64) -> f64 {
    let workers: Vec<usize> = devices.iter().copied().filter(|&w| w != ps).collect();
    if workers.is_empty() {
        return 0.0;
    }
    let push = busiest_link(workers.iter().map(|&w| {
        let r = cluster.path(w, ps);
        (
            *r.links.last().expect("distinct devices have a route"),
            bytes / r.bandwidth,
            r.latency_us,
        )
    }));
    let pull = busiest_link(workers.iter().map(|&w| {
        let r = cluster.path(ps, w);
        (r.links[0], bytes / r.bandwidth, r.latency_us)
    }));
    push + pull
}

/// Given (link, transfer time, latency) per transfer: the largest per-link total plus the largest
/// latency.
fn busiest_link(transfers: impl Iterator<Item = (usize, f64, f64)>) -> f64 {
    let mut per_link = std::collections::BTreeMap::new();
    let mut latency = 0.0f64;
    for (link, t, l) in transfers {
        *per_link.entry(link).or_insert(0.0) += t;
        latency = latency.max(l);
    }
    per_link.values().fold(0.0f64, |a, &b| a.max(b)) + latency
}
