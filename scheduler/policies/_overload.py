"""Overload planning for edgert's policy: per-model demand → which share to offload, which to shed.

XR work is periodic streams, so each model's arrival rate is knowable from
the requests a policy has already seen. :class:`OverloadPlan` measures every
stream's rate over its latest arrivals (:class:`~scheduler.policies._streams.Streams`; a stream silent
for ``stream_timeout`` of its periods has stopped), so the demand it plans
for is exact for periodic streams and does not flicker with how many frames
happened to land in a window. It looks at the demand again only when a
stream started, stopped or changed its rate by more than ``replan_rel``
(known in O(1) per decision), at most every ``replan_ms``, and solves the LP
again only when the demand moved by ``replan_delta`` (processor-ms per ms,
summed over models at their fastest processor); so the plan costs nothing on
almost every decision and one small LP when a burst starts or ends. Under
the target no LP is solved at all (a greedy placement bounds it from above).

The plan is one linear program over the fractions of each model's rate that
run on each local processor, go to the cloud, or are shed (:func:`plan_shares`):

* a processor is a candidate for a model only if one run fits the model's
  deadline budget (the cloud: with ``risky_margin`` headroom);
* local processors are busy at most ``shed_target`` (1.0: all of their
  time), the cloud's slots at most ``cloud_util``;
* the objective, in strict priority: shed as few requests as possible (a
  cascade's first stage counts for two, its later stage is lost with it);
  then keep every local processor's utilization under ``target`` (a
  non-preemptive processor near 100 % misses deadlines by queueing); then use
  as little cloud time as possible, a *risky* model (round trip within
  ``safe_margin`` of its budget) costing more than a safe one.

So the cloud takes exactly the models whose offload relieves the busiest
local processors most per cloud slot-millisecond (a 44 ms speech model
before a 1 ms keyword model), and shedding picks the requests that cost the
most local time per met deadline. After the LP, a *long* model the cloud
serves safely (one local run takes more than half the budget of another
running model) goes to the cloud whole while the cloud has room: the LP
counts time, not the non-preemptive blocking such a run causes.

The plan also names, per local processor, the tightest running model that
needs it (its next fastest processor takes ``_RESERVE_GAIN`` times as long):
:attr:`OverloadPlan.reserved`, which edgert's placement uses to keep
requests with time to spare off that processor.

A request's fate (local, cloud, shed) is fixed when the policy first sees
it, by a per-model credit counter that turns the plan's fractions into an
exact, evenly spread sequence (a 0.25 share offloads every fourth request).

State and determinism: the stream rates, the plan, the credits and each
pending request's fate are state carried between decisions. It changes only
when a request the policy has not seen before appears, or with ``now_ms``
(a stream's timeout, the ``replan_ms`` spacing of the checks); the same sequence of snapshots
therefore gives the same decisions (no clock, no randomness), and deciding
twice on one snapshot gives the same answer. Times are ms on the driver's clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.policies._lp import minimize
from scheduler.policies._streams import Streams
from scheduler.types import RequestView

LOCAL, CLOUD, SHED = 0, 1, 2

#: objective weights (see :func:`plan_shares`): shed request rate, local overflow, cloud slot time
_W_SHED, _W_OVER, _W_CLOUD, _W_RISKY = 1e5, 100.0, 1.0, 3.0
#: weight of the newest request's budget in its model's average budget (a cascade stage's varies)
_BUDGET_ALPHA = 0.05
#: a model needs its fastest processor when the next fastest takes this many times as long
_RESERVE_GAIN = 1.25
#: a planned share smaller than this is no share (solver round-off)
_MIN_SHARE = 1e-4

Latency = Callable[[str, str], "float | None"]


@dataclass(frozen=True, slots=True)
class Demand:
    """One model's demand as the plan sees it.

    Attributes:
        model: the model name.
        rate: requests per ms.
        budget_ms: ms from a request's arrival to its effective deadline (averaged).
        value: deadlines lost when one request is shed (2 for a cascade's first stage).
    """

    model: str
    rate: float
    budget_ms: float
    value: float = 1.0


def plan_shares(demand: Sequence[Demand], est: Latency, local: Sequence[str], cloud: str | None,
                cloud_slots: int, *, target: float = 0.85, shed_target: float = 1.0, cloud_util: float = 0.9,
                safe_margin: float = 0.8, risky_margin: float = 0.15) -> tuple[dict[str, tuple[float, float]], float]:
    """Solve the overload LP (module docstring): ``({model: (offload share, shed share)}, kept share)``.

    Only models with a nonzero share are in the dict; the kept share is the fraction of all
    requests (by rate) the plan does not shed. A model no processor can run within its budget is
    left out (the per-request logic drops what cannot make it).
    """
    cols: list[tuple[int, int]] = []       # (model index, processor index; -1 cloud, -2 shed)
    cost: list[float] = []
    rows_local = len(local)
    models = [d for d in demand if d.rate > 0.0]
    lat_local: list[list[float | None]] = []
    lat_cloud: list[float | None] = []
    keep: list[Demand] = []
    for d in models:
        row = [ms if (ms := est(d.model, p)) is not None and ms <= d.budget_ms else None for p in local]
        cms = est(d.model, cloud) if cloud is not None else None
        if cms is not None and cms * (1.0 + risky_margin) > d.budget_ms:
            cms = None
        if all(v is None for v in row) and cms is None:
            continue
        keep.append(d)
        lat_local.append(row)
        lat_cloud.append(cms)
    n = len(keep)
    if n == 0:
        return {}, 1.0
    for c, d in enumerate(keep):
        for p, ms in enumerate(lat_local[c]):
            if ms is not None:
                cols.append((c, p))
                cost.append(0.0)
        if lat_cloud[c] is not None:
            cols.append((c, -1))
            safe = lat_cloud[c] * (1.0 + safe_margin) <= d.budget_ms
            cost.append((_W_CLOUD if safe else _W_RISKY) * d.rate * lat_cloud[c])
        cols.append((c, -2))
        cost.append(_W_SHED * d.value * d.rate)
    n_frac = len(cols)
    # rows: n equalities (fractions sum to 1), per local processor a hard cap and an overflow row, cloud cap
    m = n + 2 * rows_local + (1 if cloud is not None else 0)
    n_over = rows_local
    n_var = n_frac + n_over + (m - n)            # fractions, overflows, slacks of the inequality rows
    a = np.zeros((m, n_var))
    b = np.zeros(m)
    c_vec = np.zeros(n_var)
    c_vec[:n_frac] = cost
    c_vec[n_frac:n_frac + n_over] = _W_OVER
    basis = [0] * m
    for j, (ci, p) in enumerate(cols):
        a[ci, j] = 1.0
        if p == -2:
            basis[ci] = j
        d = keep[ci]
        if p >= 0:
            w = d.rate * lat_local[ci][p]
            a[n + p, j] = w                       # hard cap row
            a[n + rows_local + p, j] = w          # overflow row
        elif p == -1 and cloud is not None:
            a[n + 2 * rows_local, j] = d.rate * lat_cloud[ci]
    b[:n] = 1.0
    for p in range(rows_local):
        b[n + p] = shed_target
        b[n + rows_local + p] = target
        a[n + rows_local + p, n_frac + p] = -1.0  # minus the overflow above target
    if cloud is not None:
        b[n + 2 * rows_local] = cloud_util * cloud_slots
    for r in range(n, m):
        s = n_frac + n_over + (r - n)
        a[r, s] = 1.0
        basis[r] = s
    x = minimize(c_vec, a, b, basis)
    off = [0.0] * n
    shed = [0.0] * n
    for j, (ci, p) in enumerate(cols):
        if p == -1:
            off[ci] = x[j]
        elif p == -2:
            shed[ci] = x[j]
    # a long model the cloud serves safely goes there whole while the cloud has room: each of its local runs
    # would hold a (non-preemptive) processor longer than half the budget of another model that needs it
    room = cloud_util * cloud_slots - sum(keep[ci].rate * lat_cloud[ci] * off[ci] for ci in range(n) if off[ci] > 0)
    run = [min((v for v in row if v is not None), default=0.0) for row in lat_local]
    for ci in sorted(range(n), key=lambda k: -run[k]):
        if lat_cloud[ci] is None or shed[ci] > _MIN_SHARE or off[ci] >= 1.0 - _MIN_SHARE \
                or lat_cloud[ci] * (1.0 + safe_margin) > keep[ci].budget_ms:
            continue
        others = [keep[k].budget_ms for k in range(n) if k != ci]
        if not others or run[ci] <= 0.5 * min(others):
            continue
        extra = keep[ci].rate * lat_cloud[ci] * (1.0 - off[ci])
        if extra <= room:
            room -= extra
            off[ci] = 1.0
    shares = {}
    for ci, d in enumerate(keep):
        o = off[ci] if off[ci] > _MIN_SHARE else 0.0
        s = shed[ci] if shed[ci] > _MIN_SHARE else 0.0
        if o > 0.0 or s > 0.0:
            shares[d.model] = (min(o, 1.0), min(s, 1.0 - min(o, 1.0)))
    total = sum(d.rate for d in models)
    kept = 1.0 - sum(keep[ci].rate * shed[ci] for ci in range(n)) / total if total > 0 else 1.0
    return shares, kept


def greedy_utilization(work: Sequence[Sequence[float | None]]) -> float:
    """An upper bound on the least possible utilization of the busiest processor, cheap enough for every check.

    ``work[c][p]`` is the utilization processor p would get from running all of class c (None when
    p cannot run c). Each class goes whole, largest first, to the processor where the load after it
    is least (list scheduling); any such placement is feasible for the fractional LP, so its busiest
    load bounds the LP's optimum from above. When it is already under the target the plan needs no
    LP at all — the common, not-overloaded case.
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
    """Per-model demand → offload / shed shares; fixes each new request's fate. See the module docstring.

    Args:
        replan_ms: least driver time between two checks of the demand.
        replan_delta: re-plan when the demand (processor-ms per ms, summed over models at their
            fastest processor) moved this much since the last plan, counting only models whose
            demand moved by more than ``replan_rel`` of what the plan assumed (a dead band for the
            jitter of a cascade stage's rate).
        replan_rel: see replan_delta.
        target: local utilization above which the plan offloads (then sheds).
        shed_target: the most local utilization the plan allows before it sheds.
        safe_margin: a model is *safe* for the cloud when its expected cloud latency × (1 +
            safe_margin) fits its deadline budget; it is a candidate at all with risky_margin.
        risky_margin: see safe_margin.
        cloud_util: the plan keeps the cloud's slots at most this busy.
        stream_timeout: a stream silent for this many of its periods has stopped.
        stream_keep: how many of a stream's latest arrivals its rate is measured over.

    Raises:
        ValueError: an option that is not > 0 (stream_keep: not an int >= 2).
    """

    __slots__ = (
        "_budget",
        "_credit",
        "_planned",
        "_shares",
        "_streams",
        "_t_check",
        "_whole",
        "cloud_util",
        "fates",
        "kept",
        "replan_delta",
        "replan_ms",
        "replan_rel",
        "replans",
        "reserved",
        "risky_margin",
        "safe_margin",
        "shed_target",
        "target",
    )

    def __init__(self, replan_ms: float = 50.0, replan_delta: float = 0.05, replan_rel: float = 0.05,
                 target: float = 0.85,
                 shed_target: float = 1.0, safe_margin: float = 0.8, risky_margin: float = 0.15,
                 cloud_util: float = 0.9, stream_timeout: float = 6.0, stream_keep: int = 32) -> None:
        for label, value in (("replan_ms", replan_ms), ("replan_delta", replan_delta),
                             ("replan_rel", replan_rel), ("target", target),
                             ("shed_target", shed_target), ("safe_margin", safe_margin),
                             ("risky_margin", risky_margin), ("cloud_util", cloud_util),
                             ("stream_timeout", stream_timeout)):
            if not value > 0:
                raise ValueError(f"{label} must be > 0, got {value}")
        if not (isinstance(stream_keep, int) and stream_keep >= 2):
            raise ValueError(f"stream_keep must be an int >= 2, got {stream_keep!r}")
        self.replan_ms = replan_ms
        self.replan_delta = replan_delta
        self.replan_rel = replan_rel
        self.target = target
        self.shed_target = shed_target
        self.safe_margin = safe_margin
        self.risky_margin = risky_margin
        self.cloud_util = cloud_util
        #: request id -> LOCAL / CLOUD / SHED, for requests seen and (maybe) still pending
        self.fates: dict[int, int] = {}
        #: share of the requests (by rate) the last plan keeps (1.0: it sheds nothing)
        self.kept = 1.0
        #: processor -> (model, budget ms): the tightest running model whose fastest processor it is, by a
        #: wide margin (see edgert's placement: requests with time to spare leave it to that model)
        self.reserved: dict[str, tuple[str, float]] = {}
        #: how many times the LP was solved (a measure of the plan's cost)
        self.replans = 0
        self._streams = Streams(stream_keep, stream_timeout, replan_rel)
        self._budget: dict[str, float] = {}      # ms from arrival to effective deadline, averaged
        self._shares: dict[str, tuple[float, float]] = {}   # model -> (offload share, shed share)
        self._whole: frozenset[str] = frozenset()
        self._credit: dict[str, list[float]] = {}
        self._t_check: float | None = None
        self._planned: dict[str, float] = {}     # model -> demand (processor-ms per ms) of the last plan

    @property
    def shares(self) -> dict[str, tuple[float, float]]:
        """``{model: (offload share, shed share)}`` of the current plan (models with neither left out)."""
        return dict(self._shares)

    @property
    def whole(self) -> frozenset[str]:
        """Models the current plan sends to the cloud entirely."""
        return self._whole

    @property
    def utilization(self) -> float:
        """How overloaded the last plan found the device: 1 / the share of requests it keeps (1.0: none shed)."""
        return 1.0 / self.kept if self.kept > 0 else math.inf

    def fate(self, req: RequestView) -> int:
        """Count a newly seen request and fix its fate (LOCAL, CLOUD or SHED) from the plan's shares.

        A request without a deadline is best-effort: it can never be late, so it is neither
        counted in the demand the plan guards nor offloaded or shed (always LOCAL).
        """
        if req.deadline_ms == math.inf:
            self.fates[req.id] = LOCAL
            return LOCAL
        m = req.model
        self._streams.see(req)
        budget = req.deadline_ms - req.downstream_ms - req.arrival_ms
        old = self._budget.get(m)
        self._budget[m] = budget if old is None else old + _BUDGET_ALPHA * (budget - old)
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

    def update(self, pending: Sequence[RequestView], now_ms: float, est: Latency, local: Sequence[str],
               cloud: str | None, cloud_slots: int) -> None:
        """Check the demand (at most every ``replan_ms``, and only when a stream started, stopped or changed
        its rate) and re-plan when it moved by ``replan_delta`` or more."""
        if self._t_check is None:
            self._t_check = now_ms
            return
        if len(self.fates) > 2 * len(pending) + 256:   # forget the fates of requests no longer pending
            live = {r.id for r in pending}
            self.fates = {i: f for i, f in self.fates.items() if i in live}
        if now_ms - self._t_check < self.replan_ms or not self._streams.due(now_ms):
            return
        self._t_check = now_ms
        rates, head = self._streams.rates(now_ms)
        load: dict[str, float] = {}
        for m, r in rates.items():
            best = min((ms for p in local if (ms := est(m, p)) is not None), default=None)
            if best is None and cloud is not None:
                best = est(m, cloud)
            load[m] = r * (best or 0.0)
        res: dict[str, tuple[str, float]] = {}
        for m in sorted(rates):
            budget = self._budget.get(m, 0.0)
            row = sorted((ms, p) for p in local if (ms := est(m, p)) is not None and ms <= budget)
            if row and (len(row) == 1 or row[1][0] >= _RESERVE_GAIN * row[0][0]):
                p = row[0][1]
                if p not in res or budget < res[p][1]:
                    res[p] = (m, budget)
        self.reserved = res
        last = self._planned
        moved = 0.0
        for m in load.keys() | last.keys():
            new, old = load.get(m, 0.0), last.get(m, 0.0)
            if abs(new - old) > self.replan_rel * old:   # a cascade stage's rate jitters by a few %
                moved += abs(new - old)
        if moved < self.replan_delta:
            return
        self._planned = load
        demand = [Demand(m, rates[m], self._budget.get(m, 0.0), 2.0 if head[m] else 1.0) for m in sorted(rates)]
        work = [[None if (ms := est(d.model, p)) is None or ms > d.budget_ms else d.rate * ms for p in local]
                for d in demand]
        if local and all(any(v is not None for v in row) for row in work) and \
                greedy_utilization(work) <= self.target:
            self._shares, self.kept = {}, 1.0   # an upper bound under the target: no LP needed
            self._whole = frozenset()
            return
        self.replans += 1
        self._shares, self.kept = plan_shares(
            demand, est, local, cloud, cloud_slots, target=self.target, shed_target=self.shed_target,
            cloud_util=self.cloud_util, safe_margin=self.safe_margin, risky_margin=self.risky_margin)
        self._whole = frozenset(m for m, (off, _) in self._shares.items() if off >= 1.0 - _MIN_SHARE)
