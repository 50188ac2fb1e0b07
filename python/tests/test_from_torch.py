"""``tp.from_torch``: a PyTorch module captured from an example batch and used as a model by
every call. Without torch (as in CI) only the clear ImportError is checked."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

import topoplace as tp
from helpers import cli_json

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs torch")


@pytest.mark.skipif(HAS_TORCH, reason="torch is installed here")
def test_without_torch_the_call_says_what_is_missing():
    with pytest.raises(ImportError, match="torch"):
        tp.from_torch(object(), ())


def mlp():
    import torch.nn as nn

    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


@needs_torch
def test_an_mlp_becomes_a_graph_every_call_takes(tmp_path):
    import torch

    net = mlp()
    graph = tp.from_torch(net, torch.randn(16, 32), torch.randint(0, 10, (16,)), out=tmp_path / "mlp.json")
    assert graph.params == sum(p.numel() for p in net.parameters()) == 32 * 64 + 64 + 64 * 10 + 10
    assert graph.batch == 16 and os.fspath(graph) == str(tmp_path / "mlp.json")
    # GEMMs: 2·B·in·out per layer forward; backward the weight gradients of both layers and the
    # input gradient of the second only (the batch itself needs no gradient)
    gemm = sum(op["flops"] for op in json.loads(open(graph).read())["ops"]
               if op["op_type"] in ("aten.mm", "aten.addmm"))
    b = 16
    assert gemm == 2 * b * (32 * 64 + 64 * 10) + 2 * b * (32 * 64 + 64 * 10) + 2 * b * 64 * 10
    sim = tp.simulate(graph, "tag-testbed", "dp")
    assert sim.to_dict() == cli_json("simulate", "--model", str(graph), "--cluster", "tag-testbed",
                                     "--strategy", "dp")
    placed = tp.place(graph, "tag-testbed", budget=20, progress=False)
    assert placed.iteration_ms > 0


@needs_torch
def test_default_losses_follow_the_targets():
    import torch

    def loss_ops(*targets):
        graph = tp.from_torch(mlp(), torch.randn(4, 32), *targets)
        doc = json.loads(open(graph).read())
        return {op["op_type"] for op in doc["ops"] if "loss" in op["op_type"]}

    assert "aten.nll_loss_forward" in loss_ops(torch.randint(0, 10, (4,)))
    assert "aten.mse_loss" in loss_ops(torch.randn(4, 10))
    assert not loss_ops()  # no targets: mean of the squared output, no loss op


@needs_torch
def test_the_batch_grows_by_repeating_rows_so_token_ids_stay_valid():
    import torch
    import torch.nn as nn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(100, 16)
            self.out = nn.Linear(16, 5)

        def forward(self, ids):
            return self.out(self.embed(ids).mean(dim=1))

    ids = torch.randint(0, 100, (3, 7))
    graph = tp.from_torch(Tagger(), ids, torch.randint(0, 5, (3,)), name="tagger")
    assert graph.name == "tagger" and graph.params == 100 * 16 + 16 * 5 + 5
    # the exporter traced batch 3 and 4: a batch of 4 reuses row 0 (valid ids, same dtype)
    from topoplace.torch_export import example_workload

    (grown,), (labels,) = example_workload(Tagger(), ids, torch.randint(0, 5, (3,))).make_batch(4)
    assert grown.shape == (4, 7) and torch.equal(grown[3], ids[0]) and labels.shape == (4,)


@needs_torch
def test_bad_modules_and_batches_raise_input_errors_naming_the_field():
    import torch

    with pytest.raises(tp.InputError) as bad:
        tp.from_torch(mlp(), torch.randn(4, 32), torch.randint(0, 10, (5,)))
    assert (bad.value.file, bad.value.field) == ("<module>", "inputs")
    with pytest.raises(tp.InputError) as bad:
        tp.from_torch(mlp(), torch.randn(4, 31))  # the first Linear wants 32 features
    assert (bad.value.file, bad.value.field) == ("<module>", "forward")
    with pytest.raises(tp.InputError) as bad:
        tp.from_torch(mlp(), [torch.randn(4, 32), "not a tensor"])
    assert bad.value.field == "inputs"
