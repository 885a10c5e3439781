"""A lumped RC heat model of a device and the throttling it causes.

One thermal node per device::

    C * dT/dt = P - (T - T_amb) / R

with C the heat capacity (J/K), R the resistance to ambient (K/W), P the
device's power (W). Between two simulator events P is constant, so the
model is integrated exactly, not stepped::

    T(t0 + dt) = T_ss + (T(t0) - T_ss) * exp(-dt / tau),   T_ss = T_amb + P * R,   tau = R * C

Within such an interval T moves monotonically toward T_ss, so the moment it
crosses a threshold also has a closed form,
``dt = tau * ln((T0 - T_ss) / (T_x - T_ss))``. :meth:`ThermalModel.advance`
uses it to change severity at the exact crossing (the time spent at each
severity is exact), and :meth:`ThermalModel.time_to_c` /
:meth:`ThermalModel.time_to_severity` let a policy see how long it has before
the throttle hits at a given power, and move work first.

Throttling follows Android's thermal HAL: severities NONE, LIGHT, MODERATE,
SEVERE, CRITICAL, EMERGENCY, SHUTDOWN (``scheduler.power.SEVERITIES``); the
profile's ``thermal.levels`` say from which temperature each applies and the
fraction of nominal speed each processor keeps there (latency / speed). A
level is entered when T reaches its ``at_c`` and left when T falls below
``at_c - hysteresis_c``.

Times in the API are in ms (the simulator's clock), temperatures in deg C,
power in W.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduler.power import ThermalSpec


class ThermalModel:
    """The temperature of one device over simulated time, and its throttling state.

    Args:
        spec: the profile's ``thermal`` section.
        start_ms: the simulator time the model starts at (ms).

    Raises:
        ValueError (from :meth:`advance`): time moved backwards or power is negative / not finite.
    """

    __slots__ = ("spec", "now_ms", "temp_c", "level", "peak_c", "ms_at", "_tau_ms", "_r", "_amb", "_on", "_off",
                 "_up", "_names")

    def __init__(self, spec: ThermalSpec, start_ms: float = 0.0) -> None:
        self.spec = spec
        self.now_ms = float(start_ms)
        self.temp_c = spec.ambient_c if spec.initial_c is None else spec.initial_c
        self._tau_ms = spec.tau_s * 1e3
        self._r = spec.resistance_k_per_w
        self._amb = spec.ambient_c
        #: entry temperature of level i (index 0 = no throttling), and where it is left
        self._on = [-math.inf] + [lv.at_c for lv in spec.levels]
        self._off = [-math.inf] + [lv.at_c - spec.hysteresis_c for lv in spec.levels]
        #: by level: the entry temperature of the next level up (inf at the top), and the level's severity name
        self._up = self._on[1:] + [math.inf]
        self._names = ["none"] + [lv.severity for lv in spec.levels]
        self.level = 0
        self.level = self._settle(self.temp_c, rising=True)
        self.peak_c = self.temp_c
        #: ms spent at each severity name since start
        self.ms_at: dict[str, float] = {}

    # -- state ------------------------------------------------------------------------------------
    @property
    def severity(self) -> str:
        """The current Android severity name (``"none"`` ... ``"shutdown"``)."""
        return self._names[self.level]

    def speed(self, processor: str) -> float:
        """Fraction of nominal speed ``processor`` keeps now (1.0 unthrottled); latency / speed."""
        if self.level == 0:
            return 1.0
        return self.spec.levels[self.level - 1].speed.get(processor, 1.0)

    def speeds(self) -> dict[str, float]:
        """:meth:`speed` of every processor the levels name."""
        names: Sequence[str] = list(self.spec.levels[0].speed) if self.spec.levels else []
        return {p: self.speed(p) for p in names}

    def steady_state_c(self, power_w: float) -> float:
        """The temperature (deg C) the device tends to at constant ``power_w``: T_amb + P * R."""
        return self._amb + power_w * self._r

    def temperature_after(self, dt_ms: float, power_w: float) -> float:
        """The temperature (deg C) ``dt_ms`` from now at constant ``power_w``; changes nothing."""
        ss = self.steady_state_c(power_w)
        return ss + (self.temp_c - ss) * math.exp(-dt_ms / self._tau_ms)

    # -- look-ahead for a policy -------------------------------------------------------------------
    def time_to_c(self, target_c: float, power_w: float) -> float:
        """ms until the temperature reaches ``target_c`` at constant ``power_w``.

        0.0 if it is there already; ``math.inf`` if it never gets there (the
        steady state lies short of it, or on the other side).
        """
        t0 = self.temp_c
        if t0 == target_c:
            return 0.0
        ss = self.steady_state_c(power_w)
        if (target_c - t0) * (ss - t0) <= 0 or abs(ss - t0) <= abs(target_c - t0):
            return math.inf
        return self._tau_ms * math.log((t0 - ss) / (target_c - ss))

    def time_to_severity(self, power_w: float, severity: str | None = None) -> float:
        """ms until ``severity`` (default: the next level up) starts at constant ``power_w``.

        0.0 if that severity (or a higher one) is in force already; ``math.inf``
        if it never comes at this power or the profile has no such level.
        """
        if severity is None:
            target = self.level + 1
        else:
            names = [lv.severity for lv in self.spec.levels]
            if severity.lower() not in names:
                return 0.0 if severity.lower() == "none" else math.inf
            target = names.index(severity.lower()) + 1
        if target <= self.level:
            return 0.0
        if target > len(self.spec.levels):
            return math.inf
        return self.time_to_c(self._on[target], power_w)

    # -- integration -------------------------------------------------------------------------------
    def advance(self, t_ms: float, power_w: float) -> str:
        """Integrate from now to ``t_ms`` at constant ``power_w`` (the power over that interval).

        Severity changes at the exact crossing times inside the interval.
        Returns the severity at ``t_ms``.
        """
        dt = t_ms - self.now_ms
        if not (dt >= 0.0 and t_ms < math.inf):   # (backwards, NaN or infinite: chained tests, no isfinite calls)
            raise ValueError(f"advance to {t_ms!r} ms: time must not move backwards (now {self.now_ms} ms)")
        if not 0.0 <= power_w < math.inf:
            raise ValueError(f"power_w must be a finite number >= 0, not {power_w!r}")
        if dt == 0:
            return self.severity
        t0 = self.temp_c
        ss = self._amb + power_w * self._r   # temperature_after(dt, power_w), inline (the simulator syncs often)
        t1 = ss + (t0 - ss) * math.exp(-dt / self._tau_ms)
        rising = t1 > t0
        lv = self.level
        if (t1 < self._up[lv]) if rising else (lv == 0 or t1 >= self._off[lv]):
            name = self._names[lv]   # no level crossed (most intervals): _settle's answer, fast
            if dt > 0:   # (_spend(dt))
                self.ms_at[name] = self.ms_at.get(name, 0.0) + dt
            self.temp_c = t1
            self.now_ms = float(t_ms)
            if t1 > self.peak_c:
                self.peak_c = t1
            return name
        new = self._settle(t1, rising)
        spent = 0.0
        while self.level != new:   # monotone path: walk the levels crossed, at their exact times
            nxt = self.level + (1 if rising else -1)
            edge = self._on[nxt] if rising else self._off[self.level]
            at = min(max(self.time_to_c(edge, power_w), 0.0), dt) if math.isfinite(edge) else dt
            self._spend(at - spent)
            spent = at
            self.level = nxt
        self._spend(dt - spent)
        self.temp_c = t1
        self.now_ms = float(t_ms)
        self.peak_c = max(self.peak_c, t1)
        return self.severity

    def _spend(self, ms: float) -> None:
        if ms > 0:
            name = self.severity
            self.ms_at[name] = self.ms_at.get(name, 0.0) + ms

    def _settle(self, temp_c: float, rising: bool) -> int:
        """The level in force at ``temp_c`` coming from the current level along a monotone path."""
        lv = self.level
        if rising:
            while lv + 1 < len(self._on) and temp_c >= self._on[lv + 1]:
                lv += 1
        else:
            while lv > 0 and temp_c < self._off[lv]:
                lv -= 1
        return lv
