"""The dependency direction (docs/architecture.md): apps > recursion > edgert > delegates > scheduler.

The contracts live in ``.importlinter`` and are checked by import-linter: imports point
down only, the runtime core does not import the tools around it, backend families do not
import each other's SDKs. What import-linter cannot say (an allow-list of third-party
packages) is checked here: ``scheduler`` imports only the standard library and numpy.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_import_contracts_hold():
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.fail("import-linter is not installed: pip install -e '.[test]'")
    r = subprocess.run([exe, "--config", str(ROOT / ".importlinter")], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_scheduler_needs_only_stdlib_and_numpy():
    allowed = set(sys.stdlib_module_names) | {"numpy", "scheduler", "__future__"}
    for path in (ROOT / "scheduler").rglob("*.py"):
        bad = imported_roots(path) - allowed
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.slow
def test_mypy_is_clean_on_the_runtime_packages():
    """edgert/, scheduler/ and delegates/ type-check ([tool.mypy] in pyproject.toml)."""
    if shutil.which("mypy") is None:
        pytest.fail("mypy is not installed: pip install -e '.[test]'")
    r = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
