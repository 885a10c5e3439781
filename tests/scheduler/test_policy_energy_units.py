"""edgert's energy objective piece by piece (scheduler/policies/_energy.py), on small hand-built tables and
processor tables: the figures ``EnergyTable`` reads from a profile, the energy of one invocation, what each
objective sets up (``make_objective``), where ``Greener.plan`` homes each model, which placement
``Greener.choose`` picks (only the home or a free cloud slot, with the energy headroom, only for a real
saving), and when ``HeatWatch`` calls the device hot.
"""

from __future__ import annotations

import math

import pytest

from scheduler.policies._energy import WAIT_SLACK, EnergyTable, Greener, HeatWatch, make_objective
from scheduler.policies._slots import Processors
from scheduler.power import (
    PowerSpec,
    ProcessorPower,
    RadioPower,
    ThermalLevel,
    ThermalSpec,
)
from scheduler.profile import CloudSpec, DeviceProfile, ProcessorSpec
from scheduler.energy import EnergyModel
from scheduler.thermal import ThermalModel

THERMAL = ThermalSpec(10.0, 10.0, 25.0, (ThermalLevel("light", 35.0, {"gpu": 0.9}),
                                         ThermalLevel("moderate", 45.0, {"gpu": 0.5})))


def _profile(power: bool = True, cloud: bool = True, thermal: ThermalSpec | None = THERMAL) -> DeviceProfile:
    return DeviceProfile(
        "p", [ProcessorSpec("cpu", "cpu"), ProcessorSpec("gpu", "gpu")],
        {"m": {"cpu": 10.0, "gpu": 4.0}},
        energy_mj={"m": {"gpu": 5.0}, "n": {"cpu": 7.0}},
        cloud=CloudSpec(20.0, 8.0, 2.0, {"m": 1.5}, {"m": 1000}, {"m": 500}) if cloud else None,
        power=PowerSpec({"cpu": ProcessorPower(3.0, 0.5), "gpu": ProcessorPower(2.0, 0.25)}, 1.0,
                        RadioPower(10.0, 5.0, 300.0)) if power else None,
        thermal=thermal)


# -- EnergyTable --

def test_table_from_a_profile() -> None:
    prof = _profile()
    cloud_mj = EnergyModel(prof).cloud_mj("m")
    assert cloud_mj > 0
    assert EnergyTable.from_profile(prof) == EnergyTable(
        above_idle_w={"cpu": 2.5, "gpu": 1.75},
        # measured energy less idle over the profiled run; "n" has no latency: nothing to take off
        measured_mj={("m", "gpu"): 5.0 - 0.25 * 4.0, ("n", "cpu"): 7.0},
        cloud_mj={"m": cloud_mj}, base_w=1.0 + 0.5 + 0.25, thermal=THERMAL)


def test_table_without_cloud_or_thermal() -> None:
    table = EnergyTable.from_profile(_profile(cloud=False, thermal=None))
    assert table is not None and table.cloud_mj == {} and table.thermal is None


def test_no_table_without_figures() -> None:
    prof = DeviceProfile("p", [ProcessorSpec("cpu", "cpu")], {"m": {"cpu": 1.0}})
    assert EnergyTable.from_profile(prof) is None


def test_invocation_energy() -> None:
    t = EnergyTable({"cpu": 2.0}, {("m", "gpu"): 4.0}, {"m": 9.0})
    assert t.invocation_mj("m", "cloud", 50.0, True) == 9.0
    assert t.invocation_mj("other", "cloud", 50.0, True) == 0.0
    assert t.invocation_mj("m", "gpu", 50.0, False) == 4.0          # measured
    assert t.invocation_mj("m", "cpu", 5.0, False) == 10.0          # W above idle x ms
    assert t.invocation_mj("m", "npu", 5.0, False) == 0.0           # no figure


# -- make_objective --

def test_unknown_objective_names_the_choices() -> None:
    with pytest.raises(ValueError, match=r"^objective must be one of deadlines, balanced, energy, not 'green'$"):
        make_objective("green", None, 0.2, 0.4, 1.0)


def test_deadlines_or_no_table_means_no_energy_choice() -> None:
    table = EnergyTable.from_profile(_profile())
    assert make_objective("deadlines", table, 0.2, 0.4, 1.0) == (None, None)
    assert make_objective("balanced", None, 0.2, 0.4, 1.0) == (None, None)


