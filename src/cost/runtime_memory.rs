//! What a framework's runtime holds on a GPU beyond the tensors a training step keeps: the CUDA
//! context (loaded kernels, cuBLAS and cuDNN handles, outside any allocator) and the caching
//! allocator's reserve above the bytes it has handed out.
//!
//! PyTorch's caching allocator keeps freed blocks for reuse and rounds requests up (to 512 B,
//! large ones into 2 MiB-aligned segments); a step's many short-lived activations of different
//! sizes leave free space inside segments it cannot return or merge. `torch.cuda` reports the
//! tensors as *allocated*, the segments as *reserved*, and `nvidia-smi` shows the reserve plus
//! the context. The simulator's reference-counted peak is the allocated peak; a device needs
//! `allocated × (1 + headroom) + context`, which is what is compared with its memory.

/// The runtime's memory beyond the tensors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuntimeMemory {
    /// Bytes the CUDA context takes on each GPU.
    pub context_bytes: f64,
    /// The allocator's reserve at the peak, as a share of the allocated peak.
    pub allocator_headroom: f64,
}

impl RuntimeMemory {
    /// Tensors only: TAG's setting, in which a GPU's whole memory holds tensors.
    pub(crate) const NONE: RuntimeMemory = RuntimeMemory {
        context_bytes: 0.0,
        allocator_headroom: 0.0,
    };

    /// PyTorch's. The context: 1,343 MiB, what `nvidia-smi` shows for a process that has only
    /// initialised CUDA and PyTorch on a V100 (Hugging Face, "Efficient training on a single
    /// GPU", the `print_gpu_utilization` of an empty tensor; newer CUDA loads kernels lazily and
    /// takes less). The headroom: fitted to the same page's BERT-large measurement at batch 4
    /// (fidelity scenarios, `DeviceMemoryMib`), held out on its other rows.
    pub(crate) const PYTORCH: RuntimeMemory = RuntimeMemory {
        context_bytes: 1343.0 * 1024.0 * 1024.0,
        allocator_headroom: PYTORCH_ALLOCATOR_HEADROOM,
    };

    /// What a device needs when its tensors peak at `allocated` bytes.
    pub(crate) fn device_bytes(&self, allocated: f64) -> f64 {
        allocated * (1.0 + self.allocator_headroom) + self.context_bytes
    }

    /// The most tensor bytes a device of `memory` bytes holds (0 when the context alone fills it).
    pub(crate) fn tensor_capacity(&self, memory: f64) -> f64 {
        ((memory - self.context_bytes) / (1.0 + self.allocator_headroom)).max(0.0)
    }
}

/// PyTorch's caching-allocator reserve at the peak, as a share of the allocated peak: fitted by
/// `topoplace fidelity --calibrate` to Hugging Face's BERT-large FP32 run at batch 4
/// (`nvidia-smi` less the context, over the simulated allocated peak).
pub(crate) const PYTORCH_ALLOCATOR_HEADROOM: f64 = 0.1175;

impl Default for RuntimeMemory {
    fn default() -> RuntimeMemory {
        RuntimeMemory::NONE
    }
}
