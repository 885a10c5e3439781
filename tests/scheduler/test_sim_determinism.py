"""One seed -> one result (apart from ``wall`` keys), run 10 times; another seed -> another result."""

from __future__ import annotations

import dataclasses
import json
import math

from scheduler.sim import Burst, SimConfig, run_simulation


def _stable(summary: dict) -> str:
    return json.dumps({k: v for k, v in summary.items() if "wall" not in k}, sort_keys=True)


def _rows(records: list) -> list[tuple]:
    """Records as tuples, NaN (the times of a request that never ran) as None: NaN equals nothing, not even
    itself, and from Python 3.13 a dataclass compares field by field, without a tuple's identity shortcut."""
    return [tuple(None if isinstance(v, float) and math.isnan(v) else v for v in dataclasses.astuple(r))
            for r in records]


def test_same_seed_gives_an_identical_summary_and_records_ten_times():
    cfg = SimConfig(scenario="ar_assistant", profile="pixel4", scheduler="edgert", load=3.0, duration_s=2.0,
                    seed=7, burst=Burst(0.5, 1.0, 2.5))
    first = run_simulation(cfg)
    ref, ref_records = _stable(first.summary()), _rows(first.records)
    assert first.summary()["dropped"] > 0 and first.summary()["offloaded"] > 0   # a run with something to differ
    for _ in range(9):
        res = run_simulation(cfg)
        assert _stable(res.summary()) == ref
        assert _rows(res.records) == ref_records


def test_wall_clock_only_under_wall_keys():
    s = run_simulation(SimConfig(scenario="vr_gaming", profile="xr2-gen2", duration_s=1.0)).summary()
    assert {k for k in s if "wall" in k} == {"wall_s", "wall_requests_per_s"}
    assert not any("wall" in k for m in s["per_model"].values() for k in m)


def test_another_seed_changes_the_result():
    a = run_simulation(SimConfig(scenario="ar_assistant", profile="pixel4", duration_s=5.0, seed=1)).summary()
    b = run_simulation(SimConfig(scenario="ar_assistant", profile="pixel4", duration_s=5.0, seed=2)).summary()
    assert _stable(a) != _stable(b)
