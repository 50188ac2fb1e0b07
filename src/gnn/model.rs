//! TAG's heterogeneous GNN (§4.2.1, Fig. 2) and its thin decoder, in burn.
//!
//! - Input: a dense layer per node type (op group, device group) and per edge relation maps the
//!   [`features`](super::features) to width `f`.
//! - Four heterogeneous attention layers. For each relation `r` (op→op, dev→dev, op→dev,
//!   dev→op) a message is `σ(W_r (h_src ∘ e) + b_r)`; `H` heads score each message against its
//!   destination (`leaky_relu(a_r · (m ∘ h_dst))`), a softmax over each destination's incoming
//!   edges of that relation weights them (GAT), and the heads' `f / H`-wide slices are
//!   concatenated. A node's new embedding is `σ(W_self h + Σ_r γ_r · agg_r)` with `γ = 1` for
//!   relations between nodes of the same type and 0.1 across types, so a node's many op–device
//!   edges do not drown its own type's neighbours; the layer adds it to `h` (a residual, so the
//!   input features reach the decoder undiminished). `σ` is SiLU (smooth, so gradient checks are
//!   meaningful); the attention logits keep GAT's leaky ReLU.
//! - Decoder: a strategy slice `(P_i, O_i)` of op group `i` is scored from
//!   `Σ_j E_dev[j]·P_ij ∘ E_op[i] ∘ emb(O_i)` by a two-layer dense head; a softmax over the
//!   slices (the actions for group `i`) gives the priors.
//!
//! Parameters are drawn from a seeded generator, not burn's global one, so one seed gives the
//! same weights whichever thread builds the model.

use burn::module::{Param, ParamId};
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::IndexingUpdateOp;
use burn::tensor::activation::{leaky_relu, log_softmax, silu};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::features::{DEV_FEATURES, EDGE_FEATURES, HeteroGraph, OP_FEATURES, OPTIONS, Slice};

/// Relations, in the order the layers hold their weights.
const RELATIONS: usize = 4;
/// `γ` per relation: op→op, dev→dev (same type) 1; op→dev, dev→op (cross type) 0.1.
const GAMMA: [f32; RELATIONS] = [1.0, 1.0, 0.1, 0.1];

/// The widest embedding a GNN may have.
pub const MAX_WIDTH: usize = 4096;
/// The most attention heads a GNN may have.
pub const MAX_HEADS: usize = 64;
/// The most message-passing layers a GNN may have.
pub const MAX_LAYERS: usize = 64;

/// The hyper-parameters a saved policy carries so that loading can rebuild the module. Unknown
/// keys are refused: a policy file written by a newer build (or edited) would otherwise load with
/// its extra settings silently dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GnnConfig {
    /// Embedding width `f`.
    pub width: usize,
    /// Attention heads; must divide `width`.
    pub heads: usize,
    /// Message-passing layers (TAG: 4).
    pub layers: usize,
}

impl Default for GnnConfig {
    fn default() -> GnnConfig {
        GnnConfig {
            width: 64,
            heads: 4,
            layers: 4,
        }
    }
}

impl GnnConfig {
    /// Why the configuration cannot build a model, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.width == 0 || self.heads == 0 || self.layers == 0 {
            return Err(format!(
                "width, heads and layers must be positive (width {}, {} heads, {} layers)",
                self.width, self.heads, self.layers
            ));
        }
        // A wider network would need gigabytes of weights and minutes a step; `policy init`
        // refuses the same at its flags.
        if self.width > MAX_WIDTH || self.heads > MAX_HEADS || self.layers > MAX_LAYERS {
            return Err(format!(
                "at most width {MAX_WIDTH}, {MAX_HEADS} heads and {MAX_LAYERS} layers (width {}, \
                 {} heads, {} layers)",
                self.width, self.heads, self.layers
            ));
        }
        if !self.width.is_multiple_of(self.heads) {
            return Err(format!(
                "width {} is not a multiple of heads {}",
                self.width, self.heads
            ));
        }
        // A policy is read back through the input files' cap: a larger one would be written and
        // then refused by every command that loads it.
        let file_bytes = 4 * self.weights();
        if file_bytes as u64 > crate::io::MAX_INPUT_BYTES {
            return Err(format!(
                "width {} with {} layers has {} weights, {:.1} GiB of FP32: more than the 1 GiB a \
                 policy file may hold (narrower, or fewer layers)",
                self.width,
                self.layers,
                self.weights(),
                file_bytes as f64 / f64::from(1u32 << 30)
            ));
        }
        Ok(())
    }

    /// Weights and biases of the model this configuration builds ([`GnnModel::new`]).
    pub(crate) fn weights(&self) -> usize {
        let dense =
            |d_in: usize, d_out: usize, bias: bool| d_in * d_out + if bias { d_out } else { 0 };
        let (f, heads) = (self.width, self.heads);
        let relation = dense(2 * f, f, true) + dense(2 * f, heads, true);
        let layer = RELATIONS * relation + 2 * dense(f, f, true);
        dense(OP_FEATURES, f, true)
            + dense(DEV_FEATURES, f, true)
            + RELATIONS * dense(EDGE_FEATURES, f, true)
            + self.layers * layer
            + dense(OPTIONS, f, false)
            + dense(3 * f, f, true)
            + dense(f, 1, true)
    }
}

