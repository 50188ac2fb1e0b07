//! What a layout policy reads: the layout tree's partial layouts and their decisions as fixed-size
//! feature vectors, normalised so one set of weights serves any model and any cluster.
//!
//! A decision of the tree ([`Decision`]) is scored by the features of the partial layout each
//! action leads to: the decision's kind, the GPUs taken so far (their share of the cluster, of its
//! memory relative to the model states, of its peak in the step's precision), the pipeline's
//! depth, the tensor-parallel and data-parallel degrees, the ZeRO stage, the micro-batch count and
//! the bubble `(p − 1)/(m + p − 1)` they give, the model states and activations a GPU would hold
//! relative to its memory (the ZeRO paper's and Korthikanti et al.'s closed forms, rough: equal
//! layers per stage, no recomputation), the model's size, the batch and sequence, and the GPU type
//! the decision is about. Nothing depends on the order of the pools beyond "fastest first", so a
//! cluster's GPU types may come in any order.

use super::memory::{StateBytes, model_states};
use super::plan::ZeroStage;

/// Features of one scored action.
pub const LAYOUT_FEATURES: usize = 30;

/// GPU types, fastest first, as the layout features see them.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolFacts {
    /// GPUs of the type.
    pub gpus: usize,
    /// Memory of one GPU, bytes.
    pub memory_bytes: f64,
    /// Matrix-product peak of one GPU in the step's precision, TFLOP/s.
    pub peak_tflops: f64,
    /// GPUs of its smallest machine: the largest tensor-parallel degree inside a machine.
    pub per_machine: usize,
}

/// The model, batch and cluster a layout tree decides for.
#[derive(Debug, Clone, PartialEq)]
pub struct LayoutContext {
    /// GPU types, fastest (per layer) first.
    pub pools: Vec<PoolFacts>,
    /// Transformer layers.
    pub layers: usize,
    /// Sequences an iteration.
    pub batch: u32,
    /// Tokens a sequence.
    pub seq: usize,
    /// Parameters.
    pub params: f64,
    /// Hidden width.
    pub hidden: f64,
    /// Bytes a parameter's states take.
    pub states: StateBytes,
}

/// What the tree decides at a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Which GPU types take part, in pipeline order.
    Types,
    /// The stage count of one type's GPUs (pool index).
    Stages(usize),
    /// The tensor-parallel degree of one type's stages (pool index).
    Tp(usize),
    /// The ZeRO stage.
    Zero,
    /// The micro-batch count.
    MicroBatches,
}

impl Decision {
    fn kind(self) -> usize {
        match self {
            Decision::Types => 0,
            Decision::Stages(_) => 1,
            Decision::Tp(_) => 2,
            Decision::Zero => 3,
            Decision::MicroBatches => 4,
        }
    }

    fn pool(self) -> Option<usize> {
        match self {
            Decision::Stages(t) | Decision::Tp(t) => Some(t),
            _ => None,
        }
    }
}

/// A layout with some decisions still open: an empty `types`, a 0 stage count, TP degree or
/// micro-batch count, or no ZeRO stage is undecided.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PartialLayout {
    /// Pools taking part, in pipeline order.
    pub types: Vec<usize>,
    /// Stages per pool (index: pool).
    pub stages: Vec<usize>,
    /// Tensor-parallel degree per pool (index: pool).
    pub tp: Vec<usize>,
    /// The ZeRO stage.
    pub zero: Option<ZeroStage>,
    /// Micro-batches an iteration.
    pub micro_batches: u32,
}

impl PartialLayout {
    /// Nothing decided, for `pools` GPU types.
    pub fn empty(pools: usize) -> PartialLayout {
        PartialLayout {
            stages: vec![0; pools],
            tp: vec![0; pools],
            ..PartialLayout::default()
        }
    }

    /// The next open decision; `None` when the layout is complete.
    pub fn next(&self) -> Option<Decision> {
        if self.types.is_empty() {
            return Some(Decision::Types);
        }
        for &t in &self.types {
            if self.stages[t] == 0 {
                return Some(Decision::Stages(t));
            }
            if self.tp[t] == 0 {
                return Some(Decision::Tp(t));
            }
        }
        if self.zero.is_none() {
            return Some(Decision::Zero);
        }
        (self.micro_batches == 0).then_some(Decision::MicroBatches)
    }

    /// Pipeline stages decided so far.
    fn stages_decided(&self) -> usize {
        self.types.iter().map(|&t| self.stages[t]).sum()
    }
}

fn log_scale(x: f64, decades: f64) -> f32 {
    (x.max(1.0).log2() / decades).clamp(0.0, 1.5) as f32
}

