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

The plan is one small linear program (:mod:`~scheduler.policies._shares`):
which share of each model to run locally, offload or shed, the cloud priced
by the odds its round trip is late. The plan also says whether the device is
*overloaded* (the cheap greedy bound is over ``target``, so the LP was
needed) and the *tightest* running model's budget: edgert's placement keeps a
long local run (more than half that budget) off the device while it is
overloaded and the cloud serves the run safely.

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

from scheduler.policies._shares import (
    MIN_SHARE,
    Demand,
    Latency,
    greedy_utilization,
    plan_shares,
)
from scheduler.policies._streams import Streams
from scheduler.types import RequestView

__all__ = ["CLOUD", "LOCAL", "SHED", "Demand", "OverloadPlan", "greedy_utilization", "plan_shares"]

LOCAL, CLOUD, SHED = 0, 1, 2

#: weight of the newest request's budget in its model's average budget (a cascade stage's varies)
_BUDGET_ALPHA = 0.05
#: a model needs its fastest processor when the next fastest takes this many times as long
_RESERVE_GAIN = 1.25


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
        cloud_jitter: log-normal sigma of a cloud round trip around its expected time, for the odds that
            it comes back late (:func:`~scheduler.policies._shares.late_odds`).
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
        "cloud_jitter",
        "cloud_util",
        "fates",
        "kept",
        "on_demand",
        "overloaded",
        "replan_delta",
        "replan_ms",
        "replan_rel",
        "replans",
        "reserved",
        "risky_margin",
        "safe_margin",
        "shed_target",
        "target",
        "tight_ms",
    )

    def __init__(self, replan_ms: float = 50.0, replan_delta: float = 0.05, replan_rel: float = 0.05,
                 target: float = 0.85,
                 shed_target: float = 1.0, safe_margin: float = 0.8, risky_margin: float = 0.05,
                 cloud_util: float = 0.9, cloud_jitter: float = 0.2, stream_timeout: float = 6.0,
                 stream_keep: int = 32) -> None:
        for label, value in (("replan_ms", replan_ms), ("replan_delta", replan_delta),
                             ("replan_rel", replan_rel), ("target", target),
                             ("shed_target", shed_target), ("safe_margin", safe_margin),
                             ("risky_margin", risky_margin), ("cloud_util", cloud_util),
                             ("cloud_jitter", cloud_jitter), ("stream_timeout", stream_timeout)):
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
        self.cloud_jitter = cloud_jitter
        #: request id -> LOCAL / CLOUD / SHED, for requests seen and (maybe) still pending
        self.fates: dict[int, int] = {}
        #: share of the requests (by rate) the last plan keeps (1.0: it sheds nothing)
        self.kept = 1.0
        #: processor -> (model, budget ms): the tightest running model whose fastest processor it is, by a
        #: wide margin (see edgert's placement: requests with time to spare leave it to that model)
        self.reserved: dict[str, tuple[str, float]] = {}
        #: the last check found the device overloaded (the greedy bound over ``target``: the LP was needed)
        self.overloaded = False
        #: the least budget (ms, arrival to effective deadline) of the models running now (inf: none)
        self.tight_ms = math.inf
        #: how many times the LP was solved (a measure of the plan's cost)
        self.replans = 0
        self._streams = Streams(stream_keep, stream_timeout, replan_rel)
        self._budget: dict[str, float] = {}      # ms from arrival to effective deadline, averaged
        self._shares: dict[str, tuple[float, float]] = {}   # model -> (offload share, shed share)
        self._whole: frozenset[str] = frozenset()
        self._credit: dict[str, list[float]] = {}
        self._t_check: float | None = None
        self._planned: dict[str, float] = {}     # model -> demand (processor-ms per ms) of the last plan
        #: called as ``on_demand(rates, budgets, est, local)`` whenever the demand moved (requests per ms and
        #: ms from arrival to effective deadline by model; edgert's energy objective plans by it)
        self.on_demand: Callable[[dict[str, float], dict[str, float], Latency, Sequence[str]], None] | None = None

    @property
    def shares(self) -> dict[str, tuple[float, float]]:
        """``{model: (offload share, shed share)}`` of the current plan (models with neither left out)."""
        return dict(self._shares)

    @property
    def idle(self) -> bool:
        """No plan in force: it offloads, sheds and sends whole nothing (every request's fate is LOCAL)."""
        return not self._shares and not self._whole and not self.overloaded

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
        rid, m, deadline = req.id, req.model, req.deadline_ms
        if deadline == math.inf:
            self.fates[rid] = LOCAL
            return LOCAL
        self._streams.see(req)
        budget = deadline - req.downstream_ms - req.arrival_ms
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
                    # a burst's rate is no ground to shed: only a stream that has shown its rate over one
                    # budget (Streams.established); another is dropped only if it cannot be in time
                    fate = SHED if self._streams.established(req) else LOCAL
        self.fates[rid] = fate
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
        self.tight_ms = min((self._budget.get(m, math.inf) for m in rates), default=math.inf)
        last = self._planned
        moved = 0.0
        for m in load.keys() | last.keys():
            new, old = load.get(m, 0.0), last.get(m, 0.0)
            if abs(new - old) > self.replan_rel * old:   # a cascade stage's rate jitters by a few %
                moved += abs(new - old)
        if moved < self.replan_delta:
            return
        self._planned = load
        if self.on_demand is not None:
            self.on_demand(rates, self._budget, est, local)
        demand = [Demand(m, rates[m], self._budget.get(m, 0.0), 2.0 if head[m] else 1.0) for m in sorted(rates)]
        work = [[None if (ms := est(d.model, p)) is None or ms > d.budget_ms else d.rate * ms for p in local]
                for d in demand]
        if local and all(any(v is not None for v in row) for row in work) and \
                greedy_utilization(work) <= self.target:
            self._shares, self.kept = {}, 1.0   # an upper bound under the target: no LP needed
            self._whole = frozenset()
            self.overloaded = False
            return
        self.overloaded = True
        self.replans += 1
        self._shares, self.kept = plan_shares(
            demand, est, local, cloud, cloud_slots, target=self.target, shed_target=self.shed_target,
            cloud_util=self.cloud_util, safe_margin=self.safe_margin, risky_margin=self.risky_margin,
            cloud_jitter=self.cloud_jitter)
        self._whole = frozenset(m for m, (off, _) in self._shares.items() if off >= 1.0 - MIN_SHARE)
