"""What Band's five schedulers share, read from mrsnu/band (``band/engine.cc``, ``band/planner.cc``).

Band (MobiSys'22) keeps one request queue per planner and asks the engine a few
questions; these helpers answer them over a :class:`~scheduler.types.SchedulerView`:

* **worker waiting time** (``Worker::GetWaitingTime``): the expected time until
  a worker could start new work, i.e. the remaining expected time of the job it
  runs plus, for a device-queue worker, the expected latencies of its queue.
  Here: ``max(busy_until_ms - now_ms, 0) + queued_ms``. Unavailable workers are
  skipped (Band returns a huge waiting time for them).
* **idle workers** (``Engine::GetIdleWorkers``): waiting time 0.
* **shortest latency** (``Engine::GetShortestSubgraphKey``): over the workers
  that can run the model, ``waiting + expected latency``; on a tie the *later*
  worker wins (Band compares with ``>=``). We place whole models (Band's
  fallback subgraphs split a model across workers; our profiles have one
  latency per model and processor).
* **the planner's SLO check** (``Planner::IsSLOViolated`` on enqueue): a job
  that is handed to a worker after its deadline has already passed is finished
  as an SLO violation instead of being run. For a fresh job Band's check reduces
  to ``now > deadline`` (its subgraph key and expected time are not set yet), so
  that is what :func:`past_deadline` tests; every Band baseline applies it.

Global-queue schedulers (shortest_expected_latency, HEFT, least slack) hand a
worker one job at a time: ``GlobalQueueWorker::IsEnqueueReady`` refuses a busy
worker and the planner puts the job back at the front of the queue. Here that
is "leave the request pending".

Times are ms on the driver's clock; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.types import Assignment, ProcessorView, RequestView, SchedulerView

#: Band's default schedule window (``RuntimeConfigBuilder``'s default config uses 10).
BAND_WINDOW = 10

#: Reason given when the planner's SLO check finishes a job instead of running it.
PAST_DEADLINE = "deadline passed before dispatch (Band planner SLO check)"

#: ``[(processor name, expected ms), ...]`` for one request, in view order.
Row = list[tuple[str, float]]


def waiting_ms(view: SchedulerView, now_ms: float) -> dict[str, float]:
    """Band's waiting time (ms) of every available processor, by name."""
    return {
        p.name: (p.busy_until_ms - now_ms if p.busy_until_ms > now_ms else 0.0) + p.queued_ms
        for p in view.processors
        if p.available
    }


def idle_names(view: SchedulerView, now_ms: float) -> set[str]:
    """Names of available processors that run nothing and have nothing queued."""
    return {p.name for p in view.processors if p.available and p.is_idle(now_ms)}


def row_cache(view: SchedulerView) -> Callable[[RequestView], Row]:
    """Return ``row(request)``: the processors that can run it with their expected ms.

    Rows are cached per ``(model, allowed)`` for the duration of one decision.
    """
    est = view.estimator.expected_ms
    procs: list[ProcessorView] = [p for p in view.processors if p.available]
    cache: dict[tuple[str, tuple[str, ...] | None], Row] = {}

    def row(req: RequestView) -> Row:
        key = (req.model, req.allowed)
        r = cache.get(key)
        if r is None:
            r = []
            for p in procs:
                if req.allowed is not None and p.name not in req.allowed:
                    continue
                ms = est(req.model, p.name)
                if ms is not None:
                    r.append((p.name, ms))
            cache[key] = r
        return r

    return row


def shortest(row: Row, waiting: dict[str, float]) -> tuple[str | None, float, float]:
    """Band's ``GetShortestSubgraphKey``: ``(processor, waiting + expected ms, expected ms)``.

    Ties go to the later processor in view order, as in Band. ``(None, inf, inf)``
    when ``row`` is empty.
    """
    best: str | None = None
    best_total = float("inf")
    best_ms = float("inf")
    for name, ms in row:
        total = waiting[name] + ms
        if total <= best_total:
            best, best_total, best_ms = name, total, ms
    return best, best_total, best_ms


def past_deadline(req: RequestView, now_ms: float) -> bool:
    """Band's planner SLO check for a fresh job: the deadline has already passed."""
    return now_ms > req.deadline_ms


def unsupported(req: RequestView) -> Assignment:
    """Drop a request no available processor can run (Band would never finish it)."""
    where = "" if req.allowed is None else f" among the allowed processors {list(req.allowed)}"
    return Assignment.drop(req.id, f"no available processor can run model {req.model!r}{where}")


class WindowedPolicy:
    """Base of Band's planners that look at a window of the oldest pending requests."""

    def __init__(self, window_size: int = BAND_WINDOW) -> None:
        """``window_size``: how many of the oldest pending requests one decision looks at."""
        if window_size < 1:
            raise ValueError(f"window_size must be >= 1, got {window_size}")
        self.window_size = window_size


def runnable(view: SchedulerView, row: Callable[[RequestView], Row],
             limit: int | None = None) -> tuple[list[Assignment], list[RequestView]]:
    """Drops for requests nothing can run (Band would keep them forever), and the first ``limit``
    runnable ones in arrival order (all of them when ``limit`` is None)."""
    out: list[Assignment] = []
    keep: list[RequestView] = []
    for req in view.pending:
        if not row(req):
            out.append(unsupported(req))
        elif limit is None or len(keep) < limit:
            keep.append(req)
    return out, keep
