"""Capture one real PyTorch training iteration (forward, backward, Adam) as a topoplace graph.

From Python, ``topoplace.from_torch(module, inputs, ...)``; from the shell (``python -m
topoplace.torch_export``, or ``datasets/export_torch.py`` in a checkout)::

    python -m topoplace.torch_export --model torchvision:resnet50 --batch 64 --out resnet50.json.gz
    python -m topoplace.torch_export --model transformers:bert-large-uncased --batch 16 --seq 128 --out bert.json
    python -m topoplace.torch_export --model module:my.models:make_net --batch 8 --out net.json --profile
    python -m topoplace.torch_export --model transformers:gpt2 --batch 8 --seq 1024 --out gpt2.json.gz
    python -m topoplace.torch_export --model transformers:llama --config hidden_size=512,num_hidden_layers=4 ...

How (see docs/formats.md and datasets/README.md):
- ``make_fx(functionalize(step, remove="mutations"), tracing_mode="fake")`` over a ``step`` that
  computes loss and gradients with ``torch.func.grad_and_value`` of ``functional_call`` and applies
  a hand-written out-of-place Adam (the stock optimizer reads its step counter with ``.item()``,
  which cannot be traced). Fake tensors: no weights are needed and nothing runs on a GPU. oneDNN
  is off while tracing, so RNN layers are captured as ATen's cells, not one opaque call.
- Every live ATen call becomes one op (ops whose results reach no output are dropped); ``getitem``
  is folded into output ports; views fold into the op that made their base (no op, no memory;
  the edges carry the view's bytes). Parameters become parameter ops (exact ``numel`` in
  ``params``); batch inputs are input ops. The Adam arithmetic of each parameter is fused into one
  optimizer op (like TF's ApplyAdam) whose resident bytes are its m and v state, linked to the op
  producing the gradient.
- Splittability from the batch dimension, found by tracing twice (batch B and B+1) and comparing
  shapes: an op whose output keeps it is ``concat``; one that reduces over it by a sum, a mean
  (``"reduce": "mean"`` in op_info) or a contraction (weight gradients) is ``sum``; a linear op of
  partial sums is ``sum``; anything else reducing over the batch is ``none`` and named in a
  warning. The optimizer is ``none``.
- FLOPs: ``flops.py`` (grouped convolutions counted right; every op type without a
  formula is listed in ``"flops_estimated"`` and warned about). Peak memory replayed from the
  graph's allocations: ``memory.py``, in ``"memory_replay"``.
- Output is topoplace graph JSON plus a top-level ``"torch"`` metadata object (exact parameter
  count, shapes, dtypes, trace time), read by ``topoplace import --format torch``.
"""

from __future__ import annotations

import gzip
import json
import math
import operator
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections import defaultdict

import torch
from torch.func import functional_call, functionalize, grad_and_value
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_flatten

from .flops import node_flops
from .fx import input_nodes, nbytes, tensors_of
from .memory import replay

ADAM = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8)

# ATen ops that only alias their input: no compute, no memory traffic.
VIEW_OPS = {
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "squeeze",
    "unsqueeze", "slice", "select", "alias", "detach", "as_strided", "unfold", "_reshape_alias",
    "view_as", "expand_as", "split", "split_with_sizes", "unbind", "chunk", "diagonal", "lift_fresh",
    "unsafe_split", "unsafe_chunk", "unsafe_split_with_sizes", "view_as_real", "view_as_complex",
}

# Ops that only allocate or fill: no arithmetic.
CREATION_OPS = {"empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
                "scalar_tensor", "new_zeros", "new_empty", "new_ones", "empty_strided", "arange"}

# Reductions over the batch whose results over batch slices add up exactly: weight gradients
# (contractions over the batch) and sums. Under data parallelism they are ``sum``-split.
SUMMABLE = {"mm", "bmm", "sum", "convolution_backward", "embedding_dense_backward",
            "native_batch_norm_backward", "native_layer_norm_backward", "native_group_norm_backward",
            "_to_copy", "clone", "addmm", "baddbmm"}

# Ops with a ``reduction`` argument (ATen's Reduction enum: 0 none, 1 mean, 2 sum): the losses.
# Mean and sum over the batch are both sum-split (a mean's slices add up once each is scaled by
# its share of the batch; op_info records ``"reduce": "mean"``). ``mean`` itself is the same.
REDUCTION_ENUM = {1: "mean", 2: "sum"}

