"""What the calls return: the command line's JSON summaries as objects with attributes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Mapping

from .errors import InputError


class Result(Mapping[str, Any]):
    """A summary as the command line prints it with ``--json``: read its fields as attributes
    (``r.iteration_us``) or as keys (``r["iteration_us"]``); ``to_dict()`` gives the dict."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self._fields = dict(fields)

    def __getattr__(self, name: str) -> Any:
        # Before `__init__` has run (copy and pickle make the object first), and for the
        # protocol names they probe, there are no fields to look in.
        if name == "_fields" or name.startswith("__"):
            raise AttributeError(name)
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__} has no field {name!r}; it has {sorted(self._fields)}"
            ) from None

    def __getitem__(self, key: str) -> Any:
        return self._fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._fields))

    def to_dict(self) -> dict[str, Any]:
        """The fields, as the JSON has them."""
        return dict(self._fields)

    def __repr__(self) -> str:
        shown = {k: v for k, v in self._fields.items() if not isinstance(v, (list, dict))}
        return f"{type(self).__name__}({shown})"


class _Timed(Result):
    """A result with an iteration time: in ms where the JSON has ``iteration_ms`` (hybrid
    plans), from ``iteration_us`` otherwise."""

    @property
    def iteration_ms(self) -> float:
        """The simulated iteration time, milliseconds."""
        if "iteration_ms" in self._fields:
            return self._fields["iteration_ms"]
        return self._fields["iteration_us"] / 1e3


class Simulation(_Timed):
    """One simulated training iteration (``topoplace simulate --json``)."""

    @property
    def fits(self) -> bool:
        """Whether every GPU's memory holds the iteration."""
        if "fits" in self._fields:
            return self._fields["fits"]
        return not self._fields["oom"]


class Strategy(Result):
    """A strategy (or a hybrid plan) as its JSON file holds it; round-trips through ``save``
    and ``load`` to the file ``topoplace simulate --strategy`` (``--plan``) reads."""

    def to_json(self) -> str:
        """The file's text."""
        return json.dumps(self._fields, indent=2)

    def save(self, path: str | Path) -> Path:
        """Writes the file (through a temporary file, so a failed write leaves none)."""
        path = Path(path)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(self.to_json())
        partial.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Strategy":
        """Reads a strategy or plan file."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(str(path), "", f"cannot read the file: {e}") from None
        return cls._parsed(text, str(path))

    @classmethod
    def from_json(cls, text: str) -> "Strategy":
        """A strategy from its file's text."""
        return cls._parsed(text, "<argument>")

    @classmethod
    def _parsed(cls, text: str, source: str) -> "Strategy":
        """The JSON object of a strategy or plan file; anything else (an array, a number, NaN,
        which `to_json` would write as invalid JSON) raises :class:`InputError`."""
        def no_constant(name: str):
            raise ValueError(f"{name} is not a JSON number")

        try:
            value = json.loads(text, parse_constant=no_constant)
        except ValueError as e:
            raise InputError(source, "", f"not a strategy file's JSON: {e}") from None
        if not isinstance(value, dict):
            raise InputError(source, "", f"a strategy file holds a JSON object, not {type(value).__name__}")
        return cls(value)


class Placement(_Timed):
    """What ``place`` found (``topoplace place --json``), with the strategy behind it."""

    def __init__(self, fields: Mapping[str, Any], strategy: Strategy) -> None:
        super().__init__(fields)
        self.strategy = strategy

    @property
    def hybrid(self) -> bool:
        """Whether the hybrid planner (pipeline × tensor × data parallelism) placed the model."""
        return "plan" in self._fields


class Row(Result):
    """One method on one model and cluster (a row of ``topoplace compare``)."""
