"""Energy and heat of a simulated run: the driver's two hooks and the run's energy report.

Heat: one :class:`~scheduler.thermal.ThermalModel` per device, heated by
``baseline_w`` + every processor's ``idle_w`` + each run's energy above idle
(measured ``energy_mj`` or ``active_w`` × its ms, less ``idle_w`` × its ms; a
cloud run's radio energy). The driver's start step calls :meth:`Heat.start`, which divides the run time
by the processor's speed at the throttling severity in force (the cloud is
never throttled) and adds the run's energy. At the first start at least
``SYNC_MS`` (100 ms) after the last sync, the model is integrated exactly
(closed form, severity changes at their crossing times) at that window's mean
power, and the speeds follow its severity. The device's time constant is
minutes (R×C = 670–820 s in the shipped profiles), so averaging over 0.1 s and
counting a run's energy from its start (a few ms early) moves the temperature
by well under 0.01 °C; a severity change reaches the speeds up to 0.1 s late.
:meth:`Heat.close` integrates to the end of the run. Without a
``thermal`` section, or with ``SimConfig(thermal=False)``, there is no
:class:`Heat` and the driver runs its plain start step: nothing is paid.

Energy is computed after the run from the outcome's columns
(:func:`energy_report`): the same figures as feeding every run to an
:class:`~scheduler.energy.EnergyMeter`, in bulk. Units: ms, mJ, W, °C.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler.power import SEVERITIES
from scheduler.profile import DeviceProfile
from scheduler.energy import EnergyModel, EnergyReport
from scheduler.sim.metrics import Outcome
from scheduler.thermal import ThermalModel
from scheduler.sim.xrbench import E_MAX_MJ, profile_e_max_mj, xrbench_score

#: the heat model integrates the device's power averaged over windows of at least this many ms
SYNC_MS = 100.0
_DROPPED = 2   # scheduler.timeline.STATUSES.index("dropped")


class Heat:
    """The device's temperature over one run and the throttling it causes (see the module doc).

    Args:
        profile: a profile with a ``thermal`` section.
        processors: the simulator's processors as ``(name, kind)``, by index.
        models: the workload's model names, by model code.
    """

    __slots__ = ("thermal", "energy", "mj", "next_sync", "speed", "cost", "_base_w", "_names", "_cloud")

    def __init__(self, profile: DeviceProfile, processors: Sequence[tuple[str, str]], models: Sequence[str]) -> None:
        assert profile.thermal is not None
        self.thermal = ThermalModel(profile.thermal)
        self.energy = e = EnergyModel(profile)
        self._names = [n for n, _ in processors]
        self._cloud = [k == "cloud" for _, k in processors]
        self._base_w = e.device_power_w({})   # W with every processor idle: baseline + idle powers
        #: mJ above idle of the runs started since the last sync
        self.mj = 0.0
        self.next_sync = 0.0
        #: by processor index: the fraction of nominal speed it keeps now (the cloud: 1)
        self.speed = [1.0 if c else self.thermal.speed(n) for n, c in zip(self._names, self._cloud)]
        #: by processor index, by model code: ``(fixed mJ, W)``: a run of ``ms`` costs ``fixed + W * ms`` above idle
        self.cost = [[self._cost(n, c, m) for m in models] for n, c in zip(self._names, self._cloud)]

    def _cost(self, name: str, cloud: bool, model: str) -> tuple[float, float]:
        e = self.energy
        if cloud:
            return e.cloud_mj(model), 0.0
        if name in e.energy_mj.get(model, {}):
            return e.energy_mj[model][name], -e.idle_w(name)
        return 0.0, e.invocation_mj(model, name, 1.0) - e.idle_w(name)

    def start(self, index: int, model: int, ms: float, now_ms: float) -> float:
        """A run of ``ms`` at nominal speed starts at ``now_ms`` on processor ``index`` (model code ``model``):
        its time at the speed in force (syncing first when due), its energy counted. The driver's start step."""
        if now_ms >= self.next_sync:
            self.sync(now_ms)
        ms = ms / self.speed[index]
        fixed, w = self.cost[index][model]
        self.mj += fixed + w * ms
        return ms

    def sync(self, now_ms: float) -> None:
        """Integrate to ``now_ms`` at the mean power since the last sync; take the throttle now in force."""
        t = self.thermal
        dt = now_ms - t.now_ms
        if dt > 0:
            level = t.level
            t.advance(now_ms, max(self._base_w + self.mj / dt, 0.0))
            self.mj = 0.0
            if t.level != level:
                self.speed = [1.0 if c else t.speed(n) for n, c in zip(self._names, self._cloud)]
        self.next_sync = now_ms + SYNC_MS

    def close(self, end_ms: float) -> None:
        """Integrate to the end of the run (ms); an earlier time changes nothing."""
        self.sync(max(end_ms, self.thermal.now_ms))

    def to_json(self) -> dict[str, object]:
        """``peak_c``, ``final_c`` (°C), ``ms_at`` (ms at each severity reached, Android's order) and
        ``throttled_ms`` (ms above NONE)."""
        t = self.thermal
        at = {s: round(t.ms_at[s], 3) for s in SEVERITIES if t.ms_at.get(s, 0.0) > 0}
        return {"peak_c": round(t.peak_c, 4), "final_c": round(t.temp_c, 4), "ms_at": at,
                "throttled_ms": round(sum(v for s, v in t.ms_at.items() if s != "none"), 3)}