/// The features of `after`, the layout `decision` led to.
pub fn layout_features(
    cx: &LayoutContext,
    after: &PartialLayout,
    decision: Decision,
) -> [f32; LAYOUT_FEATURES] {
    let mut f = [0f32; LAYOUT_FEATURES];
    f[decision.kind()] = 1.0;
    let all_gpus: usize = cx.pools.iter().map(|p| p.gpus).sum();
    let all_peak: f64 = cx.pools.iter().map(|p| p.gpus as f64 * p.peak_tflops).sum();
    let max_peak = cx.pools.iter().map(|p| p.peak_tflops).fold(0.0, f64::max);
    let max_memory = cx.pools.iter().map(|p| p.memory_bytes).fold(0.0, f64::max);
    let used = || after.types.iter().map(|&t| &cx.pools[t]);
    let states_total = cx.params * (cx.states.weights + cx.states.grads + cx.states.optimizer);
    let used_memory: f64 = used().map(|p| p.gpus as f64 * p.memory_bytes).sum();
    f[5] = (used().map(|p| p.gpus).sum::<usize>() as f64 / all_gpus.max(1) as f64) as f32;
    f[6] = ((1.0 + used_memory / states_total.max(1.0)).ln() / 4.0) as f32;
    f[7] = (used().map(|p| p.gpus as f64 * p.peak_tflops).sum::<f64>() / all_peak.max(1e-9)) as f32;
    f[8] = (after.types.len() as f64 / cx.pools.len().max(1) as f64) as f32;
    f[9] = f32::from(after.types.windows(2).all(|w| w[0] < w[1]) && !after.types.is_empty());
    let depth = after.stages_decided();
    f[10] = (depth as f64 / cx.layers.max(1) as f64) as f32;
    f[11] = log_scale(1.0 + depth as f64, 7.0);
    let decided: Vec<usize> = after
        .types
        .iter()
        .copied()
        .filter(|&t| after.stages[t] > 0 && after.tp[t] > 0)
        .collect();
    if !decided.is_empty() {
        let n = decided.len() as f64;
        let tp = |t: usize| after.tp[t] as f64;
        let dp = |t: usize| cx.pools[t].gpus as f64 / (after.stages[t] as f64 * tp(t));
        f[12] = (decided.iter().map(|&t| tp(t)).sum::<f64>() / n / 8.0) as f32;
        f[13] = (decided
            .iter()
            .map(|&t| tp(t) / cx.pools[t].per_machine.max(1) as f64)
            .sum::<f64>()
            / n) as f32;
        f[14] = log_scale(decided.iter().map(|&t| dp(t)).sum::<f64>() / n, 10.0);
        let (states, activations) = memory_pressure(cx, after, &decided, depth);
        f[22] = (states.min(4.0) / 4.0) as f32;
        f[23] = (activations.min(4.0) / 4.0) as f32;
    }
    if let Some(z) = after.zero {
        f[15 + z.level() as usize] = 1.0;
    }
    if after.micro_batches > 0 {
        let m = after.micro_batches as f64;
        f[19] = log_scale(m, 10.0);
        if after.next().is_none() {
            let p = depth as f64;
            f[20] = ((p - 1.0) / (m + p - 1.0)) as f32;
        }
        f[21] = log_scale(cx.batch as f64 / m, 10.0);
    }
    f[24] = (cx.params.max(1.0).log10() / 11.0) as f32;
    f[25] = log_scale(cx.batch as f64, 12.0);
    f[26] = log_scale(cx.seq as f64, 17.0);
    if let Some(t) = decision.pool() {
        let p = &cx.pools[t];
        f[27] = (p.peak_tflops / max_peak.max(1e-9)) as f32;
        f[28] = (p.per_machine as f64 / 8.0) as f32;
        f[29] = (p.memory_bytes / max_memory.max(1.0)) as f32;
    }
    f
}

/// The largest share of a GPU's memory the model states, then the activations, would take among
/// the `decided` pools: equal layers per stage over `depth` stages, the ZeRO stage when decided,
/// 1F1B's first stage holding `depth` micro-batches of 34·s·h bytes a layer (Korthikanti et al.,
/// 16-bit, sequence parallel) of its replica's share of the micro-batch, all sharded by the TP
/// degree.
fn memory_pressure(
    cx: &LayoutContext,
    after: &PartialLayout,
    decided: &[usize],
    depth: usize,
) -> (f64, f64) {
    let layers_per_stage = cx.layers as f64 / depth.max(1) as f64;
    let params_per_stage = cx.params * layers_per_stage / cx.layers.max(1) as f64;
    let micro = if after.micro_batches > 0 {
        cx.batch as f64 / after.micro_batches as f64
    } else {
        1.0
    };
    let in_flight = depth.max(1).min(after.micro_batches.max(1) as usize) as f64;
    let mut worst = (0.0f64, 0.0f64);
    for &t in decided {
        let pool = &cx.pools[t];
        let tp = after.tp[t] as f64;
        let dp = (pool.gpus / (after.stages[t] * after.tp[t])).max(1);
        let zero = after.zero.unwrap_or(ZeroStage::None);
        let states = model_states(params_per_stage / tp, dp, zero, cx.states).total();
        let activations =
            in_flight * micro / dp as f64 * 34.0 * cx.seq as f64 * cx.hidden * layers_per_stage
                / tp;
        worst.0 = worst.0.max(states / pool.memory_bytes);
        worst.1 = worst.1.max(activations / pool.memory_bytes);
    }
    worst
}
