//! Layer-level graph builder with automatic backward generation.
//!
//! Model code describes the forward pass only, one framework op at a time, and tags each op with
//! a [`Rule`] saying how its gradient is computed. [`Net::finish`] then walks the forward ops in
//! reverse creation order (a reverse topological order, since an op can only consume tensors that
//! already exist), emits the gradient ops each rule asks for, sums gradients of tensors with
//! several consumers with `AddN`, and ends with one optimizer update per parameter (`ApplyAdam`
//! unless another [`Optimizer`] is asked for). This mirrors how
//! TensorFlow's `tf.gradients` expands a graph, so op counts and tensor sizes look like a real
//! framework's training graph.

use std::collections::HashSet;

use super::{Framework, Optimizer};
use crate::error::InputError;
use crate::graph::{
    AttentionShape, ConvWindow, Graph, GraphBuilder, Op, OpIdx, Phase, Splittability,
};

mod backward;

/// Bytes per fp32 (and int32 id) element.
const F32: f64 = 4.0;

/// A tensor: the output of one op the builder made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct T(usize);

/// How the gradients of an op's inputs are computed from the gradient of its output.
#[derive(Debug, Clone)]
pub(crate) enum Rule {
    /// No gradient flows through (data, parameters, constants, random masks).
    Leaf,
    /// The input's gradient is the output's gradient (adding a constant, casts).
    Identity,
    /// `y = f(x, W)` bilinear in an activation and a weight (MatMul, Conv2D): one op for dX
    /// (needs W) and one for dW (needs X); each costs as much as the forward op.
    Linear {
        dx: &'static str,
        dw: &'static str,
        flops: f64,
    },
    /// Product of two activations (attention scores, context): two products of the same cost.
    BatchMatMul { flops: f64 },
    /// `x + b` with b broadcast over rows: dX passes through, db is a reduction.
    Bias,
    /// A one-input op whose gradient is one op reading dY and optionally X and Y.
    Unary {
        grad: &'static str,
        use_in: bool,
        use_out: bool,
        flops_per_elem: f64,
    },
    /// Elementwise sum of any number of inputs, with broadcasting.
    Add,
    /// `a - b`, with broadcasting.
    Sub,
    /// `a * b`, with broadcasting.
    Mul,
    /// `(a - b)^2` where b is a stopped gradient (TensorFlow's `moments`).
    SqDiffStopB,
    /// Normalisation with inputs `[x, gamma, beta]`: dX needs x and gamma; gamma and beta get
    /// their own reduction ops so each parameter has one gradient producer.
    Norm {
        dx: &'static str,
        dgamma: &'static str,
        dbeta: &'static str,
    },
    /// Root-mean-square normalisation with inputs `[x, gamma]` (no bias): dX needs x and gamma;
    /// gamma gets its own reduction op.
    RmsNorm {
        dx: &'static str,
        dgamma: &'static str,
    },
    /// Concatenation: each input's gradient is a slice of dY.
    Concat,
    /// Embedding lookup with inputs `[ids, table]`: the table gradient is a segment sum.
    Gather,
    /// Mean over trailing axes: TensorFlow's gradient reshapes dY, tiles it back and divides.
    Mean,
    /// Softmax cross-entropy with inputs `[logits, labels]`.
    Loss,
    /// Fused scaled-dot-product attention with inputs `[q, k, v]` and an optional mask: `flops`
    /// forward per sample; backward recomputes the scores (FlashAttention-2: 2.5× the forward
    /// FLOPs), one op per distinct input that needs a gradient, reading `dY`, q, k, v and `Y`.
    Attention { flops: f64 },
}

struct Node {
    op: OpIdx,
    /// Elements per sample when `batched`, else in total.
    elems: f64,
    batched: bool,
    /// Whether a gradient must flow into this tensor (it depends on a parameter).
    requires_grad: bool,
    rule: Rule,
    inputs: Vec<T>,
}

