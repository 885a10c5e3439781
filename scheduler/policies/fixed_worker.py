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
from typing import Any, ClassVar

from scheduler.policies._band import PAST_DEADLINE, row_cache, unsupported
from scheduler.types import Assignment, ProcessorView, SchedulerView


_name = attrgetter("name")
_available = attrgetter("available")
_NONE_DOWN: frozenset[str] = frozenset()
_UNSET: Any = object()


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
        self._down: frozenset[str] = _NONE_DOWN
        self._prior: Callable[[str, str], float | None] | None = None
        # each model's target under the current availability (the first of its ranking that is up)
        self._first: dict[str, str | None] = {}

    def _renew(self, estimator: object) -> None:
        """A new estimator or new priors: forget the rankings. Only an estimator with priors is
        remembered; without them rankings follow the current estimates and last one decision."""
        self._static.clear()
        self._first.clear()
        self._prior = getattr(estimator, "prior_ms", None)
        self._version = getattr(estimator, "prior_version", None) if self._prior is not None else None
        self._estimator = estimator if self._version is not None else None

    def _target(self, model: str, procs: tuple[ProcessorView, ...], estimator: Any) -> str | None:
        """``model``'s first ranked processor that is up now (None if none can run it)."""
        order = self._static.get(model)
        if order is None:
            order = self._static[model] = _rank(self._prior or estimator.expected_ms, model, procs)
        return next((n for n in order if n not in self._down), None)

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """Assign every pending request to its model's fixed processor (pure in view and now_ms).

        A model's processors are ranked once by prior latency (local ones first, then the cloud; ties
        in view order) and the ranking is kept until the estimator's priors or the processors change;
        a request goes to the first ranked processor that is available now, so a decision costs a
        dict lookup per request.
        """
        procs, estimator = view.processors, view.estimator
        if procs is not self._procs:   # a new processor snapshot (a driver may pass an unchanged one again)
            self._procs = procs
            names = tuple(map(_name, procs))
            if names != self._names:
                self._static.clear()
                self._first.clear()
                self._names = names
            down = _NONE_DOWN if all(map(_available, procs)) else frozenset(p.name for p in procs if not p.available)
            if down != self._down:
                self._down = down
                self._first.clear()
        # (an estimator is kept only when it has prior_version: see _renew)
        if estimator is not self._estimator or estimator.prior_version != self._version:  # type: ignore[attr-defined]
            self._renew(estimator)
        return self._each(view, now_ms)

    def _each(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """:meth:`decide`'s rule for each pending request, in order (the snapshot and the estimator already checked)."""
        estimator, procs = view.estimator, view.processors
        first = self._first
        mapping = self.mapping
        row = None
        out: list[Assignment] = []
        append = out.append
        for req in view.pending:
            if req.allowed is not None:   # Band's direct request: the first allowed processor that runs it
                if row is None:
                    row = row_cache(view)
                r = row(req)
                target = r[0][0] if r else None
            else:
                model = req.model
                target = _UNSET
                if mapping:
                    want = mapping.get(model)
                    if (want is not None and want not in self._down and want in self._names
                            and estimator.expected_ms(model, want) is not None):
                        target = want
                if target is _UNSET:
                    target = first.get(model, _UNSET)
                    if target is _UNSET:
                        target = first[model] = self._target(model, procs, estimator)
            if target is None:
                append(unsupported(req))
            elif now_ms > req.deadline_ms:   # Band's planner SLO check (past_deadline)
                append(Assignment.drop(req.id, PAST_DEADLINE))
            else:
                append(Assignment(req.id, target))
        return out


def _rank(est: Callable[[str, str], float | None], model: str, procs: tuple[ProcessorView, ...]) -> list[str]:
    """The processors that can run ``model``: local ones by ``est`` ms, then cloud ones by ms (stable: ties
    keep view order)."""
    rows = [(p.kind == "cloud", ms, i, p.name) for i, p in enumerate(procs)
            if (ms := est(model, p.name)) is not None]
    return [name for *_, name in sorted(rows)]
