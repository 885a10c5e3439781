"""A replayed trace may chain cascade stages thousands deep: every step of a simulation stays
linear (or n log n) in the chain and never recurses per stage (#16's 200,000-line chain hung)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scheduler.sim.columns import _depths, _depths_by_walk, downstream_ms
from scheduler.sim.run import SimConfig, run_simulation

DEPTH = 5_000   # well past Python's recursion limit (1,000)


def _chain(path: Path, n: int, slo_ms: float) -> Path:
    with path.open("w") as f:
        for i in range(n):
            line = {"t_ms": 0.0, "model": "hand_tracking", "slo_ms": slo_ms, "id": f"r{i}"}
            if i:
                line["after"] = f"r{i - 1}"
            f.write(json.dumps(line) + "\n")
    return path


def test_depths_by_walk_match_pointer_jumping():
    rng = np.random.default_rng(0)
    parent = np.array([-1 if i == 0 or rng.random() < 0.3 else int(rng.integers(0, i)) for i in range(500)])
    has = np.flatnonzero(parent >= 0)
    assert _depths(parent, has, "t").tolist() == _depths_by_walk(parent.tolist(), "t").tolist()


def test_downstream_of_a_deep_chain_is_the_sum_below_each_stage():
    class Chain:   # a test double with the two columns downstream_ms reads
        name = "chain"
        parent = np.arange(-1, DEPTH - 1)
        model = np.zeros(DEPTH, np.int64)

        def __len__(self) -> int:
            return DEPTH

    down = downstream_ms(Chain(), np.array([2.0]))
    assert down[0] == 2.0 * (DEPTH - 1) and down[-1] == 0.0 and down[DEPTH // 2] == 2.0 * (DEPTH - 1 - DEPTH // 2)


def test_deep_chain_runs_end_to_end_and_a_dropped_head_drops_every_stage(tmp_path):
    ok = run_simulation(SimConfig(profile="galaxy-s23", trace=_chain(tmp_path / "ok.jsonl", DEPTH, 1e9),
                                  duration_s=1e6))
    assert ok.summary()["requests"] == DEPTH and ok.summary()["per_model"]["hand_tracking"]["ok"] == DEPTH
    late = run_simulation(SimConfig(profile="galaxy-s23", trace=_chain(tmp_path / "late.jsonl", DEPTH, 0.5)))
    s = late.summary()
    assert s["requests"] == DEPTH and s["dropped"] == DEPTH   # no stage can meet 0.5 ms: all shed, none lost