# Ops linear in their inputs: applied to partial sums they give partial sums, so a weight
# gradient stays summable through the transpose/view/add (tied weights) that follow it, and
# through the cat that joins the q and kv parts of nn.MultiheadAttention's packed in_proj
# gradient in cross-attention.
LINEAR_OPS = VIEW_OPS | {"add", "sub", "neg", "clone", "_to_copy", "embedding_dense_backward", "cat", "stack"}

# Backward ops whose outputs mix the input gradient (batch-split → concat) with weight
# gradients (→ sum): each becomes two graph ops, ``<name>.input`` and ``<name>.weight``.
MIXED_PORTS = {"convolution_backward", "native_batch_norm_backward", "native_layer_norm_backward",
               "native_group_norm_backward"}


# --------------------------------------------------------------------------- tracing

def make_step(w, param_names, buffer_names):
    """One training iteration as a pure function of (params, buffers, m, v, inputs, targets)."""
    model, loss_fn = w.model, w.loss
    b1, b2, lr, eps = ADAM["beta1"], ADAM["beta2"], ADAM["lr"], ADAM["eps"]
    # Step 1 of Adam: bias corrections are constants.
    bc1, bc2 = 1 - b1, 1 - b2

    def compute_loss(params, buffers, inputs, targets):
        out = functional_call(model, {**params, **buffers}, inputs)
        return loss_fn(out, *targets)

    def step(params, buffers, m, v, inputs, targets):
        grads, loss = grad_and_value(compute_loss)(params, buffers, inputs, targets)
        g = [grads[n] for n in param_names]
        new_p, new_m, new_v = [], [], []
        for k, n in enumerate(param_names):
            mk = torch.lerp(m[k], g[k], 1 - b1)
            vk = torch.addcmul(v[k] * b2, g[k], g[k], value=1 - b2)
            denom = (vk.sqrt() / math.sqrt(bc2)).add(eps)
            new_p.append(torch.addcdiv(params[n], mk, denom, value=-lr / bc1))
            new_m.append(mk)
            new_v.append(vk)
        return loss, g, new_p, new_m, new_v

    return step


def step_args(w, batch):
    params = {n: p.detach() for n, p in w.model.named_parameters()}
    buffers = {n: b.detach().clone() for n, b in w.model.named_buffers()}
    m = [torch.zeros_like(p) for p in params.values()]
    v = [torch.zeros_like(p) for p in params.values()]
    inputs, targets = w.make_batch(batch)
    return (params, buffers, m, v, inputs, targets)


def trace(w, batch):
    w.model.train()
    args = step_args(w, batch)
    param_names, buffer_names = list(args[0]), list(args[1])
    step = make_step(w, param_names, buffer_names)
    # oneDNN off: with it, an RNN layer is one opaque mkldnn_rnn_layer call; without it, ATen's
    # own LSTM/GRU cells (matrix products and element-wise gates) are what gets captured.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TF32 acceleration")  # torch notes Intel GPUs
        with torch.backends.mkldnn.flags(enabled=False):
            gm = make_fx(functionalize(step, remove="mutations"), tracing_mode="fake")(*args)
    return gm, args


def placeholder_roles(args):
    """Role of each flattened argument, in the order make_fx numbers its placeholders."""
    params, buffers, m, v, inputs, targets = args
    pn, bn = list(params), list(buffers)
    roles = [("param", k) for k in range(len(pn))] + [("buffer", n) for n in bn]
    roles += [("m", k) for k in range(len(pn))] + [("v", k) for k in range(len(pn))]
    roles += [("input", i) for i in range(len(tree_flatten(inputs)[0]))]
    roles += [("target", i) for i in range(len(tree_flatten(targets)[0]))]
    return roles


# --------------------------------------------------------------------------- graph analysis



def op_name(node):
    if node.target is operator.getitem:
        return "getitem"
    return node.target.overloadpacket.__name__ if hasattr(node.target, "overloadpacket") else str(node.target)



