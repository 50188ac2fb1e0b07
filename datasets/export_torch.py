#!/usr/bin/env python3
"""Capture one real PyTorch training iteration (forward, backward, Adam) as a topoplace graph.

    python datasets/export_torch.py --model torchvision:resnet50 --batch 64 --out resnet50.json.gz
    python datasets/export_torch.py --model transformers:bert-large-uncased --batch 16 --seq 128 --out bert.json
    python datasets/export_torch.py --model module:my.models:make_net --batch 8 --out net.json --profile
    python datasets/export_torch.py --model transformers:gpt2 --batch 8 --seq 1024 --out gpt2.json.gz
    python datasets/export_torch.py --model module:torch_models:transformer_base --tokens 32,32 --batch 480 --out t.json.gz

How (see /docs/formats.md and datasets/README.md):
- ``make_fx(functionalize(step, remove="mutations"), tracing_mode="fake")`` over a ``step`` that
  computes loss and gradients with ``torch.func.grad_and_value`` of ``functional_call`` and applies
  a hand-written out-of-place Adam (the stock optimizer reads its step counter with ``.item()``,
  which cannot be traced). Fake tensors: no weights are needed and nothing runs on a GPU.
- Every ATen call becomes one op; ``getitem`` is folded into output ports; views are kept as
  zero-cost ops. Parameters become parameter ops (exact ``numel`` in ``params``); batch inputs are
  input ops. The Adam arithmetic of each parameter is fused into one optimizer op (like TF's
  ApplyAdam) whose resident bytes are its m and v state, linked to the op producing the gradient.
- Which tensors carry the batch is found by tracing twice (batch B and B+1) and comparing shapes;
  that drives splittability and ``batch_scaled``.
- Output is topoplace graph JSON plus a top-level ``"torch"`` metadata object (exact parameter
  count, shapes, dtypes, trace time), read by ``topoplace import --format torch``.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import math
import operator
import statistics
import sys
import time
from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, functionalize, grad_and_value
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

ADAM = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8)

# ATen ops that only alias their input: no compute, no memory traffic.
VIEW_OPS = {
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "squeeze",
    "unsqueeze", "slice", "select", "alias", "detach", "as_strided", "unfold", "_reshape_alias",
    "view_as", "expand_as", "split", "split_with_sizes", "unbind", "chunk", "diagonal", "lift_fresh",
}

# Ops that only allocate or fill: no arithmetic.
CREATION_OPS = {"empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
                "scalar_tensor", "new_zeros", "new_empty", "new_ones", "empty_strided", "arange"}

# Reductions over the batch whose partial results over batch slices add up exactly
# (weight gradients); other batch reductions (mean, losses, norms) are not splittable.
SUMMABLE = {"mm", "bmm", "sum", "convolution_backward", "embedding_dense_backward",
            "native_batch_norm_backward", "native_layer_norm_backward", "_to_copy", "clone"}

# Ops linear in their inputs: applied to partial sums they give partial sums, so a weight
# gradient stays summable through the transpose/view/add (tied weights) that follow it, and
# through the cat that joins the q and kv parts of nn.MultiheadAttention's packed in_proj
# gradient in cross-attention.
LINEAR_OPS = VIEW_OPS | {"add", "sub", "neg", "clone", "_to_copy", "embedding_dense_backward", "cat", "stack"}

# Backward ops whose outputs mix the input gradient (batch-split → concat) with weight
# gradients (→ sum): each becomes two graph ops, ``<name>.input`` and ``<name>.weight``.
MIXED_PORTS = {"convolution_backward", "native_batch_norm_backward", "native_layer_norm_backward",
               "native_group_norm_backward"}


# --------------------------------------------------------------------------- models

def bert_config(name):
    """BERT configs by hand (the network is closed, so nothing is downloaded)."""
    from transformers import BertConfig
    sizes = {
        "bert-large-uncased": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
        "bert-base-uncased": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
        "bert-small": dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048),
        "bert-tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
    }
    if name not in sizes:
        sys.exit(f"unknown transformers config {name!r}; known: {', '.join(sizes)}")
    cfg = BertConfig(vocab_size=30522, max_position_embeddings=512, type_vocab_size=2, **sizes[name])
    cfg._attn_implementation = "eager"  # one explicit softmax(QK^T)V path, no fused kernel choice
    return cfg


class Workload:
    """A model plus how to make a batch and a scalar loss from its output."""

    def __init__(self, model, make_batch, loss):
        self.model, self.make_batch, self.loss = model, make_batch, loss


def image_workload(model, batch_hw, classes, aux_weight=None):
    def make_batch(b):
        x = torch.randn(b, 3, *batch_hw)
        y = torch.randint(0, classes, (b,))
        return (x,), (y,)

    def loss(out, y):
        if aux_weight is not None and isinstance(out, tuple):  # inception (logits, aux_logits)
            return F.cross_entropy(out[0], y) + aux_weight * F.cross_entropy(out[1], y)
        return F.cross_entropy(out, y)

    return Workload(model, make_batch, loss)


def torchvision_workload(name):
    import torchvision
    if name == "inception_v3":
        model = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=False)
        return image_workload(model, (299, 299), 1000, aux_weight=0.4)
    model = torchvision.models.get_model(name, weights=None)
    return image_workload(model, (224, 224), 1000)


def bert_workload(name, seq):
    from transformers import BertForPreTraining
    cfg = bert_config(name)
    model = BertForPreTraining(cfg)

    def make_batch(b):
        ids = torch.randint(0, cfg.vocab_size, (b, seq))
        types = torch.zeros(b, seq, dtype=torch.long)
        # A prepared 4-D additive mask (all visible): a 2-D mask makes transformers call
        # mask.all(), a data-dependent branch that fake tensors cannot take.
        mask = torch.zeros(b, 1, 1, seq)
        mlm = torch.randint(0, cfg.vocab_size, (b, seq))
        nsp = torch.randint(0, 2, (b,))
        return (ids, mask, types), (mlm, nsp)

    class Wrapped(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.bert = inner

        def forward(self, ids, mask, types):
            out = self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)
            return out.prediction_logits, out.seq_relationship_logits

    def loss(out, mlm, nsp):
        logits, nsp_logits = out
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), mlm.reshape(-1)) + F.cross_entropy(nsp_logits, nsp)

    return Workload(Wrapped(model), make_batch, loss)


def gpt2_config(name):
    """GPT-2 configs by hand (nothing is downloaded)."""
    from transformers import GPT2Config
    sizes = {
        "gpt2": dict(n_embd=768, n_layer=12, n_head=12),
        "gpt2-medium": dict(n_embd=1024, n_layer=24, n_head=16),
        "gpt2-tiny": dict(n_embd=64, n_layer=2, n_head=2),
    }
    if name not in sizes:
        sys.exit(f"unknown transformers config {name!r}; known: {', '.join(sizes)}")
    cfg = GPT2Config(vocab_size=50257, n_positions=1024, **sizes[name])
    cfg._attn_implementation = "eager"
    return cfg


def gpt2_workload(name, seq):
    """HF GPT2LMHeadModel (LM head tied to the token embedding); loss = CE over every position
    against random next-token labels (the shift of HF's own loss is left out: same shapes)."""
    from transformers import GPT2LMHeadModel
    cfg = gpt2_config(name)
    model = GPT2LMHeadModel(cfg)

    def make_batch(b):
        return (torch.randint(0, cfg.vocab_size, (b, seq)),), (torch.randint(0, cfg.vocab_size, (b, seq)),)

    class Wrapped(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.gpt = inner

        def forward(self, ids):
            # A prepared 4-D additive causal mask: without one, transformers inspects the
            # position ids for packed sequences (.all(), data-dependent under fake tensors).
            s = ids.shape[1]
            mask = torch.full((s, s), torch.finfo(torch.float32).min).triu(1)[None, None]
            return self.gpt(input_ids=ids, attention_mask=mask, use_cache=False).logits

    def loss(logits, labels):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))

    return Workload(Wrapped(model), make_batch, loss)


