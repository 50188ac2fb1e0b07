//! What one transformer layer, the embedding and the head cost, read from the model's training
//! graph at one micro-batch: their ops sorted by how tensor parallelism shards them, each op timed
//! by the cost model (so the precision, the fused kernels, each GPU's fitted efficiencies and the
//! host's time to issue the ops are the op-level simulator's own), and the activations backward
//! keeps.
//!
//! An op belongs to layer `l` when a segment of its name is `h{l}` (GPT) or `layers_{l}`
//! (Llama); to the head when it is the final norm, the LM head or the loss; to the embedding
//! otherwise. Inside a layer, the attention and MLP ops are split `tp` ways (Megatron: heads for
//! attention, columns then rows for the MLP); the norms and the residual adds and dropouts are
//! replicated, or split along the sequence under sequence parallelism. The embedding and the
//! head are vocabulary-parallel. Every layer is taken to cost what layer 0 costs.

use super::Recompute;
use crate::cluster::GpuSpec;
use crate::cost::CostModel;
use crate::error::InputError;
use crate::graph::{Graph, OpIdx, Phase};

/// Which part of the model an op belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Embedding,
    Layer(usize),
    Head,
}

/// The part of the model the op named `name` belongs to (a backward op by its forward op's name).
pub(crate) fn part_of(name: &str) -> Part {
    let name = name.strip_prefix("gradients/").unwrap_or(name);
    let mut previous = "";
    for seg in name.split('/') {
        let layer = seg.strip_prefix("layers_").or_else(|| {
            (previous == "model")
                .then(|| seg.strip_prefix('h'))
                .flatten()
        });
        if let Some(l) = layer.and_then(|d| d.parse::<usize>().ok()) {
            return Part::Layer(l);
        }
        previous = seg;
    }
    let head = [
        "model/ln_f",
        "model/norm/",
        "lm_head",
        "model/lm_head",
        "loss",
    ];
    if head.iter().any(|h| name.starts_with(h)) {
        Part::Head
    } else {
        Part::Embedding
    }
}

/// Whether tensor parallelism splits the op named `name` inside a layer (attention and MLP), as
/// opposed to replicating it (norms, residual adds, their dropouts).
fn tp_splits_layer_op(name: &str) -> bool {
    let in_block = ["/attn/", "/self_attn/", "/mlp/"]
        .iter()
        .any(|b| name.contains(b));
    let residual = ["/attn/add", "/mlp/add", "resid_dropout"]
        .iter()
        .any(|r| name.contains(r));
    in_block && !residual
}

/// One op of a part, with how tensor parallelism treats it.
#[derive(Debug, Clone, Copy)]
struct PartOp {
    op: OpIdx,
    /// Split `tp` ways (else replicated, or sequence-split under sequence parallelism).
    split: bool,
    /// A forward op whose output selective recomputation keeps (a weight GEMM or attention).
    kept_by_selective: bool,
    /// A forward op whose output torchtitan's selective op recomputation keeps: the same, less
    /// every second weight GEMM of the part.
    kept_by_selective_op: bool,
}

impl PartOp {
    /// Whether `recompute` keeps the op's output for backward (else backward runs it again).
    fn kept_under(&self, recompute: Recompute) -> bool {
        match recompute {
            Recompute::None => true,
            Recompute::Selective => self.kept_by_selective,
            Recompute::SelectiveOp => self.kept_by_selective_op,
            Recompute::Full => false,
        }
    }
}

/// Every recomputation, in declaration order (its `as usize`).
const RECOMPUTES: [Recompute; 4] = [
    Recompute::None,
    Recompute::Selective,
    Recompute::SelectiveOp,
    Recompute::Full,
];

/// The ops of one part by phase, and the bytes it holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct PartProfile {
    forward: Vec<PartOp>,
    backward: Vec<PartOp>,
    optimizer: Vec<PartOp>,
    /// Parameters split by tensor parallelism, and replicated ones.
    pub params_split: f64,
    pub params_replicated: f64,
    /// Bytes of the forward outputs backward reads that each recomputation keeps, by
    /// [`Recompute`] (as `usize`): `[replicated, split]`.
    kept: [[f64; 2]; RECOMPUTES.len()],
    /// Weight GEMMs of the part's forward so far (which of them selective op recomputes).
    weight_gemms: usize,
    /// Bytes of the part's input from the part before it (what full recomputation keeps).
    pub input_bytes: f64,
    /// The largest output of a backward op: the working memory backward needs beyond what is kept.
    pub largest_backward_output: f64,
}