def batch_carrying(gm_a, gm_b):
    """Per node name: which output ports change shape between the two batch sizes."""
    na, nb = list(gm_a.graph.nodes), list(gm_b.graph.nodes)
    if len(na) != len(nb):
        raise SystemExit(f"the two traces differ ({len(na)} vs {len(nb)} nodes); cannot find the batch dimension")
    out = {}
    for a, b in zip(na, nb):
        ta, tb = tensors_of(a.meta.get("val")), tensors_of(b.meta.get("val"))
        out[a.name] = [x is not None and y is not None and tuple(x.shape) != tuple(y.shape) for x, y in zip(ta, tb)]
    return out


def ancestors(roots):
    seen, stack = set(), list(roots)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(input_nodes(n))
    return seen


def conv_window(n, kind):
    """Kernel and stride of a dense, undilated, non-transposed 2-D convolution (forward or
    backward): what the cost model needs to know whether cuDNN can use Winograd. None otherwise."""
    if kind == "convolution":
        weight, stride, dilation, transposed, groups = n.args[1], n.args[3], n.args[5], n.args[6], n.args[8]
    elif kind == "convolution_backward":
        weight, stride, dilation, transposed, groups = n.args[2], n.args[4], n.args[6], n.args[7], n.args[9]
    else:
        return None
    shape = weight.meta["val"].shape
    if len(shape) != 4 or transposed or groups != 1 or any(d != 1 for d in dilation):
        return None
    return {"kernel": [int(shape[2]), int(shape[3])], "stride": [int(v) for v in stride]}


