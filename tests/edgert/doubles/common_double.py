"""Shared helpers of the device-tool test doubles: config, call log, fake filesystems."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def config() -> dict[str, Any]:
    """The fake device description the test wrote (``EDGERT_DOUBLE_CONFIG``)."""
    return json.loads(Path(os.environ["EDGERT_DOUBLE_CONFIG"]).read_text())


def log_call(tool: str, argv: list[str]) -> None:
    """Append this call to the test's call log."""
    with open(config()["log"], "a") as fh:
        fh.write(json.dumps({"tool": tool, "argv": argv}) + "\n")


def mapped(root: str | Path, path: str, cwd: str | None = None) -> Path:
    """A device path inside the fake root: absolute paths under ``root``, relative ones under ``cwd``."""
    base = Path(root)
    if path.startswith("/"):
        return base / path.lstrip("/")
    return base / (cwd or "").lstrip("/") / path


def fail(msg: str, code: int = 1) -> None:
    """Print ``msg`` on stderr and exit with ``code``, as the real tools do."""
    print(msg, file=sys.stderr)
    raise SystemExit(code)


def g(x: float) -> str:
    """A number as C++ ``operator<<`` prints a double (six significant digits, %g)."""
    return format(x, "g")