/// How a replica runs a part: its share of the micro-batch and its tensor parallelism.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Shard {
    /// Share of the stage's micro-batch the replica takes.
    pub share: f64,
    /// Tensor-parallel degree.
    pub tp: usize,
    /// Sequence parallelism: replicated ops run on `1/tp` of the tokens.
    pub sequence_parallel: bool,
}

impl Shard {
    fn fraction(&self, split: bool) -> f64 {
        if split || self.sequence_parallel {
            self.share / self.tp as f64
        } else {
            self.share
        }
    }
}

impl PartProfile {
    /// The time of `ops` on `gpu` at shard `s`: their kernels', or the host's to issue them
    /// when that is longer ([`crate::cost::HostDispatch`]).
    fn time<'o>(
        &self,
        ops: impl IntoIterator<Item = &'o PartOp>,
        g: &Graph,
        cost: &CostModel,
        gpu: &GpuSpec,
        s: Shard,
    ) -> f64 {
        let (kernels_us, host_us) = ops.into_iter().fold((0.0, 0.0), |(kernels, host), o| {
            let op = g.op(o.op);
            let kernel = cost.compute_time_us(op, gpu, s.fraction(o.split));
            (kernels + kernel, host + cost.host.per_op_us(op.phase))
        });
        // The host issues the part's ops while the GPU runs them: the slower of the two.
        kernels_us.max(host_us)
    }

    /// Forward time of the part, µs.
    pub(crate) fn forward_us(&self, g: &Graph, cost: &CostModel, gpu: &GpuSpec, s: Shard) -> f64 {
        self.time(&self.forward, g, cost, gpu, s)
    }

    /// Backward time of the part, µs (without recomputation).
    pub(crate) fn backward_us(&self, g: &Graph, cost: &CostModel, gpu: &GpuSpec, s: Shard) -> f64 {
        self.time(&self.backward, g, cost, gpu, s)
    }

    /// Forward time of the ops `recompute` runs again before the part's backward, µs.
    pub(crate) fn recompute_us(
        &self,
        recompute: Recompute,
        g: &Graph,
        cost: &CostModel,
        gpu: &GpuSpec,
        s: Shard,
    ) -> f64 {
        let redone = self.forward.iter().filter(|o| !o.kept_under(recompute));
        self.time(redone, g, cost, gpu, s)
    }

    /// The optimizer step of `fraction` of the part's parameters, as one fused (multi-tensor)
    /// kernel, µs.
    pub(crate) fn optimizer_us(
        &self,
        g: &Graph,
        cost: &CostModel,
        gpu: &GpuSpec,
        tp: usize,
        fraction: f64,
    ) -> f64 {
        let (mut flops, mut bytes) = (0.0, 0.0);
        for o in &self.optimizer {
            let f = if o.split {
                fraction / tp as f64
            } else {
                fraction
            };
            flops += g.op(o.op).flops * f;
            bytes += g.op(o.op).bytes_accessed * f;
        }
        if self.optimizer.is_empty() {
            0.0
        } else {
            cost.kernel_us(gpu, flops, bytes)
        }
    }

    /// Parameters one tensor-parallel rank holds.
    pub(crate) fn params_per_rank(&self, tp: usize) -> f64 {
        self.params_split / tp as f64 + self.params_replicated
    }

    /// Activation bytes one replica keeps for backward per micro-batch.
    pub(crate) fn kept_bytes(&self, s: Shard, recompute: Recompute) -> f64 {
        let [replicated, split] = self.kept[recompute as usize];
        // Recomputation reruns the layer from its input, which it keeps.
        let input = match recompute {
            Recompute::None => 0.0,
            _ => self.input_bytes,
        };
        let replicated = replicated + input;
        split * s.fraction(true) + replicated * s.fraction(false)
    }
}

/// The parts of a decoder language model's training graph at one micro-batch.
#[derive(Debug, Clone)]
pub(crate) struct ModelProfile {
    pub embedding: PartProfile,
    pub layer: PartProfile,
    pub head: PartProfile,
    /// Transformer layers of the model.
    pub layers: usize,
}

