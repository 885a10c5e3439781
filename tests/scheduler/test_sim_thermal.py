"""The lumped RC heat model (scheduler.thermal): closed form vs Euler, crossings, throttling, look-ahead."""

from __future__ import annotations

import math

import pytest

from scheduler.power import SEVERITIES, ThermalLevel, ThermalSpec
from scheduler.thermal import ThermalModel

# C = 100 J/K, R = 2 K/W: tau = 200 s; 10 W settles at 25 + 20 = 45 C.
LEVELS = (ThermalLevel("light", 35.0, {"cpu": 0.9, "npu": 1.0}),
          ThermalLevel("moderate", 40.0, {"cpu": 0.8, "npu": 0.9}),
          ThermalLevel("severe", 44.0, {"cpu": 0.6, "npu": 0.5}))


def spec(hyst: float = 0.0, initial: float | None = None) -> ThermalSpec:
    return ThermalSpec(capacitance_j_per_k=100.0, resistance_k_per_w=2.0, ambient_c=25.0, levels=LEVELS,
                       initial_c=initial, hysteresis_c=hyst)


def euler(t0_c: float, steps: list[tuple[float, float]], dt_s: float = 1e-3) -> float:
    """Fine forward-Euler integration of C dT/dt = P - (T - Tamb)/R over (duration_s, power_w) steps."""
    t = t0_c
    for dur, p in steps:
        for _ in range(int(round(dur / dt_s))):
            t += dt_s * (p - (t - 25.0) / 2.0) / 100.0
    return t


def test_closed_form_matches_fine_euler_over_piecewise_power() -> None:
    steps = [(30.0, 10.0), (12.5, 0.0), (40.0, 6.0), (7.0, 15.0)]
    m = ThermalModel(spec())
    now = 0.0
    for dur, p in steps:
        now += dur * 1e3
        m.advance(now, p)
    assert m.temp_c == pytest.approx(euler(25.0, steps), abs=2e-3)


@pytest.mark.parametrize("dt_s, power_w, expect_c", [
    (200.0, 10.0, 45.0 - 20.0 * math.exp(-1)),      # one time constant: 63 % of the way
    (0.0, 10.0, 25.0),
    (1e6, 10.0, 45.0),                               # settles at Tamb + P R
    (100.0, 0.0, 25.0),                              # no power: stays at ambient
])
def test_temperature_table(dt_s: float, power_w: float, expect_c: float) -> None:
    m = ThermalModel(spec())
    m.advance(dt_s * 1e3, power_w)
    assert m.temp_c == pytest.approx(expect_c, abs=1e-9)


def test_cooling_from_a_hot_start() -> None:
    m = ThermalModel(spec(initial=45.0))
    assert m.severity == "severe"                    # starts where its temperature says
    m.advance(200e3, 0.0)
    assert m.temp_c == pytest.approx(25.0 + 20.0 * math.exp(-1))


def test_time_to_threshold_is_exact_and_the_throttle_starts_there() -> None:
    m = ThermalModel(spec())
    t_light = m.time_to_severity(10.0)               # 35 C: 200 s * ln(20/10)
    assert t_light == pytest.approx(200e3 * math.log(2.0))
    assert m.time_to_c(35.0, 10.0) == t_light
    assert m.time_to_severity(10.0, "moderate") == pytest.approx(200e3 * math.log(20 / 5))
    assert m.time_to_severity(10.0, "severe") == pytest.approx(200e3 * math.log(20 / 1))
    assert m.time_to_severity(4.0) == math.inf       # settles at 33 C, below LIGHT
    assert m.time_to_severity(10.0, "critical") == math.inf   # the profile has no such level
    m.advance(t_light - 1.0, 10.0)
    assert m.severity == "none" and m.speed("cpu") == 1.0
    m.advance(t_light + 1.0, 10.0)
    assert (m.severity, SEVERITIES.index(m.severity), m.speed("cpu"), m.speed("npu")) == ("light", 1, 0.9, 1.0)
    assert m.time_to_severity(10.0, "light") == 0.0


def test_one_long_interval_crosses_levels_at_their_exact_times() -> None:
    m = ThermalModel(spec())
    m.advance(1000e3, 10.0)                          # 1000 s at 10 W: ends near 45 C, severe
    assert m.severity == "severe" and m.speeds() == {"cpu": 0.6, "npu": 0.5}
    t1, t2, t3 = (200e3 * math.log(20 / d) for d in (10, 5, 1))
    assert m.ms_at["none"] == pytest.approx(t1)
    assert m.ms_at["light"] == pytest.approx(t2 - t1)
    assert m.ms_at["moderate"] == pytest.approx(t3 - t2)
    assert m.ms_at["severe"] == pytest.approx(1000e3 - t3)
    assert sum(m.ms_at.values()) == pytest.approx(1000e3)
    assert m.peak_c == pytest.approx(m.temp_c)


def test_hysteresis_keeps_a_level_until_it_cools_past_it() -> None:
    m = ThermalModel(spec(hyst=2.0, initial=41.0))
    assert m.severity == "moderate"
    target = 39.0                                    # below 40 but not below 40 - 2
    m.advance(m.time_to_c(target, 0.0), 0.0)
    assert m.temp_c == pytest.approx(target) and m.severity == "moderate"
    m.advance(m.now_ms + m.time_to_c(37.5, 0.0), 0.0)
    assert m.severity == "light"                     # left moderate at 38 C
    m.advance(m.now_ms + 1e7, 0.0)
    assert m.severity == "none"


def power_budget_w(m: ThermalModel, target_c: float, horizon_ms: float) -> float:
    """The constant power (W) at which ``m`` reaches ``target_c`` exactly after ``horizon_ms`` (the
    first-order model solved for the power; a check of the model's own closed forms)."""
    decay = math.exp(-horizon_ms / m._tau_ms)
    return ((target_c - m._amb) - (m.temp_c - m._amb) * decay) / (m._r * (1.0 - decay))


def test_power_budget_keeps_the_device_just_below_the_threshold() -> None:
    m = ThermalModel(spec(initial=30.0))
    p = power_budget_w(m, 35.0, 60e3)
    assert m.temperature_after(60e3, p) == pytest.approx(35.0)
    assert m.time_to_c(35.0, p) == pytest.approx(60e3)


@pytest.mark.parametrize("t_ms, power_w", [(-1.0, 1.0), (10.0, -1.0), (10.0, math.nan), (math.inf, 1.0)])
def test_advance_rejects_bad_input(t_ms: float, power_w: float) -> None:
    with pytest.raises(ValueError):
        ThermalModel(spec()).advance(t_ms, power_w)
