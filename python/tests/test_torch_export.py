"""Checks for the PyTorch exporter (``topoplace.torch_export``). Skipped where torch is not
installed (as in CI); the tests that build torchvision or transformers models skip without them.
Run with torch: see docs/python.md."""

import json
import os
import sys
import tempfile

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from helpers import ROOT  # noqa: E402
from topoplace.torch_export import capture as export_torch  # noqa: E402
from topoplace.torch_export import workloads as torch_workloads  # noqa: E402
from topoplace.torch_export.__main__ import main as export_main  # noqa: E402

# The model factories kept beside the committed exports (``module:torch_models:...``).
sys.path.insert(0, str(ROOT / "datasets"))

BATCH, D_IN, D_HID, D_OUT = 3, 8, 16, 4


def make_mlp():
    """Factory used through ``--model module:test_torch_export:make_mlp``."""
    model = nn.Sequential(nn.Linear(D_IN, D_HID), nn.ReLU(), nn.Linear(D_HID, D_OUT))

    def make_batch(b):
        return (torch.randn(b, D_IN),), (torch.randint(0, D_OUT, (b,)),)

    return {"model": model, "make_batch": make_batch, "loss": lambda out, y: F.cross_entropy(out, y)}


def export(*argv):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "g.json")
        doc = export_main([*argv, "--out", out])
        with open(out) as f:
            assert json.load(f) == json.loads(json.dumps(doc))
    return doc


def check_graph(doc):
    """What topoplace's loader checks too: ids, endpoints, acyclic, gradient edges."""
    ids = {op["id"] for op in doc["ops"]}
    assert len(ids) == len(doc["ops"])
    pairs = {(e["src"], e["dst"]) for e in doc["edges"]}
    assert len(pairs) == len(doc["edges"]), "duplicate edges"
    assert all(s in ids and d in ids and e["bytes"] >= 0 for (s, d), e in zip(pairs, doc["edges"]))
    indeg = {i: 0 for i in ids}
    succ = {i: [] for i in ids}
    for s, d in pairs:
        indeg[d] += 1
        succ[s].append(d)
    ready = [i for i, k in indeg.items() if k == 0]
    seen = 0
    while ready:
        i = ready.pop()
        seen += 1
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    assert seen == len(ids), "cycle"
    by_id = {op["id"]: op for op in doc["ops"]}
    for g in doc["gradients"]:
        assert (g["grad"], g["optimizer"]) in pairs
        assert by_id[g["optimizer"]]["phase"] == "optimizer"
    # Weight gradients reduce over the batch: partial results of batch slices add up.
    assert all(by_id[g["grad"]]["split"] == "sum" for g in doc["gradients"])
    fed = {g["optimizer"] for g in doc["gradients"]}
    assert all(op["id"] in fed for op in doc["ops"] if op["phase"] == "optimizer")
    return by_id


def test_mlp_params_links_and_linear_flops():
    doc = export("--model", "module:test_torch_export:make_mlp", "--batch", str(BATCH))
    by_id = check_graph(doc)
    n_params = D_IN * D_HID + D_HID + D_HID * D_OUT + D_OUT
    assert doc["torch"]["params_total"] == n_params
    assert sum(op.get("params", 0) for op in doc["ops"] if op["phase"] == "parameter") == n_params
    assert len(doc["gradients"]) == 4  # one per parameter tensor
    assert sorted(by_id[g["optimizer"]]["name"] for g in doc["gradients"]) == [
        "adam:0.bias", "adam:0.weight", "adam:2.bias", "adam:2.weight"]
    # Linear forward y = x W^T + b as addmm: 2·B·in·out flops (the bias add is not counted).
    fwd = sorted(op["flops"] for op in doc["ops"] if op["op_type"] == "aten.addmm" and op["phase"] == "forward")
    assert fwd == sorted([2 * BATCH * D_IN * D_HID, 2 * BATCH * D_HID * D_OUT])
    # Weight gradient dW1 = dY^T X reduces over the batch: same flops, partial sums add up.
    w1 = next(g for g in doc["gradients"] if by_id[g["optimizer"]]["name"] == "adam:0.weight")
    grad_op = by_id[w1["grad"]]
    assert grad_op["phase"] == "backward"
    assert grad_op["output_bytes"] == D_IN * D_HID * 4
    mm = [op for op in doc["ops"] if op["op_type"] == "aten.mm" and op["split"] == "sum"]
    assert 2 * BATCH * D_IN * D_HID in [op["flops"] for op in mm]
    adam = by_id[w1["optimizer"]]
    assert adam["resident_bytes"] == 2 * D_IN * D_HID * 4  # m and v
    x = next(op for op in doc["ops"] if op["phase"] == "input" and op["name"] == "input0")
    assert (x["output_bytes"], x["split"]) == (BATCH * D_IN * 4, "concat")


