"""The PyTorch exporter: one real training iteration of a module, captured at ATen level as a
topoplace graph (needs torch; ``topoplace.from_torch`` is its front door).

- ``capture``: tracing (``make_fx`` over a functional forward + backward + Adam step), the
  graph's ops, edges, splits and gradient links, and the document's metadata;
- ``flops``: FLOPs of one ATen call; ``memory``: peak memory replayed from the allocations;
- ``workloads``: what gets traced (a module, how to make a batch, and a loss);
- ``fx``: small helpers over FX nodes shared by the others.
"""

from .capture import export, summary, write
from .workloads import Workload, build_workload, example_workload

__all__ = ["export", "summary", "write", "Workload", "build_workload", "example_workload"]
