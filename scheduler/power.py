"""Power and thermal figures of a device profile: parsing and validation.

Both sections are optional; a profile without them keeps working and the
simulator then accounts no energy and models no heat. JSON shape::

    "power": {
      "processors": {                                  # per processor of the profile, all optional
        "cpu": {"active_w": 3.2, "idle_w": 0.15},      # W while running an inference / while idle
        "npu": {"active_w": 1.1, "idle_w": 0.02}
      },
      "baseline_w": 2.5,                               # optional: rest of the device (display, cameras,
                                                       # rendering) in W; heats, not charged to inference
      "radio": {"uplink_mw_per_mbps": 283.17,          # optional: linear radio model of the cloud path,
                "downlink_mw_per_mbps": 137.01,        # P = a_u * up_Mbit/s + a_d * down_Mbit/s + base
                "active_mw": 132.86}
    },
    "energy_mj": {"hand_tracking": {"npu": 1.9}},      # optional, measured mJ per inference (wins over
                                                       # active_w x latency for that model and processor)
    "thermal": {
      "capacitance_j_per_k": 180.0,                    # lumped heat capacity C (J/K)
      "resistance_k_per_w": 5.0,                       # lumped resistance to ambient R (K/W)
      "ambient_c": 25.0,                               # T_amb (deg C)
      "initial_c": 25.0,                               # optional, default ambient_c
      "hysteresis_c": 1.0,                             # optional, default 0: a level is left below at_c - this
      "levels": [                                      # Android thermal HAL severities, rising
        {"severity": "light", "at_c": 39.0, "speed": 0.95},
        {"severity": "moderate", "at_c": 41.0, "speed": {"cpu": 0.85, "gpu": 0.85, "npu": 0.9}},
        {"severity": "severe", "at_c": 43.0, "speed": {"cpu": 0.72, "gpu": 0.72, "npu": 0.8}}
      ]
    }

``speed`` is the fraction of nominal speed a processor keeps at that level
(latency is divided by it): one number for every processor, or an object per
processor (processors it does not name keep 1.0). Severities are Android's
``ThrottlingSeverity`` names (NONE, LIGHT, MODERATE, SEVERE, CRITICAL,
EMERGENCY, SHUTDOWN), lower case; levels must rise in severity and in
``at_c``, and no processor may speed up at a hotter level. Each number's origin
goes in the profile's ``sources`` under ``power/...``, ``thermal/...`` and
``energy_mj/<model>/<processor>`` like every other number.

Malformed input raises :class:`~scheduler.errors.TraceError` naming the field
and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.errors import TraceError

#: Android ``ThrottlingSeverity`` (android.hardware.thermal), in order; the index is the HAL's value.
SEVERITIES: tuple[str, ...] = ("none", "light", "moderate", "severe", "critical", "emergency", "shutdown")

Bad = Callable[[str], TraceError]


@dataclass(frozen=True, slots=True)
class ProcessorPower:
    """Power of one processor: ``active_w`` while it runs an inference, ``idle_w`` otherwise (W)."""

    active_w: float
    idle_w: float


@dataclass(frozen=True, slots=True)
class RadioPower:
    """Linear radio power model of the cloud path (mW): per Mbit/s up and down, plus the active base."""

    uplink_mw_per_mbps: float
    downlink_mw_per_mbps: float
    active_mw: float


@dataclass(frozen=True, slots=True)
class PowerSpec:
    """The ``power`` section: per-processor power, the rest of the device (``baseline_w``), the radio."""

    processors: dict[str, ProcessorPower] = field(default_factory=dict)
    baseline_w: float = 0.0
    radio: RadioPower | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``power`` object of the module docstring."""
        out: dict[str, Any] = {"processors": {n: {"active_w": p.active_w, "idle_w": p.idle_w}
                                              for n, p in self.processors.items()}}
        if self.baseline_w:
            out["baseline_w"] = self.baseline_w
        if self.radio is not None:
            r = self.radio
            out["radio"] = {"uplink_mw_per_mbps": r.uplink_mw_per_mbps,
                            "downlink_mw_per_mbps": r.downlink_mw_per_mbps, "active_mw": r.active_mw}
        return out