def test_mlp_profile_gives_cpu_times():
    doc = export("--model", "module:test_torch_export:make_mlp", "--batch", str(BATCH), "--profile", "--profile-runs", "3")
    timed = [op for op in doc["ops"] if "cpu" in op.get("profiled_us", {})]
    assert doc["torch"]["profiled"]
    assert all(op["phase"] in ("forward", "backward", "optimizer") for op in timed)
    assert {op["phase"] for op in timed} == {"forward", "backward", "optimizer"}
    assert sum(op["profiled_us"]["cpu"] for op in timed) > 0


def test_resnet18_exact_params_and_gradient_links():
    torchvision = pytest.importorskip("torchvision")
    doc = export("--model", "torchvision:resnet18", "--batch", "2", "--no-op-info")
    by_id = check_graph(doc)
    model = torchvision.models.resnet18(weights=None)
    assert doc["torch"]["params_total"] == 11_689_512 == sum(p.numel() for p in model.parameters())
    assert sum(op.get("params", 0) for op in doc["ops"]) == 11_689_512
    assert len(doc["gradients"]) == len(list(model.parameters())) == 62
    kinds = {op["op_type"] for op in doc["ops"]}
    assert {"aten.convolution", "aten.convolution_backward", "adam"} <= kinds
    # conv backward is split into input-gradient (concat) and weight-gradient (sum) parts
    splits = {op["split"] for op in doc["ops"] if op["op_type"] == "aten.convolution_backward"}
    assert splits == {"concat", "sum"}
    assert all(by_id[g["grad"]]["phase"] == "backward" for g in doc["gradients"])


def test_traced_step_matches_eager_autograd_and_adam():
    """The captured graph is a real training iteration: same loss, gradients and Adam update."""
    from torch.utils._pytree import tree_flatten
    torch.manual_seed(0)
    w = torch_workloads.Workload(**make_mlp())
    gm, args = export_torch.trace(w, BATCH)
    outs, _ = tree_flatten(gm(*args))
    n = len(args[0])
    loss, grads, new_p = outs[0], outs[1:1 + n], outs[1 + n:1 + 2 * n]
    (x,), (y,) = args[4], args[5]
    opt = torch.optim.Adam(w.model.parameters(), lr=export_torch.ADAM["lr"],
                           betas=(export_torch.ADAM["beta1"], export_torch.ADAM["beta2"]), eps=export_torch.ADAM["eps"])
    opt.zero_grad()
    eager_loss = w.loss(w.model(x), y)
    eager_loss.backward()
    assert torch.equal(loss, eager_loss.detach())
    for g, p in zip(grads, w.model.parameters()):
        assert torch.allclose(g, p.grad, rtol=1e-6, atol=1e-7)
    opt.step()
    for q, p in zip(new_p, w.model.parameters()):
        assert torch.allclose(q, p.detach(), rtol=1e-6, atol=1e-7)


def test_resnet18_flops_match_flop_counter_mode():
    """Σ FLOPs of the formula-counted ops equals torch's FlopCounterMode over an eager step."""
    torchvision = pytest.importorskip("torchvision")
    from torch.utils.flop_counter import FlopCounterMode
    doc = export("--model", "torchvision:resnet18", "--batch", "2", "--no-op-info")
    model = torchvision.models.resnet18(weights=None)
    x, y = torch.randn(2, 3, 224, 224), torch.randint(0, 1000, (2,))
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    formula_ops = {"aten.convolution", "aten.convolution_backward", "aten.addmm", "aten.mm", "aten.bmm"}
    ours = sum(op["flops"] for op in doc["ops"] if op["op_type"] in formula_ops)
    assert ours == counter.get_total_flops(), (ours, counter.get_total_flops())


