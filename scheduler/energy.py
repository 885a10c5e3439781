"""Energy accounting of a simulated run: per invocation, per processor, per run.

The figures come from the profile (``scheduler.power`` documents the JSON):

* one on-device invocation of ``model`` on ``processor`` costs
  ``energy_mj[model][processor]`` when the profile has that measured figure,
  else ``active_w * latency_ms`` (W x ms = mJ) with the latency it really took
  (a throttled run takes longer and costs more). A measured figure is taken as
  it is: it was measured at nominal clocks, and the throttled clock is assumed
  to cost the same energy per inference (DVFS lowers power as it stretches time).
* an idle processor draws ``idle_w``: a run of ``run_ms`` adds
  ``idle_w * (run_ms - busy_ms)`` per processor with a power figure.
* the rest of the device (``power.baseline_w``: display, cameras, rendering)
  adds ``baseline_w * run_ms``; it heats the device but is no inference's.
* a cloud invocation costs radio energy from the linear model of
  ``power.radio``: ``(a_u * up + base) * t_up + (a_d * down + base) * t_down
  + base * (rtt + server time)`` (mW x ms = uJ), with ``up``/``down`` the link
  speeds of the profile's ``cloud`` section (Mbit/s) and ``t_up``/``t_down``
  the transfer times of the model's bytes. Without ``power.radio`` the cloud
  path costs 0 mJ on the device (the radio is not modelled), and the report
  says so (``radio_modelled``). The radio's tail energy after the transfer is
  not modelled.

An invocation with no figure at all (no ``energy_mj`` entry, no ``active_w``
for its processor) counts 0 mJ and is counted in ``unaccounted``, so a
report never hides a gap.

Units: mJ, W, ms. mJ / ms = W, so :meth:`EnergyModel.invocation_power_w` is
the average power of an invocation, the figure the heat model integrates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.power import PowerSpec
from scheduler.profile import DeviceProfile


class EnergyModel:
    """Energy and power of invocations on one device profile (stateless; see the module doc)."""

    __slots__ = ("power", "energy_mj", "cloud", "_active", "_idle")

    def __init__(self, profile: DeviceProfile) -> None:
        self.power: PowerSpec = profile.power or PowerSpec()
        self.energy_mj = profile.energy_mj
        self.cloud = profile.cloud
        self._active = {n: p.active_w for n, p in self.power.processors.items()}
        self._idle = {n: p.idle_w for n, p in self.power.processors.items()}

    @property
    def has_figures(self) -> bool:
        """True when the profile has any power or energy figure (else every invocation costs 0 mJ)."""
        return bool(self._active or self.energy_mj or self.power.radio or self.power.baseline_w)

    def covers(self, model: str, processor: str) -> bool:
        """True when an invocation of ``model`` on ``processor`` has a figure."""
        return processor in self._active or processor in self.energy_mj.get(model, {})

    def invocation_mj(self, model: str, processor: str, latency_ms: float) -> float:
        """mJ of one invocation that ran ``latency_ms``: measured ``energy_mj`` else ``active_w x latency_ms``."""
        row = self.energy_mj.get(model)
        if row is not None and processor in row:
            return row[processor]
        return self._active.get(processor, 0.0) * latency_ms

    def invocation_power_w(self, model: str, processor: str, latency_ms: float) -> float:
        """Average power (W) of that invocation: its mJ / its ms (``active_w`` without a table entry)."""
        if latency_ms <= 0:
            return self._active.get(processor, 0.0)
        return self.invocation_mj(model, processor, latency_ms) / latency_ms

    def idle_w(self, processor: str) -> float:
        """Idle power (W) of ``processor``; 0.0 without a figure."""
        return self._idle.get(processor, 0.0)

    def device_power_w(self, running_w: Mapping[str, float]) -> float:
        """Power (W) of the whole device now: baseline + each running processor's invocation power
        (``running_w``: processor -> W, from :meth:`invocation_power_w`) + every other processor's idle."""
        total = self.power.baseline_w
        for name, idle in self._idle.items():
            total += running_w.get(name, idle)
        for name, w in running_w.items():
            if name not in self._idle:
                total += w
        return total

    def cloud_mj(self, model: str) -> float:
        """Radio energy (mJ) of one cloud invocation of ``model``; 0.0 without ``power.radio`` or a cloud."""
        radio, c = self.power.radio, self.cloud
        if radio is None or c is None or model not in c.latency_ms:
            return 0.0
        t_up = c.input_bytes.get(model, 0) * 8 / (c.uplink_mbps * 1e3)
        t_down = c.output_bytes.get(model, 0) * 8 / (c.downlink_mbps * 1e3)
        wait = c.rtt_ms + c.latency_ms[model]
        uj = ((radio.uplink_mw_per_mbps * c.uplink_mbps + radio.active_mw) * t_up
              + (radio.downlink_mw_per_mbps * c.downlink_mbps + radio.active_mw) * t_down
              + radio.active_mw * wait)
        return uj / 1e3


