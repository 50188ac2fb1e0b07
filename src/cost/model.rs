//! The cost model proper: compute time of an op on a GPU and transfer time between devices.
//!
//! Compute time (docs/modelling.md): the profiled time when the op carries one for the device
//! type, scaled linearly in the batch share (TAG §4.1.2); otherwise a roofline per kernel class
//! and GPU architecture, `launch + max(FLOPs / (peak · class efficiency · algorithm speed-up),
//! bytes / (memory bandwidth · memory efficiency))` ([`super::kernels`]). Ops that do not depend
//! on the batch (parameters, optimizer) are not scaled. Transfers cost latency + bytes /
//! bottleneck bandwidth of the route.

use super::attention::attention_share;
use super::collective::CommModel;
use super::fit::LinearBatchModel;
use super::host_dispatch::HostDispatch;
use super::kernels::{KernelClass, KernelEfficiency, KernelTable};
use super::memory_format::MemoryFormat;
use super::runtime_memory::RuntimeMemory;
#[cfg(test)]
use crate::cluster::Cluster;
use crate::cluster::GpuSpec;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::graph::{Dtype, Graph, Op, OpIdx};
use crate::precision::Precision;

/// Knobs of the compute and communication estimates.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CostModel {
    /// Kernel efficiencies per GPU architecture. Default: the shipped fitted table.
    pub kernels: KernelTable,
    /// Use the tensor-core peak where the GPU has one. Default false: TAG trains in FP32.
    pub use_tensor_cores: bool,
    /// Collective efficiency, fixed cost and interference with compute.
    pub comm: CommModel,
    /// The precision matrix products and convolutions run in: which peak they reach
    /// ([`Precision::matmul_tflops`]). Default FP32, TAG's setting.
    pub precision: Precision,
    /// The framework runtime's memory beyond the tensors. Default none, TAG's setting.
    pub runtime: RuntimeMemory,
    /// The layout of convolution activations: in NCHW a 16-bit convolution on the tensor cores
    /// also transposes its tensors. Default channels-last (no transposes).
    pub memory_format: MemoryFormat,
    /// The host's time to issue each op, which the GPU waits for when its kernels are shorter.
    /// Default none, TAG's setting.
    pub host: HostDispatch,
}

impl CostModel {
    /// One set of efficiencies for every GPU and kernel class, no fast convolution algorithms,
    /// the default communication knobs.
    #[cfg(test)]
    pub(crate) fn uniform(compute: f64, memory: f64, launch_us: f64) -> CostModel {
        CostModel {
            kernels: KernelTable::uniform(KernelEfficiency::uniform(compute, memory, launch_us)),
            ..CostModel::default()
        }
    }

    /// The efficiencies of `gpu`'s architecture.
    pub(crate) fn efficiency(&self, gpu: &GpuSpec) -> &KernelEfficiency {
        self.kernels.get(gpu.arch)
    }

    /// Time in µs of `op` on `gpu` when it processes `fraction` ∈ (0, 1] of the graph's batch.
    pub fn compute_time_us(&self, op: &Op, gpu: &GpuSpec, fraction: f64) -> f64 {
        match profiled_us(op, gpu) {
            Some(t) => self.scale_profiled(op, gpu, t, fraction),
            None => self.roofline_us(op, gpu, fraction),
        }
    }

    /// [`compute_time_us`](Self::compute_time_us) on a device of a cluster.
    #[cfg(test)]
    pub(crate) fn device_time_us(
        &self,
        op: &Op,
        cluster: &Cluster,
        device: usize,
        fraction: f64,
    ) -> f64 {
        self.compute_time_us(op, &cluster.devices[device].gpu, fraction)
    }

    /// One GPU's step with nothing overlapped: every op of `graph` at the full batch on `gpu`, one
    /// after another (a single-GPU iteration, as the calibration and `info` read it).
    pub fn serial_us(&self, graph: &Graph, gpu: &GpuSpec) -> f64 {
        graph
            .ops()
            .iter()
            .map(|op| self.compute_time_us(op, gpu, 1.0))
            .sum()
    }

