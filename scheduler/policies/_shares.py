"""The overload plan's linear program: per-model demand → shares to offload and to shed (numpy only).

:class:`~scheduler.policies._overload.OverloadPlan` measures each model's
demand (:class:`Demand`) and calls :func:`plan_shares` when the device may be
overloaded; :func:`greedy_utilization` is the cheap test that it is not.

The program is over the fractions of each model's rate that run on each local
processor, go to the cloud, or are shed:

* a processor is a candidate for a model only if one run fits the model's
  deadline budget (the cloud: with ``risky_margin`` headroom);
* local processors are busy at most ``shed_target`` (1.0: all of their
  time), the cloud's slots at most ``cloud_util``;
* the objective, in strict priority: shed as few requests as possible (a
  cascade's first stage counts for two, its later stage is lost with it);
  then keep every local processor's utilization under ``target`` (a
  non-preemptive processor near 100 % misses deadlines by queueing); then use
  as little cloud time as possible, each cloud slot-millisecond of a model
  priced up by the odds that its round trip comes back late
  (:func:`late_odds`: a log-normal jitter of ``cloud_jitter`` on the
  expected round trip, against the model's budget), so of two models that
  relieve the device alike the cloud takes the one it serves more surely
  (pixel4's hand tracking, ~7 % late, before depth refinement, ~16 %).

So the cloud takes exactly the models whose offload relieves the busiest
local processors most per priced cloud slot-millisecond (a 44 ms speech model
before a 1 ms keyword model), and shedding picks the requests that cost the
most local time per met deadline. After the LP, a *long* model the cloud
serves safely (one local run takes more than half the budget of another
running model) goes to the cloud whole while the cloud has room: the LP
counts time, not the non-preemptive blocking such a run causes.

The weights are priorities, not prices of one currency: a shed request costs
``_W_SHED``, far above anything else, and local overflow above the target
``_W_OVER`` per unit of utilization, well above any cloud time. Measured on
the benchmark grid (``benchmarks/schedulers.py``, seeds 0-2), the loss weight
``_W_LOSS`` changes nothing between 10 and 100 and makes the device run
hotter past ~1000 (local overflow becomes cheaper than a late round trip),
which misses more: a local queue at 100 % loses more than the cloud's jitter.
Times are ms; rates are requests per ms.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.policies._lp import minimize

#: objective weights (see the module docstring): shed request rate, local overflow, cloud slot time, its loss odds
_W_SHED, _W_OVER, _W_CLOUD, _W_LOSS = 1e5, 100.0, 1.0, 30.0
#: a planned share smaller than this is no share (solver round-off)
MIN_SHARE = 1e-4

Latency = Callable[[str, str], "float | None"]


def late_odds(expected_ms: float, budget_ms: float, jitter: float) -> float:
    """Odds that a run expected to take ``expected_ms`` exceeds ``budget_ms`` under log-normal jitter.

    The run takes ``expected_ms × F`` with ``F`` log-normal of mean 1 and sigma ``jitter`` (a network
    round trip's spread; the simulator's cloud default is 0.2). Treating the whole expected time as
    jittered (the transfer part is steadier in reality) errs towards calling the cloud late.
    """
    if budget_ms <= 0.0:
        return 1.0
    if jitter <= 0.0:
        return 0.0 if expected_ms <= budget_ms else 1.0
    z = (math.log(budget_ms / expected_ms) + 0.5 * jitter * jitter) / jitter
    return 0.5 * math.erfc(z / math.sqrt(2.0))


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
                safe_margin: float = 0.8, risky_margin: float = 0.05,
                cloud_jitter: float = 0.2) -> tuple[dict[str, tuple[float, float]], float]:
    """Solve the overload LP (module docstring): ``({model: (offload share, shed share)}, kept share)``.

    Only models with a nonzero share are in the dict; the kept share is the fraction of all
    requests (by rate) the plan does not shed. A model no processor can run within its budget is
    left out (the per-request logic drops what cannot make it).
    """
    models = [d for d in demand if d.rate > 0.0]
    keep, lat_local, lat_cloud = _in_budget(models, est, local, cloud, risky_margin)
    n = len(keep)
    if n == 0:
        return {}, 1.0
    cols, cost = _variables(keep, lat_local, lat_cloud, cloud_jitter)
    c_vec, a, b, basis = _constraints(keep, lat_local, lat_cloud, cols, cost, len(local), cloud is not None,
                                      target, shed_target, cloud_util * cloud_slots)
    x = minimize(c_vec, a, b, basis)
    off = [0.0] * n
    shed = [0.0] * n
    for j, (ci, p) in enumerate(cols):
        if p == -1:
            off[ci] = x[j]
        elif p == -2:
            shed[ci] = x[j]
    _long_models_whole(keep, lat_local, lat_cloud, off, shed, cloud_util * cloud_slots, safe_margin)
    shares = {}
    for ci, d in enumerate(keep):
        o = off[ci] if off[ci] > MIN_SHARE else 0.0
        s = shed[ci] if shed[ci] > MIN_SHARE else 0.0
        if o > 0.0 or s > 0.0:
            shares[d.model] = (min(o, 1.0), min(s, 1.0 - min(o, 1.0)))
    total = sum(d.rate for d in models)
    kept = 1.0 - sum(keep[ci].rate * shed[ci] for ci in range(n)) / total if total > 0 else 1.0
    return shares, kept


def _in_budget(models: Sequence[Demand], est: Latency, local: Sequence[str], cloud: str | None,
               risky_margin: float) -> tuple[list[Demand], list[list[float | None]], list[float | None]]:
    """The models some processor runs within their budget, and for each its local latencies (None where
    over budget or unsupported) and its cloud latency (None where over budget with ``risky_margin``)."""
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
    return keep, lat_local, lat_cloud


def _variables(keep: Sequence[Demand], lat_local: list[list[float | None]], lat_cloud: list[float | None],
               cloud_jitter: float) -> tuple[list[tuple[int, int]], list[float]]:
    """The LP's share variables ``(model index, processor index; -1 cloud, -2 shed)`` and their costs."""
    cols: list[tuple[int, int]] = []
    cost: list[float] = []
    for c, d in enumerate(keep):
        for p, ms in enumerate(lat_local[c]):
            if ms is not None:
                cols.append((c, p))
                cost.append(0.0)
        cms = lat_cloud[c]
        if cms is not None:
            cols.append((c, -1))
            # cloud slot time, dearer by the odds that the round trip's jitter makes it late
            cost.append((_W_CLOUD + _W_LOSS * late_odds(cms, d.budget_ms, cloud_jitter)) * d.rate * cms)
        cols.append((c, -2))
        cost.append(_W_SHED * d.value * d.rate)
    return cols, cost


