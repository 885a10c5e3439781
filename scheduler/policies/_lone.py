"""edgert's decision on a lone pending request, without the general placement (a sync call's cost).

Two shortcuts :meth:`~scheduler.policies.edgert.EdgertPolicy.decide` takes when they apply: :func:`best_effort`
(a request without a deadline while every processor is idle and local) and :func:`lone` (one request pending,
no plan in force, no cloud, placed in time). Each gives :meth:`~scheduler.policies.edgert.EdgertPolicy._place`'s
answer with its state change, or None for the general path; ``tests/scheduler/test_edgert_lone.py`` pins the
two together over random snapshots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.estimator import LatencyEstimator
from scheduler.policies._overload import SHED
from scheduler.policies._slots import _SLOWER, Processors, _processor_table, _row
from scheduler.types import Assignment, LatencyModel, RequestView, SchedulerView

if TYPE_CHECKING:
    from scheduler.policies.edgert import EdgertPolicy

_INF = float("inf")


def best_effort(policy: EdgertPolicy, req: RequestView, view: SchedulerView, now_ms: float) -> list[Assignment] | None:
    """A lone request without a deadline while every processor is idle and local: the fastest one that
    runs it (the first of equals, as :meth:`EdgertPolicy._place`); None for the general path (a cloud, an unhealthy or
    busy processor, a reserved one, or none that runs it).

    It skips what only deadlines need: the plan's rate tracking never counts a request without a
    deadline, and the ager's and the plan's time-gated checks run at the next decision, before anything
    reads what they update. The placement is :meth:`EdgertPolicy._place`'s (``tests/scheduler/test_edgert_lone.py``).
    """
    processors = view.processors
    if processors is not policy._idle[0]:
        for p in processors:
            if p.busy_until_ms > 0.0 or p.queued_ms != 0.0 or not p.available or p.kind == "cloud":
                return None
        policy._idle = (processors, _processor_table(processors, now_ms))
    estimator = view.estimator
    est = estimator.ema_table().get if type(estimator) is LatencyEstimator else None
    names = policy._idle[1].names   # type: ignore[union-attr]  # set above
    model, allowed = req.model, req.allowed
    best, best_ms = -1, _INF
    for i, name in enumerate(names):   # _row's lookups, inline
        ms = est((model, name)) if est is not None else estimator.expected_ms(model, name)
        if ms is not None and ms < best_ms and (allowed is None or name in allowed):
            best, best_ms = i, ms
    if best < 0:
        return None
    held = policy.plan.reserved.get(names[best]) if policy.use_plan else None
    if held is not None and held[0] != model:
        return None   # another stream reserved it: _idle_choice may leave it to that one
    return [Assignment(req.id, names[best])]

def lone(policy: EdgertPolicy, req: RequestView, procs: Processors, estimator: LatencyModel,
         now_ms: float) -> list[Assignment] | None:
    """The decision on one pending request with no plan in force, no energy objective and no cloud, when
    it is placed in time (free now, or a claim after a wait); None for the general path (:meth:`EdgertPolicy._place`).

    The same answer and the same state change as :meth:`EdgertPolicy._place` on that snapshot, at a third of its cost
    (a sync caller's every request comes here); ``tests/scheduler/test_edgert_lone.py`` pins
    the two together over random snapshots.
    """
    names, ready, is_cloud = procs.names, procs.ready, procs.is_cloud
    if True in is_cloud:
        return None
    fates = policy.plan.fates if policy.use_plan else None
    seen = -1 if fates is None else fates.get(req.id, -1)   # the fate fixed when it was first seen
    if seen == SHED:
        return None
    model, deadline, allowed = req.model, req.deadline_ms, req.allowed
    lookup = estimator.ema_table().get if type(estimator) is LatencyEstimator else None
    row = _row(lookup, estimator, model, names)
    if allowed is not None:
        row = [(i, ms) for i, ms in row if names[i] in allowed]
    if not row:
        return None   # unsupported: _place says why
    if deadline == _INF and min(ready) > now_ms:
        out: list[Assignment] = []   # best-effort work waits for a free processor (as _place)
        if fates is not None and seen < 0:
            policy.plan.fate(req)
        return out
    target, k_local = deadline - req.downstream_ms, policy.k_local
    local, local_f, idle, idle_f = -1, _INF, -1, _INF
    for i, ms in row:
        f = (start := ready[i]) + ms
        if f < local_f:
            local, local_f = i, f
        if start <= now_ms and f < idle_f and start + k_local * ms <= target:
            idle, idle_f = i, f
    local_ms = local_f - ready[local]
    reserved = policy.plan.reserved if policy.use_plan else None
    if idle >= 0 and (local == idle or ready[local] + k_local * local_ms > target
                      or local_f + (policy.eft_slack * local_ms if idle_f - ready[idle] < _SLOWER * local_ms
                                    else 0.0) >= idle_f):
        if reserved and (held := reserved.get(names[idle])) is not None and held[0] != model \
                and target - now_ms > 2.0 * held[1]:
            return None   # leave it to the tighter stream that reserved it (_idle_choice)
        out = [Assignment(req.id, names[idle])]
    elif ready[local] + k_local * local_ms <= target:
        out = []   # in time after a wait: it stays pending with its claim
    else:
        return None   # late everywhere: swap, cloud, supersede or drop (_late_choice)
    if fates is not None and seen < 0:
        policy.plan.fate(req)   # counted as _place counts a request first seen (no plan in force: LOCAL)
    return out