/// A training (or forward-only) graph under construction.
pub(crate) struct Net {
    b: GraphBuilder,
    batch: u32,
    training: bool,
    phase: Phase,
    nodes: Vec<Node>,
    linked: HashSet<(OpIdx, OpIdx)>,
    params: Vec<T>,
    losses: Vec<T>,
    framework: Framework,
    optimizer: Optimizer,
}

impl Net {
    pub(crate) fn new(batch: u32, training: bool) -> Net {
        Net {
            b: GraphBuilder::new(),
            batch,
            training,
            phase: Phase::Forward,
            nodes: Vec::new(),
            linked: HashSet::new(),
            params: Vec::new(),
            losses: Vec::new(),
            framework: Framework::Tf1,
            optimizer: Optimizer::Adam,
        }
    }

    /// The same net ending with `optimizer`'s updates.
    pub(crate) fn with_optimizer(mut self, optimizer: Optimizer) -> Net {
        self.optimizer = optimizer;
        self
    }

    /// The same net building `framework`'s ops.
    pub(crate) fn with_framework(mut self, framework: Framework) -> Net {
        self.framework = framework;
        self
    }

    /// Whose ops the layers build.
    pub(crate) fn framework(&self) -> Framework {
        self.framework
    }

    /// Whether the graph gets a loss, a backward pass and optimizer ops.
    pub(crate) fn training(&self) -> bool {
        self.training
    }

    pub(crate) fn elems(&self, t: T) -> f64 {
        self.nodes[t.0].elems
    }

    fn batched(&self, t: T) -> bool {
        self.nodes[t.0].batched
    }

    fn bytes(&self, t: T) -> f64 {
        self.shape_bytes(self.nodes[t.0].elems, self.nodes[t.0].batched)
    }

    fn shape_bytes(&self, elems: f64, batched: bool) -> f64 {
        let n = if batched { f64::from(self.batch) } else { 1.0 };
        F32 * elems * n
    }

    fn name_of(&self, t: T) -> String {
        self.b.op(self.nodes[t.0].op).name.clone()
    }

    /// Add an edge unless the pair is already connected (an op reading a tensor twice reads it
    /// over one edge).
    fn link(&mut self, src: OpIdx, dst: OpIdx, bytes: f64) {
        if self.linked.insert((src, dst)) {
            self.b.add_edge(src, dst, bytes);
        }
    }

    fn push(
        &mut self,
        op: OpIdx,
        elems: f64,
        batched: bool,
        rg: bool,
        rule: Rule,
        inputs: Vec<T>,
    ) -> T {
        self.nodes.push(Node {
            op,
            elems,
            batched,
            requires_grad: rg,
            rule,
            inputs,
        });
        T(self.nodes.len() - 1)
    }

    /// Training data: batch-scaled, split by concatenation.
    pub(crate) fn input(&mut self, name: &str, elems_per_sample: f64) -> T {
        let mut op = Op::new(0, name, "IteratorGetNext", Phase::Input);
        op.output_bytes = self.shape_bytes(elems_per_sample, true);
        op.bytes_accessed = op.output_bytes;
        op.split = Splittability::Concat;
        let idx = self.b.add_op(op);
        self.push(idx, elems_per_sample, true, false, Rule::Leaf, Vec::new())
    }

    /// One trainable tensor.
    pub(crate) fn param(&mut self, name: &str, elems: usize) -> T {
        let e = elems as f64;
        let mut op = Op::new(0, name, "VariableV2", Phase::Parameter);
        op.params = elems as u64;
        op.resident_bytes = F32 * e;
        op.output_bytes = F32 * e;
        op.bytes_accessed = F32 * e;
        let idx = self.b.add_op(op);
        let t = self.push(idx, e, false, true, Rule::Leaf, Vec::new());
        self.params.push(t);
        t
    }

    /// A constant that does not depend on the batch (position encodings, causal masks).
    pub(crate) fn constant(&mut self, name: &str, elems: f64) -> T {
        self.op("Const", name, &[], elems, false, 0.0, Rule::Leaf)
    }

