"""edgert's default policy: earliest deadline first, placed where it finishes earliest.

Order: pending requests by effective deadline (``deadline_ms - downstream_ms``,
so a cascade's first stage leaves time for the stages after it), then
arrival. Placement: the processor with the earliest expected finish
(``ready_at + expected latency``); a request is dispatched only when that
processor is idle, otherwise it stays pending and keeps its claim, so queues
never build up behind a slow job and every decision sees fresh state.
"""

from __future__ import annotations

from typing import ClassVar

from scheduler.types import Assignment, RequestView, SchedulerView


class EdgertPolicy:
    """EDF + earliest-finish placement, dispatching only to idle processors."""

    name: ClassVar[str] = "edgert"

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """See the module docstring; pure in ``view`` and ``now_ms``."""
        if not view.pending:
            return []
        est = view.estimator.expected_ms
        ready = {p.name: p.ready_at_ms(now_ms) for p in view.processors if p.available}
        out: list[Assignment] = []
        for req in sorted(view.pending, key=_urgency):
            best, best_finish = None, 0.0
            for p in view.processors:
                start = ready.get(p.name)
                if start is None or (req.allowed is not None and p.name not in req.allowed):
                    continue
                ms = est(req.model, p.name)
                if ms is None:
                    continue
                finish = start + ms
                if best is None or finish < best_finish:
                    best, best_finish = p.name, finish
            if best is None:
                if not any(
                    est(req.model, p.name) is not None
                    and (req.allowed is None or p.name in req.allowed)
                    for p in view.processors
                ):
                    out.append(Assignment.drop(req.id, f"no processor can run model {req.model!r}"))
                continue
            if ready[best] <= now_ms:
                out.append(Assignment(req.id, best))
            ready[best] = best_finish  # claimed: later requests see it busy
        return out


def _urgency(r: RequestView) -> tuple[float, float, int]:
    return (r.deadline_ms - r.downstream_ms, r.arrival_ms, r.id)
