"""The dependency direction of docs/design.md §1: scheduler ← delegates ← edgert ← recursion ← apps.

An import only points left; ``scheduler`` imports only the standard library and numpy;
nothing imports ``apps`` (the CLI finds apps through the ``edgert.apps`` entry points).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORDER = ["scheduler", "delegates", "edgert", "recursion", "apps"]


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", ORDER)
def test_imports_only_point_left(package):
    later = set(ORDER[ORDER.index(package) + 1:])
    for path in (ROOT / package).rglob("*.py"):
        bad = imported_roots(path) & later
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}, which sit above {package!r}"


def test_scheduler_needs_only_stdlib_and_numpy():
    allowed = set(sys.stdlib_module_names) | {"numpy", "scheduler", "__future__"}
    for path in (ROOT / "scheduler").rglob("*.py"):
        bad = imported_roots(path) - allowed
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
