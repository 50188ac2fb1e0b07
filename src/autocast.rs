//! A training graph as PyTorch's autocast runs it in 16-bit mixed precision: each forward and
//! backward op's element type, and its output, memory traffic and outgoing tensors rescaled from
//! the FP32 graph's.
//!
//! The rules ([`crate::precision`] states them for users): matrix products and convolutions run
//! in 16 bits; softmax, layer and group norms, losses, reductions and `exp`/`log`/`pow` in FP32
//! (autocast's FP32 list); every other op in its inputs' type, FP32 when any input is FP32
//! (PyTorch's type promotion). Parameters and data inputs do not decide an op's type: autocast
//! casts weights for the ops it lowers, and a bias add fused into a linear layer runs in its
//! type. A weight's gradient is written into the FP32 `.grad`. fp16 adds GradScaler's unscale
//! pass: one read and one write of every gradient, charged to the optimizer op applying it.
//!
//! Autocast casts each weight a lowered op reads once per forward and caches the 16-bit copy;
//! the ops save it for backward, so it lives from forward to backward: 2 bytes a parameter, charged
//! as resident memory of the parameter. Not modelled: casts as kernels of their own (their
//! traffic is in the ops that read the cast tensors).

use crate::cost::KernelClass;
use crate::error::InputError;
use crate::graph::{Dtype, Graph, Op, OpIdx, Phase};
use crate::precision::Precision;

/// How autocast treats an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AutocastClass {
    /// Cast to 16 bits: matrix products, convolutions, fused attention.
    Lower,
    /// Cast to FP32: softmax, norms, losses, reductions, exp/log/pow.
    Fp32,
    /// Runs in its inputs' type.
    Follows,
}

/// Lower-case fragments of the framework op types autocast runs in FP32 (PyTorch's "Autocast Op
/// Reference", CUDA ops that autocast to float32, with the TensorFlow spellings of the zoo's
/// graphs: `Softmax`, `Mean`, `Sum`, `Rsqrt` of a decomposed LayerNorm, `SoftmaxCrossEntropy…`).
const FP32_OPS: [&str; 14] = [
    "softmax", "norm", "loss", "entropy", "xent", "exp", "log", "pow", "rsqrt", "sum", "mean",
    "reduce", "erf", "moments",
];

fn autocast_class(op: &Op) -> AutocastClass {
    if KernelClass::of(op) != KernelClass::Memory {
        return AutocastClass::Lower;
    }
    let t = op.op_type.to_ascii_lowercase();
    if t.contains("attention") || t.contains("sdpa") {
        AutocastClass::Lower
    } else if t.contains("batchnorm") {
        // Not on autocast's FP32 list: cuDNN normalises 16-bit activations with FP32 statistics.
        AutocastClass::Follows
    } else if FP32_OPS.iter().any(|f| t.contains(f)) {
        AutocastClass::Fp32
    } else {
        AutocastClass::Follows
    }
}

/// Whether `op` computes activations or their gradients (not data, weights or updates).
fn is_activation_op(op: &Op) -> bool {
    matches!(op.phase, Phase::Forward | Phase::Backward)
}

/// `graph` as it trains in `precision`; FP32 and TF32 leave it as it is. `source` names the
/// graph for errors (none is expected: the rewrite keeps the graph's structure).
pub fn autocast(graph: &Graph, precision: Precision, source: &str) -> Result<Graph, InputError> {
    if !precision.is_mixed() {
        return Ok(graph.clone());
    }
    let mut weight_gradient = vec![false; graph.len()];
    for link in graph.gradients() {
        weight_gradient[link.grad] = true;
    }
    let (computes, writes) = element_types(graph, &weight_gradient);
    retype(graph, precision, source, &computes, &writes, true)
}

