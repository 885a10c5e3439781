"""Band's ``fixed_worker``: every model always runs on one worker chosen ahead of time.

What Band does (``band/scheduler/fixed_worker_scheduler.cc``): it empties the
request queue on every call; each job goes to ``job.target_worker_id`` when the
caller asked for one, else to the model's worker from the planner's
model→worker map (a configuration value), and is appended to that worker's own
queue (``WorkerType::kDeviceQueue``), so queues build up behind slow jobs. The
only deadline handling is the planner's check on enqueue (see ``_band``).

Here:

* ``mapping`` (``{model: processor name}``) is Band's model→worker map.
  Models it does not name go to their *static* best: the non-cloud processor
  with the lowest *prior* latency in the snapshot's estimator
  (``LatencyEstimator.prior_ms``: the profile's or the warm-up's figure, which
  the moving average never moves), so the map is fixed ahead of time as in
  Band and does not flip with measurement noise (Band's own default map sends
  every model to worker 0, which would make this baseline a strawman; the
  fastest processor is what a developer would configure). An estimator
  without priors is read through ``expected_ms``.
* A request with ``allowed`` set is Band's direct request: it goes to the first
  allowed processor that can run it.
* If the mapped processor is unavailable or cannot run the model, the request
  falls back to the static best; a model nothing can run is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import ClassVar

from scheduler.policies._band import PAST_DEADLINE, row_cache, unsupported
from scheduler.types import Assignment, ProcessorView, SchedulerView


_name = attrgetter("name")
_available = attrgetter("available")


class FixedWorkerPolicy:
    """Each model on one fixed processor, every request queued there at once."""

    name: ClassVar[str] = "fixed_worker"

    def __init__(self, mapping: Mapping[str, str] | None = None) -> None:
        """``mapping``: optional ``{model: processor name}``; others use their fastest local processor."""
        self.mapping: dict[str, str] = dict(mapping or {})
        # each model's processors ranked by prior latency; rebuilt when the priors or the processors change
        self._static: dict[str, list[str]] = {}
        self._estimator: object = None
        self._version: int | None = None
        self._procs: tuple[ProcessorView, ...] | None = None
        self._names: tuple[str, ...] = ()
        self._down: set[str] = set()

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """Assign every pending request to its model's fixed processor (pure in view and now_ms).

        A model's processors are ranked once by prior latency (local ones first, then the cloud; ties
        in view order) and the ranking is kept until the estimator's priors or the processors change;
        a request goes to the first ranked processor that is available now, so a decision costs a
        dict lookup per request.
        """
        estimator = view.estimator
        prior = getattr(estimator, "prior_ms", None)
        procs = view.processors
        if procs is not self._procs:   # a new processor snapshot (a driver may pass an unchanged one again)
            self._procs = procs
            names = tuple(map(_name, procs))
            if names != self._names:
                self._static.clear()
                self._names = names
            self._down = set() if all(map(_available, procs)) else {p.name for p in procs if not p.available}
        names, down = self._names, self._down
        version = getattr(estimator, "prior_version", None) if prior is not None else None
        if version is None or version != self._version or estimator is not self._estimator:
            self._static.clear()   # without priors, rankings follow the current estimates: kept one decision
            self._estimator, self._version = estimator, version
        ranked = self._static
        mapping = self.mapping
        current = estimator.expected_ms
        row = None
        out: list[Assignment] = []
        for req in view.pending:
            model = req.model
            if req.allowed is not None:   # Band's direct request: the first allowed processor that runs it
                if row is None:
                    row = row_cache(view)
                r = row(req)
                target = r[0][0] if r else None
            else:
                want = mapping.get(model) if mapping else None
                if want is not None and want not in down and want in names and current(model, want) is not None:
                    target = want
                else:
                    order = ranked.get(model)
                    if order is None:
                        order = ranked[model] = _rank(prior or current, model, procs)
                    if not down:
                        target = order[0] if order else None
                    else:
                        target = next((n for n in order if n not in down), None)
            if target is None:
                out.append(unsupported(req))
            elif now_ms > req.deadline_ms:   # Band's planner SLO check (past_deadline)
                out.append(Assignment.drop(req.id, PAST_DEADLINE))
            else:
                out.append(Assignment(req.id, target))
        return out


def _rank(est: Callable[[str, str], float | None], model: str, procs: tuple[ProcessorView, ...]) -> list[str]:
    """The processors that can run ``model``: local ones by ``est`` ms, then cloud ones by ms (stable: ties
    keep view order)."""
    rows = [(p.kind == "cloud", ms, i, p.name) for i, p in enumerate(procs)
            if (ms := est(model, p.name)) is not None]
    return [name for *_, name in sorted(rows)]
