"""The exceptions topoplace raises: one base class, and the two kinds a caller handles."""

from __future__ import annotations


class TopoplaceError(Exception):
    """Anything topoplace refuses or fails at, with the message the command line prints."""


class InputError(TopoplaceError, ValueError):
    """A model, cluster, strategy or argument is malformed or out of range.

    ``file`` is the file the bad input came from (``<zoo>`` for a built-in model,
    ``<argument>`` for an argument of the call), ``field`` the field, line or argument inside
    it, ``reason`` what is wrong with it.
    """

    def __init__(self, file: str, field: str, reason: str) -> None:
        self.file = file
        self.field = field
        self.reason = reason
        where = f"{file}: {field}" if field else file
        super().__init__(f"{where}: {reason}")


class DoesNotFitError(TopoplaceError):
    """No strategy the search tried fits in the GPUs' memory."""
