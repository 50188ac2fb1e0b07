//! The collectives of a hybrid plan, in closed form: tensor parallelism's AllReduces (or their
//! reduce-scatter + all-gather halves under sequence parallelism), data parallelism's gradient
//! AllReduce, ZeRO's reduce-scatter and all-gather, on the rings NCCL builds over the cluster.
//!
//! Volumes per GPU for a ring of `d` over `S` bytes: AllReduce 2(d−1)/d·S, reduce-scatter and
//! all-gather (d−1)/d·S each. Megatron's tensor parallelism (Shoeybi et al. 2019, §3) runs two
//! AllReduces of the layer's activation b·s·h in forward and two in backward; ZeRO-1/2 move what
//! an AllReduce moves (2Ψ), ZeRO-3 adds the backward all-gather (3Ψ, 1.5×).

use crate::cluster::Cluster;
use crate::compile::collective::ring_plan;
use crate::cost::CostModel;

#[cfg(test)]
use super::plan::ZeroStage;

/// A ring over some GPUs: how many, and the bandwidth and latency of its slowest hop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ring {
    pub size: usize,
    /// B/µs, before NCCL's efficiency.
    pub bandwidth: f64,
    pub latency_us: f64,
}

impl Ring {
    /// The ring NCCL runs over `devices` when `sharing` such rings cross each machine's NIC at
    /// once (the data-parallel rings of a stage's tensor-parallel ranks all do).
    pub(crate) fn over(cluster: &Cluster, devices: &[usize], sharing: usize) -> Ring {
        let mut ring: Vec<u32> = devices.iter().map(|&d| d as u32).collect();
        ring.sort_unstable();
        if ring.len() < 2 {
            return Ring {
                size: ring.len(),
                bandwidth: f64::INFINITY,
                latency_us: 0.0,
            };
        }
        let plan = ring_plan(cluster, &ring);
        let n = ring.len();
        let crossing = (0..n)
            .map(|k| (ring[k] as usize, ring[(k + 1) % n] as usize))
            .filter(|&(a, b)| cluster.devices[a].machine != cluster.devices[b].machine)
            .map(|(a, b)| cluster.bandwidth(a, b) / sharing.max(1) as f64)
            .fold(f64::INFINITY, f64::min);
        Ring {
            size: n,
            bandwidth: plan.bandwidth.min(crossing),
            latency_us: plan.latency_us,
        }
    }

    /// An AllReduce of `bytes`, µs: NCCL's faster of ring and tree, with its fixed cost.
    pub(crate) fn allreduce_us(&self, cost: &CostModel, bytes: f64) -> f64 {
        cost.comm
            .allreduce_us(bytes, self.size, self.bandwidth, self.latency_us)
    }

    /// A reduce-scatter or an all-gather of `bytes` (the whole, before or after sharding), µs:
    /// (d−1)/d·S/B + (d−1)·latency, with the fixed cost.
    pub(crate) fn half_us(&self, cost: &CostModel, bytes: f64) -> f64 {
        if self.size <= 1 {
            return 0.0;
        }
        let steps = (self.size - 1) as f64;
        let b = self.bandwidth * cost.comm.nccl_efficiency;
        cost.comm.collective_launch_us
            + steps / self.size as f64 * bytes / b
            + steps * self.latency_us
    }
}

/// Bytes each GPU sends per tensor-parallel layer and pass (forward or backward) over a ring of
/// `t`: two AllReduces of the activation (`activation_bytes` = b·s·h at its element size), or
/// with sequence parallelism two all-gathers and two reduce-scatters of it — the same volume.
#[cfg(test)]
pub(crate) fn tp_bytes_per_layer_pass(
    activation_bytes: f64,
    t: usize,
    sequence_parallel: bool,
) -> f64 {
    let d = t as f64;
    if t <= 1 {
        return 0.0;
    }
    let half = (d - 1.0) / d * activation_bytes;
    if sequence_parallel {
        4.0 * half
    } else {
        2.0 * (2.0 * half)
    }
}

/// Bytes each GPU sends to synchronise `params` parameters of `element_bytes` among `d` replicas
/// in one iteration (one micro-batch for ZeRO-3, whose gathers repeat per micro-batch): an
/// AllReduce (2(d−1)/d·Ψ) for stages 0–2, plus the backward all-gather for stage 3 (3(d−1)/d·Ψ).
#[cfg(test)]
pub(crate) fn dp_bytes(params: f64, element_bytes: f64, d: usize, zero: ZeroStage) -> f64 {
    let share = (d.max(1) - 1) as f64 / d.max(1) as f64 * params * element_bytes;
    match zero {
        ZeroStage::Parameters => 3.0 * share,
        _ => 2.0 * share,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1e-300)
    }

    /// Megatron: per layer two AllReduces of b·s·h forward (and two backward); a ring AllReduce
    /// sends 2(t−1)/t of its bytes.
    #[test]
    fn tensor_parallel_volume_is_two_allreduces_of_the_activation() {
        let (b, s, h) = (4.0, 2048.0, 4096.0);
        let act = b * s * h * 2.0;
        for t in [2usize, 4, 8] {
            let allreduce = 2.0 * (t as f64 - 1.0) / t as f64 * act;
            assert!(close(
                tp_bytes_per_layer_pass(act, t, false),
                2.0 * allreduce
            ));
            // Sequence parallelism: reduce-scatter + all-gather per AllReduce, equal volume.
            assert!(close(
                tp_bytes_per_layer_pass(act, t, true),
                2.0 * allreduce
            ));
        }
        assert_eq!(tp_bytes_per_layer_pass(act, 1, false), 0.0);
    }

    /// The ZeRO paper §7: stages 1 and 2 move data parallelism's 2Ψ, stage 3 1.5× that.
    #[test]
    fn zero_3_moves_one_and_a_half_times_data_parallelism() {
        for d in [2usize, 8, 64, 1024] {
            let dp = dp_bytes(7e9, 2.0, d, ZeroStage::None);
            assert!(close(dp_bytes(7e9, 2.0, d, ZeroStage::Optimizer), dp));
            assert!(close(dp_bytes(7e9, 2.0, d, ZeroStage::Gradients), dp));
            assert!(close(
                dp_bytes(7e9, 2.0, d, ZeroStage::Parameters),
                1.5 * dp
            ));
            assert!(close(dp, 2.0 * (d as f64 - 1.0) / d as f64 * 14e9));
        }
    }
}