    /// One GPU's step as a framework runs it: every op of `graph` at the full batch, one after
    /// another, each kernel starting once the host has issued it ([`HostDispatch`]): the flow
    /// shop of host and GPU, with the simulator's order on one GPU (of the ops ready, those the
    /// host does not issue first, such as a parameter's update once its gradient is ready, then
    /// the rest in program order). [`Self::serial_us`] when the host costs nothing; what `info`
    /// estimates per GPU type.
    pub fn single_gpu_us(&self, graph: &Graph, gpu: &GpuSpec) -> f64 {
        let (mut issued, mut done) = (0.0, 0.0_f64);
        for i in self.issue_order(graph) {
            let op = graph.op(i);
            issued += self.host.per_op_us(op.phase);
            done = done.max(issued) + self.compute_time_us(op, gpu, 1.0);
        }
        done
    }

    /// `graph`'s ops in a topological order that takes every ready op without host time before
    /// any with, and otherwise follows the program (the graph's topological order).
    fn issue_order(&self, graph: &Graph) -> Vec<OpIdx> {
        let mut rank = vec![0; graph.len()];
        for (r, i) in graph.topological_order().into_iter().enumerate() {
            rank[i] = r;
        }
        let mut waiting: Vec<usize> = (0..graph.len()).map(|i| graph.in_edges(i).len()).collect();
        let key = |i: OpIdx| {
            let hosted = self.host.per_op_us(graph.op(i).phase) > 0.0;
            Reverse((hosted, rank[i], i))
        };
        let mut ready: BinaryHeap<_> = (0..graph.len())
            .filter(|&i| waiting[i] == 0)
            .map(key)
            .collect();
        let mut order = Vec::with_capacity(graph.len());
        while let Some(Reverse((_, _, i))) = ready.pop() {
            order.push(i);
            for next in graph.successors(i) {
                waiting[next] -= 1;
                if waiting[next] == 0 {
                    ready.push(key(next));
                }
            }
        }
        order
    }

    /// A profiled full-batch time scaled to a batch share with the one-point linear batch model:
    /// the launch overhead stays fixed, the rest is proportional to the batch.
    fn scale_profiled(&self, op: &Op, gpu: &GpuSpec, full_batch_us: f64, fraction: f64) -> f64 {
        if !op.scales_with_batch() {
            return full_batch_us;
        }
        let launch = self.efficiency(gpu).launch_us;
        LinearBatchModel::from_single(1.0, full_batch_us, launch).eval(fraction)
    }

    /// Roofline estimate in µs for the op's kernel class on `gpu`'s architecture.
    pub(crate) fn roofline_us(&self, op: &Op, gpu: &GpuSpec, fraction: f64) -> f64 {
        let share = if op.scales_with_batch() {
            fraction
        } else {
            1.0
        };
        let e = self.efficiency(gpu);
        let class = KernelClass::of(op);
        let (efficiency, speedup) = e.compute(class);
        let mut transposes = 0.0;
        let (peak, efficiency, speedup) = match class {
            KernelClass::Memory => (self.peak_flops_per_us(gpu), efficiency, speedup),
            _ => match self.tensor_core_peak(op, class, gpu) {
                Some(peak) if class == KernelClass::Attention => {
                    (peak, self.attention_share(op, gpu), 1.0)
                }
                Some(peak) if class == KernelClass::Gemm => (peak, e.tensor, 1.0),
                Some(peak) => {
                    if self.memory_format.transposes() {
                        transposes = layout_transposes_us(op, gpu, e, share);
                    }
                    (peak, e.tensor_conv, 1.0)
                }
                None => (self.peak_flops_per_us(gpu), efficiency, speedup),
            },
        };
        let compute = op.flops * share / speedup / (peak * efficiency);
        let memory = op.bytes_accessed * share / (gpu.mem_bandwidth() * e.memory);
        e.launch_us + compute.max(memory) + transposes
    }

    /// Roofline time of one memory-bound kernel doing `flops` with `bytes` of memory traffic: what
    /// the compiler charges for the Concat and AddN ops it inserts.
    pub(crate) fn kernel_us(&self, gpu: &GpuSpec, flops: f64, bytes: f64) -> f64 {
        let e = self.efficiency(gpu);
        let compute = flops / (self.peak_flops_per_us(gpu) * e.conv);
        let memory = bytes / (gpu.mem_bandwidth() * e.memory);
        e.launch_us + compute.max(memory)
    }

