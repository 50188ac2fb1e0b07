//! The framework whose kernels a zoo graph reproduces: TensorFlow 1's decomposed ops (TAG's
//! setting), PyTorch 2's fused ones, or PyTorch's with attention left unfused.

use crate::cost::{CostModel, HostDispatch, MemoryFormat, RuntimeMemory};
use crate::precision::Precision;

/// Which framework's ops a zoo graph is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Framework {
    /// TensorFlow 1 as the models were published: LayerNorm as ten primitive ops, tanh GELU as
    /// eight, dropout as four, attention as score and context products with the s×s scores,
    /// mask, softmax and dropout kept for backward. TAG's tables are measured on these graphs.
    #[default]
    Tf1,
    /// PyTorch 2: fused scaled-dot-product attention (one kernel forward and one backward that
    /// recomputes the scores, keeping only O(s) per head: FlashAttention / memory-efficient
    /// SDPA, with attention dropout inside it and a causal mask halving the FLOPs), one kernel
    /// each for LayerNorm, GELU and dropout, heads split and merged as views.
    Pytorch,
    /// PyTorch without fused attention, as Hugging Face models ran before SDPA (and as SDPA's
    /// math backend runs): fused LayerNorm, GELU and dropout, attention as a score product,
    /// softmax, dropout and context product, the s×s probabilities and their dropout kept for
    /// backward.
    PytorchEager,
}

impl Framework {
    /// Every framework, in the order `--framework` lists them.
    pub(crate) const ALL: [Framework; 3] =
        [Framework::Tf1, Framework::Pytorch, Framework::PytorchEager];

    /// The name on the command line and in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Framework::Tf1 => "tf1",
            Framework::Pytorch => "pytorch",
            Framework::PytorchEager => "pytorch-eager",
        }
    }

    /// The cost model of a step in `precision` under this framework: its peaks, the runtime's
    /// memory ([`Self::runtime_memory`]) and its convolutions' layout (`memory_format`, else
    /// [`Self::memory_format`]), the shipped kernel efficiencies.
    pub fn cost_model(
        self,
        precision: Precision,
        memory_format: Option<MemoryFormat>,
    ) -> CostModel {
        CostModel {
            precision,
            runtime: self.runtime_memory(),
            memory_format: memory_format.unwrap_or(self.memory_format()),
            host: self.host_dispatch(precision),
            ..CostModel::default()
        }
    }

    /// The layout convolution activations are in unless the user says otherwise: PyTorch's
    /// default contiguous NCHW tensors (`torch.channels_last` is an opt-in), and channels-last
    /// under TensorFlow, whose layout optimizer hands 16-bit convolutions NHWC tensors.
    pub fn memory_format(self) -> MemoryFormat {
        match self {
            Framework::Tf1 => MemoryFormat::ChannelsLast,
            Framework::Pytorch | Framework::PytorchEager => MemoryFormat::ChannelsFirst,
        }
    }

    /// What the framework's runtime holds beyond the tensors: nothing under `tf1` (TAG's
    /// accounting, kept so its tables reproduce), PyTorch's context and caching-allocator
    /// reserve otherwise.
    pub fn runtime_memory(self) -> RuntimeMemory {
        match self {
            Framework::Tf1 => RuntimeMemory::NONE,
            Framework::Pytorch | Framework::PytorchEager => RuntimeMemory::PYTORCH,
        }
    }

    /// The host's time to issue each op of a step in `precision`: nothing under `tf1` (its
    /// executor's cost is in the fitted launch term), eager PyTorch's otherwise.
    pub fn host_dispatch(self, precision: Precision) -> HostDispatch {
        match self {
            Framework::Tf1 => HostDispatch::NONE,
            Framework::Pytorch | Framework::PytorchEager => HostDispatch::pytorch(precision),
        }
    }

    /// Whether LayerNorm, GELU and dropout are one kernel each (PyTorch's native ops).
    pub(crate) fn fuses_layers(self) -> bool {
        self != Framework::Tf1
    }

    /// Whether attention is one fused kernel (SDPA) that keeps O(s) per head for backward.
    pub(crate) fn fuses_attention(self) -> bool {
        self == Framework::Pytorch
    }

    /// The framework named `name` (case-insensitive; `torch` is PyTorch).
    pub(crate) fn parse(name: &str) -> Option<Framework> {
        let lower = name.trim().to_ascii_lowercase();
        if lower == "torch" {
            return Some(Framework::Pytorch);
        }
        Framework::ALL.into_iter().find(|f| f.name() == lower)
    }
}

crate::choice::by_name!(Framework);