def test_energy_objective_takes_any_saving_with_the_usual_headroom_cloud_included() -> None:
    table = EnergyTable.from_profile(_profile())
    green, watch = make_objective("energy", table, 0.2, 0.3, 5000.0)
    assert isinstance(green, Greener) and green.table is table
    assert (green.k_energy, green.k_frugal, green.keep, green.cloud_margin) == (1.2, 1.2, 1.0, 0.3)
    assert (green.cap, green.wait, green.wait_slack, green.frugal) == (0.5, 1.0, WAIT_SLACK, False)
    assert isinstance(watch, HeatWatch) and watch.horizon_ms == 5000.0 and watch.hot is False


def test_balanced_objective_wants_a_fifth_saved_and_double_headroom_frugal_the_usual() -> None:
    green, _ = make_objective("balanced", EnergyTable.from_profile(_profile()), 0.25, 0.4, 1.0)
    assert isinstance(green, Greener)
    assert (green.k_energy, green.k_frugal, green.keep, green.cloud_margin) == (1.5, 1.25, 0.8, 0.4)
    assert (green.wait, green.wait_slack) == (1.0, WAIT_SLACK)


@pytest.mark.parametrize("thermal", [None, ThermalSpec(10.0, 10.0, 25.0, ())], ids=["none", "no-levels"])
def test_no_heat_watch_without_throttling_levels(thermal: ThermalSpec | None) -> None:
    green, watch = make_objective("energy", EnergyTable.from_profile(_profile(thermal=thermal)), 0.2, 0.4, 1.0)
    assert green is not None and watch is None


# -- Greener.plan: each model's home --

def _est(table: dict[str, dict[str, float]]):
    return lambda m, p: table.get(m, {}).get(p)


def test_home_is_the_cheapest_processor_within_budget() -> None:
    g = Greener(EnergyTable({"cpu": 3.0, "gpu": 1.0}), 2.0, 0.8, 0.4)
    g.plan({"m": 0.01}, {"m": 20.0}, _est({"m": {"cpu": 10.0, "gpu": 10.0}}), ["cpu", "gpu"])
    assert g.home == {"m": "gpu"}


def test_energy_sorts_the_options_not_the_names() -> None:
    # measured figures make the alphabetically last processor the cheapest
    g = Greener(EnergyTable({"cpu": 1.0, "npu": 1.0}, {("m", "npu"): 1.0}), 1.0, 0.8, 0.4)
    g.plan({"m": 0.01}, {"m": 20.0}, _est({"m": {"cpu": 10.0, "npu": 10.0}}), ["cpu", "npu"])
    assert g.home == {"m": "npu"}


@pytest.mark.parametrize(("budget", "home"), [(20.0, {"m": "gpu"}), (19.9, {})], ids=["edge", "short"])
def test_a_processor_counts_only_when_its_run_with_headroom_fits_the_budget(budget: float, home: dict) -> None:
    g = Greener(EnergyTable({"cpu": 3.0, "gpu": 1.0}), 2.0, 0.8, 0.4)
    # cpu is within any budget here; gpu only when 2.0 x 10 ms fits
    g.plan({"m": 0.01}, {"m": budget}, _est({"m": {"cpu": 5.0, "gpu": 10.0}}), ["cpu", "gpu"])
    assert g.home == home


def test_no_home_with_one_option_no_budget_or_no_estimate() -> None:
    g = Greener(EnergyTable({"cpu": 3.0, "gpu": 1.0}), 1.0, 0.8, 0.4)
    est = _est({"one": {"gpu": 1.0}, "nobudget": {"cpu": 0.4, "gpu": 0.4}, "two": {"cpu": 1.0, "gpu": 1.0}})
    g.plan({"one": 0.01, "nobudget": 0.01, "two": 0.01}, {"one": 50.0, "two": 50.0}, est, ["cpu", "gpu", "npu"])
    assert g.home == {"two": "gpu"}


@pytest.mark.parametrize(("energies", "first"), [
    # (model -> mJ on gpu, npu, cpu); both are cheapest on gpu, which has room for one: the larger saving wins
    ({"zeta": (5.0, 40.0, 41.0), "alpha": (10.0, 11.0, 40.0)}, "zeta"),
    ({"alpha": (10.0, 12.0, 40.0), "beta": (10.0, 30.0, 35.0)}, "alpha"),
], ids=["spread", "second"])
def test_the_model_saving_most_per_ms_is_homed_first(energies: dict[str, tuple[float, ...]], first: str) -> None:
    procs = ("gpu", "npu", "cpu")
    measured = {(m, p): e for m, es in energies.items() for p, e in zip(procs, es)}
    g = Greener(EnergyTable({}, measured), 1.0, 0.8, 0.4, cap=0.15)
    est = _est({m: dict.fromkeys(procs, 10.0) for m in energies})
    g.plan(dict.fromkeys(energies, 0.01), dict.fromkeys(energies, 100.0), est, list(procs))
    (other,) = set(energies) - {first}
    assert g.home == {first: "gpu", other: "npu"}