    /// Record the convolution window of `t`'s op (the gradients of a convolution inherit it).
    pub(crate) fn set_conv_window(&mut self, t: T, window: Option<ConvWindow>) {
        let op = self.nodes[t.0].op;
        self.b.op_mut(op).conv_window = window;
    }

    /// Record the shape of `t`'s fused attention kernel (its gradients inherit it).
    pub(crate) fn set_attention(&mut self, t: T, shape: Option<AttentionShape>) {
        let op = self.nodes[t.0].op;
        self.b.op_mut(op).attention = shape;
    }

    /// Add one op of the current phase. `flops` is per sample when the op's work scales with
    /// the batch (its output or an input is batched), else in total.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn op(
        &mut self,
        op_type: &str,
        name: impl Into<String>,
        inputs: &[T],
        elems: f64,
        batched: bool,
        flops: f64,
        rule: Rule,
    ) -> T {
        let mut distinct: Vec<T> = Vec::with_capacity(inputs.len());
        for &i in inputs {
            if !distinct.contains(&i) {
                distinct.push(i);
            }
        }
        let scaled = batched || distinct.iter().any(|&i| self.batched(i));
        let mult = if scaled { f64::from(self.batch) } else { 1.0 };
        let out_bytes = self.shape_bytes(elems, batched);
        let in_bytes: f64 = distinct.iter().map(|&i| self.bytes(i)).sum();
        let mut op = Op::new(0, name, op_type, self.phase);
        op.flops = flops * mult;
        op.bytes_accessed = in_bytes + out_bytes;
        op.output_bytes = out_bytes;
        if scaled != self.phase.scales_with_batch_by_default() {
            op.batch_scaled = Some(scaled);
        }
        // Batch-sliced outputs concatenate; batch-sliced inputs reduced to a batch-free output
        // (weight gradients, the mean loss) are partial sums. Backward ops applied only to
        // partial sums (AddN of a tied weight's gradients, reshapes and pads of a reduced
        // gradient) are linear, so their outputs are partial sums too. The rest needs whole inputs.
        let on_partial_sums = self.phase == Phase::Backward
            && !distinct.is_empty()
            && distinct
                .iter()
                .all(|&i| self.b.op(self.nodes[i.0].op).split == Splittability::Sum);
        op.split = if batched {
            Splittability::Concat
        } else if scaled || on_partial_sums {
            Splittability::Sum
        } else {
            Splittability::None
        };
        let idx = self.b.add_op(op);
        for &i in &distinct {
            let bytes = self.bytes(i);
            self.link(self.nodes[i.0].op, idx, bytes);
        }
        let rg =
            !matches!(rule, Rule::Leaf) && distinct.iter().any(|&i| self.nodes[i.0].requires_grad);
        self.push(idx, elems, batched, rg, rule, inputs.to_vec())
    }

    /// An op whose output has the shape of `like`.
    pub(crate) fn op_like(
        &mut self,
        op_type: &str,
        name: impl Into<String>,
        inputs: &[T],
        like: T,
        flops: f64,
        rule: Rule,
    ) -> T {
        let (e, b) = (self.elems(like), self.batched(like));
        self.op(op_type, name, inputs, e, b, flops, rule)
    }

    /// Softmax cross-entropy of `logits` (`rows` predictions of `classes` each per sample)
    /// against a fresh labels input, averaged over the batch; registered as a loss. Skipped
    /// (returns `None`) for forward-only graphs.
    pub(crate) fn xent_loss(&mut self, p: &str, logits: T, rows: f64, classes: f64) -> Option<T> {
        if !self.training {
            return None;
        }
        debug_assert_eq!(self.elems(logits), rows * classes);
        let labels = self.input(&format!("{p}/labels"), rows);
        // log-softmax plus the pick: a handful of flops per logit.
        let per = self.op(
            "SoftmaxCrossEntropyWithLogits",
            format!("{p}/SoftmaxCrossEntropyWithLogits"),
            &[logits, labels],
            rows,
            true,
            5.0 * rows * classes,
            Rule::Loss,
        );
        let mean = self.op(
            "Mean",
            format!("{p}/Mean"),
            &[per],
            1.0,
            false,
            rows,
            Rule::Mean,
        );
        self.losses.push(mean);
        Some(mean)
    }

    /// Validate and return the graph; for training, first add the backward pass and Adam.
    pub(crate) fn finish(mut self, name: &str) -> Result<Graph, InputError> {
        if self.training {
            let root = match self.losses.len() {
                0 => panic!("zoo model {name} registered no loss"),
                1 => self.losses[0],
                _ => {
                    let ls = self.losses.clone();
                    self.op(
                        "AddV2",
                        "total_loss",
                        &ls,
                        1.0,
                        false,
                        (ls.len() - 1) as f64,
                        Rule::Add,
                    )
                }
            };
            self.backward(root);
        }
        let batch = self.batch;
        self.b.finish(&format!("<zoo:{name}>"), name, batch)
    }
}