/// One relation's weights in one layer.
#[derive(Module, Debug)]
pub(crate) struct RelationConv {
    /// `[h_src ∘ e] (2f) → f`.
    message: Linear,
    /// `[m ∘ h_dst] (2f) → heads`.
    attention: Linear,
}

/// One heterogeneous attention layer.
#[derive(Module, Debug)]
pub(crate) struct HeteroLayer {
    relations: Vec<RelationConv>,
    self_op: Linear,
    self_dev: Linear,
}

/// The GNN and decoder.
#[derive(Module, Debug)]
pub struct GnnModel {
    /// The op-group input layer; public so tests can probe its gradient.
    pub op_in: Linear,
    /// The device-group input layer; public so tests can probe its gradient.
    pub dev_in: Linear,
    /// Edge-feature encoder per relation.
    edge_in: Vec<Linear>,
    layers: Vec<HeteroLayer>,
    /// The option one-hot's embedding (no bias: a lookup).
    option: Linear,
    hidden: Linear,
    /// The score of a slice; public so tests can probe its gradient.
    pub score: Linear,
}

/// A dense layer with PyTorch's default scale, `U(±1/√fan_in)`, drawn from `rng`.
pub(crate) fn dense(
    rng: &mut StdRng,
    d_in: usize,
    d_out: usize,
    bias: bool,
    dev: &Device,
) -> Linear {
    let k = 1.0 / (d_in as f32).sqrt();
    let w: Vec<f32> = (0..d_in * d_out).map(|_| rng.random_range(-k..k)).collect();
    let weight = seeded_param(
        rng,
        Tensor::<2>::from_data(TensorData::new(w, [d_in, d_out]), dev),
    );
    let bias = bias.then(|| {
        let b: Vec<f32> = (0..d_out).map(|_| rng.random_range(-k..k)).collect();
        seeded_param(
            rng,
            Tensor::<1>::from_data(TensorData::new(b, [d_out]), dev),
        )
    });
    Linear { weight, bias }
}

/// A parameter whose id is drawn from `rng` rather than burn's process-wide generator: the ids
/// are saved with the weights and key Adam's state, so a seed must fix them for policy files
/// and training checkpoints to be the same bytes in every process.
fn seeded_param<const D: usize>(rng: &mut StdRng, value: Tensor<D>) -> Param<Tensor<D>> {
    let mut p = Param::from_tensor(value);
    p.id = ParamId::from(rng.random::<u64>());
    p
}

/// Edges of one relation on the device, with their (raw or encoded) features.
#[derive(Clone)]
struct Relation {
    src: Tensor<1, Int>,
    dst: Tensor<1, Int>,
    features: Tensor<2>,
}

/// A [`HeteroGraph`] as tensors. Relations without edges are `None`.
pub(crate) struct GraphTensors {
    op_x: Tensor<2>,
    dev_x: Tensor<2>,
    relations: Vec<Option<Relation>>,
}

fn matrix(v: &[f32], cols: usize, dev: &Device) -> Tensor<2> {
    Tensor::<2>::from_data(TensorData::new(v.to_vec(), [v.len() / cols, cols]), dev)
}

