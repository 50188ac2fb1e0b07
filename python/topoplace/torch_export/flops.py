"""FLOPs of one ATen call of a captured training step, for ``export_torch.py``.

Every op the capture emits gets a count from one of three sources, in this order:

1. our own convolution formulas (torch's flop counter ignores ``groups`` in the weight-gradient
   term, which made EfficientNet's backward ~40x its forward);
2. torch's ``flop_registry`` for the matrix products (mm, addmm, bmm, baddbmm, attention);
3. a per-element table below: flops per output (or input) element of element-wise ops,
   normalisations, softmax, losses and pooling, and zero for ops that only move or view data
   (their cost is their memory traffic, ``bytes_accessed``).

An op in none of them is counted at one flop per output element and reported as an estimate:
``export_torch.py`` lists those op types in ``"torch": {"flops_estimated": [...]}`` and
``topoplace import`` repeats the warning.

The per-element counts follow the usual convention of FLOP counters that count element-wise work
at all: one flop per arithmetic operation, a transcendental function (exp, erf, tanh) as one.
They are small beside the matrix products and matter mostly for the memory-bound ops, whose
simulated time comes from ``bytes_accessed`` anyway.
"""

from __future__ import annotations

import math

import torch
from torch.utils.flop_counter import flop_registry

from .fx import tensors_of

# Data movement, views and allocation: no arithmetic.
ZERO = {
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "squeeze", "unsqueeze",
    "slice", "select", "alias", "detach", "as_strided", "unfold", "_reshape_alias", "view_as", "expand_as",
    "split", "split_with_sizes", "unbind", "chunk", "diagonal", "lift_fresh", "lift_fresh_copy",
    "_to_copy", "clone", "copy", "copy_", "cat", "stack", "index", "_unsafe_index", "index_select", "gather",
    "embedding", "constant_pad_nd", "slice_scatter", "select_scatter", "as_strided_scatter", "repeat",
    "roll", "flip", "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "scalar_tensor", "new_zeros", "new_empty", "new_ones", "empty_strided", "arange", "fill", "masked_fill",
    "triu", "tril", "contiguous", "index_put", "scatter", "new_full", "zero", "unsafe_split",
    "unsafe_chunk", "unsafe_split_with_sizes", "select_backward", "slice_backward", "index_select_backward",
    "diagonal_backward", "new_empty_strided", "expand_copy", "permute_copy", "view_copy", "t_copy", "transpose_copy",
}

# Flops per OUTPUT element.
PER_OUTPUT = {
    # one arithmetic or comparison operation
    **dict.fromkeys([
        "add", "sub", "mul", "div", "neg", "rsub", "relu", "threshold_backward", "where", "maximum",
        "minimum", "clamp", "clamp_min", "clamp_max", "abs", "sign", "lt", "gt", "le", "ge", "eq", "ne",
        "logical_not", "logical_and", "logical_or", "bitwise_and", "bitwise_or", "bitwise_not", "sqrt",
        "rsqrt", "exp", "log", "reciprocal", "sin", "cos", "pow", "erf", "tanh", "sigmoid", "hardtanh",
        "leaky_relu", "elu", "floor", "ceil", "round", "square", "log1p", "expm1", "bernoulli", "rand",
        "rand_like", "randn", "randn_like", "randint", "uniform", "normal", "_softmax_backward_data",
        "hardsigmoid", "relu6",
    ], 1),
    **dict.fromkeys(["addcmul", "addcdiv", "lerp", "sigmoid_backward", "hardtanh_backward",
                     "native_dropout", "native_dropout_backward", "leaky_relu_backward",
                     "hardsigmoid_backward"], 2),
    **dict.fromkeys(["tanh_backward", "_log_softmax_backward_data", "elu_backward"], 3),
    # x·σ(x): exp, add, divide, multiply; its gradient adds σ(x)(1 + x(1 − σ(x))).
    "silu": 4, "silu_backward": 6,
    "hardswish": 4, "hardswish_backward": 5,
    # erf form x/2·(1 + erf(x/√2)): scale, erf, add, two multiplies; the gradient also needs the
    # Gaussian density (exp and three multiplies).
    "gelu": 5, "gelu_backward": 9,
    # max, subtract, exp, sum, divide (log-softmax: log of the sum instead of the divide)
    "_softmax": 5, "_log_softmax": 5, "_safe_softmax": 5,
    "mse_loss_backward": 3,
    "nll_loss_backward": 1,
}

