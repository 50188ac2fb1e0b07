"""Checks for datasets/export_torch.py. Needs torch + torchvision (not run by CI; see
docs/formats.md): ``python -m pytest -q datasets/test_export_torch.py`` or
``python datasets/test_export_torch.py``."""

import json
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch  # noqa: E402

BATCH, D_IN, D_HID, D_OUT = 3, 8, 16, 4


def make_mlp():
    """Factory used through ``--model module:test_export_torch:make_mlp``."""
    model = nn.Sequential(nn.Linear(D_IN, D_HID), nn.ReLU(), nn.Linear(D_HID, D_OUT))

    def make_batch(b):
        return (torch.randn(b, D_IN),), (torch.randint(0, D_OUT, (b,)),)

    return {"model": model, "make_batch": make_batch, "loss": lambda out, y: F.cross_entropy(out, y)}


def export(*argv):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "g.json")
        doc = export_torch.main([*argv, "--out", out])
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
    doc = export("--model", "module:test_export_torch:make_mlp", "--batch", str(BATCH))
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
    doc = export("--model", "module:test_export_torch:make_mlp", "--batch", str(BATCH), "--profile", "--profile-runs", "3")
    timed = [op for op in doc["ops"] if "cpu" in op.get("profiled_us", {})]
    assert doc["torch"]["profiled"]
    assert all(op["phase"] in ("forward", "backward", "optimizer") for op in timed)
    assert {op["phase"] for op in timed} == {"forward", "backward", "optimizer"}
    assert sum(op["profiled_us"]["cpu"] for op in timed) > 0


def test_resnet18_exact_params_and_gradient_links():
    import torchvision
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
    w = export_torch.Workload(**make_mlp())
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
    import torchvision
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
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_models
    m = torch_models.transformer_base()
    assert sum(p.numel() for p in m.transformer.parameters()) == 44_140_544
    assert sum(p.numel() for p in m.parameters()) == transformer_params(37000, 512, 2048, 6, 6) == 63_084_544
    from transformers import GPT2LMHeadModel
    gpt = GPT2LMHeadModel(export_torch.gpt2_config("gpt2"))
    assert sum(p.numel() for p in gpt.parameters()) == 124_439_808


def test_gpt2_tiny_exports_with_exact_params():
    doc = export("--model", "transformers:gpt2-tiny", "--batch", "2", "--seq", "32", "--no-op-info")
    check_graph(doc)
    d, layers, vocab = 64, 2, 50257
    n = vocab * d + 1024 * d + layers * (12 * d * d + 13 * d) + 2 * d
    assert doc["torch"]["params_total"] == n == 3_382_080
    assert sum(op.get("params", 0) for op in doc["ops"]) == n
    # LM head tied to wte: one parameter op for it, no separate lm_head weight
    names = [op["name"] for op in doc["ops"] if op["op_type"] == "parameter"]
    assert not any("lm_head" in x for x in names)


if __name__ == "__main__":
    for name, fn in list(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
            print("ok", name)
