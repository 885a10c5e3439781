"""Band's ``shortest_expected_latency``: most urgent job first, to its fastest finishing worker.

What Band does (``band/scheduler/shortest_expected_latency_scheduler.cc``):

1. Take a window of the first ``window_size`` jobs of the queue (Band's default
   config: 10).
2. Repeat until the window is empty: refresh the workers' waiting times; for
   each job in the window (only the first job of each model is looked at, the
   others would give the same answer) compute its *shortest latency*, the
   minimum over workers of ``waiting + expected latency``; the most urgent job
   is the one whose shortest latency is the *largest* ("no, that's not a
   typo"); arrival time is deliberately ignored. Enqueue it on the worker that
   gave that latency and remove it from the window.
3. Workers are global-queue workers that hold one job at a time: a job sent to
   a busy worker is refused and goes back to the front of the queue, and the
   planner's SLO check drops it if its deadline has already passed.

Here step 3 means: a request whose best processor is busy (or was already
given a request in this decision) stays pending; it does not move to another
processor. Ties (equal shortest latency) go to the earlier job in the window.
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


class ShortestExpectedLatencyPolicy(WindowedPolicy):
    """Largest shortest-latency job first, to the processor where wait + run is least."""

    name: ClassVar[str] = "shortest_expected_latency"

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """See the module docstring (pure in view and now_ms)."""
        row = row_cache(view)
        out, window = runnable(view, row, self.window_size)
        waiting = waiting_ms(view, now_ms)
        free = idle_names(view, now_ms)
        while window:
            target_i, target_p, largest, target_ms = -1, None, -1.0, 0.0
            seen: set[tuple[str, tuple[str, ...] | None]] = set()
            for i, req in enumerate(window):
                key = (req.model, req.allowed)
                if key in seen:
                    continue
                seen.add(key)
                p, total, ms = shortest(row(req), waiting)
                if total > largest:
                    target_i, target_p, largest, target_ms = i, p, total, ms
            req = window.pop(target_i)
            if past_deadline(req, now_ms):
                out.append(Assignment.drop(req.id, PAST_DEADLINE))
            elif target_p in free:
                free.discard(target_p)
                waiting[target_p] = target_ms  # the worker now holds this job, not started
                out.append(Assignment(req.id, target_p))
            # else: the worker is busy; Band puts the job back at the front of the queue
        return out
