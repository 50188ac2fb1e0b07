//! The model states a GPU holds under data parallelism with or without ZeRO, by the ZeRO paper's
//! formulas (Rajbhandari et al. SC'20, §3.1 and §5): with Ψ parameters on the GPU, `w` bytes of
//! weights, `g` of gradients and `k` of optimizer state per parameter, and `d` data-parallel
//! replicas, a GPU holds
//!
//! | stage | bytes |
//! |---|---|
//! | 0 (plain DP) | (w + g + k)·Ψ |
//! | 1 (P_os) | (w + g)·Ψ + k·Ψ/d |
//! | 2 (P_os+g) | w·Ψ + (g + k)·Ψ/d |
//! | 3 (P_os+g+p) | (w + g + k)·Ψ/d |
//!
//! Mixed precision with Adam is the paper's w = g = 2, k = 12 (FP32 master weights, momentum and
//! variance): 16 bytes a parameter, 7.5 GB of a 7.5 B model's 120 GB under stage 3 on 64 GPUs.

use crate::graph::{Graph, Phase};
use crate::precision::Precision;
use crate::zoo::Optimizer;

use super::plan::ZeroStage;

/// Bytes per parameter of each model state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateBytes {
    /// The weights the forward and backward read (16-bit under mixed precision).
    pub weights: f64,
    /// The gradients (16-bit under mixed precision).
    pub grads: f64,
    /// The optimizer's state, FP32 master weights included under mixed precision.
    pub optimizer: f64,
}

impl StateBytes {
    /// The ZeRO paper's mixed-precision Adam: 2 + 2 + 12 bytes.
    pub const MIXED_ADAM: StateBytes = StateBytes {
        weights: 2.0,
        grads: 2.0,
        optimizer: 12.0,
    };

    /// The state bytes of `graph`'s optimizer (its update ops' type; Adam when it has none) in
    /// `precision`, plus FP32 master weights when weights and gradients are 16-bit.
    pub(crate) fn of(graph: &Graph, precision: Precision) -> StateBytes {
        let optimizer = graph
            .ops()
            .iter()
            .filter(|o| o.phase == Phase::Optimizer)
            .find_map(|o| {
                Optimizer::ALL
                    .into_iter()
                    .find(|x| x.op_type() == o.op_type)
            })
            .unwrap_or_default();
        // Per value of a large tensor (Adafactor's factored moment and 8-bit Adam's block scales
        // are per tensor: a 4,096² matrix stands for the model's).
        let elems = 4096.0 * 4096.0;
        let per_param = optimizer.state_bytes(elems) / elems;
        if precision.is_mixed() {
            StateBytes {
                weights: 2.0,
                grads: 2.0,
                optimizer: 4.0 + per_param,
            }
        } else {
            StateBytes {
                weights: 4.0,
                grads: 4.0,
                optimizer: per_param,
            }
        }
    }
}

/// Weights, gradients and optimizer state one GPU holds, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct ModelStates {
    /// Weights.
    pub weights: f64,
    /// Gradients.
    pub grads: f64,
    /// Optimizer state, master weights included.
    pub optimizer: f64,
}

impl ModelStates {
    /// All three.
    pub fn total(&self) -> f64 {
        self.weights + self.grads + self.optimizer
    }
}

/// What a GPU holding `psi` parameters keeps of them among `d` replicas under `zero`.
pub fn model_states(psi: f64, d: usize, zero: ZeroStage, b: StateBytes) -> ModelStates {
    let shard = psi / d.max(1) as f64;
    let level = zero.level();
    ModelStates {
        weights: b.weights * if level >= 3 { shard } else { psi },
        grads: b.grads * if level >= 2 { shard } else { psi },
        optimizer: b.optimizer * if level >= 1 { shard } else { psi },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ZeRO paper's Figure 1: Ψ = 7.5 B, N_d = 64, K = 12.
    #[test]
    fn zero_paper_figure_1() {
        let psi = 7.5e9;
        let gb = |z| model_states(psi, 64, z, StateBytes::MIXED_ADAM).total() / 1e9;
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b;
        assert!(close(gb(ZeroStage::None), 120.0));
        assert!(close(gb(ZeroStage::Optimizer), 31.40625));
        assert!(close(gb(ZeroStage::Gradients), 16.640625));
        assert!(close(gb(ZeroStage::Parameters), 1.875));
    }

    /// DeepSpeed's ZeRO tutorial: GPT-2 1.5 B's Adam states (12 bytes a parameter) take 18 GB;
    /// ZeRO-1 over 8 GPUs leaves 2.25 GB on each.
    #[test]
    fn zero_1_shards_the_optimizer_states_only() {
        let s = model_states(1.5e9, 8, ZeroStage::Optimizer, StateBytes::MIXED_ADAM);
        assert!((s.optimizer - 2.25e9).abs() < 1e-3);
        assert_eq!(s.weights, 3e9);
        assert_eq!(s.grads, 3e9);
        let plain = model_states(1.5e9, 8, ZeroStage::None, StateBytes::MIXED_ADAM);
        assert!((plain.optimizer - 18e9).abs() < 1e-3);
    }
}
