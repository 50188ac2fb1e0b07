"""Values a call takes that the engine reads from files: a :class:`Strategy` object and a
cluster given as TOML text are written to temporary files for the duration of the call."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

from .errors import InputError
from .results import Strategy

PathLike = Union[str, Path, "os.PathLike[str]"]


def _path(p: Optional[PathLike]) -> Optional[str]:
    return None if p is None else os.fspath(p)


class _materialised:
    """A :class:`Strategy` written to a temporary file for the duration of a call (the engine
    reads strategies from files, as the command line does); names and paths pass through."""

    def __init__(self, value):
        self.value = value
        self.directory = None

    def __enter__(self):
        if not isinstance(self.value, Strategy):
            return _path(self.value)
        import tempfile

        self.directory = tempfile.TemporaryDirectory(prefix="topoplace-")
        return str(self.value.save(Path(self.directory.name) / "strategy.json"))

    def __exit__(self, *exc):
        if self.directory is not None:
            self.directory.cleanup()
        return False


def _is_toml_text(value) -> bool:
    return isinstance(value, str) and ("\n" in value or "[[machine]]" in value)


class _inline_clusters:
    """Clusters given as TOML text, written to temporary files named after their ``name`` for
    the call (the engine reads clusters from files, as the command line does); an error about
    such a file names it ``<cluster text>``. Names and paths pass through."""

    def __init__(self, values) -> None:
        self.values = list(values)
        self.directory = None
        self.written: dict[str, str] = {}

    def __enter__(self) -> list[str]:
        import re
        import tempfile

        out = []
        for i, value in enumerate(self.values):
            if not _is_toml_text(value):
                out.append(os.fspath(value))
                continue
            if self.directory is None:
                self.directory = tempfile.TemporaryDirectory(prefix="topoplace-")
            found = re.search(r'^\s*name\s*=\s*"([A-Za-z0-9_.-]+)"', value, re.MULTILINE)
            stem = found.group(1) if found else f"cluster-{i}"
            path = Path(self.directory.name) / f"{stem}.toml"
            if str(path) in self.written:
                path = Path(self.directory.name) / f"{stem}-{i}.toml"
            path.write_text(value)
            self.written[str(path)] = "<cluster text>"
            out.append(str(path))
        return out

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.directory is not None:
            self.directory.cleanup()
        if isinstance(exc, InputError) and exc.file in self.written:
            raise InputError(self.written[exc.file], exc.field, exc.reason) from None
        return False
