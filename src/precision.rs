//! The numeric precision of a training step, with PyTorch's automatic mixed precision (autocast)
//! semantics: which ops run in 16-bit floats, what their tensors weigh, and which GPUs offer each
//! precision.
//!
//! - `fp32`: every op in FP32 on the CUDA cores (TAG's setting, and PyTorch's default for
//!   matrix products: `torch.backends.cuda.matmul.allow_tf32 = False`).
//! - `tf32`: the same tensors, matrix products and convolutions on the tensor cores in TF32
//!   (`allow_tf32 = True`); Volta and older have no TF32 and run them in FP32, as PyTorch does.
//! - `bf16` and `fp16`: `torch.autocast`. Matrix products and convolutions run in 16 bits on the
//!   tensor cores and produce 16-bit outputs; softmax, layer and group norms, losses,
//!   reductions, `exp`/`log`/`pow` run in FP32 (autocast's FP32 list; batch norm is not on it and
//!   normalises 16-bit activations); every other op takes its inputs' type,
//!   FP32 when any input is FP32 (PyTorch's type promotion). Parameters, their gradients and the
//!   optimizer state stay FP32 (master weights), so gradient AllReduce moves 4 bytes a parameter
//!   (DDP's default; its `fp16_compress_hook` is not modelled). `fp16` adds GradScaler's unscale
//!   pass over the gradients. bf16 needs Ampere or newer: autocast refuses it on older GPUs.
//!
//! The graph as it trains in a precision is [`crate::autocast`]'s; the peaks here are what the
//! cost model's roofline divides by.

use crate::cluster::{Arch, Cluster, GpuMix, GpuSpec, find_gpu};
use crate::error::InputError;
use crate::graph::Dtype;

/// The precision a training step runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// FP32 everywhere, CUDA cores.
    #[default]
    Fp32,
    /// FP32 tensors; matrix products and convolutions in TF32 on the tensor cores (Ampere+).
    Tf32,
    /// Autocast to bfloat16 (Ampere+).
    Bf16,
    /// Autocast to float16 with loss scaling.
    Fp16,
}

impl Precision {
    /// Every precision, in the order `--precision` lists them.
    pub(crate) const ALL: [Precision; 4] = [
        Precision::Fp32,
        Precision::Tf32,
        Precision::Bf16,
        Precision::Fp16,
    ];

    /// The name used on the command line and in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Bf16 => "bf16",
            Precision::Fp16 => "fp16",
        }
    }

    /// The precision named `name` (case-insensitive; `amp` is fp16, PyTorch's autocast default).
    pub(crate) fn parse(name: &str) -> Option<Precision> {
        let lower = name.trim().to_ascii_lowercase();
        if lower == "amp" {
            return Some(Precision::Fp16);
        }
        Precision::ALL.into_iter().find(|p| p.name() == lower)
    }

    /// Whether autocast runs matrix products in 16 bits.
    pub(crate) fn is_mixed(self) -> bool {
        matches!(self, Precision::Bf16 | Precision::Fp16)
    }

    /// Peak dense rate in TFLOP/s of a matrix product or convolution of `dtype` on `gpu`: the
    /// FP32 CUDA-core peak, the TF32 tensor-core peak (half the 16-bit one on Ampere and Hopper,
    /// none before), or the 16-bit tensor-core peak (the FP32 peak where there are no tensor
    /// cores).
    pub fn matmul_tflops(self, dtype: Dtype, gpu: &GpuSpec) -> f64 {
        match (self, dtype) {
            (_, Dtype::Half) if gpu.tensor_tflops > 0.0 => gpu.tensor_tflops,
            (Precision::Tf32, Dtype::F32) if has_tf32(gpu.arch) => gpu.tensor_tflops / 2.0,
            _ => gpu.fp32_tflops,
        }
    }

    /// Whether `gpu` can train in this precision; the reason when not.
    pub(crate) fn supported_on(self, gpu: &GpuSpec) -> Result<(), String> {
        if self == Precision::Bf16 && !has_bf16(gpu.arch) {
            return Err(format!(
                "{} ({:?}) has no bfloat16: PyTorch's autocast refuses bf16 before Ampere; use fp16",
                gpu.name, gpu.arch
            ));
        }
        Ok(())
    }

    /// What PyTorch does differently from what was asked on `cluster`'s GPUs, when it does:
    /// `allow_tf32` is ignored on a GPU without TF32, whose matrix products then run in FP32 (the
    /// simulator runs them so too).
    pub fn fallback_note(self, cluster: &Cluster) -> Option<String> {
        if self != Precision::Tf32 {
            return None;
        }
        let mut without: Vec<&str> = cluster
            .devices
            .iter()
            .filter(|d| !has_tf32(d.gpu.arch))
            .map(|d| d.gpu.name)
            .collect();
        without.sort_unstable();
        without.dedup();
        (!without.is_empty()).then(|| {
            format!(
                "no TF32 on {} of {}: matrix products run in FP32 there, as PyTorch runs them",
                without.join(", "),
                cluster.name
            )
        })
    }

    /// Whether every GPU type random topologies draw from `mix` can train in this precision;
    /// the first reason when not. A bf16 run on TAG's pre-Ampere mix fit no problem, and trained
    /// or measured nothing.
    pub fn supported_by_mix(self, mix: GpuMix) -> Result<(), String> {
        mix.types()
            .iter()
            .filter_map(|g| find_gpu(g))
            .try_for_each(|gpu| self.supported_on(gpu))
    }

    /// Refuses a cluster with a GPU that lacks this precision (`file` and `field` name where
    /// the precision was asked for).
    pub fn check_cluster(
        self,
        cluster: &Cluster,
        file: &str,
        field: &str,
    ) -> Result<(), InputError> {
        for device in &cluster.devices {
            self.supported_on(&device.gpu)
                .map_err(|why| InputError::new(file, field, why))?;
        }
        Ok(())
    }
}

crate::choice::by_name!(Precision);

/// TF32 tensor cores: Ampere (A100 and consumer GA10x) and Hopper.
fn has_tf32(arch: Arch) -> bool {
    matches!(arch, Arch::Ampere | Arch::Ga10x | Arch::Hopper)
}

/// bfloat16 arithmetic: the same generations.
fn has_bf16(arch: Arch) -> bool {
    has_tf32(arch)
}