def token_workload(model, tokens):
    """``--tokens SRC,TGT`` (or ``--tokens N``): ``model(*ids)`` takes one [B, n] token-id tensor
    per length and returns logits [B, last length, vocab]; loss = cross-entropy of those logits
    against random target ids. Ids are drawn below ``model.vocab_size``."""
    lengths = [int(v) for v in tokens.split(",")]
    vocab = getattr(model, "vocab_size", None)
    if not isinstance(vocab, int):
        sys.exit("--tokens needs the module to have an integer attribute vocab_size")

    def make_batch(b):
        ids = tuple(torch.randint(0, vocab, (b, n)) for n in lengths)
        return ids, (torch.randint(0, vocab, (b, lengths[-1])),)

    def loss(logits, labels):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))

    return Workload(model, make_batch, loss)


def module_workload(spec):
    """``module:pkg.mod:factory``: factory() returns an nn.Module taking images (``--image``) or
    token ids (``--tokens``), or a dict ``{"model", "make_batch": f(b) -> (inputs, targets), "loss": f(out, *targets)}``."""
    mod_name, _, fn = spec.partition(":")
    made = getattr(importlib.import_module(mod_name), fn)()
    if isinstance(made, nn.Module):
        return None, made
    return Workload(made["model"], made["make_batch"], made["loss"]), None


