"""edgert's decision on a lone pending request, without the general placement (a sync call's cost).

Two shortcuts :meth:`~scheduler.policies.edgert.EdgertPolicy.decide` takes when they apply: :func:`best_effort`
(a request without a deadline while every processor is idle and local) and :func:`lone` (one request pending,
no plan in force, no cloud, placed in time). Each gives :meth:`~scheduler.policies.edgert.EdgertPolicy._place`'s
answer with its state change, or None for the general path; ``tests/scheduler/test_edgert_lone.py`` pins the
two together over random snapshots. Neither reads the policy: what they need of it comes as arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

from scheduler.estimator import LatencyEstimator
from scheduler.policies._overload import SHED, OverloadPlan
from scheduler.policies._slots import _SLOWER, Processors, _processor_table, _row
from scheduler.types import Assignment, LatencyModel, ProcessorView, RequestView

_INF = float("inf")
_MS = itemgetter(1)   # a row entry's expected ms


class IdleTable:
    """The processor table of the last all-idle snapshot seen. A live runtime passes one such tuple of views
    while every worker is idle; its table differs only in the clock, so it is built once."""

    __slots__ = ("processors", "table")

    def __init__(self) -> None:
        self.processors: Sequence[ProcessorView] | None = None
        self.table: Processors | None = None

    def of(self, processors: Sequence[ProcessorView], now_ms: float) -> Processors | None:
        """The table of ``processors`` at ``now_ms`` (a copy: a decision counts it down) when every one is idle,
        healthy and local; else None."""
        return self.table.at(now_ms) if self.holds(processors) else None   # type: ignore[union-attr]  # (holds)

    def names(self, processors: Sequence[ProcessorView]) -> list[str] | None:
        """The names of ``processors`` when every one is idle, healthy and local; else None."""
        return self.table.names if self.holds(processors) else None   # type: ignore[union-attr]

    def holds(self, processors: Sequence[ProcessorView]) -> bool:
        """Whether every one of ``processors`` is idle, healthy and local; the table is then theirs."""
        if processors is self.processors:
            return True
        for p in reversed(processors):   # a cloud, which drivers list last, or a busy processor: met first
            if p.kind == "cloud" or p.busy_until_ms > 0.0 or p.queued_ms != 0.0 or not p.available:
                return False
        self.processors, self.table = processors, _processor_table(processors, 0.0)
        return True


def best_effort(req: RequestView, processors: Sequence[ProcessorView], estimator: LatencyModel, idle: IdleTable,
                reserved: dict[str, tuple[str, float]] | None) -> list[Assignment] | None:
    """A lone request without a deadline while every processor is idle and local: the fastest one that
    runs it (the first of equals, as :meth:`EdgertPolicy._place`); None for the general path (a cloud, an
    unhealthy or busy processor, one ``reserved`` for another stream, or none that runs it).

    It skips what only deadlines need: the plan's rate tracking never counts a request without a
    deadline, and the ager's and the plan's time-gated checks run at the next decision, before anything
    reads what they update.
    """
    if not idle.holds(processors):
        return None
    names = idle.table.names   # type: ignore[union-attr]  # (holds says so)
    lookup = estimator.ema_table().get if type(estimator) is LatencyEstimator else None
    model, allowed = req.model, req.allowed
    row = _row(lookup, estimator, model, names)
    if allowed is not None:
        row = [(i, ms) for i, ms in row if names[i] in allowed]
    best, best_ms = min(row, key=_MS, default=(-1, _INF))   # the fastest; min keeps the first of equals
    if best_ms == _INF:
        return None
    held = reserved.get(names[best]) if reserved is not None else None
    if held is not None and held[0] != model:
        return None   # another stream reserved it: _idle_choice may leave it to that one
    return [Assignment(req.id, names[best])]


def lone(req: RequestView, procs: Processors, estimator: LatencyModel, now_ms: float, *, plan: OverloadPlan | None,
         k_local: float, eft_slack: float) -> list[Assignment] | None:
    """The decision on one pending request with no plan in force (``plan``: the idle overload plan, or None when
    the policy runs without one), no energy objective and no cloud, when it is placed in time (free now, or a
    claim after a wait); None for the general path (:meth:`EdgertPolicy._place`).

    The same answer and the same state change as :meth:`EdgertPolicy._place` on that snapshot, at a third of
    its cost (a sync caller's every request comes here).
    """
    names, ready = procs.names, procs.ready
    if True in procs.is_cloud:
        return None
    seen = -1 if plan is None else plan.fates.get(req.id, -1)   # the fate fixed when it was first seen
    if seen == SHED:
        return None
    model, deadline, allowed = req.model, req.deadline_ms, req.allowed
    lookup = estimator.ema_table().get if type(estimator) is LatencyEstimator else None
    row = _row(lookup, estimator, model, names)
    if allowed is not None:
        row = [(i, ms) for i, ms in row if names[i] in allowed]
    if not row:
        return None   # unsupported: _place says why
    first_seen = plan is not None and seen < 0
    if deadline == _INF and min(ready) > now_ms:
        if first_seen:
            plan.fate(req)   # type: ignore[union-attr]  # (first_seen says so)
        return []   # best-effort work waits for a free processor (as _place)
    target = deadline - req.downstream_ms
    local, local_f, idle, idle_f = -1, _INF, -1, _INF   # Candidates' local and idle, without a cloud
    for i, ms in row:
        start = ready[i]
        finish = start + ms
        if finish < local_f:
            local, local_f = i, finish
        if start <= now_ms and finish < idle_f and start + k_local * ms <= target:
            idle, idle_f = i, finish
    local_ms = local_f - ready[local]
    local_in_time = ready[local] + k_local * local_ms <= target
    faster_later = local_f + (eft_slack * local_ms if idle_f - ready[idle] < _SLOWER * local_ms else 0.0) < idle_f
    if idle >= 0 and (local == idle or not local_in_time or not faster_later):
        held = plan.reserved.get(names[idle]) if plan is not None and plan.reserved else None
        if held is not None and held[0] != model and target - now_ms > 2.0 * held[1]:
            return None   # leave it to the tighter stream that reserved it (_idle_choice)
        out = [Assignment(req.id, names[idle])]
    elif local_in_time:
        out = []   # in time after a wait: it stays pending with its claim
    else:
        return None   # late everywhere: swap, cloud, supersede or drop (late_choice)
    if first_seen:
        plan.fate(req)   # type: ignore[union-attr]  # counted as _place counts a request first seen (LOCAL)
    return out