def _constraints(keep: Sequence[Demand], lat_local: list[list[float | None]], lat_cloud: list[float | None],
                 cols: list[tuple[int, int]], cost: list[float], rows_local: int, has_cloud: bool, target: float,
                 shed_target: float, cloud_cap: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """``(c, a, b, basis)`` of the LP in :func:`minimize`'s form: the shares, then per local processor an
    overflow above ``target``, then the slacks of the inequality rows (they and the shed shares are the
    starting basis). Rows: each model's shares sum to 1; per local processor a hard cap (``shed_target``)
    and an overflow row; the cloud's slot cap (``cloud_cap``, slot-ms per ms)."""
    n, n_frac = len(keep), len(cols)
    m = n + 2 * rows_local + (1 if has_cloud else 0)
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
            w = d.rate * lat_local[ci][p]         # type: ignore[operator]  # a column only where supported
            a[n + p, j] = w                       # hard cap row
            a[n + rows_local + p, j] = w          # overflow row
        elif p == -1 and has_cloud:
            a[n + 2 * rows_local, j] = d.rate * lat_cloud[ci]   # type: ignore[operator]
    b[:n] = 1.0
    for p in range(rows_local):
        b[n + p] = shed_target
        b[n + rows_local + p] = target
        a[n + rows_local + p, n_frac + p] = -1.0  # minus the overflow above target
    if has_cloud:
        b[n + 2 * rows_local] = cloud_cap
    for r in range(n, m):
        s = n_frac + n_over + (r - n)
        a[r, s] = 1.0
        basis[r] = s
    return c_vec, a, b, basis


def _long_models_whole(keep: Sequence[Demand], lat_local: list[list[float | None]], lat_cloud: list[float | None],
                       off: list[float], shed: list[float], cloud_cap: float, safe_margin: float) -> None:
    """Send a long model the cloud serves safely there whole (``off[ci] = 1``), longest first, while the
    cloud has room: each of its local runs would hold a (non-preemptive) processor longer than half the
    budget of another model that needs it."""
    n = len(keep)
    room = cloud_cap - sum(keep[ci].rate * lat_cloud[ci] * off[ci]   # type: ignore[operator, misc]
                           for ci in range(n) if off[ci] > 0)
    run = [min((v for v in row if v is not None), default=0.0) for row in lat_local]
    for ci in sorted(range(n), key=lambda k: -run[k]):
        cms = lat_cloud[ci]
        if cms is None or shed[ci] > MIN_SHARE or off[ci] >= 1.0 - MIN_SHARE \
                or cms * (1.0 + safe_margin) > keep[ci].budget_ms:
            continue
        others = [keep[k].budget_ms for k in range(n) if k != ci]
        if not others or run[ci] <= 0.5 * min(others):
            continue
        extra = keep[ci].rate * cms * (1.0 - off[ci])
        if extra <= room:
            room -= extra
            off[ci] = 1.0


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
