"""A profile's background load: a busy neighbour's share of a processor stretches every run there."""

from __future__ import annotations

import pytest

from scheduler.errors import TraceError
from scheduler.profile import DeviceProfile
from scheduler.sim import SimConfig, run_simulation


def _profile(background: dict | None = None) -> DeviceProfile:
    obj = {"name": "one-core", "processors": [{"name": "cpu0", "kind": "cpu"}], "latency_ms": {"m": {"cpu0": 4.0}}}
    if background is not None:
        obj["background"] = background
    return DeviceProfile.from_json(obj)


def _p50(prof: DeviceProfile, tmp_path) -> float:
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(f'{{"t_ms": {20.0 * i}, "model": "m", "slo_ms": 100.0}}\n' for i in range(50)))
    return run_simulation(SimConfig(trace=trace, profile=prof, noise=0.0)).summary()["p50_ms"]


def test_a_busy_neighbour_stretches_runs_by_one_over_what_is_left(tmp_path) -> None:
    assert _p50(_profile(), tmp_path) == pytest.approx(4.0)
    assert _p50(_profile({"cpu0": 0.5}), tmp_path) == pytest.approx(8.0)
    assert _profile({"cpu0": 0.25}).to_json()["background"] == {"cpu0": 0.25}


@pytest.mark.parametrize("bad", [{"cpu9": 0.5}, {"cpu0": 1.0}, {"cpu0": -0.1}, {"cpu0": "half"}, [0.5]])
def test_a_bad_background_is_refused_naming_it(bad) -> None:
    with pytest.raises(TraceError, match="background"):
        _profile(bad)