def test_homed_work_fills_a_processor_up_to_cap_exactly() -> None:
    g = Greener(EnergyTable({"cpu": 3.0, "gpu": 1.0}), 1.0, 0.8, 0.4, cap=0.2)
    models = {"a": 0.01, "b": 0.01, "c": 0.01}    # 0.1 of the gpu's time each
    est = _est({m: {"cpu": 10.0, "gpu": 10.0} for m in models})
    g.plan(models, dict.fromkeys(models, 100.0), est, ["cpu", "gpu"])
    assert g.home == {"a": "gpu", "b": "gpu", "c": "cpu"}


# -- Greener.choose --

def _procs(ready: list[float]) -> Processors:
    return Processors(["cpu", "gpu", "npu", "cloud"], ready, [False, False, False, True], [0, 0, 0, 0],
                      [1, 1, 1, 1], ["cpu", "gpu", "npu"], "cloud", 1)


ROW = [(0, 10.0), (1, 10.0), (2, 10.0), (3, 20.0)]


def _greener(measured: dict | None = None, cloud_mj: float = 50.0, **options: float) -> Greener:
    g = Greener(EnergyTable({"cpu": 3.0, "gpu": 1.0, "npu": 0.5}, measured or {}, {"m": cloud_mj}), 1.4, 0.8, 0.4,
                **options)
    g.home = {"m": "gpu"}
    return g


def test_a_request_moves_to_its_home_when_that_saves_enough() -> None:
    # npu is cheaper still, but is not m's home: only the home (or a free cloud slot) may take it
    assert _greener().choose("m", ROW, 0, 110.0, _procs([100.0] * 4), 200.0, 100.0) == (1, 110.0)


@pytest.mark.parametrize(("gpu_mj", "frugal", "moved"), [(24.0, False, False), (23.9, False, True),
                                                          (29.0, True, True), (30.0, True, False)])
def test_the_saving_must_beat_keep_unless_frugal(gpu_mj: float, frugal: bool, moved: bool) -> None:
    g = _greener(measured={("m", "gpu"): gpu_mj})   # cpu: 3 W x 10 ms = 30 mJ; keep 0.8: < 24 mJ to move
    g.frugal = frugal
    assert g.choose("m", ROW, 0, 110.0, _procs([100.0] * 4), 200.0, 100.0)[0] == (1 if moved else 0)


@pytest.mark.parametrize(("target", "moved"), [(114.0, True), (113.0, False)], ids=["edge", "short"])
def test_the_home_needs_the_energy_headroom(target: float, moved: bool) -> None:
    assert _greener().choose("m", ROW, 0, 110.0, _procs([100.0] * 4), target, 100.0)[0] == (1 if moved else 0)


@pytest.mark.parametrize(("gpu_ready", "result"), [(110.0, (1, 120.0)), (110.5, (0, 110.0))],
                         ids=["one-run", "longer"])
def test_waiting_for_the_home_is_at_most_one_run(gpu_ready: float, result: tuple[int, float]) -> None:
    ready = [100.0, gpu_ready, 100.0, 100.0]
    assert _greener().choose("m", ROW, 0, 110.0, _procs(ready), 500.0, 100.0) == result


def test_nothing_to_move_when_the_request_is_home_or_homeless() -> None:
    g = _greener(cloud_mj=0.0)
    busy_cloud = _procs([100.0, 100.0, 100.0, 150.0])   # (a free slot would take it: 0 mJ of radio)
    assert g.choose("m", ROW, 1, 110.0, busy_cloud, 500.0, 100.0) == (1, 110.0)
    assert g.choose("x", ROW, 0, 110.0, busy_cloud, 500.0, 100.0) == (0, 110.0)


@pytest.mark.parametrize(("cloud_mj", "frugal", "to_cloud"), [(1.0, False, True), (7.9, False, True),
                                                              (8.0, False, False), (9.9, True, True),
                                                              (10.0, True, False)])
def test_a_free_cloud_slot_takes_it_when_its_radio_saves_enough(cloud_mj: float, frugal: bool, to_cloud: bool) -> None:
    g = _greener(cloud_mj=cloud_mj)
    g.frugal = frugal
    # picked on its home already (10 mJ): only the cloud can be cheaper, by keep (< 8 mJ) or, frugal, at all
    assert g.choose("m", ROW, 1, 110.0, _procs([100.0] * 4), 500.0, 100.0) == ((3, 120.0) if to_cloud else (1, 110.0))


