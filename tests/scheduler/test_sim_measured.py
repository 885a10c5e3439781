"""A replay on the profile of the host that ran a trace may run each request as long as it ran live
(``SimConfig.run_ms``, ``edgert simulate --measured-runs``); every other run time is drawn from the profile."""

from __future__ import annotations

import json

import pytest

from scheduler.profile import DeviceProfile
from scheduler.sim import SimConfig, run_simulation


def _profile() -> DeviceProfile:
    return DeviceProfile.from_json({"name": "host", "processors": [{"name": "cpu0", "kind": "cpu"}],
                                    "latency_ms": {"m": {"cpu0": 4.0}}})


def _trace(tmp_path, n: int = 10):
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"t_ms": 50.0 * i, "model": "m", "slo_ms": 40.0, "id": f"r{i}"}) + "\n"
                             for i in range(n)))
    return trace


def _runs(tmp_path, run_ms) -> dict[int, float]:
    res = run_simulation(SimConfig(trace=_trace(tmp_path), profile=_profile(), noise=0.0, run_ms=run_ms))
    return {r.id: r.end_ms - r.start_ms for r in res.records}


def test_a_request_measured_live_runs_as_long_as_it_ran(tmp_path) -> None:
    runs = _runs(tmp_path, {"r3": ("cpu", 11.0), "r7": ("cpu", 2.5)})
    assert runs[3] == pytest.approx(11.0) and runs[7] == pytest.approx(2.5)
    assert all(ms == pytest.approx(4.0) for i, ms in runs.items() if i not in (3, 7))   # drawn: the profile's


def test_a_time_measured_on_another_kind_of_processor_is_not_used(tmp_path) -> None:
    runs = _runs(tmp_path, {"r3": ("gpu", 11.0)})
    assert runs[3] == pytest.approx(4.0)


def test_without_measured_times_the_run_is_the_same_as_before(tmp_path) -> None:
    assert _runs(tmp_path, None) == _runs(tmp_path, {})