def build_workload(args):
    kind, _, name = args.model.partition(":")
    if kind == "torchvision":
        return torchvision_workload(name)
    if kind == "transformers":
        if name.startswith("gpt2"):
            return gpt2_workload(name, args.seq)
        return bert_workload(name, args.seq)
    if kind == "module":
        w, model = module_workload(name)
        if w is None and args.tokens:
            w = token_workload(model, args.tokens)
        elif w is None:
            c, h, wd = (int(v) for v in args.image.split(","))
            w = image_workload(model, (h, wd), args.classes)
            w.make_batch = _image_batch(c, h, wd, args.classes)
        return w
    sys.exit(f"--model must be torchvision:NAME, transformers:CONFIG or module:path.to:factory, not {args.model!r}")


def _image_batch(c, h, w, classes):
    def make_batch(b):
        return (torch.randn(b, c, h, w),), (torch.randint(0, classes, (b,)),)
    return make_batch


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

def tensors_of(val):
    """The tensors in a node's meta value, in port order (None for non-tensor ports)."""
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (list, tuple)):
        return [t if isinstance(t, torch.Tensor) else None for t in val]
    return []


def nbytes(t):
    return t.numel() * t.element_size() if t is not None else 0


def op_name(node):
    if node.target is operator.getitem:
        return "getitem"
    return node.target.overloadpacket.__name__ if hasattr(node.target, "overloadpacket") else str(node.target)


def input_nodes(node):
    flat, _ = tree_flatten((node.args, node.kwargs))
    return [a for a in flat if isinstance(a, torch.fx.Node)]


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


def node_flops(node):
    """Registry formula (matmul, conv, attention) where there is one, else one flop per element."""
    packet = getattr(node.target, "overloadpacket", None)
    val = node.meta.get("val")
    if packet in flop_registry:
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
        try:
            return int(flop_registry[packet](*args, **kwargs, out_val=val))
        except Exception as e:  # a formula that does not fit this overload: count elements instead
            print(f"warning: flop formula for {node.target} failed ({e}); counting elements", file=sys.stderr)
    if op_name(node) in VIEW_OPS or op_name(node) in CREATION_OPS:
        return 0
    return sum(t.numel() for t in tensors_of(val) if t is not None)