# Flops per element of the largest input (reductions, normalisations and their gradients: the
# work is over what they read).
PER_INPUT = {
    "sum": 1, "mean": 1, "amax": 1, "amin": 1, "max": 1, "min": 1, "argmax": 1, "cumsum": 1,
    "prod": 1, "var": 3, "var_mean": 3, "std": 3, "norm": 2, "linalg_vector_norm": 2, "any": 1, "all": 1,
    # mean, variance, normalise, scale and shift
    "native_layer_norm": 8, "native_batch_norm": 8, "_native_batch_norm_legit": 8,
    "_native_batch_norm_legit_functional": 8, "_native_batch_norm_legit_no_training": 4,
    "native_group_norm": 8, "_fused_rms_norm": 5,
    "native_layer_norm_backward": 10, "native_batch_norm_backward": 10, "native_group_norm_backward": 10,
    # gather of the target's log-probability and the (weighted) sum
    "nll_loss_forward": 0, "mse_loss": 3, "binary_cross_entropy": 4, "binary_cross_entropy_with_logits": 6,
    "smooth_l1_loss": 4, "huber_loss": 4,
    "_adaptive_avg_pool2d": 1, "_adaptive_avg_pool2d_backward": 1,
    "embedding_dense_backward": 1,
    "max_pool2d_with_indices_backward": 1, "avg_pool2d_backward": 1,
}

# Ops whose loss reduces over the target's elements (not the input's): counted per target element.
PER_TARGET = {"nll_loss_forward", "nll_loss2d_forward"}


def numel(t):
    return t.numel() if isinstance(t, torch.Tensor) else 0


def prod(xs):
    return math.prod(int(x) for x in xs)



def conv_flops(x_shape, w_shape, out_shape, transposed):
    """2 x multiply-adds of a (possibly grouped or transposed) convolution.

    The weight is ``[C_out, C_in/groups, k...]`` (transposed: ``[C_in, C_out/groups, k...]``), so
    each output element of a normal convolution takes ``prod(w_shape[1:])`` multiply-adds and each
    input element of a transposed one scatters ``prod(w_shape[1:])`` per output channel group.
    The input gradient and the weight gradient take exactly as many multiply-adds as the forward.
    """
    spatial = prod((x_shape if transposed else out_shape)[2:])
    return 2 * int(x_shape[0]) * prod(w_shape) * spatial


def convolution_port_flops(node, vals):
    """Per output port: forward ``[out]``; backward ``[grad_input, grad_weight, grad_bias]``."""
    kind = node.target.overloadpacket.__name__
    if kind == "convolution":
        x, w, transposed = vals[0], vals[1], vals[6]
        out = node.meta["val"]
        return [conv_flops(x.shape, w.shape, out.shape, transposed)]
    grad_out, x, w, transposed, mask = vals[0], vals[1], vals[2], vals[7], vals[10]
    one = conv_flops(x.shape, w.shape, grad_out.shape, transposed)
    return [one if mask[0] else 0, one if mask[1] else 0, numel(grad_out) if mask[2] else 0]


def per_element_flops(kind, node, vals):
    """Table count, or None when the op is in no table."""
    outs = [t for t in tensors_of(node.meta.get("val")) if t is not None]
    if kind in ZERO:
        return 0
    if kind in PER_TARGET:
        return numel(vals[1])
    if kind in PER_OUTPUT:
        return PER_OUTPUT[kind] * sum(t.numel() for t in outs)
    if kind in PER_INPUT:
        ins = [v for v in vals if isinstance(v, torch.Tensor)]
        return PER_INPUT[kind] * max(t.numel() for t in ins)
    if kind in ("max_pool2d_with_indices", "avg_pool2d"):
        kernel = vals[1] if len(vals) > 1 else [1, 1]
        return prod(kernel) * numel(outs[0])
    return None


def node_flops(node):
    """``(per-port flops, estimated)`` of an FX call node: the list has one entry per output port
    (one in all for single-output ops); ``estimated`` is True when no formula covers the op."""
    packet = getattr(node.target, "overloadpacket", None)
    kind = packet.__name__ if packet is not None else str(node.target)
    vals = torch.fx.node.map_arg(node.args, lambda n: n.meta.get("val"))
    kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: n.meta.get("val"))
    outs = tensors_of(node.meta.get("val"))
    if kind in ("convolution", "convolution_backward"):
        return convolution_port_flops(node, vals), False
    if packet in flop_registry:
        try:
            return [int(flop_registry[packet](*vals, **kwargs, out_val=node.meta.get("val")))], False
        except Exception:  # a formula that does not fit this overload: fall through to the tables
            pass
    table = per_element_flops(kind, node, vals)
    if table is not None:
        return [int(table)], False
    return [sum(t.numel() for t in outs if t is not None)], True