impl GraphTensors {
    pub(crate) fn new(g: &HeteroGraph, dev: &Device) -> GraphTensors {
        let edges = |src: &[u32], dst: &[u32], f: &[f32]| {
            if src.is_empty() {
                None
            } else {
                let ids = |v: &[u32]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
                Some(Relation {
                    src: index_tensor(&ids(src), dev),
                    dst: index_tensor(&ids(dst), dev),
                    features: matrix(f, EDGE_FEATURES, dev),
                })
            }
        };
        GraphTensors {
            op_x: matrix(&g.op_features, OP_FEATURES, dev),
            dev_x: matrix(&g.dev_features, DEV_FEATURES, dev),
            relations: vec![
                edges(&g.op_op.src, &g.op_op.dst, &g.op_op.features),
                edges(&g.dev_dev.src, &g.dev_dev.dst, &g.dev_dev.features),
                edges(&g.op_dev.src, &g.op_dev.dst, &g.op_dev.features),
                edges(&g.op_dev.dst, &g.op_dev.src, &g.op_dev.features),
            ],
        }
    }
}

/// Softmax of `logits` `[E, H]` over the edges sharing a destination, per head.
fn segment_softmax(logits: Tensor<2>, dst: Tensor<1, Int>, nodes: usize) -> Tensor<2> {
    let [_, heads] = logits.dims();
    let dev = logits.device();
    // The per-destination max only stabilises exp; it has no gradient (and Max has no backward).
    let max = Tensor::<2>::full([nodes, heads], -1e30, &dev).select_assign(
        0,
        dst.clone(),
        logits.clone().detach(),
        IndexingUpdateOp::Max,
    );
    let ex = (logits - max.select(0, dst.clone())).exp();
    let sum = Tensor::<2>::zeros([nodes, heads], &dev).select_assign(
        0,
        dst.clone(),
        ex.clone(),
        IndexingUpdateOp::Add,
    );
    ex / (sum.select(0, dst) + 1e-16)
}

impl RelationConv {
    /// Attention-weighted sum of the messages into each of `nodes` destinations, `[nodes, f]`.
    fn aggregate(
        &self,
        h_src: Tensor<2>,
        h_dst: Tensor<2>,
        rel: &Relation,
        nodes: usize,
    ) -> Tensor<2> {
        let xs = h_src.select(0, rel.src.clone());
        let xd = h_dst.select(0, rel.dst.clone());
        let m = silu(
            self.message
                .forward(Tensor::cat(vec![xs, rel.features.clone()], 1)),
        );
        let logits = leaky_relu(
            self.attention.forward(Tensor::cat(vec![m.clone(), xd], 1)),
            0.2,
        );
        let [edges, width] = m.dims();
        let heads = logits.dims()[1];
        let alpha = segment_softmax(logits, rel.dst.clone(), nodes);
        let weighted = (m.reshape([edges, heads, width / heads]) * alpha.unsqueeze_dim::<3>(2))
            .reshape([edges, width]);
        Tensor::<2>::zeros([nodes, width], &weighted.device()).select_assign(
            0,
            rel.dst.clone(),
            weighted,
            IndexingUpdateOp::Add,
        )
    }
}

impl HeteroLayer {
    fn forward(
        &self,
        h_op: Tensor<2>,
        h_dev: Tensor<2>,
        relations: &[Option<Relation>],
    ) -> (Tensor<2>, Tensor<2>) {
        let (n_op, n_dev) = (h_op.dims()[0], h_dev.dims()[0]);
        let mut op = self.self_op.forward(h_op.clone());
        let mut dev = self.self_dev.forward(h_dev.clone());
        for (r, rel) in relations.iter().enumerate() {
            let Some(rel) = rel else { continue };
            let conv = &self.relations[r];
            // Relations 0 and 3 end at op groups, 1 and 2 at device groups.
            let (src, dst, into_op) = match r {
                0 => (h_op.clone(), h_op.clone(), true),
                1 => (h_dev.clone(), h_dev.clone(), false),
                2 => (h_op.clone(), h_dev.clone(), false),
                _ => (h_dev.clone(), h_op.clone(), true),
            };
            let nodes = if into_op { n_op } else { n_dev };
            let agg = conv.aggregate(src, dst, rel, nodes).mul_scalar(GAMMA[r]);
            if into_op {
                op = op + agg;
            } else {
                dev = dev + agg;
            }
        }
        // Residual: four layers of small-initialised dense maps would otherwise shrink the
        // input features (and their gradients) by orders of magnitude before the decoder.
        (h_op + silu(op), h_dev + silu(dev))
    }
}

