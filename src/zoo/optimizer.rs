//! The optimizer whose update ops a zoo graph ends with: what each keeps per parameter and what
//! one update reads, writes and computes.

use super::Framework;

/// How the parameters are updated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Optimizer {
    /// Adam or AdamW (the same state): two FP32 moments per parameter. TAG's, the default. Its
    /// update is the framework's default implementation: TensorFlow's one `ApplyAdam` kernel
    /// under `tf1`, `torch.optim.Adam`'s multi-tensor (`foreach`) passes under PyTorch
    /// ([`Optimizer::work_per_value`]).
    #[default]
    Adam,
    /// Adam with one fused kernel per update under every framework: `torch.optim.Adam(fused=True)`,
    /// apex's `FusedAdam` and `FusedLAMB` (NVIDIA's scripts), Megatron's and DeepSpeed's.
    AdamFused,
    /// SGD with momentum: one FP32 momentum buffer per parameter (the CNNs' usual optimizer).
    SgdMomentum,
    /// Plain SGD: no state.
    Sgd,
    /// Adafactor as Hugging Face runs it by default: no first moment, the second moment of a
    /// matrix factored into a row and a column vector.
    Adafactor,
    /// bitsandbytes' 8-bit Adam: both moments in 8 bits, blockwise quantised (one FP32 scale per
    /// 2,048 values each); tensors under 4,096 values keep FP32 moments, as its `min_8bit_size`.
    Adam8bit,
}

/// (FLOPs, bytes) per value of `torch.optim.Adam`'s default update on CUDA, the multi-tensor
/// `foreach` implementation of PyTorch 2 (`_multi_tensor_adam`): seven passes over FP32 tensors,
/// each reading and writing whole lists: `lerp_` of the first moment (12 bytes), `mul_` and
/// `addcmul_` of the second (8 + 12), `sqrt` of it into a new list (8), `div_` by the bias
/// correction and `add_` of ε (8 + 8), and `addcdiv_` into the parameter (16). AdamW's decay adds
/// a `mul_` of the parameter (8 more), not charged: `torch.optim.Adam` decays nothing by default.
const FOREACH_ADAM: (f64, f64) = (12.0, 72.0);

/// bitsandbytes quantises a moment in blocks of this many values, one FP32 scale each.
const BNB_BLOCK: f64 = 2048.0;
/// bitsandbytes keeps FP32 moments for tensors smaller than this (`min_8bit_size`).
const BNB_MIN_8BIT: f64 = 4096.0;

impl Optimizer {
    /// Every optimizer, in the order `--optimizer` lists them.
    pub(crate) const ALL: [Optimizer; 6] = [
        Optimizer::Adam,
        Optimizer::AdamFused,
        Optimizer::SgdMomentum,
        Optimizer::Sgd,
        Optimizer::Adafactor,
        Optimizer::Adam8bit,
    ];

    /// The name on the command line and in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Optimizer::Adam => "adam",
            Optimizer::AdamFused => "adam-fused",
            Optimizer::SgdMomentum => "sgd-momentum",
            Optimizer::Sgd => "sgd",
            Optimizer::Adafactor => "adafactor",
            Optimizer::Adam8bit => "adam8bit",
        }
    }

    /// The optimizer named `name` (case-insensitive; `adamw` is Adam's state).
    pub(crate) fn parse(name: &str) -> Option<Optimizer> {
        let lower = name.trim().to_ascii_lowercase();
        match lower.as_str() {
            "adamw" => return Some(Optimizer::Adam),
            "adamw-fused" => return Some(Optimizer::AdamFused),
            _ => {}
        }
        Optimizer::ALL.into_iter().find(|o| o.name() == lower)
    }

    /// The framework op type of one update (TensorFlow's names where it has the optimizer).
    pub(crate) fn op_type(self) -> &'static str {
        match self {
            Optimizer::Adam | Optimizer::AdamFused => "ApplyAdam",
            Optimizer::SgdMomentum => "ApplyMomentum",
            Optimizer::Sgd => "ApplyGradientDescent",
            Optimizer::Adafactor => "ApplyAdafactor",
            Optimizer::Adam8bit => "ApplyAdam8bit",
        }
    }

    /// Bytes of optimizer state for a parameter tensor of `elems` values. Adafactor's factored
    /// moment is taken at a square matrix's row and column, 2√n values.
    pub(crate) fn state_bytes(self, elems: f64) -> f64 {
        match self {
            Optimizer::Adam | Optimizer::AdamFused => 8.0 * elems,
            Optimizer::SgdMomentum => 4.0 * elems,
            Optimizer::Sgd => 0.0,
            Optimizer::Adafactor => 4.0 * elems.min(2.0 * elems.sqrt()),
            Optimizer::Adam8bit if elems < BNB_MIN_8BIT => 8.0 * elems,
            Optimizer::Adam8bit => 2.0 * elems + 2.0 * 4.0 * (elems / BNB_BLOCK).ceil(),
        }
    }

    /// (FLOPs per value, bytes of memory traffic per value) of one update under `framework`: the
    /// parameter and gradient read and the parameter written in FP32, plus each moment read and
    /// written, in one pass for a fused update.
    pub(crate) fn work_per_value(self, framework: Framework) -> (f64, f64) {
        match self {
            Optimizer::Adam if framework != Framework::Tf1 => FOREACH_ADAM,
            Optimizer::Adam | Optimizer::AdamFused => (10.0, 28.0),
            Optimizer::SgdMomentum => (3.0, 20.0),
            Optimizer::Sgd => (2.0, 12.0),
            // The update's RMS takes a second pass over it.
            Optimizer::Adafactor => (12.0, 16.0),
            // Two 1-byte moments read and written, dequantised and requantised.
            Optimizer::Adam8bit => (14.0, 16.0),
        }
    }
}

crate::choice::by_name!(Optimizer);
