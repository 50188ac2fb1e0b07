//! The backward pass [`Net::finish`] generates: gradient ops by each forward op's [`Rule`], sums
//! of gradients of tensors with several consumers, and one optimizer update per parameter.

use super::*;

impl Net {
    pub(super) fn backward(&mut self, root: T) {
        self.phase = Phase::Backward;
        let n = self.nodes.len();
        let mut grads: Vec<Vec<T>> = vec![Vec::new(); n];
        let seed = self.op("Fill", "gradients/Fill", &[], 1.0, false, 0.0, Rule::Leaf);
        grads[root.0].push(seed);
        for i in (0..n).rev() {
            if matches!(self.nodes[i].rule, Rule::Leaf) || grads[i].is_empty() {
                continue;
            }
            let dy = self.accumulate(T(i), std::mem::take(&mut grads[i]));
            for (k, g) in self.grad_of(T(i), dy) {
                let x = self.nodes[i].inputs[k];
                grads[x.0].push(g);
            }
        }
        self.phase = Phase::Optimizer;
        for p in self.params.clone() {
            let contributions = std::mem::take(&mut grads[p.0]);
            assert!(
                !contributions.is_empty(),
                "parameter {} gets no gradient",
                self.name_of(p)
            );
            self.phase = Phase::Backward;
            let g = self.accumulate(p, contributions);
            self.phase = Phase::Optimizer;
            self.update(p, g);
        }
    }

    /// The gradient of `t` as one tensor: an `AddN` when several consumers contributed.
    pub(super) fn accumulate(&mut self, t: T, mut parts: Vec<T>) -> T {
        if parts.len() == 1 {
            return parts.pop().expect("one part");
        }
        let name = format!("gradients/{}/AddN", self.name_of(t));
        let flops = (parts.len() - 1) as f64 * self.elems(t);
        self.op_like("AddN", name, &parts, t, flops, Rule::Leaf)
    }

    /// The optimizer's update of parameter `p` with its gradient `g`.
    pub(super) fn update(&mut self, p: T, g: T) {
        let e = self.elems(p);
        let kind = self.optimizer;
        let op_type = kind.op_type();
        let mut op = Op::new(
            0,
            format!("{}/{op_type}", self.name_of(p)),
            op_type,
            Phase::Optimizer,
        );
        let (flops, bytes) = kind.work_per_value(self.framework());
        op.flops = flops * e;
        op.bytes_accessed = bytes * e;
        op.output_bytes = F32 * e;
        op.resident_bytes = kind.state_bytes(e) + self.gradient_buffer_bytes(e);
        let idx = self.b.add_op(op);
        let (p_op, g_op) = (self.nodes[p.0].op, self.nodes[g.0].op);
        self.link(p_op, idx, F32 * e);
        self.linked.insert((g_op, idx));
        self.b.add_gradient(g_op, idx, F32 * e);
    }

    /// The FP32 `.grad` buffer of a parameter of `elems` values, kept for the whole step under
    /// PyTorch: it steps the optimizer after the whole backward, so every gradient is alive at
    /// its end (and DDP keeps its gradient buckets, Hugging Face's Trainer its zeroed `.grad`,
    /// between steps). TensorFlow 1 applies each update as soon as its gradient is ready.
    fn gradient_buffer_bytes(&self, elems: f64) -> f64 {
        if self.framework().fuses_layers() {
            F32 * elems
        } else {
            0.0
        }
    }

    /// A gradient op of forward op `fwd`, shaped like `like`.
    pub(super) fn bop(
        &mut self,
        fwd: T,
        op_type: &'static str,
        tag: &str,
        inputs: &[T],
        like: T,
        flops: f64,
    ) -> T {
        let name = format!("gradients/{}_grad/{tag}", self.name_of(fwd));
        self.op_like(op_type, name, inputs, like, flops, Rule::Leaf)
    }

