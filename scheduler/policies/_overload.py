"""Overload planning for edgert's policy: per-model demand → which share to offload, which to shed.

XR work is periodic, so the arrival rate of each model is knowable from the
requests a policy has already seen. :class:`OverloadPlan` keeps those rates
(an exponential moving average over ``window_ms`` of driver time) and, every
``replan_ms``, asks one question: *if every request ran locally, how busy
would the busiest local processor be?* That is the fluid minimum of the
maximum utilization over all fractional placements (:func:`fluid_utilization`),
an LP solved through its dual. When it exceeds ``target`` the plan offloads,
per model, the smallest share that brings it back under ``target``: first
models the cloud serves with a wide margin (*safe*), then, above
``risky_target``, models whose cloud round trip fits their deadline only
narrowly (*risky*), never more than the cloud's slots can take. When even
that leaves the device above ``shed_target`` (more work than it can ever
finish), the plan sheds the share of the costliest models (most local
milliseconds per request) that frees enough time for the cheap ones: a
met deadline counts the same whatever the model, so dropping one 12 ms hand
pose saves the time of two 6 ms gaze estimates.

A request's fate (local, cloud, shed) is fixed when the policy first sees
it, by a per-model credit counter that turns the plan's fractions into an
exact, evenly spread sequence (a 0.25 share offloads every fourth request).

State and determinism: the rates, the plan, the credits and each pending
request's fate are state carried between decisions. It changes only when a
request the policy has not seen before appears, or when ``now_ms`` has moved
``replan_ms`` past the last plan; the same sequence of snapshots therefore
gives the same decisions (no clock, no randomness), and deciding twice on
one snapshot gives the same answer. Times are ms on the driver's clock.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from scheduler.types import RequestView

LOCAL, CLOUD, SHED = 0, 1, 2

_GRID_RES = {1: 1, 2: 100, 3: 20, 4: 10}
_GRIDS: dict[tuple[int, int], np.ndarray] = {}


def _simplex(n: int, res: int) -> np.ndarray:
    """Every point of the (n-1)-simplex whose coordinates are multiples of 1/res, as rows."""
    grid = _GRIDS.get((n, res))
    if grid is None:
        pts = [c for c in itertools.product(range(res + 1), repeat=n - 1) if sum(c) <= res]
        grid = _GRIDS[(n, res)] = np.array([[*c, res - sum(c)] for c in pts], dtype=float) / res
    return grid


def fluid_utilization(work: Sequence[Sequence[float | None]]) -> float:
    """Least possible utilization of the busiest processor when classes may split across processors.

    ``work[c][p]`` is the utilization processor p would get from running all of
    class c (rate per ms × expected ms), None when p cannot run c. The LP
    ``min U s.t. sum_c work[c][p] x[c][p] <= U, sum_p x[c][p] = 1`` has the
    dual ``max over prices y in the simplex of sum_c min_p y[p] work[c][p]``;
    every y gives a lower bound, so the best y on a grid, refined five times
    around the best point, is within about 1 % of the optimum (a slight
    under-estimate). A class no processor can run is ignored.
    """
    if not work:
        return 0.0
    w = np.array([[math.inf if v is None else v for v in row] for row in work], dtype=float)
    ok = np.isfinite(w)
    w0 = np.where(ok, w, 0.0)
    n = w.shape[1]

    def value(y: np.ndarray) -> np.ndarray:
        g = np.where(ok[None], y[:, None, :] * w0[None], np.inf).min(axis=2)
        return np.where(np.isfinite(g), g, 0.0).sum(axis=1)

    res = _GRID_RES.get(n, 6)
    ys = _simplex(n, res)
    vals = value(ys)
    i = int(vals.argmax())
    best, y = float(vals[i]), ys[i]
    if n > 1:
        step = 1.0 / res
        m = 3 * n                              # a multiple of n: the offsets include 0 and are symmetric
        local = _simplex(n, m) - 1.0 / n
        for _ in range(5):
            step /= 2.0
            cand = np.clip(y[None, :] + local * (2 * m * step), 0.0, None)
            cand /= cand.sum(axis=1, keepdims=True)
            v = value(cand)
            j = int(v.argmax())
            if v[j] > best:
                best, y = float(v[j]), cand[j]
    return best


def greedy_utilization(work: Sequence[Sequence[float | None]]) -> float:
    """An upper bound on :func:`fluid_utilization`, cheap enough for every plan.

    Each class goes whole, largest first, to the processor where the load after it is
    least (list scheduling); any such placement is feasible for the LP, so its busiest
    load bounds the LP's optimum from above. When it is already under the target the
    plan needs no LP at all — the common, not-overloaded case.
    """
    if not work:
        return 0.0
    n = len(work[0])
    if n == 0:
        return 0.0
    loads = [0.0] * n
    rows = sorted(work, key=lambda r: -min((v for v in r if v is not None), default=0.0))
    for row in rows:
        best, best_load = -1, math.inf
        for p, v in enumerate(row):
            if v is not None and loads[p] + v < best_load:
                best, best_load = p, loads[p] + v
        if best >= 0:
            loads[best] = best_load
    return max(loads)


class OverloadPlan:
    """Per-model rates → offload / shed shares; fixes each new request's fate. See the module docstring.

    Args:
        window_ms: time constant of the rate average.
        replan_ms: least driver time between two plans.
        target: fluid utilization above which the plan offloads safe models.
        risky_target: the same for risky models (cloud round trip close to the deadline).
        shed_target: fluid utilization left after offloading above which the plan sheds.
        safe_margin: a model is *safe* for the cloud when its expected cloud latency × (1 +
            safe_margin) fits its deadline budget; risky_margin is the same for *risky*.
        cloud_util: the plan keeps the cloud's slots at most this busy.
    """

    __slots__ = ("window_ms", "replan_ms", "target", "risky_target", "shed_target", "safe_margin",
                 "risky_margin", "cloud_util", "fates", "utilization", "_counts", "_rates", "_budget",
                 "_shares", "_credit", "_t_plan", "_planned_rates")

    def __init__(self, window_ms: float = 100.0, replan_ms: float = 25.0, target: float = 0.85,
                 risky_target: float = 0.85, shed_target: float = 1.0, safe_margin: float = 0.8,
                 risky_margin: float = 0.15, cloud_util: float = 0.8) -> None:
        for label, value in (("window_ms", window_ms), ("replan_ms", replan_ms), ("target", target),
                             ("risky_target", risky_target), ("shed_target", shed_target),
                             ("safe_margin", safe_margin), ("risky_margin", risky_margin),
                             ("cloud_util", cloud_util)):
            if not value > 0:
                raise ValueError(f"{label} must be > 0, got {value}")
        self.window_ms = window_ms
        self.replan_ms = replan_ms
        self.target = target
        self.risky_target = risky_target
        self.shed_target = shed_target
        self.safe_margin = safe_margin
        self.risky_margin = risky_margin
        self.cloud_util = cloud_util
        #: request id -> LOCAL / CLOUD / SHED, for requests seen and (maybe) still pending
        self.fates: dict[int, int] = {}
        #: the fluid utilization of the last plan (all work local)
        self.utilization = 0.0
        self._counts: dict[str, int] = {}
        self._rates: dict[str, float] = {}       # requests per ms
        self._budget: dict[str, float] = {}      # ms from arrival to effective deadline, latest seen
        self._shares: dict[str, tuple[float, float]] = {}   # model -> (offload share, shed share)
        self._credit: dict[str, list[float]] = {}
        self._t_plan: float | None = None
        self._planned_rates: dict[str, float] | None = None

    @property
    def shares(self) -> dict[str, tuple[float, float]]:
        """``{model: (offload share, shed share)}`` of the current plan (models with neither left out)."""
        return dict(self._shares)

    def fate(self, req: RequestView) -> int:
        """Count a newly seen request and fix its fate (LOCAL, CLOUD or SHED) from the plan's shares.

        A request without a deadline is best-effort: it can never be late, so it is neither
        counted in the demand the plan guards nor offloaded or shed (always LOCAL).
        """
        if req.deadline_ms == math.inf:
            self.fates[req.id] = LOCAL
            return LOCAL
        m = req.model
        self._counts[m] = self._counts.get(m, 0) + 1
        self._budget[m] = req.deadline_ms - req.downstream_ms - req.arrival_ms
        fate = LOCAL
        share = self._shares.get(m)
        if share is not None:
            cr = self._credit.get(m)
            if cr is None:
                cr = self._credit[m] = [0.0, 0.0]
            off, shed = share
            cr[0] += off
            if cr[0] >= 1.0 - 1e-9:
                cr[0] -= 1.0
                fate = CLOUD
            elif off < 1.0:
                cr[1] += shed / (1.0 - off)
                if cr[1] >= 1.0 - 1e-9:
                    cr[1] -= 1.0
                    fate = SHED
        self.fates[req.id] = fate
        return fate

    def update(self, pending: Sequence[RequestView], now_ms: float, est, local: Sequence[str],
               cloud: str | None, cloud_slots: int) -> None:
        """Fold the arrivals counted since the last plan into the rates and re-plan (every ``replan_ms``)."""
        if self._t_plan is None:
            self._t_plan = now_ms
            return
        dt = now_ms - self._t_plan
        if dt < self.replan_ms:
            return
        self._t_plan = now_ms
        a = 1.0 - math.exp(-dt / self.window_ms)
        rates, counts = self._rates, self._counts
        for m in sorted(rates.keys() | counts.keys()):
            old = rates.get(m, 0.0)
            rates[m] = old + a * (counts.get(m, 0) / dt - old)
        self._counts = {}
        live = {r.id for r in pending}
        self.fates = {i: f for i, f in self.fates.items() if i in live}
        last = self._planned_rates
        if last is not None and last.keys() == rates.keys() and all(
                abs(rates[m] - last[m]) <= 0.03 * max(last[m], 1e-3) for m in rates):
            return   # demand unchanged (within 3 %): keep the plan
        self._planned_rates = dict(rates)
        self._plan(est, local, cloud, cloud_slots)

    def _plan(self, est, local: Sequence[str], cloud: str | None, cloud_slots: int) -> None:
        models = [m for m in sorted(self._rates) if self._rates[m] > 1e-6]
        lat = [[est(m, p) for p in local] for m in models]
        rate = [self._rates[m] for m in models]
        n = len(models)
        keep = [1.0] * n

        def util() -> float:
            return fluid_utilization([[None if ms is None else rate[c] * keep[c] * ms for ms in lat[c]]
                                      for c in range(n)])

        if not local:
            self._shares = {}
            return
        greedy = greedy_utilization([[None if ms is None else rate[c] * ms for ms in lat[c]] for c in range(n)])
        if greedy <= self.target:   # an upper bound: the LP cannot say otherwise
            self.utilization = greedy
            self._shares = {}
            return
        u = self.utilization = util()
        if u <= self.target:
            self._shares = {}
            return
        cl = [est(m, cloud) if cloud is not None else None for m in models]
        budget = [self._budget.get(m, 0.0) for m in models]
        safe = [c for c in range(n) if cl[c] is not None and cl[c] * (1 + self.safe_margin) <= budget[c]]
        risky = [c for c in range(n) if cl[c] is not None and c not in safe
                 and cl[c] * (1 + self.risky_margin) <= budget[c]]
        off = [0.0] * n
        shed = [0.0] * n
        room = cloud_slots * self.cloud_util
        for tier, limit in ((safe, self.target), (risky, self.risky_target)):
            if u <= limit or not tier:
                continue
            need = sum(rate[c] * cl[c] for c in tier)   # cloud slots the whole tier would keep busy
            top = min(1.0, room / need) if need > 0 else 0.0
            if top <= 0.0:
                continue

            def offload(share: float) -> float:
                for c in tier:
                    off[c] = share
                    keep[c] = 1.0 - share
                return util()

            u = offload(top)
            if u <= limit:                     # bisect for the least share that is enough
                lo, hi = 0.0, top
                for _ in range(6):
                    mid = 0.5 * (lo + hi)
                    if offload(mid) > limit:
                        lo = mid
                    else:
                        hi = mid
                u = offload(hi)
            room -= sum(rate[c] * cl[c] * off[c] for c in tier)
        if u > self.shed_target:
            cost = [min((ms for ms in lat[c] if ms is not None), default=0.0) for c in range(n)]
            for c in sorted(range(n), key=lambda c: -cost[c]):
                if u <= self.shed_target or keep[c] <= 0.0:
                    continue
                base = keep[c]

                def shed_share(share: float) -> float:
                    keep[c] = base * (1.0 - share)   # noqa: B023 (used right here)
                    return util()

                if shed_share(1.0) > self.shed_target:
                    shed[c] = base
                    u = util()
                    continue
                lo, hi = 0.0, 1.0
                for _ in range(6):
                    mid = 0.5 * (lo + hi)
                    if shed_share(mid) > self.shed_target:
                        lo = mid
                    else:
                        hi = mid
                u = shed_share(hi)
                shed[c] = base * hi
        self._shares = {models[c]: (off[c], shed[c]) for c in range(n) if off[c] > 0.0 or shed[c] > 0.0}