class Exporter:
    """Turns the traced FX graph into topoplace ops, edges and gradient links."""

    def __init__(self, gm, args, batch_ports, times=None):
        self.gm, self.args, self.batch_ports, self.times = gm, args, batch_ports, times or {}
        self.param_names = list(args[0])
        self.ops, self.edges, self.gradients, self.op_info = [], {}, [], {}
        self.port_op = {}  # (node name, port) -> op index
        self.node_ops = defaultdict(list)  # node name -> the op(s) it became
        self.estimated = set()  # op types whose FLOPs fell back to one per output element
        self.unsplittable = set()  # op types that reduce over the batch other than by a sum

    # -- classification
    def classify(self):
        nodes = list(self.gm.graph.nodes)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        self.roles = dict(zip((p.name for p in placeholders), placeholder_roles(self.args)))
        outputs = [o for o in tree_flatten(nodes[-1].args[0])[0] if isinstance(o, torch.fx.Node)]
        n_params = len(self.param_names)
        self.loss_node = outputs[0]
        self.grad_nodes = outputs[1:1 + n_params]
        # Dead code is left out: results that reach no output of the step (an RNN's unused
        # backward branches, buffer updates the functional step does not return).
        self.live = ancestors(outputs)
        forward = ancestors([self.loss_node])
        backward = ancestors(self.grad_nodes) - forward
        self.phase, self.group = {}, {}
        # One gradient node can serve two parameters (an LSTM's bias_ih and bias_hh).
        self.grad_params = defaultdict(set)
        for k, g in enumerate(self.grad_nodes):
            self.grad_params[g.name].add(k)
        for n in nodes:
            if n.op != "call_function" or n not in self.live:
                continue
            if n in forward:
                self.phase[n.name] = "forward"
            elif n in backward:
                self.phase[n.name] = "backward"
            else:
                k = self.optimizer_group(n)
                self.phase[n.name] = "optimizer" if k is not None else "forward"
                if k is not None:
                    self.group[n.name] = k

    def optimizer_group(self, n):
        """The parameter whose Adam update ``n`` belongs to: the m or v state it reads (directly or
        through an earlier op of the update), else its gradient when that serves one parameter."""
        state, grads = set(), set()
        for a in input_nodes(n):
            role = self.roles.get(a.name)
            if role and role[0] in ("m", "v"):
                state.add(role[1])
            elif a.name in self.group:
                state.add(self.group[a.name])
            elif a.name in self.grad_params:
                grads |= self.grad_params[a.name]
        ks = state or grads
        if len(ks) > 1:
            raise SystemExit(f"optimizer node {n.name} mixes parameters {sorted(ks)}")
        return ks.pop() if ks else None

    # -- ops
    def add_op(self, name, op_type, phase, **fields):
        op = {"id": len(self.ops), "name": name, "op_type": op_type, "phase": phase,
              "flops": 0.0, "bytes_accessed": 0.0, "output_bytes": 0.0, "resident_bytes": 0.0, "split": "none"}
        op.update(fields)
        self.ops.append(op)
        return op["id"]

    def build(self):
        self.classify()
        params = self.args[0]
        self.opt_op = {}
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                self.add_placeholder(n, params)
            elif n.op != "call_function" or n not in self.live or op_name(n) == "getitem":
                continue  # getitem is folded into its producer's ports
            elif self.phase[n.name] == "optimizer":
                self.add_to_optimizer(n)
            elif op_name(n) in VIEW_OPS:
                self.fold_view(n)
            else:
                self.add_compute(n)
        self.connect()
        return self

    def add_placeholder(self, n, params):
        role, key = self.roles[n.name]
        t = n.meta["val"]
        b = float(nbytes(t))
        if role == "param":
            name = self.param_names[key]
            i = self.add_op(name, "parameter", "parameter", output_bytes=b, resident_bytes=b, params=int(params[name].numel()))
        elif role == "buffer":
            i = self.add_op(key, "buffer", "parameter", output_bytes=b, resident_bytes=b)
        elif role in ("input", "target"):
            i = self.add_op(f"{role}{key}", "input", "input", output_bytes=b, split="concat")
        else:
            return  # Adam state: resident bytes of the fused optimizer op, not an op of its own
        self.port_op[(n.name, 0)] = i
        self.info(i, n)

    def info(self, i, n, ports=None):
        ts = tensors_of(n.meta.get("val"))
        if ports is not None:
            ts = [ts[p] for p in ports]
        self.op_info[str(i)] = {"node": n.name, "shapes": [list(t.shape) if t is not None else None for t in ts],
                                "dtypes": [str(t.dtype).removeprefix("torch.") if t is not None else None for t in ts]}

    def flops_of(self, n):
        port_flops, estimated = node_flops(n)
        if estimated:
            self.estimated.add(f"aten.{op_name(n)}")
        return port_flops

    def add_to_optimizer(self, n):
        k = self.group[n.name]
        name = self.param_names[k]
        if k not in self.opt_op:
            pb = float(nbytes(self.args[0][name]))
            # resident: m and v (the parameter itself is resident on its parameter op)
            self.opt_op[k] = self.add_op(f"adam:{name}", "adam", "optimizer", output_bytes=pb, resident_bytes=2 * pb,
                                         batch_scaled=False)
        op = self.ops[self.opt_op[k]]
        op["flops"] += sum(self.flops_of(n))
        op["bytes_accessed"] += self.traffic(n)
        self.add_time(op, n.name, 1.0)
        self.port_op[(n.name, 0)] = self.opt_op[k]
        self.node_ops[n.name] = [self.opt_op[k]]

    def fold_view(self, n):
        """A view aliases its input: it becomes no op (no compute, no memory of its own); its ports
        are its input's producer, and the edges from there carry the view's bytes."""
        base = self.view_base(n)
        src = self.source_of(base) if base is not None else None
        if src is None:
            return
        for p in range(max(1, len(tensors_of(n.meta.get("val"))))):
            self.port_op[(n.name, p)] = src[0]

    @staticmethod
    def view_base(n):
        return next((a for a in input_nodes(n) if tensors_of(a.meta.get("val"))), None)

    def traffic(self, n):
        if op_name(n) in VIEW_OPS:
            return 0.0
        ins = sum(nbytes(t) for a in input_nodes(n) for t in tensors_of(a.meta.get("val"))[:1])
        return float(ins + sum(nbytes(t) for t in tensors_of(n.meta.get("val"))))

    def add_time(self, op, node_name, share):
        if node_name in self.times:
            op.setdefault("profiled_us", {})
            op["profiled_us"]["cpu"] = op["profiled_us"].get("cpu", 0.0) + self.times[node_name] * share

    def add_compute(self, n):
        kind = op_name(n)
        ports = self.batch_ports.get(n.name, [])
        outs = tensors_of(n.meta.get("val"))
        groups = [list(range(len(outs)))]
        if kind in MIXED_PORTS and any(ports) and not all(p for p, t in zip(ports, outs) if t is not None):
            batch = [p for p, t in enumerate(outs) if t is not None and ports[p]]
            rest = [p for p, t in enumerate(outs) if t is not None and not ports[p]]
            groups = [batch, rest]
        shares = self.flop_shares(n, groups, self.flops_of(n))
        total = sum(shares)
        for gi, group in enumerate(groups):
            suffix = "" if len(groups) == 1 else (".input" if gi == 0 else ".weight")
            out_b = float(sum(nbytes(outs[p]) for p in group if outs[p] is not None))
            fraction = shares[gi] / total if total else 1 / len(groups)
            i = self.add_op(n.name + suffix, f"aten.{kind}", self.phase[n.name],
                            flops=float(shares[gi]), output_bytes=out_b, bytes_accessed=self.traffic(n) * fraction)
            op = self.ops[i]
            op["split"], scaled, reduce = self.split_of(n, kind, group)
            if scaled is False:
                op["batch_scaled"] = False
            self.add_time(op, n.name, fraction)
            window = conv_window(n, kind)
            if window is not None:
                op["conv_window"] = window
            for p in group or [0]:
                self.port_op[(n.name, p)] = i
            self.node_ops[n.name].append(i)
            self.info(i, n, group if len(groups) > 1 else None)
            shape = attention_shape(n)
            if shape is not None:
                op["attention"] = shape
                if shape["causal"]:
                    # topoplace counts a causal kernel's FLOPs as its authors' benchmarks do: the
                    # masked half of the score blocks is skipped, not computed (torch's counter
                    # charges the full square).
                    op["flops"] /= 2
            if reduce is not None:
                self.op_info[str(i)]["reduce"] = reduce
            stack = n.meta.get("nn_module_stack")
            if stack:
                last = list(stack.values())[-1]
                self.op_info[str(i)]["module"] = last[0] if isinstance(last, tuple) else str(last)
        if len(groups) == 1:
            self.split_saved_ports(n, self.node_ops[n.name][0])

    def split_saved_ports(self, n, i):
        """The secondary outputs of a forward op (batch-norm statistics, a dropout mask, pooling
        indices) live until the backward pass reads them, while the main output often dies with
        its forward consumer (a ReLU after a batch norm). One op would hold the main output as long
        as the statistics; so they become a companion op without compute, fed by the main op and
        split like it, and each output is freed after its own last reader, as in eager PyTorch."""
        outs = tensors_of(n.meta.get("val"))
        rest = [p for p, t in enumerate(outs) if p > 0 and t is not None]
        if self.phase[n.name] != "forward" or not rest or not outs or outs[0] is None:
            return
        rest_bytes = float(sum(nbytes(outs[p]) for p in rest))
        op = self.ops[i]
        op["output_bytes"] -= rest_bytes
        j = self.add_op(n.name + ".saved", op["op_type"], "forward", output_bytes=rest_bytes, split=op["split"])
        if "batch_scaled" in op:
            self.ops[j]["batch_scaled"] = op["batch_scaled"]
        for p in rest:
            self.port_op[(n.name, p)] = j
        self.edges[(i, j)] = rest_bytes
        self.info(j, n, rest)
        self.op_info[str(i)] = {**self.op_info[str(i)], "shapes": self.op_info[str(i)]["shapes"][:1],
                                "dtypes": self.op_info[str(i)]["dtypes"][:1]}

    @staticmethod
    def flop_shares(n, groups, port_flops):
        """FLOPs of each port group: exact where the formula is per port (convolution backward),
        else in proportion to the groups' output elements."""
        outs = tensors_of(n.meta["val"])
        if len(groups) == 1:
            return [sum(port_flops)]
        if len(port_flops) == len(outs):
            return [sum(port_flops[p] for p in g) for g in groups]
        sizes = [sum(outs[p].numel() for p in g) for g in groups]
        return [sum(port_flops) * s / max(1, sum(sizes)) for s in sizes]

    def split_of(self, n, kind, group):
        """(split, batch_scaled, reduce) from the batch dimension: concat when an output keeps it;
        sum when the op reduces over it by a sum or a mean (``reduce`` names which); sum for linear
        ops of partial sums and none, not batch-scaled, for ops that never touch the batch."""
        ports = self.batch_ports.get(n.name, [])
        out_batch = any(ports[p] for p in group if p < len(ports))
        in_batch = any(any(self.batch_ports.get(a.name, [])) for a in input_nodes(n))
        if out_batch:
            return "concat", None, None
        if not in_batch:
            return ("sum" if self.of_partial_sums(n, kind) else "none"), False, None
        reduce = batch_reduction(n, kind)
        if reduce is None:
            self.unsplittable.add(f"aten.{kind}")
            return "none", None, None
        return "sum", None, reduce

    def of_partial_sums(self, n, kind):
        """A linear op whose every floating-point input comes from a sum-split op (integer inputs
        are indices, e.g. embedding positions)."""
        if kind not in LINEAR_OPS:
            return False
        floats = [a for a in input_nodes(n) if any(t is not None and t.is_floating_point() for t in tensors_of(a.meta.get("val")))]
        srcs = [self.source_of(a) for a in floats]
        return bool(srcs) and all(s is not None and self.ops[s[0]]["split"] == "sum" for s in srcs)

    # -- edges
    def source_of(self, a):
        """(op index, bytes) feeding from FX value ``a``; None for Adam state and constants."""
        if a.op == "call_function" and op_name(a) == "getitem":
            producer, port = a.args[0], a.args[1]
        else:
            producer, port = a, 0
        i = self.port_op.get((producer.name, port))
        if i is None:
            return None
        return i, self.value_bytes(a)

    def value_bytes(self, a):
        """Bytes a consumer of FX value ``a`` needs sent: at most its base's when ``a`` is a view
        (an expanded bias travels as the bias)."""
        t = tensors_of(a.meta.get("val"))
        b = float(nbytes(t[0])) if t and t[0] is not None else 0.0
        node = a.args[0] if a.op == "call_function" and op_name(a) == "getitem" else a
        if node.op == "call_function" and op_name(node) in VIEW_OPS and self.phase.get(node.name) != "optimizer":
            base = self.view_base(node)
            if base is not None:
                b = min(b, self.value_bytes(base))
        return b

    def connect(self):
        """One edge per (producer op, consumer op); distinct tensors between them add up, to at
        most the producer's output (two views of one tensor are one transfer)."""
        for n in self.gm.graph.nodes:
            if n.op != "call_function" or op_name(n) == "getitem":
                continue
            dsts = self.node_ops[n.name]
            seen = set()
            for a in input_nodes(n):
                src = self.source_of(a)
                if src is None:
                    continue
                s, b = src
                for d in dsts:
                    if s != d and (a.name, d) not in seen:
                        seen.add((a.name, d))
                        self.edges[(s, d)] = self.edges.get((s, d), 0.0) + b
        for (s, d), b in self.edges.items():
            out = self.ops[s]["output_bytes"]
            self.edges[(s, d)] = min(b, out) if out > 0 else b
        for k, g in enumerate(self.grad_nodes):
            src = self.source_of(g)
            opt = self.opt_op.get(k)
            if src is None or opt is None:
                raise SystemExit(f"parameter {self.param_names[k]} has no gradient or no optimizer op")
            if (src[0], opt) not in self.edges:
                raise SystemExit(f"no edge carries the gradient of {self.param_names[k]}")
            self.gradients.append({"grad": src[0], "optimizer": opt})