/// `graph` with 16-bit parameters, as Megatron-LM, DeepSpeed and FSDP's mixed-precision policy
/// train (`param_dtype` bf16 or fp16): every forward and backward op reads and writes 16-bit
/// tensors (norms and softmax accumulate in FP32 inside the kernel), weight gradients included;
/// the FP32 master weights live in the optimizer's state. FP32 and TF32 leave the graph as it is.
pub fn half_parameters(
    graph: &Graph,
    precision: Precision,
    source: &str,
) -> Result<Graph, InputError> {
    if !precision.is_mixed() {
        return Ok(graph.clone());
    }
    let types: Vec<Dtype> = graph
        .ops()
        .iter()
        .map(|op| {
            if is_activation_op(op) {
                Dtype::Half
            } else {
                Dtype::F32
            }
        })
        .collect();
    retype(graph, precision, source, &types, &types, false)
}

/// `graph` with each op computing in `computes` and writing `writes`; `weight_copies` charges
/// autocast's cached 16-bit copy of every weight a 16-bit op reads.
fn retype(
    graph: &Graph,
    precision: Precision,
    source: &str,
    computes: &[Dtype],
    writes: &[Dtype],
    weight_copies: bool,
) -> Result<Graph, InputError> {
    let mut ops = graph.ops().to_vec();
    for (idx, op) in ops.iter_mut().enumerate() {
        if !is_activation_op(op) {
            continue;
        }
        let reads_half = computes[idx] == Dtype::Half
            || graph.predecessors(idx).any(|p| writes[p] == Dtype::Half);
        op.dtype = computes[idx];
        op.bytes_accessed *= traffic_scale(reads_half, writes[idx]);
        if writes[idx] == Dtype::Half {
            op.output_bytes *= 0.5;
        }
    }
    for (idx, op) in ops.iter_mut().enumerate() {
        let lowered = graph
            .successors(idx)
            .any(|s| is_activation_op(graph.op(s)) && computes[s] == Dtype::Half);
        if weight_copies && op.phase == Phase::Parameter && lowered {
            op.resident_bytes += 0.5 * op.output_bytes;
        }
    }
    if precision == Precision::Fp16 {
        for link in graph.gradients() {
            ops[link.optimizer].bytes_accessed += 2.0 * graph.op(link.grad).output_bytes;
        }
    }
    let mut edges = graph.edges().to_vec();
    for edge in &mut edges {
        if writes[edge.src] == Dtype::Half {
            edge.bytes *= 0.5;
        }
    }
    graph.with_numbers(source, graph.batch_size, ops, edges)
}

/// Each op's compute type and the type of the tensor it writes, in topological order.
fn element_types(graph: &Graph, weight_gradient: &[bool]) -> (Vec<Dtype>, Vec<Dtype>) {
    let mut computes = vec![Dtype::F32; graph.len()];
    let mut writes = vec![Dtype::F32; graph.len()];
    for idx in graph.topological_order() {
        let op = graph.op(idx);
        if !is_activation_op(op) {
            continue;
        }
        let inputs: Vec<Dtype> = graph
            .predecessors(idx)
            .filter(|&p| is_activation_op(graph.op(p)))
            .map(|p: OpIdx| writes[p])
            .collect();
        computes[idx] = match autocast_class(op) {
            AutocastClass::Lower => Dtype::Half,
            AutocastClass::Fp32 => Dtype::F32,
            AutocastClass::Follows if inputs.is_empty() || inputs.contains(&Dtype::F32) => {
                Dtype::F32
            }
            AutocastClass::Follows => Dtype::Half,
        };
        writes[idx] = if weight_gradient[idx] {
            Dtype::F32
        } else {
            computes[idx]
        };
    }
    (computes, writes)
}