class Exporter:
    """Turns the traced FX graph into topoplace ops, edges and gradient links."""

    def __init__(self, gm, args, batch_ports, times=None):
        self.gm, self.args, self.batch_ports, self.times = gm, args, batch_ports, times or {}
        self.param_names = list(args[0])
        self.ops, self.edges, self.gradients, self.op_info = [], {}, [], {}
        self.port_op = {}  # (node name, port) -> op index
        self.node_ops = defaultdict(list)  # node name -> the op(s) it became

    # -- classification
    def classify(self):
        nodes = list(self.gm.graph.nodes)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        self.roles = dict(zip((p.name for p in placeholders), placeholder_roles(self.args)))
        outputs, _ = tree_flatten(nodes[-1].args[0])
        n_params = len(self.param_names)
        self.loss_node = outputs[0]
        self.grad_nodes = outputs[1:1 + n_params]
        forward = ancestors([self.loss_node])
        backward = ancestors(self.grad_nodes) - forward
        self.phase, self.group = {}, {}
        for k, g in enumerate(self.grad_nodes):
            self.group[g.name] = k
        for n in nodes:
            if n.op != "call_function":
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
        """The parameter whose Adam update ``n`` belongs to: inherited from its gradient, m or v."""
        ks = set()
        for a in input_nodes(n):
            role = self.roles.get(a.name)
            if role and role[0] in ("m", "v"):
                ks.add(role[1])
            elif a.name in self.group:
                ks.add(self.group[a.name])
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
            elif n.op == "call_function" and op_name(n) == "getitem":
                continue  # folded into its producer's ports
            elif n.op == "call_function" and self.phase[n.name] == "optimizer":
                self.add_to_optimizer(n)
            elif n.op == "call_function":
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

    def add_to_optimizer(self, n):
        k = self.group[n.name]
        name = self.param_names[k]
        if k not in self.opt_op:
            pb = float(nbytes(self.args[0][name]))
            # resident: m and v (the parameter itself is resident on its parameter op)
            self.opt_op[k] = self.add_op(f"adam:{name}", "adam", "optimizer", output_bytes=pb, resident_bytes=2 * pb,
                                         batch_scaled=False)
        op = self.ops[self.opt_op[k]]
        op["flops"] += node_flops(n)
        op["bytes_accessed"] += self.traffic(n)
        self.add_time(op, n.name, 1.0)
        self.port_op[(n.name, 0)] = self.opt_op[k]
        self.node_ops[n.name] = [self.opt_op[k]]

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
        total = node_flops(n)
        shares = self.flop_shares(n, groups, total)
        for gi, group in enumerate(groups):
            suffix = "" if len(groups) == 1 else (".input" if gi == 0 else ".weight")
            out_b = float(sum(nbytes(outs[p]) for p in group if outs[p] is not None))
            i = self.add_op(n.name + suffix, f"aten.{kind}", self.phase[n.name],
                            flops=float(shares[gi]), output_bytes=out_b)
            op = self.ops[i]
            op["bytes_accessed"] = 0.0 if kind in VIEW_OPS else self.traffic(n) * (shares[gi] / total if total else 1 / len(groups))
            op["split"], scaled = self.split_of(n, kind, group)
            if scaled is False:
                op["batch_scaled"] = False
            self.add_time(op, n.name, shares[gi] / total if total else 1 / len(groups))
            window = conv_window(n, kind)
            if window is not None:
                op["conv_window"] = window
            for p in group or [0]:
                self.port_op[(n.name, p)] = i
            self.node_ops[n.name].append(i)
            self.info(i, n, group if len(groups) > 1 else None)
            stack = n.meta.get("nn_module_stack")
            if stack:
                last = list(stack.values())[-1]
                self.op_info[str(i)]["module"] = last[0] if isinstance(last, tuple) else str(last)

    def flop_shares(self, n, groups, total):
        if len(groups) == 1:
            return [total]
        if op_name(n) == "convolution_backward":
            # conv_backward's registry formula takes the output mask: evaluate each part alone.
            args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), lambda a: a.meta.get("val"))
            args = list(args)
            parts = []
            for g in groups:
                mask = [p in g and args[-1][p] for p in range(3)]
                parts.append(int(flop_registry[n.target.overloadpacket](*args[:-1], mask, out_val=n.meta["val"])))
            return parts
        outs = tensors_of(n.meta["val"])
        sizes = [sum(outs[p].numel() for p in g) for g in groups]
        return [total * s / max(1, sum(sizes)) for s in sizes]

    def split_of(self, n, kind, group):
        """(split, batch_scaled): concat when outputs carry the batch; sum for summable batch
        reductions; none (and not batch-scaled) for ops that never touch the batch."""
        ports = self.batch_ports.get(n.name, [])
        out_batch = any(ports[p] for p in group if p < len(ports))
        in_batch = any(any(self.batch_ports.get(a.name, [])) for a in input_nodes(n))
        if out_batch:
            return "concat", None
        if not in_batch:
            return ("sum" if self.of_partial_sums(n, kind) else "none"), False
        return ("sum" if kind in SUMMABLE else "none"), None

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
        """(op index, port bytes) feeding from FX value ``a``; None for Adam state and constants."""
        if a.op == "call_function" and op_name(a) == "getitem":
            producer, port = a.args[0], a.args[1]
        else:
            producer, port = a, 0
        i = self.port_op.get((producer.name, port))
        if i is None:
            return None
        t = tensors_of(a.meta.get("val"))
        return i, float(nbytes(t[0])) if t and t[0] is not None else 0.0

    def connect(self):
        """One edge per (producer op, consumer op); distinct tensors between them add up."""
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
        for k, g in enumerate(self.grad_nodes):
            src = self.source_of(g)
            opt = self.opt_op.get(k)
            if src is None or opt is None:
                raise SystemExit(f"parameter {self.param_names[k]} has no gradient or no optimizer op")
            if (src[0], opt) not in self.edges:
                raise SystemExit(f"no edge carries the gradient of {self.param_names[k]}")
            self.gradients.append({"grad": src[0], "optimizer": opt})


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