@pytest.mark.parametrize(("gpu_ready", "target", "moved"), [(120.0, 500.0, True), (120.5, 500.0, False),
                                                            (110.5, 135.0, False)])
def test_a_roomy_deadline_may_wait_for_the_home_a_share_of_its_time_left(gpu_ready: float, target: float,
                                                                         moved: bool) -> None:
    # wait_slack 0.05 of 500 - 100 ms = 20 ms: longer than one run (10 ms); with 35 ms left, one run it is
    g = _greener(wait_slack=0.05)
    ready = [100.0, gpu_ready, 100.0, 100.0]
    got = g.choose("m", ROW, 0, 110.0, _procs(ready), target, 100.0)
    assert got == ((1, gpu_ready + 10.0) if moved else (0, 110.0))


@pytest.mark.parametrize(("cloud_ready", "target", "to_cloud"), [(100.0, 128.0, True), (100.0, 127.0, False),
                                                                 (100.5, 500.0, False)],
                         ids=["edge", "short", "busy"])
def test_the_cloud_only_free_now_and_with_its_margin(cloud_ready: float, target: float, to_cloud: bool) -> None:
    g = _greener(cloud_mj=1.0)
    ready = [100.0, 100.0, 100.0, cloud_ready]
    assert g.choose("m", ROW, 1, 110.0, _procs(ready), target, 100.0)[0] == (3 if to_cloud else 1)


def test_a_costly_cloud_slot_is_not_taken_and_a_cloud_pick_may_come_home() -> None:
    g = _greener(cloud_mj=20.0)
    assert g.choose("m", ROW, 1, 110.0, _procs([100.0] * 4), 500.0, 100.0) == (1, 110.0)
    # picked on the cloud (20 mJ of radio): its home spends 10
    assert g.choose("m", ROW, 3, 120.0, _procs([100.0] * 4), 500.0, 100.0) == (1, 110.0)


def test_a_busy_cloud_listed_first_does_not_end_the_search() -> None:
    row = [(3, 20.0), (0, 10.0), (1, 10.0)]
    g = _greener(cloud_mj=1.0)
    assert g.choose("m", row, 0, 110.0, _procs([100.0, 100.0, 100.0, 150.0]), 500.0, 100.0) == (1, 110.0)


# -- HeatWatch --

def _watch(horizon_ms: float, initial_c: float | None = None, base_w: float = 0.5) -> HeatWatch:
    spec = ThermalSpec(10.0, 10.0, 25.0, THERMAL.levels, initial_c=initial_c)
    return HeatWatch(EnergyTable({"cpu": 1.0, "gpu": 1.5}, base_w=base_w, thermal=spec), horizon_ms)


def test_idle_device_below_light_is_not_hot() -> None:
    assert _watch(1e12).observe(_procs([0.0] * 4), 0.0) is False   # steady state 30 C < 35 C


def test_hot_when_light_is_due_within_the_horizon_at_the_busy_power() -> None:
    # gpu busy: 0.5 + 1.5 = 2 W, steady state 45 C; 35 C is reached after tau x ln 2
    due = ThermalModel(THERMAL).time_to_c(35.0, 2.0)
    busy = _procs([0.0, 50.0, 0.0, 0.0])
    assert _watch(due).observe(busy, 0.0) is True
    assert _watch(due * 0.999).observe(busy, 0.0) is False


def test_only_busy_local_processors_add_their_power() -> None:
    due = ThermalModel(THERMAL).time_to_c(35.0, 2.0)
    # gpu free at now, cloud busy: base power only (30 C steady) -> not hot
    assert _watch(due).observe(_procs([0.0, 10.0, 0.0, 50.0]), 10.0) is False
    # npu busy: no figure, adds nothing
    assert _watch(due).observe(_procs([0.0, 0.0, 50.0, 0.0]), 0.0) is False
    # cpu and gpu busy: 3 W, steady 55 C: due sooner than at 2 W
    assert _watch(ThermalModel(THERMAL).time_to_c(35.0, 3.0)).observe(_procs([50.0, 50.0, 0.0, 0.0]), 0.0) is True


def test_throttled_already_is_hot() -> None:
    assert _watch(0.0, initial_c=36.0, base_w=0.0).observe(_procs([0.0] * 4), 0.0) is True


def test_temperature_follows_the_power_of_the_previous_view() -> None:
    w = _watch(1.0)
    w.observe(_procs([0.0, 1e9, 0.0, 0.0]), 0.0)       # gpu busy from 0: 2 W until the next view
    w.observe(_procs([0.0] * 4), 60_000.0)
    expected = ThermalModel(THERMAL).temperature_after(60_000.0, 2.0)
    assert math.isclose(w.model.temp_c, expected)