@dataclass(slots=True)
class EnergyReport:
    """Energy of one run (mJ): inference, idle, baseline, radio, total, and the breakdowns."""

    run_ms: float
    inference_mj: float
    idle_mj: float
    baseline_mj: float
    radio_mj: float
    per_processor: dict[str, dict[str, float]] = field(default_factory=dict)
    per_model: dict[str, dict[str, float]] = field(default_factory=dict)
    unaccounted: int = 0
    radio_modelled: bool = False

    @property
    def total_mj(self) -> float:
        """Everything the device spent over the run (mJ)."""
        return self.inference_mj + self.idle_mj + self.baseline_mj + self.radio_mj

    @property
    def mean_power_w(self) -> float:
        """Average device power over the run (W); 0.0 for an empty run."""
        return self.total_mj / self.run_ms if self.run_ms > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        """A JSON-ready summary (numbers rounded to 1 uJ)."""
        r = lambda x: round(x, 3)
        return {"run_ms": r(self.run_ms), "total_mj": r(self.total_mj), "inference_mj": r(self.inference_mj),
                "idle_mj": r(self.idle_mj), "baseline_mj": r(self.baseline_mj), "radio_mj": r(self.radio_mj),
                "mean_power_w": round(self.mean_power_w, 6), "unaccounted": self.unaccounted,
                "radio_modelled": self.radio_modelled,
                "per_processor": {p: {k: r(v) for k, v in d.items()} for p, d in self.per_processor.items()},
                "per_model": {m: {k: r(v) for k, v in d.items()} for m, d in self.per_model.items()}}


class EnergyMeter:
    """Accumulates the energy of one run: call :meth:`record` per completed invocation, :meth:`report` at the end."""

    __slots__ = ("model", "_busy", "_active_mj", "_per_model", "_radio_mj", "_unaccounted")

    def __init__(self, model: EnergyModel | DeviceProfile) -> None:
        self.model = model if isinstance(model, EnergyModel) else EnergyModel(model)
        self._busy: dict[str, float] = {}
        self._active_mj: dict[str, float] = {}
        self._per_model: dict[str, list[float]] = {}   # model -> [mJ, count]
        self._radio_mj = 0.0
        self._unaccounted = 0

    def record(self, model: str, processor: str, latency_ms: float) -> float:
        """Account one on-device invocation that ran ``latency_ms``; returns its mJ."""
        mj = self.model.invocation_mj(model, processor, latency_ms)
        if not self.model.covers(model, processor):
            self._unaccounted += 1
        self._busy[processor] = self._busy.get(processor, 0.0) + latency_ms
        self._active_mj[processor] = self._active_mj.get(processor, 0.0) + mj
        self._add(model, mj)
        return mj

    def _add(self, model: str, mj: float) -> None:
        acc = self._per_model.setdefault(model, [0.0, 0.0])
        acc[0] += mj
        acc[1] += 1

    def report(self, run_ms: float) -> EnergyReport:
        """The run's energy over ``run_ms`` (ms): idle energy fills each processor's time not busy."""
        m = self.model
        per_proc: dict[str, dict[str, float]] = {}
        idle_total = 0.0
        for name in dict.fromkeys([*m.power.processors, *self._busy]):
            busy = self._busy.get(name, 0.0)
            idle = m.idle_w(name) * max(run_ms - busy, 0.0)
            idle_total += idle
            per_proc[name] = {"busy_ms": busy, "active_mj": self._active_mj.get(name, 0.0), "idle_mj": idle}
        per_model = {k: {"mj": v[0], "count": v[1], "mean_mj": v[0] / v[1]} for k, v in self._per_model.items()}
        return EnergyReport(run_ms=run_ms, inference_mj=sum(self._active_mj.values()), idle_mj=idle_total,
                            baseline_mj=m.power.baseline_w * run_ms, radio_mj=self._radio_mj,
                            per_processor=per_proc, per_model=per_model, unaccounted=self._unaccounted,
                            radio_modelled=m.power.radio is not None)
