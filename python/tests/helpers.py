"""Running this build's ``topoplace`` binary, which the tests compare the package against."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    """The ``topoplace`` binary of this build (``TOPOPLACE_CLI``, set by tests/python.rs)."""
    binary = os.environ.get("TOPOPLACE_CLI")
    assert binary, "TOPOPLACE_CLI must name the topoplace binary (cargo test sets it)"
    return subprocess.run(
        [binary, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def cli_json(*args: str):
    """What the binary prints with ``--json``, parsed; it must succeed."""
    done = cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
