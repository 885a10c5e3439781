"""Every fenced ``python`` and ``bash`` block of README.md and of the pages in docs/ runs as printed.

A page's blocks run in order in one scratch directory per page (so a file one block writes, the
next can read), with the repository on ``PYTHONPATH`` and its ``edgert``
command first on ``PATH``. An HTML comment right before a block marks it:
``<!-- readme-test: skip (why) -->`` (installs packages, needs hardware or the
network: the reason is required), ``<!-- readme-test: slow -->`` (runs under
the ``slow`` marker) or ``<!-- readme-test: needs TOOL ... -->`` (skipped, saying
which, where a command it runs is not installed). At default verbosity no native library line may reach
stderr. docs/design.md is left out: it is the contract, and its blocks are synopses of the API.
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
#: The pages whose blocks run: the README and every user page in docs/ (design.md: synopses of the contract).
PAGES = [README, *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "design.md")]
FENCE = re.compile(r"(?:<!--\s*readme-test:\s*(?P<mark>[^>]*?)\s*-->\s*\n)?```(?P<lang>\w*)\n(?P<body>.*?)\n```",
                   re.S)
NATIVE = re.compile(r"^(INFO|WARNING|VERBOSE): |\[[IW]:onnxruntime:", re.M)


@dataclass(frozen=True)
class Block:
    """One fenced block: its page, language, text, its marker, and the line it starts on."""

    page: Path
    lang: str
    body: str
    mark: str
    line: int


def blocks(page: Path = README) -> list[Block]:
    """A page's python and bash blocks, in order."""
    text = page.read_text()
    out = []
    for m in FENCE.finditer(text):
        if m.group("lang") in ("python", "bash"):
            out.append(Block(page, m.group("lang"), m.group("body"), m.group("mark") or "",
                             text.count("\n", 0, m.start("body"))))
    return out


def _where(b: Block) -> str:
    return f"{b.page.relative_to(ROOT)}:{b.line}"


def test_the_readme_has_runnable_blocks_and_skips_say_why() -> None:
    found = blocks()
    assert sum(b.lang == "python" for b in found) >= 2 and sum(b.lang == "bash" for b in found) >= 2
    for b in (b for page in PAGES for b in blocks(page)):
        assert b.mark in ("", "slow") or re.fullmatch(r"skip \(.+\)|needs( [\w.-]+)+", b.mark), f"{_where(b)}: {b.mark!r}"


_SCRATCH: dict[Path, Path] = {}


@pytest.fixture
def scratch_of(tmp_path_factory: pytest.TempPathFactory):
    """One scratch directory per page, shared by that page's blocks (in order)."""
    def get(page: Path) -> Path:
        if page not in _SCRATCH:
            _SCRATCH[page] = tmp_path_factory.mktemp(page.stem)
        return _SCRATCH[page]
    return get


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


def _which(tool: str) -> str | None:
    """``tool`` on PATH, or in /usr/sbin (mosquitto's place on Debian, off a user's PATH)."""
    import shutil  # noqa: PLC0415

    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin")


def _params() -> list[object]:
    out = []
    for page in PAGES:
        for i, b in enumerate(blocks(page)):
            marks = [pytest.mark.slow] if b.mark == "slow" else []
            if b.mark.startswith("needs "):
                missing = [t for t in b.mark.split()[1:] if _which(t) is None]
                if missing:
                    marks.append(pytest.mark.skip(reason=f"{', '.join(missing)} not installed"))
            if b.mark.startswith("skip"):
                continue   # listed and justified: test_the_readme_has_runnable_blocks_and_skips_say_why
            name = "" if page == README else f"{page.stem}-"
            out.append(pytest.param(page, i, id=f"{name}{b.lang}-line{b.line}", marks=marks))
    return out


@pytest.mark.parametrize(("page", "index"), _params())
def test_block_runs_as_printed(page: Path, index: int, scratch_of) -> None:
    b = blocks(page)[index]
    scratch = scratch_of(page)
    cmd = [sys.executable, "-c", b.body] if b.lang == "python" else ["bash", "-euo", "pipefail", "-c", b.body]
    proc = subprocess.run(cmd, cwd=scratch, env=_env(scratch), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{_where(b)} ({b.lang}) failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    if b.lang == "bash":
        assert not NATIVE.search(proc.stderr), f"{_where(b)}: a native library line on stderr:\n{proc.stderr}"