@dataclass(frozen=True, slots=True)
class ThermalLevel:
    """One throttling level: from ``at_c`` (deg C) up, processors run at ``speed[p]`` of nominal."""

    severity: str
    at_c: float
    speed: dict[str, float]

    @property
    def rank(self) -> int:
        """The Android ``ThrottlingSeverity`` value (0 = none ... 6 = shutdown)."""
        return SEVERITIES.index(self.severity)


@dataclass(frozen=True, slots=True)
class ThermalSpec:
    """The ``thermal`` section: lumped RC parameters (J/K, K/W, deg C) and the throttling levels."""

    capacitance_j_per_k: float
    resistance_k_per_w: float
    ambient_c: float
    levels: tuple[ThermalLevel, ...]
    initial_c: float | None = None
    hysteresis_c: float = 0.0

    @property
    def tau_s(self) -> float:
        """The time constant R*C in seconds."""
        return self.capacitance_j_per_k * self.resistance_k_per_w

    def to_json(self) -> dict[str, Any]:
        """The ``thermal`` object of the module docstring (per-processor speeds written out)."""
        out: dict[str, Any] = {"capacitance_j_per_k": self.capacitance_j_per_k,
                               "resistance_k_per_w": self.resistance_k_per_w, "ambient_c": self.ambient_c}
        if self.initial_c is not None:
            out["initial_c"] = self.initial_c
        if self.hysteresis_c:
            out["hysteresis_c"] = self.hysteresis_c
        out["levels"] = [{"severity": lv.severity, "at_c": lv.at_c, "speed": dict(lv.speed)} for lv in self.levels]
        return out


def _num(obj: Any, key: str, where: str, bad: Bad, *, low: float | None = 0.0, strict: bool = False,
         default: float | None = None) -> float:
    """``obj[key]`` as a finite float, at least ``low`` (above it when ``strict``)."""
    if key not in obj:
        if default is not None:
            return default
        raise bad(f"{where} needs {key!r}")
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise bad(f"{where}.{key} must be a finite number, not {v!r}")
    if low is not None and (v < low or (strict and v == low)):
        raise bad(f"{where}.{key} must be {'>' if strict else '>='} {low:g}, not {v!r}")
    return float(v)


def parse_power(obj: Any, processors: Sequence[str], bad: Bad) -> PowerSpec:
    """Validate and build the ``power`` section for a profile with these ``processors``."""
    if not isinstance(obj, dict):
        raise bad('power must be an object {"processors": {name: {"active_w": W, "idle_w": W}}, ...}')
    unknown = set(obj) - {"processors", "baseline_w", "radio"}
    if unknown:
        raise bad(f"power has unknown key(s) {sorted(unknown)}; known: processors, baseline_w, radio")
    procs = obj.get("processors", {})
    if not isinstance(procs, dict):
        raise bad("power.processors must be an object {processor: {active_w, idle_w}}")
    out: dict[str, ProcessorPower] = {}
    for name, row in procs.items():
        where = f"power.processors[{name!r}]"
        if name not in processors:
            raise bad(f"{where} is not a processor of this profile; known: {sorted(processors)}")
        if not isinstance(row, dict):
            raise bad(f"{where} must be an object {{\"active_w\": W, \"idle_w\": W}}")
        active = _num(row, "active_w", where, bad, strict=True)
        idle = _num(row, "idle_w", where, bad)
        if idle > active:
            raise bad(f"{where}: idle_w {idle:g} W exceeds active_w {active:g} W; active power includes idle")
        out[str(name)] = ProcessorPower(active, idle)
    radio = None
    if obj.get("radio") is not None:
        r = obj["radio"]
        if not isinstance(r, dict):
            raise bad("power.radio must be an object {uplink_mw_per_mbps, downlink_mw_per_mbps, active_mw}")
        radio = RadioPower(_num(r, "uplink_mw_per_mbps", "power.radio", bad),
                           _num(r, "downlink_mw_per_mbps", "power.radio", bad),
                           _num(r, "active_mw", "power.radio", bad))
    return PowerSpec(out, _num(obj, "baseline_w", "power", bad, default=0.0), radio)