/// Shorthand for [`Rule::Unary`].
pub(crate) fn unary(grad: &'static str, use_in: bool, use_out: bool, flops_per_elem: f64) -> Rule {
    Rule::Unary {
        grad,
        use_in,
        use_out,
        flops_per_elem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(g: &Graph, ty: &str) -> usize {
        g.ops().iter().filter(|o| o.op_type == ty).count()
    }

    /// x -> MatMul(W) -> h; h feeds both a ReLU and a residual add; + bias broadcast; loss.
    fn tiny(training: bool) -> Graph {
        let mut net = Net::new(4, training);
        let x = net.input("x", 8.0);
        let w = net.param("w", 8 * 8);
        let rule = Rule::Linear {
            dx: "MatMul",
            dw: "MatMul",
            flops: 128.0,
        };
        let h = net.op("MatMul", "mm", &[x, w], 8.0, true, 128.0, rule);
        let r = net.op_like(
            "Relu",
            "relu",
            &[h],
            h,
            8.0,
            unary("ReluGrad", false, true, 1.0),
        );
        let s = net.op_like("AddV2", "residual", &[h, r], h, 8.0, Rule::Add);
        let b = net.param("b", 8);
        let y = net.op_like("AddV2", "bias", &[s, b], s, 8.0, Rule::Add);
        net.xent_loss("loss", y, 1.0, 8.0);
        net.finish("tiny").unwrap()
    }

    #[test]
    fn fan_out_is_accumulated_and_inputs_get_no_gradient() {
        let g = tiny(true);
        let addn: Vec<usize> = (0..g.len())
            .filter(|&i| g.op(i).op_type == "AddN")
            .collect();
        assert_eq!(addn.len(), 1, "h has two consumers");
        assert_eq!(g.predecessors(addn[0]).count(), 2);
        // Only the weight gradient: x is data.
        assert_eq!(count(&g, "MatMul"), 2);
        assert_eq!(count(&g, "ApplyAdam"), 2);
        assert_eq!(g.gradients().len(), 2);
    }

    #[test]
    fn broadcast_operand_gradient_is_reduced_over_the_batch() {
        let g = tiny(true);
        let link = g
            .gradients()
            .iter()
            .find(|l| g.op(l.optimizer).name == "b/ApplyAdam")
            .unwrap();
        let reshape = g.op(link.grad);
        assert_eq!(reshape.op_type, "Reshape");
        assert_eq!(reshape.output_bytes, 32.0);
        let sum = g.predecessors(link.grad).next().unwrap();
        assert_eq!(g.op(sum).op_type, "Sum");
        assert_eq!(g.op(sum).split, Splittability::Sum);
        assert_eq!(
            reshape.split,
            Splittability::Sum,
            "linear op on a partial sum"
        );
    }

    #[test]
    fn forward_only_graph_has_no_loss() {
        let g = tiny(false);
        assert!(
            g.ops()
                .iter()
                .all(|o| matches!(o.phase, Phase::Input | Phase::Parameter | Phase::Forward))
        );
        assert_eq!(count(&g, "SoftmaxCrossEntropyWithLogits"), 0);
        assert_eq!(g.len(), 7);
    }
}
