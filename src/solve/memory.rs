//! The MILPs' memory model, the simulator's in linear form. The simulator allocates a task's
//! output when it starts and frees it when its last consumer ends; resident state (parameters,
//! optimizer state) stays all iteration. What a linear row `Σ_i m_i x_ik ≤ cap_k` can hold of
//! that:
//!
//! - each node's **static** bytes: resident state, plus the outputs of input and forward ops
//!   that a backward op consumes: those live from the forward pass to the backward pass, so
//!   they are all live together when the backward pass begins, the peak of a training step;
//! - one **transient reserve** per device for everything else the peak holds for a moment
//!   (activations on their way to the next layer, gradients waiting for their optimizer op):
//!   the simulator's own peak with the whole model on one GPU, minus the static bytes.
//!
//! So with every node on one GPU the row is exactly the simulated peak; with the model split,
//! each GPU is charged its own static bytes and the whole model's transient reserve. The
//! formulations as published charge every node its outputs, which counts every forward
//! activation as live at once: 16 GB for VGG16 inference, whose simulated peak on one GPU is
//! 2.9 GB (no backward pass keeps anything), so QuickP's MILP found no placement on RTX 3070s
//! where data parallelism fits.

use crate::error::Result;
use crate::evaluate::evaluate_strategy;
use crate::graph::{Graph, OpIdx, Phase};
use crate::problem::Problem;
use crate::sim::Order;
use crate::strategy::Reference;

/// Bytes `op` holds on its device through the iteration's peak.
pub(crate) fn static_bytes(g: &Graph, op: OpIdx) -> f64 {
    let o = g.op(op);
    let kept_for_backward = matches!(o.phase, Phase::Input | Phase::Forward)
        && g.successors(op).any(|s| g.op(s).phase == Phase::Backward);
    o.resident_bytes
        + if kept_for_backward {
            o.output_bytes
        } else {
            0.0
        }
}

/// The peak the simulator sees beyond the static bytes, with the model on one GPU (the fastest),
/// the larger of its first-come and priority orders. Never negative.
pub(crate) fn transient_reserve(p: &Problem) -> Result<f64> {
    let g = p.graph;
    let static_total: f64 = (0..g.len()).map(|op| static_bytes(g, op)).sum();
    let single = Reference::Single.strategy(g, p.cluster);
    let device = single.decision(0).devices[0];
    let mut peak: f64 = 0.0;
    for order in [Order::Fifo, Order::Priority] {
        let run = evaluate_strategy(p, &single, order)?;
        peak = peak.max(run.report.devices[device].peak_memory_bytes);
    }
    Ok((peak - static_total).max(0.0))
}
