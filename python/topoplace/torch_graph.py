"""A PyTorch ``nn.Module`` as a graph file the engine reads: ``from_torch`` captures one
training iteration with the exporter (``topoplace.torch_export``; torch is imported only here,
when called) and returns a :class:`TorchGraph`, which every call takes as its model."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from .errors import InputError

_scratch: Optional[str] = None


class TorchGraph(os.PathLike):
    """A captured training graph: a file (``path``) plus what the capture found. Pass it as the
    ``model`` of :func:`topoplace.simulate`, :func:`topoplace.place` or
    :func:`topoplace.compare`."""

    def __init__(self, path: Path, doc: dict) -> None:
        self.path = path
        self.name: str = doc["name"]
        self.batch: int = doc["batch_size"]
        self.ops: int = len(doc["ops"])
        self.edges: int = len(doc["edges"])
        self.params: int = doc["torch"]["params_total"]
        self.flops: float = float(sum(op["flops"] for op in doc["ops"]))
        self.flops_estimated: list[str] = list(doc["torch"]["flops_estimated"])
        self.batch_unsplittable: list[str] = list(doc["torch"]["batch_unsplittable"])
        self.peak_bytes: int = doc["torch"]["memory_replay"]["peak"]

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return (f"TorchGraph({self.name!r}, batch={self.batch}, ops={self.ops}, "
                f"params={self.params:,}, path={str(self.path)!r})")


def from_torch(
    module: Any,
    inputs: Any,
    targets: Any = None,
    loss: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    out: Optional[Union[str, os.PathLike]] = None,
    op_info: bool = True,
) -> TorchGraph:
    """Captures one training iteration (forward, backward, Adam) of ``module`` on an example
    batch, as ``python -m topoplace.torch_export`` does for named models.

    ``inputs`` (and ``targets``) are a tensor or a sequence of tensors whose first dimension is
    the batch; the module is called as ``module(*inputs)``. ``loss(output, *targets)`` returns
    the scalar loss; without it, cross-entropy against integer targets, mean squared error
    against float ones, or the mean squared output when there are no targets. Tracing runs on
    fake tensors: no weights are copied and nothing runs on a GPU. The graph is written to
    ``out`` (``.json.gz`` compresses), or to a temporary file removed when Python exits.

    Raises :class:`InputError` (file ``<module>``) when the module cannot be traced with these
    inputs; ImportError when torch is not installed.
    """
    from .torch_export import capture, example_workload

    try:
        workload = example_workload(module, inputs, targets, loss)
        label = name or type(module).__name__
        doc = capture.export(workload, workload.batch, label, f"nn.Module:{type(module).__name__}",
                             op_info=op_info)
    except (TypeError, ValueError, RuntimeError, NotImplementedError) as e:
        raise InputError("<module>", _field_of(e), f"{type(e).__name__}: {e}") from e
    path = Path(out) if out is not None else _scratch_file(doc["name"])
    capture.write(doc, path)
    return TorchGraph(path, doc)


def _field_of(error: Exception) -> str:
    text = str(error)
    for field in ("inputs", "targets", "loss"):
        if text.startswith(field):
            return field
    return "forward"


def _scratch_file(name: str) -> Path:
    global _scratch
    if _scratch is None:
        _scratch = tempfile.mkdtemp(prefix="topoplace-torch-")
        atexit.register(shutil.rmtree, _scratch, True)
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "module"
    path = Path(_scratch) / f"{stem}.json"
    n = 1
    while path.exists():
        n += 1
        path = Path(_scratch) / f"{stem}-{n}.json"
    return path


__all__: Sequence[str] = ["TorchGraph", "from_torch"]