def attention_shape(n):
    """``ops[].attention`` of a fused scaled-dot-product attention call, forward or backward
    (flash, memory-efficient, cuDNN or the CPU kernel ``F.scaled_dot_product_attention`` picks):
    query and key lengths and the head size from its ``query`` and ``key`` arguments ([batch,
    heads, tokens, head size]), ``causal`` from its ``is_causal``; None for any other op."""
    schema = getattr(n.target, "_schema", None)
    if schema is None or "attention" not in schema.name:
        return None
    names = [a.name for a in schema.arguments]
    if "query" not in names or "key" not in names:
        return None

    def arg(name):
        i = names.index(name)
        value = n.args[i] if i < len(n.args) else n.kwargs.get(name, schema.arguments[i].default_value)
        return value.meta.get("val") if isinstance(value, torch.fx.Node) else value

    q, k = arg("query"), arg("key")
    if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor)) or q.dim() != 4 or k.dim() != 4:
        return None
    causal = bool(arg("is_causal")) if "is_causal" in names else False
    return {"seq_q": int(q.shape[2]), "seq_k": int(k.shape[2]), "head_dim": int(q.shape[3]), "causal": causal}


def batch_reduction(n, kind):
    """How ``n`` reduces over the batch: "sum", "mean", or None (max, variance, ...: slices'
    results do not combine by addition)."""
    if kind in SUMMABLE:
        return "sum"
    if kind == "mean":
        return "mean"
    schema = getattr(n.target, "_schema", None)
    for i, arg in enumerate(schema.arguments if schema is not None else []):
        if arg.name == "reduction":
            value = n.kwargs.get("reduction", n.args[i] if i < len(n.args) else arg.default_value)
            return REDUCTION_ENUM.get(value)
    return None


