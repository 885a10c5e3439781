"""The profile's optional ``power`` / ``thermal`` sections (scheduler.power): shape, round trip, errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.errors import TraceError
from scheduler.profile import DeviceProfile

BASE: dict[str, Any] = {
    "name": "t",
    "processors": [{"name": "cpu", "kind": "cpu"}, {"name": "npu", "kind": "npu"}],
    "latency_ms": {"hand": {"cpu": 10.0, "npu": 2.0}},
}
POWER = {"processors": {"cpu": {"active_w": 3.0, "idle_w": 0.2}, "npu": {"active_w": 1.0, "idle_w": 0.05}},
         "baseline_w": 2.0, "radio": {"uplink_mw_per_mbps": 283.17, "downlink_mw_per_mbps": 137.01,
                                      "active_mw": 132.86}}
THERMAL = {"capacitance_j_per_k": 180.0, "resistance_k_per_w": 5.0, "ambient_c": 25.0, "hysteresis_c": 1.0,
           "levels": [{"severity": "light", "at_c": 39.0, "speed": {"cpu": 0.95}},
                      {"severity": "moderate", "at_c": 41.0, "speed": 0.9},
                      {"severity": "SEVERE", "at_c": 43.0, "speed": {"cpu": 0.72, "npu": 0.9}}]}


def prof(**extra: Any) -> dict[str, Any]:
    obj = copy.deepcopy(BASE)
    obj.update(copy.deepcopy(extra))
    return obj


def test_profile_without_power_has_none() -> None:
    p = DeviceProfile.from_json(prof())
    assert p.power is None and p.thermal is None
    assert "power" not in p.to_json() and "thermal" not in p.to_json()


def test_power_and_thermal_parse_and_round_trip() -> None:
    p = DeviceProfile.from_json(prof(power=POWER, thermal=THERMAL, energy_mj={"hand": {"npu": 1.5}}))
    assert p.power.processors["cpu"].active_w == 3.0 and p.power.processors["npu"].idle_w == 0.05
    assert p.power.baseline_w == 2.0 and p.power.radio.active_mw == 132.86
    t = p.thermal
    assert t.tau_s == pytest.approx(900.0)
    assert [lv.severity for lv in t.levels] == ["light", "moderate", "severe"]
    assert [lv.rank for lv in t.levels] == [1, 2, 3]
    assert t.levels[0].speed == {"cpu": 0.95, "npu": 1.0}   # unnamed processors keep full speed
    assert t.levels[1].speed == {"cpu": 0.9, "npu": 0.9}    # one number: every processor
    assert t.levels[2].speed == {"cpu": 0.72, "npu": 0.9}
    again = DeviceProfile.from_json(p.to_json())
    assert again.power == p.power and again.thermal == p.thermal and again.energy_mj == p.energy_mj


@pytest.mark.parametrize("section, patch, words", [
    ("power", {"processors": {"gpu": {"active_w": 1, "idle_w": 0}}}, ["'gpu'", "not a processor"]),
    ("power", {"processors": {"cpu": {"idle_w": 0.1}}}, ["active_w"]),
    ("power", {"processors": {"cpu": {"active_w": 1, "idle_w": 2}}}, ["idle_w", "exceeds"]),
    ("power", {"processors": {"cpu": {"active_w": -1, "idle_w": 0}}}, ["active_w", "> 0"]),
    ("power", {"processors": {"cpu": {"active_w": "3", "idle_w": 0}}}, ["finite number"]),
    ("power", {"watts": 3}, ["unknown key", "watts"]),
    ("power", {"radio": {"uplink_mw_per_mbps": 1}}, ["downlink_mw_per_mbps"]),
    ("thermal", {"resistance_k_per_w": 5, "ambient_c": 25, "levels": []}, ["capacitance_j_per_k"]),
    ("thermal", dict(THERMAL, capacitance_j_per_k=0), ["capacitance_j_per_k", "> 0"]),
    ("thermal", dict(THERMAL, levels=[{"severity": "warm", "at_c": 40, "speed": 0.9}]), ["severity", "light"]),
    ("thermal", dict(THERMAL, levels=[{"severity": "severe", "at_c": 40, "speed": 0.9},
                                      {"severity": "light", "at_c": 45, "speed": 0.8}]), ["must be above"]),
    ("thermal", dict(THERMAL, levels=[{"severity": "light", "at_c": 45, "speed": 0.9},
                                      {"severity": "severe", "at_c": 40, "speed": 0.8}]), ["at_c 40"]),
    ("thermal", dict(THERMAL, levels=[{"severity": "light", "at_c": 40, "speed": 0.8},
                                      {"severity": "severe", "at_c": 45, "speed": 0.9}]), ["faster"]),
    ("thermal", dict(THERMAL, levels=[{"severity": "light", "at_c": 40, "speed": 1.5}]), ["above 1"]),
    ("thermal", dict(THERMAL, levels=[{"severity": "light", "at_c": 40, "speed": {"dsp": 0.5}}]), ["'dsp'"]),
    ("thermal", dict(THERMAL, levels=[{"severity": "light", "at_c": 20, "speed": 0.9}]), ["ambient_c"]),
    ("energy_mj", {"hand": {"gpu": 1.0}}, ["energy_mj", "'gpu'"]),
    ("energy_mj", {"hand": {"cpu": -1.0}}, ["positive"]),
])
def test_malformed_sections_name_the_field(section: str, patch: Any, words: list[str]) -> None:
    with pytest.raises(TraceError) as err:
        DeviceProfile.from_json(prof(**{section: patch}), origin="dev.json")
    msg = str(err.value)
    assert msg.startswith("profile dev.json: ")
    for w in words:
        assert w in msg, msg
