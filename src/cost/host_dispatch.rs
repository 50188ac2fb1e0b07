//! The host's side of an eager training step: the CPU time a framework spends issuing each op
//! (Python, the dispatcher, autocast, autograd's bookkeeping, the kernel launch) before the GPU
//! can run it.
//!
//! In eager PyTorch one host thread per GPU issues every kernel of the step in program order and
//! runs ahead of the GPU, which queues what it is given. When the kernels are long the queue never
//! empties and the host's time is hidden; when they are short (a fast GPU, 16-bit tensor cores, a
//! small batch) the GPU waits for the host and the step takes the host's time. The simulator
//! keeps one issue clock per device ([`crate::sim`]): an op's kernel starts no earlier than the
//! sum of the host costs of the ops issued before it and its own. TensorFlow 1's executor issues
//! from C++ threads; its per-op cost is in the fitted launch term and nothing is charged here.
//!
//! The figures are host time per op of the zoo's graphs, so they include what a graph op costs
//! beyond its one kernel (views, autocast's casts, module calls). They were measured with
//! `datasets/host_dispatch.py`: a BERT-large-shaped and a GPT-2-XL-shaped model (the zoo's layer
//! structure, 24 and 48 layers) with one-element-wide tensors on the CPU, PyTorch 2.15, one
//! thread of an AMD EPYC, forward, backward and `foreach` AdamW timed apart (medians of 20 steps, two
//! runs each), divided by the zoo graph's forward and backward op counts and rounded. On the CPU each kernel also runs (about a
//! microsecond at that width), standing in for the `cudaLaunchKernel` call a GPU run makes
//! instead. Autocast issues a cast before each matrix product and around each FP32-list op, so
//! its figures are higher. The optimizer is not charged: on a GPU `foreach` and fused updates
//! issue a few dozen launches for all parameters.

use crate::graph::Phase;
use crate::precision::Precision;

/// Host time to issue one op, µs, by phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostDispatch {
    /// An op of the forward pass (issued from Python).
    pub forward_us: f64,
    /// An op of the backward pass (issued by autograd's engine).
    pub backward_us: f64,
}

impl HostDispatch {
    /// Nothing charged: TAG's setting and TensorFlow 1's.
    pub(crate) const NONE: HostDispatch = HostDispatch {
        forward_us: 0.0,
        backward_us: 0.0,
    };

    /// Eager PyTorch in FP32 or TF32. Measured medians: BERT-large's shape 12.3–13.7 ms forward
    /// over the zoo graph's 534 forward ops and 13.3–15.6 ms backward over its 833 backward ops;
    /// GPT-2 XL's 27.8–28.9 ms over 971 and 30.8–31.6 ms over 1,504.
    pub(crate) const PYTORCH_FP32: HostDispatch = HostDispatch {
        forward_us: 27.0,
        backward_us: 19.0,
    };

    /// Eager PyTorch under autocast. Measured medians on the same shapes: 14.1–18.1 ms forward
    /// and 15.4–22.2 ms backward (BERT-large), 31.1–32.4 and 37.1–38.0 ms (GPT-2 XL).
    pub(crate) const PYTORCH_AUTOCAST: HostDispatch = HostDispatch {
        forward_us: 32.0,
        backward_us: 25.0,
    };

    /// Eager PyTorch's figures for a step in `precision`.
    pub(crate) fn pytorch(precision: Precision) -> HostDispatch {
        if precision.is_mixed() {
            HostDispatch::PYTORCH_AUTOCAST
        } else {
            HostDispatch::PYTORCH_FP32
        }
    }

    /// Host time to issue an op of `phase`, µs (data inputs, parameters and the optimizer's
    /// updates cost nothing here).
    pub(crate) fn per_op_us(&self, phase: Phase) -> f64 {
        match phase {
            Phase::Forward => self.forward_us,
            Phase::Backward => self.backward_us,
            Phase::Input | Phase::Parameter | Phase::Optimizer => 0.0,
        }
    }
}

impl Default for HostDispatch {
    fn default() -> HostDispatch {
        HostDispatch::NONE
    }
}
