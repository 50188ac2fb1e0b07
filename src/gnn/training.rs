//! One training step of the policy: the cross-entropy to a target distribution and an
//! optimiser step. The training loop is [`crate::train`].

use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::prelude::*;

use super::features::{HeteroGraph, Slice};
use super::model::GnnModel;

/// Cross-entropy `−Σ_a π_a ln G(a)` between the GNN's prior over `group`'s slices and a target
/// distribution `target` (TAG trains on `π = softmax ln N` of the search's visit counts). A
/// one-element tensor, differentiable when the model lives on an autodiff device.
pub fn cross_entropy(
    model: &GnnModel,
    g: &HeteroGraph,
    group: usize,
    slices: &[Slice],
    target: &[f32],
) -> Tensor<1> {
    let log = model.forward(g, group, slices);
    let pi = Tensor::<1>::from_data(
        TensorData::new(target.to_vec(), [target.len()]),
        &model.device(),
    );
    (log * pi).sum().neg()
}

/// One optimiser step (e.g. Adam from `burn::optim::AdamConfig::new().init()`) on `loss`.
pub fn adam_step(
    model: GnnModel,
    optimizer: &mut ModuleOptimizer,
    loss: Tensor<1>,
    learning_rate: f64,
) -> GnnModel {
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    optimizer.step(learning_rate, model, grads)
}
