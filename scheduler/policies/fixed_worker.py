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
  with the lowest expected latency in the snapshot's estimator (Band's own
  default map sends every model to worker 0, which would make this baseline a
  strawman; the fastest processor is what a developer would configure).
* A request with ``allowed`` set is Band's direct request: it goes to the first
  allowed processor that can run it.
* If the mapped processor is unavailable or cannot run the model, the request
  falls back to the static best; a model nothing can run is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from scheduler.policies._band import PAST_DEADLINE, past_deadline, row_cache, unsupported
from scheduler.types import Assignment, SchedulerView


class FixedWorkerPolicy:
    """Each model on one fixed processor, every request queued there at once."""

    name: ClassVar[str] = "fixed_worker"

    def __init__(self, mapping: Mapping[str, str] | None = None) -> None:
        """``mapping``: optional ``{model: processor name}``; others use their fastest local processor."""
        self.mapping: dict[str, str] = dict(mapping or {})

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """Assign every pending request to its model's fixed processor (pure in view and now_ms)."""
        row = row_cache(view)
        local = {p.name for p in view.processors if p.kind != "cloud"}
        out: list[Assignment] = []
        for req in view.pending:
            r = row(req)
            if not r:
                out.append(unsupported(req))
                continue
            if past_deadline(req, now_ms):
                out.append(Assignment.drop(req.id, PAST_DEADLINE))
                continue
            target = None
            if req.allowed is not None:
                target = r[0][0]
            else:
                want = self.mapping.get(req.model)
                if want is not None and any(name == want for name, _ in r):
                    target = want
                else:
                    pool = [x for x in r if x[0] in local] or r
                    target = min(pool, key=lambda x: x[1])[0]
            out.append(Assignment(req.id, target))
        return out