def parse_thermal(obj: Any, processors: Sequence[str], bad: Bad) -> ThermalSpec:
    """Validate and build the ``thermal`` section for a profile with these ``processors``."""
    if not isinstance(obj, dict):
        raise bad("thermal must be an object {capacitance_j_per_k, resistance_k_per_w, ambient_c, levels}")
    c = _num(obj, "capacitance_j_per_k", "thermal", bad, strict=True)
    r = _num(obj, "resistance_k_per_w", "thermal", bad, strict=True)
    amb = _num(obj, "ambient_c", "thermal", bad, low=-273.15)
    init = _num(obj, "initial_c", "thermal", bad, low=-273.15) if "initial_c" in obj else None
    hyst = _num(obj, "hysteresis_c", "thermal", bad, default=0.0)
    raw = obj.get("levels", [])
    if not isinstance(raw, list):
        raise bad('thermal.levels must be a list of {"severity", "at_c", "speed"}')
    levels = tuple(_level(lv, i, processors, bad) for i, lv in enumerate(raw))
    for i in range(1, len(levels)):
        a, b = levels[i - 1], levels[i]
        where = f"thermal.levels[{i}]"
        if b.rank <= a.rank:
            raise bad(f"{where}: severity {b.severity!r} must be above {a.severity!r}; list levels in "
                      f"the order {', '.join(SEVERITIES[1:])}")
        if b.at_c <= a.at_c:
            raise bad(f"{where}: at_c {b.at_c:g} must be above the previous level's {a.at_c:g}")
        slower = [p for p in processors if b.speed[p] > a.speed[p]]
        if slower:
            raise bad(f"{where}: processor(s) {slower} run faster at {b.severity!r} than at {a.severity!r}; "
                      "speed must not rise with temperature")
    if levels and levels[0].at_c <= amb:
        raise bad(f"thermal.levels[0].at_c {levels[0].at_c:g} must be above ambient_c {amb:g}")
    return ThermalSpec(c, r, amb, levels, init, hyst)


def _level(obj: Any, i: int, processors: Sequence[str], bad: Bad) -> ThermalLevel:
    where = f"thermal.levels[{i}]"
    if not isinstance(obj, dict):
        raise bad(f"{where} must be an object {{\"severity\", \"at_c\", \"speed\"}}")
    sev = str(obj.get("severity", "")).lower()
    if sev not in SEVERITIES[1:]:
        raise bad(f"{where}.severity {obj.get('severity')!r} is not one of {', '.join(SEVERITIES[1:])}")
    at_c = _num(obj, "at_c", where, bad, low=None)
    raw = obj.get("speed", 1.0)
    if isinstance(raw, dict):
        unknown = set(raw) - set(processors)
        if unknown:
            raise bad(f"{where}.speed names unknown processor(s) {sorted(unknown)}; known: {sorted(processors)}")
        speed = {p: _speed(raw, p, where, bad) if p in raw else 1.0 for p in processors}
    else:
        one = _speed({"speed": raw}, "speed", where, bad)
        speed = {p: one for p in processors}
    return ThermalLevel(sev, at_c, speed)


def _speed(obj: dict, key: str, where: str, bad: Bad) -> float:
    v = _num(obj, key, where, bad, strict=True)
    if v > 1.0:
        raise bad(f"{where}: speed {v:g} is above 1; it is the fraction of nominal speed kept (0 < speed <= 1)")
    return v


def check_energy_table(energy_mj: dict[str, dict[str, float]], processors: Sequence[str], bad: Bad) -> None:
    """``energy_mj[model][processor]`` must name known processors (the values are checked where the
    profile's fields are read, :func:`scheduler.profile._energy`)."""
    for model, row in energy_mj.items():
        for proc in row:
            if proc not in processors:
                raise bad(f"energy_mj[{model!r}] names unknown processor {proc!r}; known: {sorted(processors)}")
