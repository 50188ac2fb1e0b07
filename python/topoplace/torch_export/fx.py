"""Small helpers over a captured FX graph's nodes, shared by the exporter's modules."""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten


def tensors_of(val):
    """The tensors in a node's meta value, in port order (None for non-tensor ports)."""
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (list, tuple)):
        return [t if isinstance(t, torch.Tensor) else None for t in val]
    return []


def nbytes(t):
    return t.numel() * t.element_size() if t is not None else 0


def input_nodes(node):
    """The FX nodes a node reads, in argument order."""
    flat, _ = tree_flatten((node.args, node.kwargs))
    return [a for a in flat if isinstance(a, torch.fx.Node)]
