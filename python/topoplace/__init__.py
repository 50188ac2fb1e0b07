"""topoplace: where each op of a DNN training graph runs on a heterogeneous GPU cluster.

The three jobs of the command line, from Python, over the same engine and with the same
numbers::

    import topoplace as tp

    placed = tp.place("vgg19", "tag-testbed")          # TAG's search with the shipped policy
    print(placed.iteration_ms, placed.best_heuristic)
    sim = tp.simulate("vgg19", "tag-testbed", "dp")    # one iteration of DP-NCCL
    rows = tp.compare(["vgg19"], ["tag-testbed"], "dp-subset,pipeline-dp")
    # pandas.DataFrame([r.to_dict() for r in rows])

Models are zoo names (``topoplace zoo`` lists them), graph JSON files, or a PyTorch module
captured by :func:`from_torch` (``tp.place(tp.from_torch(net, x, y), "tag-testbed")``, torch
needed); clusters are shipped names (``tp.shipped_clusters()``), TOML files, or TOML text.
Every call releases the GIL, shows the command line's progress bar on a terminal, and returns
on Ctrl-C (KeyboardInterrupt). Bad input raises :class:`InputError` naming the file and field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Optional, Union

from . import _args, _topoplace
from ._files import PathLike, _inline_clusters, _materialised, _path
from .env import PlacementEnv
from .errors import DoesNotFitError, InputError, TopoplaceError
from .results import Placement, Result, Row, Simulation, Strategy
from .torch_graph import TorchGraph, from_torch

__all__ = [
    "place",
    "simulate",
    "compare",
    "from_torch",
    "TorchGraph",
    "shipped_clusters",
    "random_topology",
    "nvidia_smi_machine",
    "PlacementEnv",
    "Placement",
    "Simulation",
    "Strategy",
    "Row",
    "Result",
    "TopoplaceError",
    "InputError",
    "DoesNotFitError",
]

__version__ = _topoplace.__version__


def simulate(
    model: PathLike,
    cluster: PathLike,
    strategy: Union[str, PathLike, Strategy] = "dp",
    *,
    batch: Optional[int] = None,
    precision: str = "fp32",
    framework: str = "tf1",
    seq: Optional[int] = None,
    optimizer: Optional[str] = None,
    memory_format: Optional[str] = None,
    order: Optional[str] = None,
    plan: Optional[Union[PathLike, Strategy]] = None,
    trace: Optional[PathLike] = None,
) -> Simulation:
    """Simulates one training iteration, as ``topoplace simulate``.

    ``strategy`` is ``"single"``, ``"dp"``, ``"dp-p"``, a strategy file, or a
    :class:`Strategy`; ``plan`` a hybrid plan (file or :class:`Strategy`) of a zoo GPT or
    Llama instead. ``trace`` writes a Chrome trace of every task there.
    """
    _args.whole("batch", batch, 1, _args.U32)
    _args.whole("seq", seq, 1, _args.MAX_SEQ)
    if plan is not None:
        # A plan is simulated at layer granularity with its own batch: the rest would be ignored.
        given = {"strategy": strategy != "dp", "batch": batch is not None,
                 "order": order is not None, "trace": trace is not None}
        for name, set_ in given.items():
            if set_:
                raise InputError("<argument>", name, "does not apply to a hybrid plan (plan=)")
    with _materialised(strategy) as strategy_arg, _materialised(plan) as plan_arg, \
            _inline_clusters([cluster]) as (cluster_arg,):
        text = _topoplace.simulate(
            os.fspath(model),
            cluster_arg,
            strategy_arg,
            batch=batch,
            precision=precision,
            framework=framework,
            seq=seq,
            optimizer=optimizer,
            memory_format=memory_format,
            order=order,
            plan=plan_arg,
            trace=_path(trace),
        )
    return Simulation(json.loads(text))


def place(
    model: PathLike,
    cluster: PathLike,
    *,
    batch: Optional[int] = None,
    precision: str = "fp32",
    framework: str = "tf1",
    seq: Optional[int] = None,
    optimizer: Optional[str] = None,
    memory_format: Optional[str] = None,
    policy: Union[str, PathLike] = "shipped",
    budget: int = 300,
    time: Optional[float] = None,
    seed: int = 0,
    planner: str = "auto",
    groups: Optional[int] = None,
    pipeline_leaves: Optional[int] = None,
    batch_split: str = "even",
    group_order: str = "compute",
    out: Optional[PathLike] = None,
    trace: Optional[PathLike] = None,
    progress: bool = True,
) -> Placement:
    """Places a model on a cluster, as ``topoplace place`` with the same defaults.

    ``policy`` is ``"shipped"``, ``"none"`` (uniform priors) or a policy file; ``time`` caps
    the call in seconds; ``planner`` is ``"auto"``, ``"tag"`` or ``"hybrid"``. The result's
    ``strategy`` is the chosen strategy (a hybrid plan under the hybrid planner); ``out``
    writes it to a file too. Raises :class:`DoesNotFitError` when nothing fits.
    """
    _args.whole("batch", batch, 1, _args.U32)
    _args.whole("seq", seq, 1, _args.MAX_SEQ)
    _args.whole("budget", budget, 1, _args.U64, optional=False)
    _args.whole("seed", seed, 0, _args.U64, optional=False)
    _args.whole("groups", groups, 1, _args.U32)
    _args.whole("pipeline_leaves", pipeline_leaves, 0, _args.U32)
    _args.seconds("time", time)
    if policy is None:
        raise InputError("<argument>", "policy", 'must be "shipped", "none" or a policy file')
    if out is not None and trace is not None and os.fspath(out) == os.fspath(trace):
        raise InputError("<argument>", "trace", "is the out file too")
    with _inline_clusters([cluster]) as (cluster_arg,):
        summary, strategy = _topoplace.place(
            os.fspath(model),
            cluster_arg,
            batch=batch,
            precision=precision,
            framework=framework,
            seq=seq,
            optimizer=optimizer,
            memory_format=memory_format,
            policy=str(policy),
            budget=budget,
            time=time,
            seed=seed,
            planner=planner,
            groups=groups,
            pipeline_leaves=pipeline_leaves,
            batch_split=batch_split,
            group_order=group_order,
            out=_path(out),
            trace=_path(trace),
            progress=progress,
        )
    return Placement(json.loads(summary), Strategy.from_json(strategy))


def compare(
    models: Union[PathLike, Iterable[PathLike]],
    clusters: Union[PathLike, Iterable[PathLike]],
    methods: Union[str, Iterable[str]] = "all",
    *,
    batch: Optional[int] = None,
    precision: str = "fp32",
    framework: str = "tf1",
    seq: Optional[int] = None,
    optimizer: Optional[str] = None,
    memory_format: Optional[str] = None,
    seed: int = 0,
    budget: int = 100,
    time_limit: Optional[float] = None,
    out: Optional[PathLike] = None,
    progress: bool = True,
) -> list[Row]:
    """Runs methods on every model × cluster, as ``topoplace compare``; one :class:`Row` per
    method, model and cluster (``pandas.DataFrame([r.to_dict() for r in rows])``). ``out``
    writes results.csv, results.md and the charts into that directory too."""
    _args.whole("batch", batch, 1, _args.U32)
    _args.whole("seq", seq, 1, _args.MAX_SEQ)
    _args.whole("budget", budget, 1, _args.U64, optional=False)
    _args.whole("seed", seed, 0, _args.U64, optional=False)
    _args.seconds("time_limit", time_limit)
    model_names = _args.names("models", _names(models, "models"))
    with _inline_clusters(_args.names("clusters", _names(clusters, "clusters"))) as cluster_args:
        text = _topoplace.compare(
            model_names,
            cluster_args,
            methods if isinstance(methods, str) else ",".join(methods),
            batch=batch,
            precision=precision,
            framework=framework,
            seq=seq,
            optimizer=optimizer,
            memory_format=memory_format,
            seed=seed,
            budget=budget,
            time_limit=time_limit,
            out=_path(out),
            progress=progress,
        )
    return [Row(r) for r in json.loads(text)]


def shipped_clusters() -> list[str]:
    """The names of the cluster configs that ship with topoplace."""
    return list(_topoplace.shipped_clusters())


def random_topology(seed: int, path: PathLike, distribution: str = "tag") -> Path:
    """Writes a random cluster of TAG's distribution, or of today's with
    ``distribution="today"`` (``topoplace topology random --seed --distribution``), to ``path``,
    a TOML file any call takes as its cluster."""
    _args.whole("seed", seed, 0, _args.U64, optional=False)
    text = _topoplace.random_topology(seed, distribution)
    path = Path(path)
    path.write_text(text)
    return path


def _names(given: Union[PathLike, Iterable[PathLike]], argument: str) -> list[str]:
    if isinstance(given, (str, os.PathLike)):
        return [os.fspath(given)]
    if isinstance(given, bytes):
        # Iterating bytes would give ints.
        raise InputError("<argument>", argument, "names must be strings or paths, not bytes")
    return [os.fspath(g) for g in given]


def nvidia_smi_machine(text: str, gpu: str, name: str = "machine") -> str:
    """A ``[[machine]]`` TOML entry from ``nvidia-smi topo -m`` output (``topoplace topology
    nvidia-smi``); ``gpu`` is a GPU type of the catalog (``A100-80GB``, ``V100-32GB``, ...).
    Prepend ``name = "..."`` (and add more machines) to get a cluster any call takes."""
    return _topoplace.nvidia_smi_machine(text, gpu, name)
