"""The simulator stays in the lowest layer: stdlib, numpy and ``scheduler`` only; a pinned export list."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import scheduler.sim

SIM_DIR = Path(scheduler.sim.__file__).parent


def test_sim_imports_only_stdlib_numpy_and_scheduler():
    allowed = set(sys.stdlib_module_names) | {"numpy", "scheduler", "__future__"}
    for path in SIM_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = [node.module.split(".")[0]]
            else:
                continue
            bad = [r for r in roots if r not in allowed]
            assert not bad, f"{path.name} imports {bad}"


def test_public_names():
    assert sorted(scheduler.sim.__all__) == [
        "Burst", "DEFAULT_DURATION_S", "LEFT_UNPLACED", "SCENARIOS", "SimConfig", "SimResult",
        "Simulation", "Stream", "Workload", "build_scenario", "left_unplaced", "load_profile", "parse_trace",
        "profile_names", "read_trace", "realtime_score", "run_simulation", "scenario_names", "write_trace",
    ]
    for name in scheduler.sim.__all__:
        assert hasattr(scheduler.sim, name)
