"""Put the test doubles (adb, ssh, scp, trtexec) on PATH under their real names (for tests only)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DOUBLES = {"adb": "adb_double.py", "ssh": "ssh_double.py", "scp": "scp_double.py", "trtexec": "trtexec_double.py"}


def install_doubles(bin_dir: Path, config: dict[str, Any], monkeypatch: Any) -> Path:
    """Write shims named adb/ssh/scp/trtexec into ``bin_dir`` that run the doubles, prepend it to PATH,
    write ``config`` to ``bin_dir/double_config.json`` and point ``EDGERT_DOUBLE_CONFIG`` at it.

    Returns the path of the call log (JSON lines: one ``{"tool": ..., "argv": [...]}`` per call).
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    log = bin_dir / "calls.jsonl"
    log.write_text("")
    cfg = dict(config, log=str(log))
    (bin_dir / "double_config.json").write_text(json.dumps(cfg))
    for name, script in DOUBLES.items():
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\n# test double of {name}\nexec "{sys.executable}" "{HERE / script}" "$@"\n')
        shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("EDGERT_DOUBLE_CONFIG", str(bin_dir / "double_config.json"))
    return log


def read_calls(log: Path) -> list[dict[str, Any]]:
    """The calls the doubles logged, in order."""
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
