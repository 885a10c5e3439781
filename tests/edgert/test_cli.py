"""The edgert command line: names and outputs other tools rely on (docs/design.md §5)."""

from __future__ import annotations

import json
import subprocess
import sys

from edgert.cli import build_parser


def edgert(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "edgert.cli", *args], capture_output=True, text=True, timeout=120)


def test_devices_json_lists_every_processor_kind_with_reasons():
    proc = edgert("devices", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)  # stdout is pure JSON even when native libraries log
    assert {r["processor"] for r in rows} >= {"cpu", "gpu", "dsp", "npu"}
    for r in rows:
        assert set(r) >= {"name", "processor", "backend", "available", "reason"}
        assert r["available"] or r["reason"], r
    assert any(r["name"] == "litert-xnnpack" and r["available"] for r in rows)


def test_devices_table_renders():
    proc = edgert("devices")
    assert proc.returncode == 0 and "litert-xnnpack" in proc.stdout, proc.stderr


def test_every_binding_subcommand_is_registered():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) >= {"devices", "models", "run", "profile", "simulate", "cloud", "deploy", "bench"}


def test_our_errors_are_one_line_exit_2():
    proc = edgert("models", "fetch", "mediapip")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["edgert: error: unknown model zoo 'mediapip'; did you mean "
                                                "'mediapipe'? (choices: mediapipe)"]
