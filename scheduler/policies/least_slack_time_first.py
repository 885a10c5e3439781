"""Band's ``least_slack_time_first``: least slack first, drop what can no longer meet its SLO.

What Band does (``band/scheduler/least_slack_first_scheduler.cc``, window 10 in
Band's default config):

1. If no worker is idle, do nothing (not even drops).
2. For the first ``window_size`` jobs of the queue, set each job's expected
   latency to its shortest latency (min over workers of waiting + expected
   latency) and sort them by slack = ``deadline - now - expected latency``
   (jobs without an SLO last).
3. In that order, with a local copy of the waiting times: find the job's best
   worker; if ``now + shortest latency > deadline`` the job is finished as an
   SLO violation (dropped); else if that worker was idle at the start of the
   decision, add the job's expected latency to its waiting time and enqueue it.
   A global-queue worker takes one job at a time, so a second job enqueued to
   the same worker is refused and returns to the queue (the waiting-time
   update stays, as in Band).

Band reads the wall clock (``time::NowMicros()``) for ``now``; this policy
takes ``now_ms`` from the driver, so it replays identically in the simulator.
"""

from __future__ import annotations

import math
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
from scheduler.types import Assignment, RequestView, SchedulerView


class LeastSlackTimeFirstPolicy(WindowedPolicy):
    """Least slack first onto idle processors; drop requests whose best finish is past the deadline."""

    name: ClassVar[str] = "least_slack_time_first"

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """See the module docstring (pure in view and now_ms)."""
        row = row_cache(view)
        out, window = runnable(view, row, self.window_size)
        free = idle_names(view, now_ms)
        if not window or not free:
            return out
        waiting = waiting_ms(view, now_ms)

        def slack(req: RequestView) -> float:
            if math.isinf(req.deadline_ms):
                return math.inf
            return req.deadline_ms - now_ms - shortest(row(req), waiting)[1]

        window.sort(key=slack)  # stable: equal slack keeps arrival order
        local = dict(waiting)
        given: set[str] = set()
        for req in window:
            p, total, ms = shortest(row(req), local)
            if now_ms + total > req.deadline_ms:
                reason = PAST_DEADLINE if past_deadline(req, now_ms) else (
                    f"cannot meet its deadline: best expected finish {now_ms + total:.2f} ms on {p} "
                    f"> deadline {req.deadline_ms:.2f} ms (least slack first)")
                out.append(Assignment.drop(req.id, reason))
                continue
            if p in free:
                local[p] += ms  # type: ignore[index]
                if p not in given:
                    given.add(p)  # type: ignore[arg-type]
                    out.append(Assignment(req.id, p))
                # else: the worker already holds a job; Band re-queues this one
        return out