def export(args):
    torch.manual_seed(0)
    w = build_workload(args)
    params_total = sum(p.numel() for p in w.model.parameters())
    t0 = time.perf_counter()
    gm, step_in = trace(w, args.batch)
    trace_s = time.perf_counter() - t0
    gm2, _ = trace(w, args.batch + 1)
    ports = batch_carrying(gm, gm2)
    times = None
    if args.profile:
        real = step_args(w, args.batch)
        times = profile(gm, real, args.profile_runs)
    ex = Exporter(gm, step_in, ports, times).build()
    doc = {
        "format": "topoplace-graph", "version": 1,
        "name": args.name or args.model.split(":")[-1], "batch_size": args.batch,
        "ops": ex.ops,
        "edges": [{"src": s, "dst": d, "bytes": b} for (s, d), b in ex.edges.items()],
        "gradients": ex.gradients,
        "torch": {
            "model": args.model, "params_total": int(params_total),
            "torch_version": torch.__version__, "batch_size": args.batch,
            "seq_len": args.seq if args.model.startswith("transformers:") else None,
            "tokens": [int(v) for v in args.tokens.split(",")] if args.tokens else None,
            "trace_seconds": round(trace_s, 2), "fx_nodes": len(gm.graph.nodes),
            "optimizer": {"name": "adam", **ADAM}, "profiled": bool(args.profile),
            "op_info": ex.op_info if args.op_info else None,
        },
    }
    return doc


def write(doc, path):
    text = json.dumps(doc, separators=(",", ":"))
    if path.endswith(".gz"):
        with gzip.GzipFile(path, "wb", mtime=0, compresslevel=9) as f:
            f.write(text.encode())
    else:
        with open(path, "w") as f:
            f.write(text)


def summary(doc):
    phases = defaultdict(int)
    for op in doc["ops"]:
        phases[op["phase"]] += 1
    return (f"{doc['name']}: {len(doc['ops'])} ops, {len(doc['edges'])} edges, {len(doc['gradients'])} gradient links, "
            f"params {doc['torch']['params_total']:,}, {sum(o['flops'] for o in doc['ops']) / 1e12:.3f} TFLOP, "
            f"phases {dict(phases)}, trace {doc['torch']['trace_seconds']} s")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="torchvision:NAME | transformers:CONFIG (bert-*, gpt2*) | module:pkg.mod:factory")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, default=128, help="sequence length for transformers models")
    ap.add_argument("--image", default="3,224,224", help="C,H,W of the input for module: models returning a bare nn.Module")
    ap.add_argument("--tokens", help="SRC,TGT (or N): token-id inputs of these lengths for module: models "
                    "returning a bare nn.Module (it must have vocab_size; loss = CE over the last input's tokens)")
    ap.add_argument("--classes", type=int, default=1000, help="classes for module: image models")
    ap.add_argument("--out", required=True, help="output JSON path (.json.gz to compress)")
    ap.add_argument("--name", help="graph name (default: the model name)")
    ap.add_argument("--profile", action="store_true", help="measure per-op CPU times (profiled_us.cpu)")
    ap.add_argument("--profile-runs", type=int, default=5)
    ap.add_argument("--no-op-info", dest="op_info", action="store_false", help="omit per-op shapes/dtypes metadata")
    args = ap.parse_args(argv)
    doc = export(args)
    write(doc, args.out)
    print(summary(doc))
    return doc


if __name__ == "__main__":
    main()