def transformer_params(vocab, d, ff, enc, dec):
    """nn.Transformer (biases everywhere, final norms) + one shared vocab x d embedding."""
    mha = 3 * d * d + 3 * d + d * d + d
    ffn = d * ff + ff + ff * d + d
    return vocab * d + enc * (mha + ffn + 2 * 2 * d) + dec * (2 * mha + ffn + 3 * 2 * d) + 2 * 2 * d


def test_token_module_transformer_tiny():
    """``module:`` with ``--tokens SRC,TGT``: the torch_models.py wrapper of nn.Transformer with a
    shared embedding and tied output projection, at a small size."""
    src, tgt, b = 8, 6, 4
    doc = export("--model", "module:torch_models:transformer_tiny", "--tokens", f"{src},{tgt}", "--batch", str(b))
    by_id = check_graph(doc)
    n = transformer_params(vocab=100, d=16, ff=32, enc=1, dec=1)
    assert n == 7_232
    assert doc["torch"]["params_total"] == n
    assert sum(op.get("params", 0) for op in doc["ops"] if op["phase"] == "parameter") == n
    assert doc["torch"]["tokens"] == [src, tgt]
    # the shared embedding is one parameter (one gradient link) used three times
    params = [op for op in doc["ops"] if op["op_type"] == "parameter"]
    assert [op["name"] for op in params].count("embedding.weight") == 1
    assert len(doc["gradients"]) == len(params) == 35
    emb = next(g for g in doc["gradients"] if by_id[g["optimizer"]]["name"] == "adam:embedding.weight")
    assert by_id[emb["grad"]]["output_bytes"] == 100 * 16 * 4
    # inputs: source and target ids (int64, batch-split) and the labels
    inputs = {op["name"]: op for op in doc["ops"] if op["phase"] == "input"}
    assert {k: v["output_bytes"] for k, v in inputs.items()} == {
        "input0": b * src * 8, "input1": b * tgt * 8, "target0": b * tgt * 8}
    assert all(v["split"] == "concat" for v in inputs.values())
    # the tied output projection y @ E^T: 2·B·T·d·vocab forward flops
    fwd_mm = [op["flops"] for op in doc["ops"] if op["phase"] == "forward" and op["op_type"] in ("aten.mm", "aten.bmm")]
    assert 2 * b * tgt * 16 * 100 in fwd_mm
    assert {"forward", "backward", "optimizer"} <= {op["phase"] for op in doc["ops"]}


def test_transformer_base_and_gpt2_param_counts():
    """The zoo equivalents: exact parameter counts without tracing."""
    import torch_models
    m = torch_models.transformer_base()
    assert sum(p.numel() for p in m.transformer.parameters()) == 44_140_544
    assert sum(p.numel() for p in m.parameters()) == transformer_params(37000, 512, 2048, 6, 6) == 63_084_544
    pytest.importorskip("transformers")
    from transformers import GPT2LMHeadModel
    gpt = GPT2LMHeadModel(torch_workloads.gpt2_config("gpt2"))
    assert sum(p.numel() for p in gpt.parameters()) == 124_439_808


def test_gpt2_tiny_exports_with_exact_params():
    pytest.importorskip("transformers")
    doc = export("--model", "transformers:gpt2-tiny", "--batch", "2", "--seq", "32", "--no-op-info")
    check_graph(doc)
    d, layers, vocab = 64, 2, 50257
    n = vocab * d + 1024 * d + layers * (12 * d * d + 13 * d) + 2 * d
    assert doc["torch"]["params_total"] == n == 3_382_080
    assert sum(op.get("params", 0) for op in doc["ops"]) == n
    # LM head tied to wte: one parameter op for it, no separate lm_head weight
    names = [op["name"] for op in doc["ops"] if op["op_type"] == "parameter"]
    assert not any("lm_head" in x for x in names)


