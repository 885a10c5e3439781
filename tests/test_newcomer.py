"""tools/newcomer.py: it runs the README's two commands as written, in an environment without the caller's Python."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("newcomer", ROOT / "tools" / "newcomer.py")
assert _spec is not None and _spec.loader is not None
newcomer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(newcomer)


def test_it_takes_the_readme_two_commands_as_written() -> None:
    cmds = newcomer.readme_commands(ROOT / "README.md")
    assert [c.split("#")[0].strip() for c in cmds] == ['pip install -e ".[all]" && edgert run xr-demo',
                                                       'pip install -e ".[test]" && python -m pytest -q']


def test_the_venv_comes_first_and_the_callers_python_settings_stay_out(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = newcomer.venv_env(tmp_path / "v")
    assert "PYTHONPATH" not in env and env["VIRTUAL_ENV"] == str(tmp_path / "v")
    assert env["PATH"].split(":")[0] == str(tmp_path / "v" / "bin")


def test_it_reports_each_command_and_fails_when_one_fails(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "newcomer.py"), "--dir", str(tmp_path), "--only", "0",
                           "--also", "python -c 'import sys; print(sys.prefix)'", "--also", "exit 3"],
                          capture_output=True, text=True, timeout=300)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"    {tmp_path / 'venv'}" in lines, proc.stdout           # python is the fresh venv's
    assert any(x.startswith("✓ exit 0") for x in lines) and any(x.startswith("✗ exit 3") for x in lines), proc.stdout