    /// Reduce a gradient of a broadcast result back to the shape of the operand `x`.
    pub(super) fn reduce_to(&mut self, fwd: T, g: T, x: T) -> T {
        if self.elems(g) == self.elems(x) && self.batched(g) == self.batched(x) {
            return g;
        }
        // TensorFlow's broadcast gradients: reduce_sum over the broadcast axes, then reshape.
        let flops = self.elems(g);
        let summed = self.bop(fwd, "Sum", "Sum", &[g], x, flops);
        self.bop(fwd, "Reshape", "Reshape", &[summed], x, 0.0)
    }

    pub(super) fn wants(&self, t: T) -> bool {
        self.nodes[t.0].requires_grad
    }

    /// Gradient ops for the inputs of `y` that need one: `(input position, gradient)`.
    pub(super) fn grad_of(&mut self, y: T, dy: T) -> Vec<(usize, T)> {
        let inputs = self.nodes[y.0].inputs.clone();
        let rule = self.nodes[y.0].rule.clone();
        let want = |net: &Net, k: usize| net.wants(inputs[k]);
        let mut out = Vec::new();
        match rule {
            Rule::Leaf => {}
            Rule::Identity => {
                if want(self, 0) {
                    out.push((0, self.reduce_to(y, dy, inputs[0])));
                }
            }
            Rule::Linear { dx, dw, flops } => {
                let (x, w) = (inputs[0], inputs[1]);
                let window = self.b.op(self.nodes[y.0].op).conv_window;
                if want(self, 0) {
                    let g = self.bop(y, dx, dx, &[dy, w], x, flops);
                    self.set_conv_window(g, window);
                    out.push((0, g));
                }
                if want(self, 1) {
                    let g = self.bop(y, dw, &format!("{dw}_1"), &[x, dy], w, flops);
                    self.set_conv_window(g, window);
                    out.push((1, g));
                }
            }
            Rule::BatchMatMul { flops } => {
                let (a, b) = (inputs[0], inputs[1]);
                if want(self, 0) {
                    out.push((
                        0,
                        self.bop(y, "BatchMatMulV2", "BatchMatMulV2", &[dy, b], a, flops),
                    ));
                }
                if want(self, 1) {
                    out.push((
                        1,
                        self.bop(y, "BatchMatMulV2", "BatchMatMulV2_1", &[a, dy], b, flops),
                    ));
                }
            }
            Rule::Bias => {
                if want(self, 0) {
                    out.push((0, dy));
                }
                if want(self, 1) {
                    let f = self.elems(dy);
                    out.push((
                        1,
                        self.bop(y, "BiasAddGrad", "BiasAddGrad", &[dy], inputs[1], f),
                    ));
                }
            }
            Rule::Unary {
                grad,
                use_in,
                use_out,
                flops_per_elem,
            } => {
                if want(self, 0) {
                    let x = inputs[0];
                    let mut ins = vec![dy];
                    if use_in {
                        ins.push(x);
                    }
                    if use_out {
                        ins.push(y);
                    }
                    let f = flops_per_elem * self.elems(x);
                    out.push((0, self.bop(y, grad, grad, &ins, x, f)));
                }
            }
            Rule::Add => {
                for (k, &x) in inputs.iter().enumerate() {
                    if self.wants(x) {
                        out.push((k, self.reduce_to(y, dy, x)));
                    }
                }
            }
            Rule::Sub => {
                if want(self, 0) {
                    out.push((0, self.reduce_to(y, dy, inputs[0])));
                }
                if want(self, 1) {
                    let f = self.elems(y);
                    let neg = self.bop(y, "Neg", "Neg", &[dy], y, f);
                    out.push((1, self.reduce_to(y, neg, inputs[1])));
                }
            }
            Rule::Mul => {
                for k in 0..2 {
                    if want(self, k) {
                        let other = inputs[1 - k];
                        let f = self.elems(y);
                        let tag = if k == 0 { "Mul" } else { "Mul_1" };
                        let m = self.bop(y, "Mul", tag, &[dy, other], y, f);
                        out.push((k, self.reduce_to(y, m, inputs[k])));
                    }
                }
            }
            Rule::SqDiffStopB => {
                if want(self, 0) {
                    let f = 3.0 * self.elems(y);
                    let m = self.bop(y, "Mul", "Mul", &[dy, inputs[0], inputs[1]], y, f);
                    out.push((0, self.reduce_to(y, m, inputs[0])));
                }
            }
            Rule::Norm { dx, dgamma, dbeta } => {
                let (x, gamma, beta) = (inputs[0], inputs[1], inputs[2]);
                let e = self.elems(x);
                if want(self, 0) {
                    out.push((0, self.bop(y, dx, dx, &[dy, x, gamma], x, 8.0 * e)));
                }
                if want(self, 1) {
                    out.push((1, self.bop(y, dgamma, dgamma, &[dy, x], gamma, 2.0 * e)));
                }
                if want(self, 2) {
                    out.push((2, self.bop(y, dbeta, dbeta, &[dy], beta, e)));
                }
            }
            Rule::RmsNorm { dx, dgamma } => {
                let (x, gamma) = (inputs[0], inputs[1]);
                let e = self.elems(x);
                if want(self, 0) {
                    out.push((0, self.bop(y, dx, dx, &[dy, x, gamma], x, 6.0 * e)));
                }
                if want(self, 1) {
                    out.push((1, self.bop(y, dgamma, dgamma, &[dy, x], gamma, 2.0 * e)));
                }
            }
            Rule::Attention { flops } => {
                let mut distinct: Vec<usize> = Vec::new();
                for k in 0..3 {
                    if !distinct.iter().any(|&j| inputs[j] == inputs[k]) && want(self, k) {
                        distinct.push(k);
                    }
                }
                let share = 2.5 * flops / distinct.len().max(1) as f64;
                let saved = [dy, inputs[0], inputs[1], inputs[2], y];
                let shape = self.b.op(self.nodes[y.0].op).attention;
                for k in distinct {
                    let tag = format!("ScaledDotProductAttentionBackward_{k}");
                    let op = "ScaledDotProductAttentionBackward";
                    let g = self.bop(y, op, &tag, &saved, inputs[k], share);
                    self.set_attention(g, shape);
                    out.push((k, g));
                }
            }
            Rule::Concat => {
                for (k, &x) in inputs.iter().enumerate() {
                    if self.wants(x) {
                        let tag = format!("Slice_{k}");
                        out.push((k, self.bop(y, "Slice", &tag, &[dy], x, 0.0)));
                    }
                }
            }
            Rule::Gather => {
                if want(self, 1) {
                    let f = self.elems(y);
                    let g = self.bop(
                        y,
                        "UnsortedSegmentSum",
                        "UnsortedSegmentSum",
                        &[dy, inputs[0]],
                        inputs[1],
                        f,
                    );
                    out.push((1, g));
                }
            }
            Rule::Mean => {
                if want(self, 0) {
                    let x = inputs[0];
                    let r = self.bop(y, "Reshape", "Reshape", &[dy], y, 0.0);
                    let tiled = self.bop(y, "Tile", "Tile", &[r], x, 0.0);
                    let f = self.elems(x);
                    out.push((0, self.bop(y, "RealDiv", "truediv", &[tiled], x, f)));
                }
            }
            Rule::Loss => {
                if want(self, 0) {
                    let logits = inputs[0];
                    let f = 3.0 * self.elems(logits);
                    let g = self.bop(
                        y,
                        "SoftmaxCrossEntropyWithLogitsGrad",
                        "SoftmaxCrossEntropyWithLogitsGrad",
                        &[dy, logits, inputs[1]],
                        logits,
                        f,
                    );
                    out.push((0, g));
                }
            }
        }
        out
    }
}
