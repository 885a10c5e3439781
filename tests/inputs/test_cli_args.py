"""Issue #16, CLI arguments: each bad value is one line, exit 2, before anything runs; --debug shows a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from edgert.cli import main

SIM = ["simulate", "--scenario", "ar_assistant", "--device", "galaxy-s23"]
CASES = [
    (SIM + ["--load", "1e9"], "edgert simulate: error: --load must be > 0 and <= 1000, got 1e9"),
    (SIM + ["--load", "nan"], "--load must be a finite number, got 'nan'"),
    (SIM + ["--duration", "inf"], "--duration must be a finite number, got 'inf'"),
    (SIM + ["--duration", "-1"], "--duration must be > 0 and <= 86400 s, got -1"),
    (SIM + ["--seed", "-1"], "--seed must be >= 0"),
    (SIM + ["--burst", "0:1:1e9"], "--burst must be START:DUR:FACTOR with"),
    (SIM + ["--plot", "x.txt"], "--plot must end in .png or .pdf or .svg"),
    (SIM + ["--load", "1000", "--duration", "86400"], "requests, over the simulator's"),
    (SIM + ["--json", "/nonexistent/s.json"], "directory '/nonexistent' does not exist"),
    (["run", "xr-demo", "--plot", "/nonexistent/p.png"], "edgert run: error: --plot cannot write '/nonexistent/p.png'"),
    (["run", "xr-demo", "--seconds", "-1"], "--seconds must be > 0 and <= 86400 s, got -1"),
    (["run", "xr-demo", "--cpu-workers", "-1"], "--cpu-workers must be >= 0"),
    (["bogus"], "edgert: error: COMMAND: invalid choice: 'bogus'"),
]


@pytest.mark.parametrize(("argv", "message"), CASES, ids=[" ".join(c[0][-2:]) for c in CASES])
def test_bad_argument_is_one_line_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert message in err and err.count("\n") == 1 and "Traceback" not in err and not out


def test_a_bug_is_one_line_exit_1_and_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import edgert.cli._core as core

    def broken(args: object) -> int:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(core, "_devices", broken)
    assert main(["devices"]) == 1
    err = capsys.readouterr().err
    assert err == ("edgert: internal error: ZeroDivisionError: division by zero; please report it "
                   "(rerun with --debug or EDGERT_DEBUG=1 for the traceback)\n")
    assert main(["--debug", "devices"]) == 1
    assert "Traceback" in capsys.readouterr().err
    monkeypatch.setenv("EDGERT_DEBUG", "1")
    assert main(["devices"]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_installed_entry_point_exits_2_with_one_line(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "edgert.cli", *SIM, "--plot", "x.txt"], capture_output=True,
                       text=True, timeout=60, check=False, cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and not r.stdout