    /// The share of the tensor-core peak fused attention reaches on `gpu`: the published 16-bit
    /// kernels' speed at its shape ([`attention_share`]), or the matrix products' share in 32
    /// bits and where nothing is published.
    fn attention_share(&self, op: &Op, gpu: &GpuSpec) -> f64 {
        let published = match (op.dtype, op.attention) {
            (Dtype::Half, Some(shape)) => attention_share(gpu.arch, &shape),
            _ => None,
        };
        published.unwrap_or(self.efficiency(gpu).tensor)
    }

    /// The tensor-core peak, FLOPs per µs, when matrix product or convolution `op` runs on
    /// `gpu`'s tensor cores in this precision (TF32 or 16-bit); `None` when it runs on the FP32
    /// units (or under `use_tensor_cores`, TAG's single peak). On the tensor cores cuDNN runs
    /// implicit GEMM, not Winograd or FFT, so no fast algorithm's speed-up applies.
    fn tensor_core_peak(&self, op: &Op, class: KernelClass, gpu: &GpuSpec) -> Option<f64> {
        if self.use_tensor_cores {
            return None;
        }
        // PyTorch lets cuDNN run FP32 convolutions in TF32 by default (`cudnn.allow_tf32`), and
        // Ampere's fitted FP32 convolution share already reflects it: TF32 changes GEMMs only.
        let is_conv = !matches!(class, KernelClass::Gemm | KernelClass::Attention);
        if is_conv && op.dtype == Dtype::F32 {
            return None;
        }
        let tflops = self.precision.matmul_tflops(op.dtype, gpu);
        (tflops > gpu.fp32_tflops).then_some(tflops * 1e6)
    }

    /// Peak FLOPs per µs the roofline uses on `gpu`.
    pub(crate) fn peak_flops_per_us(&self, gpu: &GpuSpec) -> f64 {
        if self.use_tensor_cores && gpu.tensor_tflops > 0.0 {
            gpu.tensor_flops_per_us()
        } else {
            gpu.fp32_flops_per_us()
        }
    }

    /// Time in µs to send `bytes` from device `a` to device `b` (0 for a device to itself).
    #[cfg(test)]
    pub(crate) fn transfer_us(&self, cluster: &Cluster, a: usize, b: usize, bytes: f64) -> f64 {
        transfer_us(cluster, a, b, bytes)
    }
}

/// The op's profiled full-batch time on `gpu`: under its name or an alias, else under its family's
/// name ("V100", see [`GpuSpec::profiled_as`]).
pub(crate) fn profiled_us(op: &Op, gpu: &GpuSpec) -> Option<f64> {
    // Called for every replica of every op in every simulation; zoo ops have no profile.
    if op.profiled_us.is_empty() {
        return None;
    }
    let under = |applies: &dyn Fn(&str) -> bool| {
        op.profiled_us
            .iter()
            .find(|(key, _)| applies(key))
            .map(|(_, &t)| t)
    };
    under(&|key| gpu.matches(key)).or_else(|| under(&|key| gpu.profiled_as(key)))
}

/// The two transposes a tensor-core convolution `op` pays on `gpu` (efficiencies `e`) when its
/// activations are NCHW ([`MemoryFormat::transposes`]): two memory-bound kernels, each with its
/// launch, that read and write every byte the convolution touches once more.
fn layout_transposes_us(op: &Op, gpu: &GpuSpec, e: &KernelEfficiency, share: f64) -> f64 {
    2.0 * e.launch_us + 2.0 * op.bytes_accessed * share / (gpu.mem_bandwidth() * e.memory)
}

/// latency + bytes / bandwidth.
#[cfg(test)]
pub(crate) fn transfer_time_us(bytes: f64, bandwidth: f64, latency_us: f64) -> f64 {
    latency_us + bytes / bandwidth
}

/// Time in µs to send `bytes` from device `a` to device `b` over the cluster's route.
#[cfg(test)]
pub(crate) fn transfer_us(cluster: &Cluster, a: usize, b: usize, bytes: f64) -> f64 {
    if a == b {
        return 0.0;
    }
    let route = cluster.path(a, b);
    transfer_time_us(bytes, route.bandwidth, route.latency_us)
}