/// The share of an op's FP32 memory traffic left when it reads 16-bit tensors (`reads_half`)
/// and writes `writes`: reads and writes taken as equal halves of the traffic.
fn traffic_scale(reads_half: bool, writes: Dtype) -> f64 {
    let read = if reads_half { 0.5 } else { 1.0 };
    let write = if writes == Dtype::Half { 0.5 } else { 1.0 };
    (read + write) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zoo::{ZooOptions, build};

    fn bytes(g: &Graph, phase: Phase) -> (f64, f64) {
        g.ops()
            .iter()
            .filter(|o| o.phase == phase)
            .fold((0.0, 0.0), |(out, traffic), o| {
                (out + o.output_bytes, traffic + o.bytes_accessed)
            })
    }

    #[test]
    fn fp32_and_tf32_leave_the_graph_alone() {
        let g = build("mlp", &ZooOptions::default()).unwrap();
        for p in [Precision::Fp32, Precision::Tf32] {
            let same = autocast(&g, p, "<test>").unwrap();
            assert_eq!(same.ops(), g.ops());
        }
    }

    #[test]
    fn matrix_products_run_in_half_and_softmax_in_fp32() {
        let g = build("transformer", &ZooOptions::default()).unwrap();
        let half = autocast(&g, Precision::Bf16, "<test>").unwrap();
        for (a, b) in g.ops().iter().zip(half.ops()) {
            let class = KernelClass::of(a);
            let t = a.op_type.to_ascii_lowercase();
            if is_activation_op(a) && class == KernelClass::Gemm {
                assert_eq!(b.dtype, Dtype::Half, "{}", a.name);
            }
            if is_activation_op(a) && t.contains("softmax") {
                assert_eq!(b.dtype, Dtype::F32, "{}", a.name);
            }
            if !is_activation_op(a) && a.phase != Phase::Parameter {
                assert_eq!(a, b, "{} is not an activation op", a.name);
            }
        }
    }

    #[test]
    fn activations_weigh_between_half_and_all_of_fp32() {
        for model in ["vgg16", "bert-small"] {
            let g = build(model, &ZooOptions::default()).unwrap();
            let half = autocast(&g, Precision::Fp16, "<test>").unwrap();
            let (out32, traffic32) = bytes(&g, Phase::Forward);
            let (out16, traffic16) = bytes(&half, Phase::Forward);
            for (name, r) in [
                ("outputs", out16 / out32),
                ("traffic", traffic16 / traffic32),
            ] {
                assert!((0.5..0.9).contains(&r), "{model} forward {name}: {r}");
            }
        }
    }

    #[test]
    fn weights_read_in_half_keep_a_half_copy_from_forward_to_backward() {
        let g = build("bert-small", &ZooOptions::default()).unwrap();
        let half = autocast(&g, Precision::Bf16, "<test>").unwrap();
        let mut cached = 0;
        for (idx, (a, b)) in g.ops().iter().zip(half.ops()).enumerate() {
            if a.phase != Phase::Parameter {
                continue;
            }
            let lowered = half
                .successors(idx)
                .any(|s| is_activation_op(half.op(s)) && half.op(s).dtype == Dtype::Half);
            let copy = if lowered { 0.5 * a.output_bytes } else { 0.0 };
            assert_eq!(b.resident_bytes, a.resident_bytes + copy, "{}", a.name);
            cached += usize::from(lowered);
        }
        // The projections are cast; LayerNorm's gamma and beta stay FP32.
        assert!(cached > 0);
        let norms = g
            .ops()
            .iter()
            .enumerate()
            .filter(|(_, o)| o.name.contains("LayerNorm/gamma"));
        for (idx, o) in norms {
            assert_eq!(half.op(idx).resident_bytes, o.resident_bytes, "{}", o.name);
        }
    }

    #[test]
    fn fp16_pays_the_unscale_pass_and_bf16_does_not() {
        let g = build("mlp", &ZooOptions::default()).unwrap();
        let bf16 = autocast(&g, Precision::Bf16, "<test>").unwrap();
        let fp16 = autocast(&g, Precision::Fp16, "<test>").unwrap();
        let (_, opt32) = bytes(&g, Phase::Optimizer);
        let (_, opt_bf16) = bytes(&bf16, Phase::Optimizer);
        let (_, opt_fp16) = bytes(&fp16, Phase::Optimizer);
        let grads: f64 = g
            .gradients()
            .iter()
            .map(|l| g.op(l.grad).output_bytes)
            .sum();
        assert_eq!(opt_bf16, opt32);
        assert!((opt_fp16 - opt32 - 2.0 * grads).abs() < 1e-6 * opt32);
    }
}
