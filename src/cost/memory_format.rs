//! The layout a framework keeps convolution activations in, and what the layout the tensor cores
//! do not read costs.
//!
//! cuDNN's 16-bit tensor-core convolutions read and write channels-last (NHWC) tensors. Given
//! PyTorch's default contiguous (NCHW) tensors, cuDNN transposes every tensor the convolution
//! reads into NHWC and its result back (profiles show `nchwToNhwcKernel` and `nhwcToNchwKernel`
//! around each tensor-core convolution; NVIDIA's performance guide for convolutions says the same),
//! so an NCHW convolution in 16 bits pays, besides the convolution, one read and one write of
//! every tensor it touches, in two memory-bound kernels. `model.to(memory_format=
//! torch.channels_last)` (NVIDIA's DeepLearningExamples, `--memory-format nhwc`) removes them. FP32
//! convolutions on the FP32 units read NCHW natively and pay nothing.

/// How convolution activations are laid out in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MemoryFormat {
    /// Channels last (NHWC): what the tensor cores read, no transposes. TensorFlow's layout and
    /// `torch.channels_last`.
    #[default]
    ChannelsLast,
    /// Channels first (NCHW), PyTorch's default: a 16-bit convolution on the tensor cores
    /// transposes its tensors in and out.
    ChannelsFirst,
}

impl MemoryFormat {
    /// Every format, in the order `--memory-format` lists them.
    pub const ALL: [MemoryFormat; 2] = [MemoryFormat::ChannelsFirst, MemoryFormat::ChannelsLast];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            MemoryFormat::ChannelsLast => "channels-last",
            MemoryFormat::ChannelsFirst => "nchw",
        }
    }

    /// The format named `name` (case-insensitive; `nhwc` is channels-last, `contiguous` NCHW).
    pub fn parse(name: &str) -> Option<MemoryFormat> {
        match name.trim().to_ascii_lowercase().as_str() {
            "channels-last" | "channels_last" | "nhwc" => Some(MemoryFormat::ChannelsLast),
            "nchw" | "contiguous" | "channels-first" => Some(MemoryFormat::ChannelsFirst),
            _ => None,
        }
    }

    /// Whether a 16-bit convolution on the tensor cores transposes its tensors in this layout:
    /// one kernel in and one out, a read and a write of every byte the convolution touches.
    pub(crate) fn transposes(self) -> bool {
        self == MemoryFormat::ChannelsFirst
    }
}

crate::choice::by_name!(MemoryFormat);