def test_loss_is_sum_split_with_the_means_scale():
    """The loss reduces over the batch by a mean: sum-split (each slice's partial loss, scaled by
    its share, adds up), recorded as ``reduce: mean``. Unsplittable, data parallelism would gather
    the whole log-softmax on one GPU."""
    doc = export("--model", "module:test_torch_export:make_mlp", "--batch", str(BATCH))
    losses = [op for op in doc["ops"] if op["op_type"] == "aten.nll_loss_forward"]
    # the loss and its companion holding total_weight (read by the backward): both sum-split
    assert sorted(op["name"].endswith(".saved") for op in losses) == [False, True]
    loss = next(op for op in losses if not op["name"].endswith(".saved"))
    assert all(op["split"] == "sum" for op in losses)
    assert doc["torch"]["op_info"][str(loss["id"])]["reduce"] == "mean"
    assert doc["torch"]["batch_unsplittable"] == []
    # every batch-carrying forward/backward op is concat or sum: nothing forces a gather
    assert all(op["split"] != "none" for op in doc["ops"]
               if op["phase"] in ("forward", "backward") and op.get("batch_scaled", True))


def make_depthwise():
    """A depthwise 3x3 convolution (groups = channels) between two pointwise ones."""
    c = 8
    model = nn.Sequential(nn.Conv2d(3, c, 1), nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False),
                          nn.Flatten(), nn.Linear(c * 6 * 6, 4))

    def make_batch(b):
        return (torch.randn(b, 3, 6, 6),), (torch.randint(0, 4, (b,)),)

    return {"model": model, "make_batch": make_batch, "loss": lambda out, y: F.cross_entropy(out, y)}


def test_grouped_convolution_backward_flops():
    """Depthwise: 2·B·C·H·W·k² forward flops, and exactly that again for each of the input and the
    weight gradient (torch's counter charged the weight gradient C times too much)."""
    b, c, hw, k = 5, 8, 36, 9
    doc = export("--model", "module:test_torch_export:make_depthwise", "--batch", str(b))
    depthwise = 2 * b * c * hw * k
    fwd = sorted(op["flops"] for op in doc["ops"] if op["op_type"] == "aten.convolution")
    assert fwd == sorted([2 * b * 8 * 3 * hw, depthwise])
    bwd = {op["name"]: op["flops"] for op in doc["ops"] if op["op_type"] == "aten.convolution_backward"}
    weight_parts = [f for name, f in bwd.items() if name.endswith(".weight")]
    input_parts = [f for name, f in bwd.items() if name.endswith(".input")]
    assert depthwise in weight_parts and depthwise in input_parts, bwd
    # the first conv needs no input gradient: one op, weight (2·B·8·3·HW) plus bias (B·8·HW)
    assert 2 * b * 8 * 3 * hw + b * 8 * hw in bwd.values(), bwd


def test_views_are_folded_and_dead_code_dropped():
    """No view op is exported (views are not memory), every edge carries at most its producer's
    output, and every op but the loss and the optimizer ops feeds something."""
    doc = export("--model", "module:torch_models:transformer_tiny", "--tokens", "8,6", "--batch", "4")
    by_id = check_graph(doc)
    assert not [op for op in doc["ops"] if op["op_type"].removeprefix("aten.") in export_torch.VIEW_OPS]
    for e in doc["edges"]:
        assert e["bytes"] <= by_id[e["src"]]["output_bytes"] + 1e-9 or by_id[e["src"]]["output_bytes"] == 0
    fed = {e["src"] for e in doc["edges"]}
    loose = [op["name"] for op in doc["ops"] if op["id"] not in fed and op["phase"] in ("forward", "backward")
             and op["op_type"] != "aten.nll_loss_forward"]
    assert loose == [], loose


def rnn_expected_forward_matmul_flops(gates, b, t, f, h, layers):
    """Input and hidden projections of every step of every layer: 2·B·gates·H·(in + H)."""
    total, inp = 0, f
    for _ in range(layers):
        total += t * 2 * b * gates * h * (inp + h)
        inp = h
    return total


