"""Band's ``heterogeneous_earliest_finish_time``: like shortest expected latency, idle workers only.

What Band does (``band/scheduler/heterogeneous_earliest_finish_time_scheduler.cc``,
``reserve = false``, window 10 in Band's default config):

1. While the window (the first ``window_size`` jobs of the queue) is not used up
   and some worker is idle: copy the workers' waiting times; then repeatedly
   pick, among the window's jobs not yet yielded (first job of each model
   only), the one whose shortest latency (min over workers of waiting +
   expected latency) is the *largest*.
2. If that job's best worker is idle, dispatch it there, remove it from the
   queue and shrink the window by one. If not, the job *yields*: its expected
   latency is added to that worker's waiting time in the local copy (so later
   picks see the worker as more loaded) and the next most urgent job is tried.
   When every job has yielded, the decision ends.
3. The planner's SLO check drops a job dispatched after its deadline.

Here a dispatched processor stops being idle for the rest of the decision
(its waiting time becomes the job's expected latency, as Band's global-queue
worker reports for a job not yet started).
"""

from __future__ import annotations

from typing import ClassVar

from scheduler.policies._band import (
    PAST_DEADLINE,
    WindowedPolicy,
    idle_names,
    past_deadline,
    row_cache,
    runnable,
    shortest,
    waiting_ms,
)
from scheduler.types import Assignment, SchedulerView


class HeterogeneousEarliestFinishTimePolicy(WindowedPolicy):
    """Largest shortest-latency job first, dispatched only to an idle processor, else it yields."""

    name: ClassVar[str] = "heterogeneous_earliest_finish_time"

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """See the module docstring (pure in view and now_ms)."""
        row = row_cache(view)
        out, requests = runnable(view, row)
        window = min(self.window_size, len(requests))
        waiting = waiting_ms(view, now_ms)
        free = idle_names(view, now_ms)
        while window > 0 and free:
            local = dict(waiting)
            yielded: set[int] = set()
            while True:
                target_i, target_p, largest, target_ms = -1, None, -1.0, 0.0
                seen: set[tuple[str, tuple[str, ...] | None]] = set()
                for i in range(window):
                    req = requests[i]
                    if req.id in yielded:
                        continue
                    key = (req.model, req.allowed)
                    if key in seen:
                        continue
                    seen.add(key)
                    p, total, ms = shortest(row(req), local)
                    if total > largest:
                        target_i, target_p, largest, target_ms = i, p, total, ms
                if target_i < 0:
                    return out  # every job yielded: nobody wants to be scheduled now
                if target_p in free:
                    break
                local[target_p] += target_ms  # type: ignore[index]
                yielded.add(requests[target_i].id)
            req = requests.pop(target_i)
            window -= 1
            if past_deadline(req, now_ms):
                out.append(Assignment.drop(req.id, PAST_DEADLINE))
                continue
            free.discard(target_p)  # type: ignore[arg-type]
            waiting[target_p] = target_ms  # type: ignore[index]
            out.append(Assignment(req.id, target_p))
        return out
