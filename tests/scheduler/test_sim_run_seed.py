"""``SimConfig.run_seed``: the same workload with its runs drawn again (scheduler/sim/run.py).

The scheduler table's energy bar compares two objectives cell by cell; how far a cell moves when only the
run-time draws change is that comparison's resolution (``benchmarks/energy_noise.py``). That needs the
workload held fixed while the draws change, and ``run_seed=None`` to change nothing at all.
"""

from __future__ import annotations

import numpy as np

from scheduler.sim import SimConfig, run_simulation


def _run(**kw: object) -> tuple[dict[str, object], object]:
    res = run_simulation(SimConfig(scenario="ar_assistant", profile="pixel4", duration_s=2.0, seed=3,
                                   scheduler="fixed_worker", **kw))   # type: ignore[arg-type]
    return res.summary(), res.outcome


def _without_wall(s: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in s.items() if "wall" not in k}


def test_run_seed_none_or_equal_to_seed_changes_nothing() -> None:
    plain, out = _run()
    same, out2 = _run(run_seed=3)
    assert "run_seed" not in plain and same.pop("run_seed") == 3
    assert _without_wall(plain) == _without_wall(same)
    assert np.array_equal(out.end_ms, out2.end_ms)


def test_another_run_seed_keeps_the_requests_and_draws_new_run_times() -> None:
    _, base = _run()
    s, other = _run(run_seed=4)
    assert s["run_seed"] == 4 and s["seed"] == 3
    order, order2 = np.argsort(base.id), np.argsort(other.id)
    assert np.array_equal(base.id[order], other.id[order2])                 # the same requests
    assert np.array_equal(base.deadline_ms[order], other.deadline_ms[order2])
    ran = (base.processor[order] >= 0) & (other.processor[order2] >= 0)
    took, took2 = (base.end_ms - base.start_ms)[order][ran], (other.end_ms - other.start_ms)[order2][ran]
    assert ran.sum() > 100 and not np.allclose(took, took2)                 # runs drawn again