def test_default_lstm_and_gru_export():
    """A default nn.LSTM / nn.GRU (biases on, sequence-first): bias_ih and bias_hh share one
    gradient node, RNN layers are ATen cells (no opaque mkldnn call), their matrix products have
    exact FLOPs, nothing is an estimate but data movement, and no dead backward op remains."""
    import torch_models
    b, t, f, h = 4, 5, 8, 16
    for factory, gates in (("lstm_tiny", 4), ("gru_tiny", 3)):
        doc = export("--model", f"module:torch_models:{factory}", "--sequence", f"{t},{f}", "--classes", str(h),
                     "--batch", str(b))
        by_id = check_graph(doc)
        model = getattr(torch_models, factory)()
        assert doc["torch"]["params_total"] == sum(p.numel() for p in model.parameters())
        assert len(doc["gradients"]) == len(list(model.parameters())) == 8
        kinds = {op["op_type"] for op in doc["ops"]}
        assert not any("mkldnn" in k or "rnn" in k for k in kinds), kinds
        mm = sum(op["flops"] for op in doc["ops"] if op["phase"] == "forward"
                 and op["op_type"] in ("aten.mm", "aten.addmm", "aten.bmm", "aten.linear"))
        assert mm == rnn_expected_forward_matmul_flops(gates, b, t, f, h, 2), (factory, mm)
        assert doc["torch"]["flops_estimated"] == []
        fed = {e["src"] for e in doc["edges"]}
        assert all(op["id"] in fed for op in doc["ops"] if op["phase"] == "backward")
        fwd = sum(op["flops"] for op in doc["ops"] if op["phase"] == "forward")
        bwd = sum(op["flops"] for op in doc["ops"] if op["phase"] == "backward")
        assert 1.5 <= bwd / fwd <= 2.6, (factory, bwd / fwd)
        assert all(by_id[g["grad"]]["phase"] == "backward" for g in doc["gradients"])


def test_transformers_configs_by_name_with_overrides():
    """T5 by preset and Llama by model type with --config overrides: no hand-written factory,
    exact parameter counts, the loss sum-split."""
    pytest.importorskip("transformers")
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM
    llama = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, vocab_size=256)
    cases = [
        (["--model", "transformers:t5-tiny"], AutoModelForSeq2SeqLM.from_config(torch_workloads.transformers_config("t5-tiny"))),
        (["--model", "transformers:llama", "--config", ",".join(f"{k}={v}" for k, v in llama.items())],
         AutoModelForCausalLM.from_config(AutoConfig.for_model("llama", **llama))),
    ]
    for argv, model in cases:
        doc = export(*argv, "--batch", "2", "--seq", "16")
        check_graph(doc)
        assert doc["torch"]["params_total"] == sum(p.numel() for p in model.parameters())
        assert sum(op.get("params", 0) for op in doc["ops"]) == doc["torch"]["params_total"]
        loss = next(op for op in doc["ops"] if op["op_type"] == "aten.nll_loss_forward")
        assert loss["split"] == "sum"
        assert doc["torch"]["batch_unsplittable"] == []


def test_memory_replay_of_a_chain():
    """Replay on y = relu(x W1ᵀ + b1) W2ᵀ + b2 at batch B, checked by hand: forward keeps the
    hidden pre-activation's consumers' inputs alive until the backward reads them."""
    doc = export("--model", "module:test_torch_export:make_mlp", "--batch", str(BATCH))
    mem = doc["torch"]["memory_replay"]
    params = (D_IN * D_HID + D_HID + D_HID * D_OUT + D_OUT) * 4
    batch = BATCH * D_IN * 4 + BATCH * 8  # features and int64 labels
    assert mem["static"] == 3 * params + batch  # parameters, m, v and the batch
    # forward tensors alive at once can never exceed every forward output together
    fwd_outputs = sum(op["output_bytes"] for op in doc["ops"] if op["phase"] == "forward")
    assert 0 < mem["forward_peak"] <= fwd_outputs
    # the hidden activation (B x D_HID floats) is alive at the peak
    assert mem["forward_peak"] >= BATCH * D_HID * 4