# --------------------------------------------------------------------------- profiling

class TimingInterpreter(torch.fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        self.samples = defaultdict(list)

    def run_node(self, n):
        t0 = time.perf_counter_ns()
        r = super().run_node(n)
        self.samples[n.name].append((time.perf_counter_ns() - t0) / 1000.0)
        return r


def profile(gm, args, runs):
    """Median per-node CPU time in µs over ``runs`` runs (after one warm-up) on real tensors."""
    interp = TimingInterpreter(gm)
    with torch.no_grad():
        interp.run(*args)
        interp.samples.clear()
        for _ in range(runs):
            interp.run(*args)
    return {k: statistics.median(v) for k, v in interp.samples.items()}


# --------------------------------------------------------------------------- main

def export(w, batch, name, source, *, seq=None, tokens=None, profile_runs=0, op_info=True):
    """The graph document of one training iteration of workload ``w`` at ``batch``.

    ``source`` names the model in the metadata (``torchvision:vgg19``, ``nn.Module:MyNet``);
    ``profile_runs`` > 0 also measures per-op CPU times on real tensors."""
    torch.manual_seed(0)
    params_total = sum(p.numel() for p in w.model.parameters())
    t0 = time.perf_counter()
    gm, step_in = trace(w, batch)
    trace_s = time.perf_counter() - t0
    gm2, _ = trace(w, batch + 1)
    ports = batch_carrying(gm, gm2)
    times = profile(gm, step_args(w, batch), profile_runs) if profile_runs > 0 else None
    ex = Exporter(gm, step_in, ports, times).build()
    memory = replay(gm, VIEW_OPS, op_name, lambda n: ex.phase.get(n.name))
    return {
        "format": "topoplace-graph", "version": 1,
        "name": name, "batch_size": batch,
        "ops": ex.ops,
        "edges": [{"src": s, "dst": d, "bytes": b} for (s, d), b in ex.edges.items()],
        "gradients": ex.gradients,
        "torch": {
            "model": source, "params_total": int(params_total),
            "torch_version": torch.__version__, "batch_size": batch,
            "seq_len": seq, "tokens": tokens,
            "trace_seconds": round(trace_s, 2), "fx_nodes": len(gm.graph.nodes),
            "optimizer": {"name": "adam", **ADAM}, "profiled": profile_runs > 0,
            "flops_estimated": sorted(ex.estimated), "batch_unsplittable": sorted(ex.unsplittable),
            "memory_replay": memory,
            "op_info": ex.op_info if op_info else None,
        },
    }


def write(doc, path):
    """Writes the document to ``path`` (gzip when it ends in .gz) through a temporary file beside
    it, so an interrupted export leaves no half-written graph."""
    path = os.fspath(path)
    data = json.dumps(doc, separators=(",", ":")).encode()
    if path.endswith(".gz"):
        data = gzip.compress(data, compresslevel=9, mtime=0)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".export-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def summary(doc):
    phases = defaultdict(int)
    for op in doc["ops"]:
        phases[op["phase"]] += 1
    return (f"{doc['name']}: {len(doc['ops'])} ops, {len(doc['edges'])} edges, {len(doc['gradients'])} gradient links, "
            f"params {doc['torch']['params_total']:,}, {sum(o['flops'] for o in doc['ops']) / 1e12:.3f} TFLOP, "
            f"phases {dict(phases)}, trace {doc['torch']['trace_seconds']} s")


def warn(doc):
    meta = doc["torch"]
    if meta["flops_estimated"]:
        print(f"warning: FLOPs of {', '.join(meta['flops_estimated'])} are estimates (one per output element; "
              "no formula in topoplace/torch_export/flops.py)", file=sys.stderr)
    if meta["batch_unsplittable"]:
        print(f"warning: {', '.join(meta['batch_unsplittable'])} reduce over the batch other than by a sum: "
              "exported unsplittable (split none)", file=sys.stderr)