impl ModelProfile {
    /// The profile of `graph`, a decoder language model of the zoo (or a graph named as one).
    pub(crate) fn of(graph: &Graph, source: &str) -> Result<ModelProfile, InputError> {
        let parts: Vec<Part> = graph.ops().iter().map(|o| part_of(&o.name)).collect();
        let layers = parts
            .iter()
            .filter_map(|p| match p {
                Part::Layer(l) => Some(l + 1),
                _ => None,
            })
            .max()
            .ok_or_else(|| {
                InputError::new(
                    source,
                    "",
                    "has no transformer layers (ops named `h<N>/` or `layers_<N>/`): a hybrid \
                     plan needs a decoder language model (gpt*, llama*)",
                )
            })?;
        Ok(ModelProfile {
            embedding: profile_part(graph, &parts, Part::Embedding),
            layer: profile_part(graph, &parts, Part::Layer(0)),
            head: profile_part(graph, &parts, Part::Head),
            layers,
        })
    }
}

fn profile_part(g: &Graph, parts: &[Part], part: Part) -> PartProfile {
    let mut p = PartProfile::default();
    let mut inputs: Vec<OpIdx> = Vec::new();
    for (i, op) in g.ops().iter().enumerate() {
        if parts[i] != part {
            continue;
        }
        let split = match part {
            Part::Layer(_) => tp_splits_layer_op(&op.name),
            // Vocabulary-parallel embedding, LM head and loss; the final norm is replicated.
            _ => !op.name.contains("norm") && !op.name.contains("ln_f"),
        };
        let weight_gemm = op.op_type.contains("MatMul")
            && g.predecessors(i).any(|q| g.op(q).phase == Phase::Parameter);
        let kept_by_selective = op.op_type.contains("Attention") || weight_gemm;
        // torchtitan counts the matrix products of each checkpointed block from one and
        // recomputes the even ones.
        let second = weight_gemm && op.phase == Phase::Forward && {
            p.weight_gemms += 1;
            p.weight_gemms % 2 == 0
        };
        let entry = PartOp {
            op: i,
            split,
            kept_by_selective,
            kept_by_selective_op: kept_by_selective && !second,
        };
        match op.phase {
            Phase::Forward => {
                p.forward.push(entry);
                let saved = g.successors(i).any(|q| g.op(q).phase == Phase::Backward);
                if saved {
                    for r in RECOMPUTES {
                        if entry.kept_under(r) {
                            p.kept[r as usize][usize::from(split)] += op.output_bytes;
                        }
                    }
                }
                inputs.extend(g.predecessors(i).filter(|&q| {
                    parts[q] != part
                        && g.op(q).phase == Phase::Forward
                        && g.op(q).op_type != "Const"
                }));
            }
            Phase::Backward => {
                p.backward.push(entry);
                p.largest_backward_output = p.largest_backward_output.max(op.output_bytes);
            }
            Phase::Optimizer => p.optimizer.push(entry),
            Phase::Parameter if split => p.params_split += op.params as f64,
            Phase::Parameter => p.params_replicated += op.params as f64,
            Phase::Input => {}
        }
    }
    inputs.sort_unstable();
    inputs.dedup();
    p.input_bytes = inputs.iter().map(|&q| g.op(q).output_bytes).sum();
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_are_assigned_to_their_layer_or_the_ends() {
        assert_eq!(part_of("model/h12/attn/c_attn/MatMul"), Part::Layer(12));
        assert_eq!(
            part_of("gradients/model/layers_3/mlp/up_proj/MatMul_grad/MatMul_1"),
            Part::Layer(3)
        );
        assert_eq!(
            part_of("model/layers_0/self_attn/q_proj/kernel/ApplyAdam"),
            Part::Layer(0)
        );
        assert_eq!(part_of("model/wte/GatherV2"), Part::Embedding);
        assert_eq!(part_of("model/head/x"), Part::Embedding);
        assert_eq!(part_of("lm_head/MatMul"), Part::Head);
        assert_eq!(part_of("gradients/model/ln_f/LayerNorm_grad/x"), Part::Head);
        assert!(tp_splits_layer_op("model/h0/mlp/c_fc/MatMul"));
        assert!(!tp_splits_layer_op("model/h0/mlp/add"));
        assert!(!tp_splits_layer_op("model/h0/ln_1/LayerNorm"));
        assert!(!tp_splits_layer_op("model/h0/attn/resid_dropout/Mul"));
    }
}