def request_energy_mj(energy: EnergyModel, models: Sequence[str], processors: Sequence[tuple[str, str]],
                      model: np.ndarray, proc: np.ndarray, took_ms: np.ndarray) -> np.ndarray:
    """Each request's energy (mJ) from its model code, processor index (-1: never ran, 0 mJ) and run time
    (ms), as :class:`EnergyMeter` would record it (measured ``energy_mj``, else ``active_w`` × ms; the cloud's
    radio energy)."""
    n_m, n_p = len(models), len(processors)
    fixed = np.zeros((n_m, n_p + 1))   # column n_p: never ran
    watts = np.zeros((n_m, n_p + 1))
    for j, (pname, kind) in enumerate(processors):
        for i, m in enumerate(models):
            if kind == "cloud":
                fixed[i, j] = energy.cloud_mj(m)
            elif pname in energy.energy_mj.get(m, {}):
                fixed[i, j] = energy.energy_mj[m][pname]
            else:
                watts[i, j] = energy.invocation_mj(m, pname, 1.0)
    col = np.where(proc >= 0, proc, n_p)
    took = np.where(proc >= 0, took_ms, 0.0)
    return fixed[model, col] + watts[model, col] * took


def energy_report(energy: EnergyModel, models: Sequence[str], processors: Sequence[tuple[str, str]],
                  model: np.ndarray, proc: np.ndarray, took_ms: np.ndarray, run_ms: float) -> EnergyReport:
    """The run's :class:`EnergyReport` over ``run_ms`` (ms): what an :class:`EnergyMeter` fed every run reports."""
    mj = request_energy_mj(energy, models, processors, model, proc, took_ms)
    ran = proc >= 0
    cloud = np.array([k == "cloud" for _, k in processors] + [False])[np.where(ran, proc, len(processors))]
    local = ran & ~cloud
    per_proc: dict[str, dict[str, float]] = {}
    idle_total = 0.0
    unaccounted = 0
    for j, (pname, kind) in enumerate(processors):
        on = local & (proc == j)
        busy = float(took_ms[on].sum())
        if kind == "cloud" or (not on.any() and pname not in energy.power.processors):
            continue
        idle = energy.idle_w(pname) * max(run_ms - busy, 0.0)
        idle_total += idle
        per_proc[pname] = {"busy_ms": busy, "active_mj": float(mj[on].sum()), "idle_mj": idle}
        unaccounted += sum(int(np.count_nonzero(on & (model == i))) for i, m in enumerate(models)
                           if not energy.covers(m, pname))
    per_model: dict[str, dict[str, float]] = {}
    counts = np.bincount(model[ran], minlength=len(models))
    sums = np.bincount(model[ran], weights=mj[ran], minlength=len(models))
    for i, m in enumerate(models):
        if counts[i]:
            per_model[m] = {"mj": float(sums[i]), "count": float(counts[i]), "mean_mj": float(sums[i] / counts[i])}
    return EnergyReport(run_ms=run_ms, inference_mj=float(mj[local].sum()), idle_mj=idle_total,
                        baseline_mj=energy.power.baseline_w * run_ms, radio_mj=float(mj[cloud].sum()),
                        per_processor=per_proc, per_model=per_model, unaccounted=unaccounted,
                        radio_modelled=energy.power.radio is not None)



def energy_summary(outcome: Outcome, profile: DeviceProfile, processors: Sequence[tuple[str, str, int, float, int]],
                   span_ms: float) -> dict[str, Any]:
    """The summary's ``energy_mj`` (:meth:`EnergyReport.to_json`: total, inference / idle / baseline / radio,
    per model, per processor) and ``xrbench`` keys; ``{}`` when the profile has no power or energy figure.

    ``xrbench``: XRBench's score (its code's formula, :func:`~scheduler.sim.xrbench.xrbench_score`) with
    XRBench's own E_max of 1500 mJ (``score``) and with the profile's E_max, its costliest invocation
    (``score_profile_e_max``), and the one-drop-factor ``paper_score`` of each.
    """
    energy = EnergyModel(profile)
    if not energy.has_figures:
        return {}
    procs = [(p[0], p[1]) for p in processors]
    took = np.nan_to_num(outcome.end_ms - outcome.start_ms)
    proc = outcome.processor.astype(np.int64)
    model = outcome.model.astype(np.int64)
    report = energy_report(energy, outcome.models, procs, model, proc, took, span_ms)
    per_req = request_energy_mj(energy, outcome.models, procs, model, proc, took)
    names = [outcome.models[c] for c in model.tolist()]
    done = np.where(outcome.status == _DROPPED, np.nan, outcome.end_ms)
    xr: dict[str, Any] = {"note": f"XRBench's formula (drop rate weighed twice, as its code does); score: "
                                  f"XRBench's E_max = {E_MAX_MJ:g} mJ; score_profile_e_max: E_max = the "
                                  "profile's costliest invocation"}
    e_prof = profile_e_max_mj(profile)
    for key, e_max in (("", E_MAX_MJ), ("_profile_e_max", e_prof)):   # keys: score, e_max_mj; score_profile_e_max ...
        if e_max is None:
            continue
        sc = xrbench_score(names, done, outcome.deadline_ms, per_req, e_max_mj=e_max)
        paper = 100.0 * sum(m.paper_score for m in sc.per_model.values()) / len(sc.per_model) if sc.per_model else 0.0
        xr[f"score{key}"] = round(sc.overall, 4)
        xr[f"paper_score{key}"] = round(paper, 4)
        xr["e_max_mj" if not key else "profile_e_max_mj"] = round(e_max, 4)
    return {"energy_mj": report.to_json(), "xrbench": xr}
