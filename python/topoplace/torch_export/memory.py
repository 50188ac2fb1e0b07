"""Peak memory of a captured training step, replayed without a GPU (for ``export_torch.py``).

``torch.cuda.max_memory_allocated`` after one eager step is the peak of the caching allocator's
live bytes. The captured FX graph holds the same allocations in the order eager PyTorch makes
them: every ATen call allocates its outputs when it runs, a view shares its base's storage, and a
tensor is freed once the last op reading it (or any view of it) has run. Replaying that over the
graph's fake tensors gives the peak without running anything:

- ``static``: parameters, buffers, Adam's m and v, and the batch (resident before the step);
- ``peak``: the most bytes of the step's own tensors (activations, gradients, temporaries)
  alive at once, on top of ``static``;
- ``forward_peak``: the most bytes of tensors made by forward ops alive at once: the
  activations, what ``topoplace info`` bounds from above by summing every forward output.

What the replay leaves out: the allocator's rounding to 512-byte blocks and caching (fragmentation),
cuBLAS/cuDNN workspaces, and in-place updates (the functional step writes new parameters, m and v
where the optimizer would overwrite them, so the optimizer's outputs are not counted: they replace
tensors already in ``static``).
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten

from .fx import input_nodes, nbytes, tensors_of





class _Storages:
    """Which allocation each FX value lives in: (node name, port) of the op that made it."""

    def __init__(self, view_ops, op_name):
        self.view_ops, self.op_name = view_ops, op_name
        self.owner = {}  # FX value name -> owner key

    def is_view(self, n):
        return n.op == "call_function" and self.op_name(n) in self.view_ops

    def assign(self, n):
        if n.op == "placeholder":
            self.owner[n.name] = ("static", n.name)
        elif n.op == "call_function" and self.op_name(n) == "getitem":
            producer, port = n.args[0], n.args[1]
            self.owner[n.name] = self.owner[producer.name] if self.is_view(producer) else (producer.name, port)
        elif self.is_view(n):
            base = next((a for a in input_nodes(n) if tensors_of(a.meta.get("val"))), None)
            self.owner[n.name] = self.owner.get(base.name) if base is not None else None
        elif n.op == "call_function":
            self.owner[n.name] = (n.name, 0)


def replay(gm, view_ops, op_name, phase_of):
    """Bytes as in the module docstring. ``phase_of(node)`` names the phase of a call node
    ("forward", "backward", "optimizer"; None for dead code, which eager mode does not run)."""
    nodes = list(gm.graph.nodes)
    storages = _Storages(view_ops, op_name)
    for n in nodes:
        storages.assign(n)
    outputs = {storages.owner.get(o.name) for o in tree_flatten(nodes[-1].args[0])[0] if isinstance(o, torch.fx.Node)}
    last_use = {}
    for i, n in enumerate(nodes):
        for a in input_nodes(n):
            key = storages.owner.get(a.name)
            if key is not None:
                last_use[key] = i
    static = sum(nbytes(t) for n in nodes if n.op == "placeholder" for t in tensors_of(n.meta.get("val")))
    live, live_forward, sizes, made_in_forward = 0, 0, {}, set()
    peak = forward_peak = 0
    freed_at = {}
    for key, i in last_use.items():
        freed_at.setdefault(i, []).append(key)
    for i, n in enumerate(nodes):
        phase = phase_of(n) if n.op == "call_function" else None
        if phase not in (None, "optimizer") and not storages.is_view(n) and op_name(n) != "getitem":
            for port, t in enumerate(tensors_of(n.meta.get("val"))):
                key = (n.name, port)
                if key not in last_use and key not in outputs:
                    continue  # never read: freed as soon as made (still counted at its op)
                sizes[key] = nbytes(t)
                live += sizes[key]
                if phase == "forward":
                    made_in_forward.add(key)
                    live_forward += sizes[key]
            peak = max(peak, live + sum(nbytes(t) for t in _unread_outputs(n, last_use, outputs, phase)))
            forward_peak = max(forward_peak, live_forward)
        for key in freed_at.get(i, []):
            if key in sizes and key not in outputs:
                size = sizes.pop(key)
                live -= size
                if key in made_in_forward:
                    live_forward -= size
    return {"static": static, "peak": peak, "forward_peak": forward_peak}


def _unread_outputs(n, last_use, outputs, phase):
    """Outputs of ``n`` nobody reads: allocated while ``n`` runs, freed right after."""
    if phase in (None, "optimizer"):
        return []
    return [t for port, t in enumerate(tensors_of(n.meta.get("val")))
            if (n.name, port) not in last_use and (n.name, port) not in outputs]
