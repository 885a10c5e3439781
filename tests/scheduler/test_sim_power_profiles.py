"""The shipped profiles' power and thermal figures: sourced, as built, and calibrated as their sources say."""

from __future__ import annotations

import fnmatch
import json
import math

import pytest

from scheduler.sim import load_profile, profile_names
from scheduler.sim._build_power import CALIBRATION_S, DEVICES, power_and_thermal, xr_load_w
from scheduler.energy import EnergyModel
from scheduler.sim.profiles import PROFILE_DIR
from scheduler.thermal import ThermalModel


def sourced(sources: dict[str, str], key: str) -> str | None:
    """The source of ``key``: an exact entry, else the first ``*`` pattern matching it."""
    if key in sources:
        return sources[key]
    return next((v for k, v in sources.items() if "*" in k and fnmatch.fnmatchcase(key, k)), None)


@pytest.mark.parametrize("name", profile_names())
def test_every_power_and_thermal_number_is_sourced(name: str) -> None:
    prof = load_profile(name)
    assert prof.power is not None and prof.thermal is not None
    keys = [f"power/processors/{p}/{f}" for p in prof.power.processors for f in ("active_w", "idle_w")]
    keys += ["power/baseline_w", "power/radio", "thermal/capacitance_j_per_k", "thermal/resistance_k_per_w",
             "thermal/ambient_c"]
    keys += [f"thermal/levels/{lv.severity}/{f}" for lv in prof.thermal.levels for f in ("at_c", "speed")]
    for key in keys:
        src = sourced(prof.sources, key)
        assert src and src.split(":")[0].split(" ")[0] in ("published", "assumed", "derived"), (key, src)
    assert set(prof.power.processors) == {p.name for p in prof.processors}


@pytest.mark.parametrize("name", profile_names())
def test_shipped_files_match_the_builder(name: str) -> None:
    obj = json.loads((PROFILE_DIR / f"{name}.json").read_text())
    power, thermal, src = power_and_thermal(name)
    assert obj["power"] == power and obj["thermal"] == thermal
    assert all(obj["sources"][k] == v for k, v in src.items())


@pytest.mark.parametrize("name", profile_names())
def test_calibration_stress_reaches_severe_at_twenty_minutes(name: str) -> None:
    prof = load_profile(name)
    m = ThermalModel(prof.thermal)
    t = m.time_to_severity(DEVICES[name]["stress_w"], "severe")
    assert t == pytest.approx(CALIBRATION_S * 1e3, rel=1e-3)    # C is rounded to 0.1 J/K
    m.advance(t * 1.0001, DEVICES[name]["stress_w"])
    assert m.severity == "severe"
    gpu = [p for p in prof.power.processors if p in ("gpu",)]
    assert [m.speed(p) for p in gpu] == [0.72] * len(gpu)           # -28 %: the 3DMark figure


@pytest.mark.parametrize("name", profile_names())
def test_sustained_xr_load_throttles_within_minutes_and_idle_does_not(name: str) -> None:
    prof = load_profile(name)
    dev = DEVICES[name]
    xr = xr_load_w(dev)
    energy = EnergyModel(prof)
    half = {p: a for p, (a, _) in dev["proc"].items()}
    # the reference load is the time average of all-busy and all-idle device power, as the builder says
    busy, idle = energy.device_power_w(half), energy.device_power_w({})
    shares = {p: (0.25 if p == "cpu" else 0.5) for p in half}
    assert xr == pytest.approx(idle + sum(shares[p] * (half[p] - energy.idle_w(p)) for p in half))
    assert busy > xr > idle
    m = ThermalModel(prof.thermal)
    t_xr = m.time_to_severity(xr)
    assert t_xr < 15 * 60e3                                          # LIGHT within 15 minutes
    assert m.time_to_severity(idle) > 3 * t_xr                       # an XR session without inference: much later
    assert m.time_to_severity(idle - dev["baseline_w"]) == math.inf  # a device doing nothing never throttles