def eager_peak_bytes(model, x, y):
    """Peak of the CPU allocator's live bytes over one eager forward and backward (the profiler's
    memory events: every allocation and free, in order), above what existed before."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        F.cross_entropy(model(x), y).backward()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        live += e.nbytes()
        peak = max(peak, live)
    return peak


def test_memory_replay_matches_eager_allocations():
    """The replayed peak of the captured step (without its optimizer) equals what the allocator
    really holds at the peak of an eager forward and backward, within 5%: the replay is a
    ``max_memory_allocated`` measurement made without a GPU."""
    torchvision = pytest.importorskip("torchvision")
    for name, b in (("resnet18", 4), ("vit_b_16", 4)):
        doc = export("--model", f"torchvision:{name}", "--batch", str(b), "--no-op-info")
        torch.manual_seed(0)
        model = torchvision.models.get_model(name, weights=None)
        eager = eager_peak_bytes(model, torch.randn(b, 3, 224, 224), torch.randint(0, 1000, (b,)))
        replayed = doc["torch"]["memory_replay"]["peak"]
        assert abs(replayed / eager - 1) < 0.05, (name, replayed, eager)



HEADS, TOKENS, HEAD_DIM = 2, 12, 4


def make_sdpa(causal):
    """One causal (or full) self-attention layer that calls ``F.scaled_dot_product_attention``."""

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(HEADS * HEAD_DIM, 3 * HEADS * HEAD_DIM)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum(dim=(1, 3))

    def make_batch(b):
        return (torch.randn(b, TOKENS, HEADS * HEAD_DIM),), (torch.randn(b, TOKENS),)

    return {"model": Attention(), "make_batch": make_batch, "loss": lambda out, y: F.mse_loss(out, y)}


def make_causal_sdpa():
    return make_sdpa(True)


def make_full_sdpa():
    return make_sdpa(False)


@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_exports_as_one_op_with_its_shape_and_flops(causal):
    factory = "make_causal_sdpa" if causal else "make_full_sdpa"
    doc = export("--model", f"module:test_torch_export:{factory}", "--batch", str(BATCH))
    by_id = check_graph(doc)
    fused = [op for op in by_id.values() if "attention" in op]
    # The kernel call of the forward and the one of the backward; nothing else carries a shape.
    assert sorted(op["phase"] for op in fused) == ["backward", "forward"]
    shape = {"seq_q": TOKENS, "seq_k": TOKENS, "head_dim": HEAD_DIM, "causal": causal}
    assert all(op["attention"] == shape for op in fused)
    # Forward: QKᵀ and PV, 2·s·s·d multiply-adds each per head, 4·b·heads·s²·d FLOPs, half of it
    # under a causal mask (topoplace's count, the kernels' benchmarks'); backward 2.5 times that.
    forward = 4 * BATCH * HEADS * TOKENS * TOKENS * HEAD_DIM / (2 if causal else 1)
    by_phase = {op["phase"]: op for op in fused}
    assert by_phase["forward"]["flops"] == pytest.approx(forward)
    assert by_phase["backward"]["flops"] == pytest.approx(2.5 * forward)
    # No score matrix is made, let alone kept: no op outputs a [b, heads, s, s] tensor.
    shapes = [shape for info in doc["torch"]["op_info"].values() for shape in info["shapes"]]
    assert [BATCH, HEADS, TOKENS, HEAD_DIM] in shapes
    assert [BATCH, HEADS, TOKENS, TOKENS] not in shapes


def test_llama_with_sdpa_attention_exports_one_fused_causal_op_per_layer():
    """``--attention sdpa``: a decoder's attention is PyTorch's fused kernel, one op per layer
    and pass with its shape, causal, with the same parameters as the eager export."""
    pytest.importorskip("transformers")
    config = "hidden_size=64,num_hidden_layers=3,num_attention_heads=4,num_key_value_heads=2," \
             "intermediate_size=128,vocab_size=256"
    common = ["--model", "transformers:llama", "--config", config, "--batch", "2", "--seq", "24"]
    fused = export(*common, "--attention", "sdpa")
    eager = export(*common)
    check_graph(fused)
    assert fused["torch"]["params_total"] == eager["torch"]["params_total"]
    ops = [op for op in fused["ops"] if "attention" in op]
    assert sorted(op["phase"] for op in ops) == ["backward"] * 3 + ["forward"] * 3
    assert all(op["attention"] == {"seq_q": 24, "seq_k": 24, "head_dim": 16, "causal": True} for op in ops)
    assert not any("attention" in op for op in eager["ops"])
    # The eager export keeps the softmax of a [2, 4, 24, 24] score tensor per layer; SDPA none.
    shapes = lambda doc: [s for info in doc["torch"]["op_info"].values() for s in info["shapes"]]
    assert [2, 4, 24, 24] in shapes(eager)
    assert [2, 4, 24, 24] not in shapes(fused)
