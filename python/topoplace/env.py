"""TAG's tree as an episodic environment for learning research, in the shape Gymnasium users
expect: ``reset()``, ``step(action)``, ``action_space``, ``observation_space``.

An episode decides the op groups of a model one by one, in the order ``place``'s search decides
them; each action is one of the tree's actions (a set of GPUs and a replication option,
``env.actions``). The observation is the heterogeneous graph the GNN scores at that vertex; the
reward, at the last step only, is the search's: DP-NCCL's simulated time over the strategy's,
less one (−1 when it runs out of memory). ``env.strategy()`` is the strategy the episode built,
the file ``topoplace simulate --strategy`` reads.

With Gymnasium installed the class is a ``gymnasium.Env`` with ``Discrete`` actions and ``Box``
observations (numpy arrays); without it, observations are lists and the spaces are ``None``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Union

from . import _topoplace
from ._files import _inline_clusters
from .errors import InputError
from .results import Strategy

try:  # Optional: the package itself needs neither.
    import gymnasium as _gym
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the environment
    _gym = None
    _np = None

_Base = _gym.Env if _gym is not None else object


def _rows(flat: list, width: int):
    if _np is not None:
        return _np.asarray(flat, dtype=_np.float32).reshape(-1, width)
    return [flat[i:i + width] for i in range(0, len(flat), width)]


def _index(values: list):
    return _np.asarray(values, dtype=_np.int64) if _np is not None else list(values)


def _is_numpy_int(value) -> bool:
    """Whether `value` is a numpy integer scalar (what Gymnasium's spaces sample)."""
    return _np is not None and isinstance(value, _np.integer)


def _observation(raw: dict) -> dict[str, Any]:
    """The native observation as named arrays: node features (rows), and per edge type its
    sources, destinations and features."""
    out: dict[str, Any] = {"group": raw["group"]}
    for name in ("op_features", "dev_features"):
        flat, width = raw[name]
        out[name] = _rows(flat, width)
    for name in ("op_op", "dev_dev", "op_dev"):
        src, dst, features, width = raw[name]
        out[f"{name}_src"] = _index(src)
        out[f"{name}_dst"] = _index(dst)
        out[f"{name}_features"] = _rows(features, width)
    return out


class PlacementEnv(_Base):
    """``model`` (zoo name or graph file) on ``cluster`` (shipped name, TOML file or text), over
    ``groups`` METIS op groups (``place``'s default when ``None``), replicas sharing the batch
    ``"even"``-ly (TAG) or ``"proportional"``-ly to their GPUs' speed, gradients synchronised
    as ``allreduce`` says: ``"auto"`` (the faster of Horovod's 64 MiB buckets and one pack, as
    the tree scores), ``"per-tensor"``, ``"packed"`` or ``"buckets"``."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        model: Union[str, Path, "os.PathLike[str]"],
        cluster: Union[str, Path],
        *,
        groups: Optional[int] = None,
        batch: Optional[int] = None,
        precision: str = "fp32",
        framework: str = "tf1",
        seq: Optional[int] = None,
        optimizer: Optional[str] = None,
        memory_format: Optional[str] = None,
        batch_split: str = "even",
        allreduce: str = "auto",
    ) -> None:
        with _inline_clusters([cluster]) as (cluster_arg,):
            self._env = _topoplace.Environment(
                os.fspath(model), cluster_arg, groups=groups, batch=batch, precision=precision,
                framework=framework, seq=seq, optimizer=optimizer, memory_format=memory_format,
                batch_split=batch_split, allreduce=allreduce,
            )
        self.actions = self._env.actions
        self.slices = self._env.slices
        self.groups = self._env.groups
        self.dp_us = self._env.dp_us
        self._last: Optional[dict[str, Any]] = None
        self.action_space = None
        self.observation_space = None
        if _gym is not None:
            self._declare_spaces()

    def _declare_spaces(self) -> None:
        spaces = _gym.spaces
        first = _observation(self._env.reset())
        box = lambda a: spaces.Box(-_np.inf, _np.inf, shape=a.shape, dtype=a.dtype)  # noqa: E731
        self.action_space = spaces.Discrete(len(self.actions))
        self.observation_space = spaces.Dict(
            {k: (spaces.Discrete(self.groups) if k == "group" else box(v))
             for k, v in first.items()}
        )

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Starts an episode: nothing decided. Returns ``(observation, info)``. The episode is
        deterministic; ``seed`` is accepted for Gymnasium's API and has nothing to draw."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise InputError("<argument>", "seed", f"must be a whole number, not {type(seed).__name__}")
        self._last = _observation(self._env.reset())
        return self._last, {"dp_us": self.dp_us}

    def step(self, action: int):
        """Decides the next op group. Returns ``(observation, reward, terminated, truncated,
        info)``; at the last group the observation is the last one seen, ``terminated`` is
        true, and ``info`` carries the strategy's simulated ``iteration_us`` and ``fits``."""
        if self._last is None:
            raise RuntimeError("call reset() before step()")
        # `int()` would take 1.7, "0" and True as actions.
        if isinstance(action, bool) or not isinstance(action, int) and not _is_numpy_int(action):
            raise InputError("<argument>", "action", f"must be a whole number, not {type(action).__name__}")
        if not 0 <= action < len(self.actions):
            raise InputError("<argument>", "action", f"must be from 0 to {len(self.actions) - 1}, not {action}")
        raw, reward, iteration_us, fits = self._env.step(int(action))
        terminated = raw is None
        if not terminated:
            self._last = _observation(raw)
        info = {"iteration_us": iteration_us, "fits": fits, "choice": self._env.choice}
        return self._last, reward, terminated, False, info

    def priors(self, policy: str = "shipped") -> list[float]:
        """A GNN policy's prior probabilities over every action at the vertex the next step
        decides (``"shipped"``, or a policy file as ``place --policy`` takes): what the search
        gives that vertex's edges."""
        return list(self._env.priors(str(policy)))

    def strategy(self) -> Strategy:
        """The strategy of the choices so far (undecided groups take the first group's action),
        under the AllReduce packing that simulates faster."""
        return Strategy.from_json(self._env.strategy_json())

    @property
    def choice(self) -> list[int]:
        """The actions taken so far, by op group."""
        return list(self._env.choice)
