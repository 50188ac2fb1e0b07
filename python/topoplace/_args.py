"""Checks of a call's arguments that the native layer would only answer with a conversion error
naming no argument (``OverflowError: can't convert negative int to unsigned``): each failure is
an :class:`InputError` naming the argument, as the command line names its flag."""

from __future__ import annotations

import math
from typing import Optional

from .errors import InputError

U32 = 2**32 - 1
U64 = 2**64 - 1
MAX_SEQ = 1_048_576


def _refuse(name: str, reason: str) -> InputError:
    return InputError("<argument>", name, reason)


def whole(name: str, value, low: int, high: int, optional: bool = True) -> Optional[int]:
    """``value``, a whole number from ``low`` to ``high``, or ``None`` where it is optional."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(name, f"must be a whole number, not {type(value).__name__}")
    if not low <= value <= high:
        raise _refuse(name, f"must be from {low} to {high}, not {value}")
    return value


def seconds(name: str, value) -> Optional[float]:
    """``value``, a finite number of seconds above 0, or ``None`` (the native check bounds it)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _refuse(name, f"must be a number of seconds, not {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise _refuse(name, f"must be a finite number of seconds above 0, not {value}")
    return float(value)


def text(name: str, value) -> str:
    """``value``, a string (a name, a path, a choice), as the native layer takes it."""
    if isinstance(value, bytes) or not isinstance(value, str):
        raise _refuse(name, f"must be a string, not {type(value).__name__}")
    return value


def names(name: str, given: list[str]) -> list[str]:
    """A list of names that may not be empty."""
    if not given:
        raise _refuse(name, "names nothing")
    return given
