"""Energy and heat in the simulator (scheduler.sim.heat) and edgert's objective (scheduler.policies._energy)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from scheduler.errors import ConfigError
from scheduler.policies._energy import EnergyTable, HeatWatch, make_objective
from scheduler.policies._slots import Processors
from scheduler.profile import DeviceProfile
from scheduler.registry import make_policy
from scheduler.sim import SimConfig, load_profile, run_simulation
from tests.scheduler.meters import CloudMeter


def _profile(**changes: object) -> DeviceProfile:
    obj = copy.deepcopy(load_profile("galaxy-s23").to_json())
    for key, value in changes.items():
        if value is None:
            obj.pop(key, None)
        else:
            obj[key] = value
    return DeviceProfile.from_json(obj)


def _run(profile: DeviceProfile | str = "galaxy-s23", **kw: object):
    cfg = dict(scenario="ar_gaming", profile=profile, duration_s=3.0, seed=1)
    cfg.update(kw)
    return run_simulation(SimConfig(**cfg))  # type: ignore[arg-type]


def test_energy_summary_is_what_an_energy_meter_fed_every_run_reports() -> None:
    res = _run("pixel4", load=3.0)
    meter = CloudMeter(res.profile)
    kinds = {p[0]: p[1] for p in res.processors}
    for r in res.records:
        if r.processor:
            if kinds[r.processor] == "cloud":
                meter.record_cloud(r.model)
            else:
                meter.record(r.model, r.processor, r.end_ms - r.start_ms)
    want = meter.report(res.span_ms).to_json()
    got = res.summary()["energy_mj"]
    assert got["per_processor"] == want["per_processor"]
    for key in ("total_mj", "inference_mj", "idle_mj", "baseline_mj", "radio_mj", "unaccounted"):
        assert got[key] == pytest.approx(want[key], abs=2e-3), key
    assert got["per_model"].keys() == want["per_model"].keys()
    assert got["radio_mj"] > 0   # load 3 offloads: the radio is charged


def test_thermal_off_and_unthrottled_runs_are_bit_for_bit_the_same() -> None:
    on, off = _run(), _run(thermal=False)
    assert on.summary()["thermal"]["throttled_ms"] == 0      # 3 s from ambient: never near 39 degC
    assert "thermal" not in off.summary()
    for col in ("start_ms", "end_ms", "processor", "status"):
        assert np.array_equal(getattr(on.outcome, col), getattr(off.outcome, col), equal_nan=True), col


def test_a_profile_without_power_or_thermal_reports_neither() -> None:
    bare = _profile(power=None, thermal=None)
    s = _run(bare).summary()
    assert not {"energy_mj", "xrbench", "thermal"} & s.keys()
    assert s["ok"] == _run(thermal=False, objective="deadlines").summary()["ok"]


def test_a_hot_device_throttles_runs_and_reports_the_time_at_each_severity() -> None:
    th = load_profile("galaxy-s23").thermal.to_json()
    th["initial_c"] = 48.0   # critical: cpu/gpu 0.6, npu 0.5 of nominal speed
    hot = _run(_profile(thermal=th), objective="deadlines")
    cool = _run(objective="deadlines", thermal=False)
    heat = hot.summary()["thermal"]
    assert heat["peak_c"] >= 48.0 and heat["ms_at"]["critical"] > 0
    assert heat["throttled_ms"] == pytest.approx(hot.span_ms, rel=1e-6)
    busy = lambda r: sum(p[3] for p in r.processors if p[1] != "cloud")
    assert busy(hot) > 1.6 * busy(cool)


def test_xrbench_keys_name_their_e_max() -> None:
    xr = _run().summary()["xrbench"]
    assert xr["e_max_mj"] == 1500.0 and "1500 mJ" in xr["note"]
    assert 0 < xr["profile_e_max_mj"] < 1500.0
    assert xr["score_profile_e_max"] < xr["score"] <= 100.0


def test_deadlines_objective_places_as_no_energy_table() -> None:
    prof = load_profile("galaxy-s23")
    a = _run(scheduler=make_policy("edgert", profile=prof, objective="deadlines"), load=2.0)
    b = _run(scheduler=make_policy("edgert", energy=None), load=2.0)
    assert np.array_equal(a.outcome.processor, b.outcome.processor)
    assert np.array_equal(a.outcome.end_ms, b.outcome.end_ms, equal_nan=True)


def test_balanced_spends_less_than_deadlines_and_meets_as_many() -> None:
    runs = {o: _run(objective=o, duration_s=10.0, scenario="ar_assistant") for o in ("deadlines", "balanced")}
    spent = {o: r.summary()["energy_mj"] for o, r in runs.items()}
    ctrl = {o: e["total_mj"] - e["baseline_mj"] for o, e in spent.items()}
    assert ctrl["balanced"] < 0.9 * ctrl["deadlines"]
    assert runs["balanced"].summary()["ok"] >= runs["deadlines"].summary()["ok"] - 1


def test_objective_is_checked_and_only_for_policies_that_have_one() -> None:
    with pytest.raises(ConfigError, match="no objective"):
        make_policy("round_robin", objective="energy")
    with pytest.raises(ConfigError, match="did you mean 'energy'"):
        make_policy("edgert", objective="enrgy")
    assert make_policy("round_robin", profile=load_profile("pixel4")).name == "round_robin"


def test_energy_table_from_profile() -> None:
    t = EnergyTable.from_profile(load_profile("galaxy-s23"))
    assert t is not None and t.thermal is not None
    assert t.above_idle_w["npu"] == pytest.approx(1.2 - 0.02)
    assert t.invocation_mj("hand_tracking", "npu", 2.0, False) == pytest.approx(2.36)
    assert t.base_w == pytest.approx(3.0 + 0.1 + 0.05 + 0.02)
    assert t.invocation_mj("hand_tracking", "cloud", 25.0, True) > 0
    assert EnergyTable.from_profile(_profile(power=None, energy_mj=None)) is None


def _procs(busy: bool, now: float) -> Processors:
    names = ["cpu", "gpu", "npu", "cloud"]
    ready = [now + 5.0 if busy else now] * 3 + [now]
    return Processors(names, ready, [False, False, False, True], [0, 0, 0, 4], [1, 1, 1, 4], names[:3], "cloud", 4)


@pytest.mark.parametrize("initial_c, busy, hot", [
    (38.9, True, True),     # 0.1 degC under LIGHT, every processor busy: LIGHT in well under a minute
    (38.9, False, False),   # idle: the device tends to 37.7 degC, it never gets there
    (25.0, True, False),    # cold: LIGHT is many minutes away
    (39.5, False, True),    # throttled already
])
def test_heat_watch_looks_ahead_to_the_next_level(initial_c: float, busy: bool, hot: bool) -> None:
    th = load_profile("galaxy-s23").thermal.to_json()
    th["initial_c"] = initial_c
    table = EnergyTable.from_profile(_profile(thermal=th))
    assert table is not None
    watch = HeatWatch(table, 60_000.0)
    watch.observe(_procs(busy, 0.0), 0.0)
    assert watch.observe(_procs(busy, 10.0), 10.0) is hot


def _two_locals(npu_ready_ms: float) -> Processors:
    """A gpu free now and an npu (the home) ready at ``npu_ready_ms``; no cloud."""
    return Processors(["gpu", "npu"], [0.0, npu_ready_ms], [False, False], [0, 0], [1, 1], ["gpu", "npu"], None, 0)


@pytest.mark.parametrize(("npu_w", "npu_ms", "target_ms", "moves_when_cool"), [
    (1.8, 10.0, 100.0, False),   # saves 10 %: only a frugal choice takes a saving under 20 %
    (1.0, 10.0, 13.0, False),    # saves 50 % but finishes in 1.3 x its run: inside frugal headroom only
    (1.0, 10.0, 100.0, True),    # saves 50 % with room to spare: both move
])
def test_a_frugal_choice_takes_smaller_savings_with_less_headroom(npu_w, npu_ms, target_ms, moves_when_cool) -> None:
    # balanced: keep 0.8, headroom 1 + 2 x margin; frugal (the throttle near): any saving, 1 + margin
    green, _ = make_objective("balanced", EnergyTable(above_idle_w={"gpu": 2.0, "npu": npu_w}), 0.2, 0.4, 60_000.0)
    assert green is not None
    green.home = {"m": "npu"}
    row = [(0, 10.0), (1, npu_ms)]
    procs = _two_locals(0.0)
    choices = {}
    for frugal in (False, True):
        green.frugal = frugal
        choices[frugal] = green.choose("m", row, 0, 10.0, procs, target_ms, 0.0)
    assert choices[True] == (1, npu_ms)
    assert choices[False] == ((1, npu_ms) if moves_when_cool else (0, 10.0))


def test_the_policy_turns_frugal_on_a_hot_device() -> None:
    th = load_profile("galaxy-s23").thermal.to_json()
    th["initial_c"] = 38.9
    prof = _profile(thermal=th)
    seen: dict[float, list[bool]] = {}
    for h in (0.0, 60_000.0):
        pol = make_policy("edgert", profile=prof, heat_horizon_ms=h)
        log = seen[h] = []

        class Spy:
            """A test double around the real policy: notes after each decision whether it chose frugally."""

            name = "edgert"

            def decide(self, view, now_ms, pol=pol, log=log):   # noqa: ANN001
                out = pol.decide(view, now_ms)
                log.append(pol.green.frugal)
                return out

        _run(prof, scheduler=Spy(), load=1.5, scenario="ar_assistant")
    assert not any(seen[0.0])                 # horizon 0: frugal only once throttled (it never is here)
    assert 0 < sum(seen[60_000.0]) < len(seen[60_000.0])   # the 60 s horizon sees the throttle coming