impl GnnModel {
    /// Fresh weights from `seed` on `device`.
    pub fn new(config: &GnnConfig, seed: u64, device: &Device) -> GnnModel {
        let f = config.width;
        let mut rng = StdRng::seed_from_u64(seed);
        let r = &mut rng;
        let layers = (0..config.layers)
            .map(|_| HeteroLayer {
                relations: (0..RELATIONS)
                    .map(|_| RelationConv {
                        message: dense(r, 2 * f, f, true, device),
                        attention: dense(r, 2 * f, config.heads, true, device),
                    })
                    .collect(),
                self_op: dense(r, f, f, true, device),
                self_dev: dense(r, f, f, true, device),
            })
            .collect();
        GnnModel {
            op_in: dense(r, OP_FEATURES, f, true, device),
            dev_in: dense(r, DEV_FEATURES, f, true, device),
            edge_in: (0..RELATIONS)
                .map(|_| dense(r, EDGE_FEATURES, f, true, device))
                .collect(),
            layers,
            option: dense(r, OPTIONS, f, false, device),
            hidden: dense(r, 3 * f, f, true, device),
            score: dense(r, f, 1, true, device),
        }
    }

    /// The device the parameters live on.
    pub(crate) fn device(&self) -> Device {
        self.op_in.weight.val().device()
    }

    /// Op-group and device-group embeddings `(E_op [N, f], E_dev [M, f])`.
    pub(crate) fn embed(&self, g: &GraphTensors) -> (Tensor<2>, Tensor<2>) {
        let relations: Vec<Option<Relation>> = g
            .relations
            .iter()
            .zip(&self.edge_in)
            .map(|(rel, enc)| {
                rel.as_ref().map(|r| Relation {
                    features: silu(enc.forward(r.features.clone())),
                    ..r.clone()
                })
            })
            .collect();
        let mut h_op = silu(self.op_in.forward(g.op_x.clone()));
        let mut h_dev = silu(self.dev_in.forward(g.dev_x.clone()));
        for layer in &self.layers {
            (h_op, h_dev) = layer.forward(h_op, h_dev, &relations);
        }
        (h_op, h_dev)
    }

    /// Log-probabilities `[A]` of the slices of op group `group`.
    pub(crate) fn log_priors(
        &self,
        e_op: Tensor<2>,
        e_dev: Tensor<2>,
        group: usize,
        slices: &[Slice],
    ) -> Tensor<1> {
        let dev = self.device();
        let a = slices.len();
        let m = e_dev.dims()[0];
        let placement: Vec<f32> = slices
            .iter()
            .flat_map(|s| s.placement.iter().copied())
            .collect();
        let mut options = vec![0.0f32; a * OPTIONS];
        for (i, s) in slices.iter().enumerate() {
            options[i * OPTIONS + s.option] = 1.0;
        }
        let p = Tensor::<2>::from_data(TensorData::new(placement, [a, m]), &dev);
        let o = Tensor::<2>::from_data(TensorData::new(options, [a, OPTIONS]), &dev);
        let dev_part = p.matmul(e_dev);
        let op_part = e_op
            .select(0, index_tensor(&[group as i64], &dev))
            .repeat_dim(0, a);
        let opt_part = self.option.forward(o);
        let x = Tensor::cat(vec![dev_part, op_part, opt_part], 1);
        let scores = self.score.forward(silu(self.hidden.forward(x)));
        log_softmax(scores.reshape([a]), 0)
    }

    /// Log-priors of `group`'s slices for a graph: embed, then decode.
    pub(crate) fn forward(&self, g: &HeteroGraph, group: usize, slices: &[Slice]) -> Tensor<1> {
        let t = GraphTensors::new(g, &self.device());
        let (e_op, e_dev) = self.embed(&t);
        self.log_priors(e_op, e_dev, group, slices)
    }

    /// The priors (probabilities) of `group`'s slices.
    pub(crate) fn priors(&self, g: &HeteroGraph, group: usize, slices: &[Slice]) -> Vec<f32> {
        let log = self.forward(g, group, slices);
        to_vec(log.exp())
    }
}

fn index_tensor(v: &[i64], dev: &Device) -> Tensor<1, Int> {
    Tensor::<1, Int>::from_data(TensorData::new(v.to_vec(), [v.len()]), dev)
}

/// A float tensor's values.
pub fn to_vec<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}
