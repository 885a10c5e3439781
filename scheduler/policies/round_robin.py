"""Band's ``round_robin``: each idle worker takes the first queued job it can run.

What Band does (``band/scheduler/round_robin_scheduler.cc``): for every idle
worker (waiting time 0), in worker-id order, it scans the request queue from
the front and hands the worker the first job that has a subgraph for it; busy
workers get nothing. No latency estimate is consulted. The planner's SLO check
on enqueue finishes a job whose deadline has already passed instead of running
it and asks for an immediate reschedule, so the worker then takes the next job
(modelled here by continuing the scan for the same worker).

Here workers are the snapshot's available processors in view order, and the
queue is ``view.pending`` in arrival order.
"""

from __future__ import annotations

from typing import ClassVar

from scheduler.policies._band import PAST_DEADLINE, past_deadline, row_cache, unsupported
from scheduler.types import Assignment, SchedulerView


class RoundRobinPolicy:
    """Idle processors, in order, each take the oldest pending request they support."""

    name: ClassVar[str] = "round_robin"

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """One request per idle processor, oldest first (pure in view and now_ms)."""
        row = row_cache(view)
        out: list[Assignment] = []
        taken: set[int] = set()
        for req in view.pending:
            if not row(req):
                out.append(unsupported(req))
                taken.add(req.id)
        for p in view.processors:
            if not (p.available and p.is_idle(now_ms)):
                continue
            for req in view.pending:
                if req.id in taken or all(name != p.name for name, _ in row(req)):
                    continue
                taken.add(req.id)
                if past_deadline(req, now_ms):
                    out.append(Assignment.drop(req.id, PAST_DEADLINE))
                    continue
                out.append(Assignment(req.id, p.name))
                break
        return out
