"""Every fenced ``python`` and ``bash`` block of README.md runs as printed.

Blocks run in order in one scratch directory (so a file one block writes, the
next can read), with the repository on ``PYTHONPATH`` and its ``edgert``
command first on ``PATH``. An HTML comment right before a block marks it:
``<!-- readme-test: skip (why) -->`` (installs packages, needs hardware or the
network: the reason is required) or ``<!-- readme-test: slow -->`` (runs under
the ``slow`` marker). At default verbosity no native library line may reach
stderr.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"(?:<!--\s*readme-test:\s*(?P<mark>[^>]*?)\s*-->\s*\n)?```(?P<lang>\w*)\n(?P<body>.*?)\n```",
                   re.S)
NATIVE = re.compile(r"^(INFO|WARNING|VERBOSE): |\[[IW]:onnxruntime:", re.M)


@dataclass(frozen=True)
class Block:
    """One fenced block: language, text, its marker, and the line it starts on."""

    lang: str
    body: str
    mark: str
    line: int


def blocks() -> list[Block]:
    """The README's python and bash blocks, in order."""
    text = README.read_text()
    out = []
    for m in FENCE.finditer(text):
        if m.group("lang") in ("python", "bash"):
            out.append(Block(m.group("lang"), m.group("body"), m.group("mark") or "",
                             text.count("\n", 0, m.start("body"))))
    return out


def test_the_readme_has_runnable_blocks_and_skips_say_why() -> None:
    found = blocks()
    assert sum(b.lang == "python" for b in found) >= 2 and sum(b.lang == "bash" for b in found) >= 2
    for b in found:
        assert b.mark in ("", "slow") or re.fullmatch(r"skip \(.+\)", b.mark), f"README.md:{b.line}: {b.mark!r}"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme")


def _env(scratch: Path) -> dict[str, str]:
    """The repository first on PYTHONPATH and an ``edgert`` command that runs this checkout's CLI."""
    bindir = scratch / ".bin"
    bindir.mkdir(exist_ok=True)
    exe = bindir / "edgert"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m edgert.cli "$@"\n')
    exe.chmod(0o755)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PATH"] = os.pathsep.join([str(bindir), str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("COLUMNS", None)
    return env


def _params() -> list[object]:
    out = []
    for i, b in enumerate(blocks()):
        marks = [pytest.mark.slow] if b.mark == "slow" else []
        if b.mark.startswith("skip"):
            continue   # listed and justified: test_the_readme_has_runnable_blocks_and_skips_say_why
        out.append(pytest.param(i, id=f"{b.lang}-line{b.line}", marks=marks))
    return out


@pytest.mark.parametrize("index", _params())
def test_block_runs_as_printed(index: int, scratch: Path) -> None:
    b = blocks()[index]
    cmd = [sys.executable, "-c", b.body] if b.lang == "python" else ["bash", "-euo", "pipefail", "-c", b.body]
    proc = subprocess.run(cmd, cwd=scratch, env=_env(scratch), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"README.md:{b.line} ({b.lang}) failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    if b.lang == "bash":
        assert not NATIVE.search(proc.stderr), f"README.md:{b.line}: a native library line on stderr:\n{proc.stderr}"
