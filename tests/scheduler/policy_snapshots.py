"""Hand-built snapshots for the policy tests (plain data, real LatencyEstimator)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from scheduler.estimator import LatencyEstimator
from scheduler.types import Assignment, ProcessorView, RequestView, SchedulerView


def req(id: int, model: str, deadline: float = math.inf, arrival: float | None = None, *,
        stream: str | None = None, frame: int = -1, downstream: float = 0.0,
        allowed: tuple[str, ...] | None = None) -> RequestView:
    """A pending request; arrival defaults to ``id`` (so ids are in arrival order)."""
    return RequestView(id, model, float(id if arrival is None else arrival), deadline,
                       stream if stream is not None else model, frame, downstream, allowed)


def proc(name: str, kind: str | None = None, busy_until: float = 0.0, queued: float = 0.0,
         n_queued: int = 0, available: bool = True) -> ProcessorView:
    """A processor; kind defaults to the name without trailing digits."""
    return ProcessorView(name, kind or name.rstrip("0123456789"), busy_until, queued, n_queued, available)


def view(pending: Iterable[RequestView], procs: Iterable[ProcessorView],
         lat: Mapping[str, Mapping[str, float]]) -> SchedulerView:
    """A snapshot over a LatencyEstimator seeded with ``lat`` ({model: {processor: ms}})."""
    return SchedulerView(tuple(pending), tuple(procs), LatencyEstimator(seed=lat))


def plan(assignments: list[Assignment]) -> list[tuple[int, str | None]]:
    """``[(request id, processor or None)]`` in decision order, reasons left out."""
    return [(a.request_id, a.processor) for a in assignments]
