"""The dispatch core of the live runtime: the policy's decisions applied to the workers.

:class:`Dispatcher` runs requests once they exist: it builds the policy's
snapshot under the lock (``_schedule_locked``), hands work to the workers'
threads or the caller's, runs a request (``_run``), folds its latency into the
estimator, re-places it after an accelerator fault, and ends every request with
exactly one terminal status. It owns the state it works on — declared below and
set by its own ``__init__`` — and the clock (:meth:`Dispatcher.now_ms`).
:class:`edgert.Runtime` extends it with what creates requests: loading models,
``submit``, frames, stats and closing.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

import numpy as np

from edgert._result import DROPPED, FAILED, LATE, OK, Result, completed, outputs_dict
from edgert._stats import ModelStats
from edgert._trace import TraceWriter
from edgert._worker import Request, Worker
from edgert.errors import EdgeRTError, RequestDropped
from scheduler.contract import OnBroken, broken, dropped_by, left_unplaced, misplaced
from scheduler.estimator import LatencyEstimator
from scheduler.types import Assignment, Policy, ProcessorView, SchedulerView

_new = tuple.__new__   # a NamedTuple from a ready tuple, without the keyword-handling constructor

#: Where a bug of ours (or of a user's policy) is logged, at ERROR with its traceback: the request it
#: hit ends ``failed`` with the bug chained, and the runtime keeps serving. tests/conftest.py fails a
#: test that logs here.
bug_log = logging.getLogger("edgert.bug")

#: A decision that breaks the driver contract drops the request it names (the simulator raises instead):
#: the app keeps running and every request still ends once. See scheduler.contract.
ON_BROKEN = OnBroken.DROP
#: After a runtime fault, an accelerator is kept out of placement this long before it is tried again (ms).
REPROBE_MS = 2_000.0
#: Finished requests kept for ``records()`` / timelines.
RECORDS_KEPT = 200_000


class Dispatcher:
    """Applies the policy's decisions to the workers and ends every request once (see the module doc).

    Args:
        policy: the policy object (``decide(view, now_ms)``).
        estimator: the latency estimator the policy reads and every completed run updates.
    """

    _lock: threading.Lock                  #: guards every field below
    _idle: threading.Condition             #: notified when nothing is in flight
    _t0: float                             #: perf_counter() at start: the clock's zero
    _policy: Policy
    estimator: LatencyEstimator
    _workers: list[Worker]
    _by_name: dict[str, Worker]
    _pending: dict[int, Request]           #: request id -> request awaiting a decision
    _unmeasured: set[tuple[str, str]]      #: (model, processor) pairs seeded with no measurement
    _stats: dict[str, ModelStats]          #: model name -> counters
    _records: deque[tuple[Any, ...]]       #: RequestRecord fields of the last RECORDS_KEPT finished
    _inflight: int                         #: requests submitted and not yet terminal
    _stopping: bool                        #: workers exit when their queue is empty
    _trace: TraceWriter | None             #: every request's line, given its outcome when it ends

    def __init__(self, policy: Policy, estimator: LatencyEstimator) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._t0 = time.perf_counter()
        self._policy = policy
        self.estimator = estimator
        self._workers = []
        self._by_name = {}
        self._pending = {}
        self._unmeasured = set()
        self._stats = {}
        self._records = deque(maxlen=RECORDS_KEPT)
        self._inflight = 0
        self._stopping = False
        self._trace = None

    def now_ms(self) -> float:
        """The runtime clock: ms since the runtime started (monotonic)."""
        return (time.perf_counter() - self._t0) * 1e3

    @property
    def scheduler(self) -> str:
        """The policy's name."""
        return getattr(self._policy, "name", type(self._policy).__name__)

    def _start_workers(self, workers: list[Worker]) -> None:
        """Adopt ``workers`` and start their threads (``capacity`` each)."""
        self._workers = workers
        self._by_name = {w.name: w for w in workers}
        for w in workers:
            for i in range(w.capacity):
                t = threading.Thread(target=self._loop, args=(w,), name=f"edgert-{w.name}-{i}", daemon=True)
                w.threads.append(t)
                t.start()

    # -- scheduling ------------------------------------------------------------------------
    def _schedule_locked(self, now: float, done: list[tuple[Request, Result]],
                         wake: list[Worker] | None = None) -> None:
        """Ask the policy about every pending request and apply its answer.

        Workers given work are notified at once, or appended to ``wake`` for the caller to
        notify after it has taken what it runs inline.
        """
        if not self._pending:
            return
        exp = self.estimator.expected_ms
        procs = tuple([w.idle_view if not (w.running or w.queue) and now >= w.unhealthy_until_ms   # idle: inline
                       else self._view(w, now, exp) for w in self._workers])
        view = _new(SchedulerView, (tuple([r.view for r in self._pending.values()]), procs, self.estimator))
        try:
            decisions: list[Assignment] = self._policy.decide(view, now)
        except Exception as exc:  # noqa: BLE001 - a policy bug must not lose requests; it is logged
            bug_log.error("scheduler %r raised deciding %d request(s)", self.scheduler, len(self._pending),
                          exc_info=exc)
            err = EdgeRTError(f"scheduler {self.scheduler!r} raised {exc!r} (a bug: see the edgert.bug log)")
            err.__cause__ = exc
            for stranded in list(self._pending.values()):
                self._fail_locked(stranded, err, now, done)
            self._pending.clear()
            return
        for a in decisions:   # each assignment as scheduler.contract says
            req = self._pending.pop(a.request_id, None)
            if req is None:   # a broken decision: nothing to drop (ON_BROKEN)
                continue
            if a.processor is None:
                self._drop_locked(req, a.reason or dropped_by(self.scheduler), now, done)
                continue
            w = self._by_name.get(a.processor)
            if w is None or not self._can_run(w, req):
                why = broken(misplaced(self.scheduler, a.processor, w is not None), ON_BROKEN)
                self._drop_locked(req, why, now, done)
                continue
            req.worker = w
            w.queue.append(req)
            if wake is None:
                w.cond.notify()
            elif w not in wake:
                wake.append(w)
        if self._pending:
            self._drop_unplaceable_locked(now, done)

    def _view(self, w: Worker, now: float, exp: Any) -> ProcessorView:
        """A busy (or unhealthy) worker as the policy sees it; an idle one is ``w.idle_view``."""
        busy = 0.0
        if w.running and not w.has_free_slot():
            busy = min(r.start_ms + (exp(r.model.name, w.name) or 0.0) for r in w.running)
        queued = sum((exp(r.model.name, w.name) or 0.0) for r in w.queue) if w.queue else 0.0
        return ProcessorView(w.name, w.kind, busy, queued, len(w.queue), now >= w.unhealthy_until_ms,
                             w.capacity, w.capacity - len(w.running))

    def _can_run(self, w: Worker, req: Request) -> bool:
        allowed = req.view.allowed
        return (self.estimator.expected_ms(req.model.name, w.name) is not None
                and (allowed is None or w.name in allowed))

    def _drop_unplaceable_locked(self, now: float, done: list[tuple[Request, Result]]) -> None:
        if not any(w.is_idle() for w in self._workers):
            return  # a completion is coming, and with it another decision (load guarantees a session)
        for req in list(self._pending.values()):
            able = [w for w in self._workers if self._can_run(w, req)]
            if not able:
                reason = f"no processor of this runtime can run model {req.model.name!r}"
            elif all(w.is_idle() for w in able):
                unhealthy = [w.name for w in able if now < w.unhealthy_until_ms]
                reason = (f"its processors {unhealthy} are unhealthy after a fault" if unhealthy else
                          left_unplaced(self.scheduler))
            else:
                continue
            del self._pending[req.id]
            self._drop_locked(req, reason, now, done)

    # -- execution -------------------------------------------------------------------------
    def _loop(self, w: Worker) -> None:
        while True:
            with w.cond:
                while not (w.queue and w.has_free_slot()):
                    if self._stopping:
                        return
                    w.cond.wait()
                req = w.queue.popleft()
                w.running.append(req)
                req.start_ms = self.now_ms()
            self._run(w, req)

    def _run(self, w: Worker, req: Request) -> None:
        outs: list[np.ndarray] | None = None
        err: EdgeRTError | None = None
        delegate = ""
        try:
            outs, delegate = w.execute(req)
        except EdgeRTError as exc:
            err = exc
        except Exception as exc:  # noqa: BLE001 - not a backend error (sessions map those): a bug, logged
            bug_log.error("%s raised running %r (request %d)", w.name, req.model.name, req.id, exc_info=exc)
            err = EdgeRTError(f"{w.name} raised {exc!r} running {req.model.name!r} (a bug: see the edgert.bug log)")
            err.__cause__ = exc
        done: list[tuple[Request, Result]] = []
        with self._lock:
            end = self.now_ms()
            w.running.remove(req)
            if w.queue:
                w.cond.notify()
            if err is None:
                self._observe(req.model.name, w, end - req.start_ms)
                status = OK if end <= req.deadline_ms else LATE
                outputs = outputs_dict(req.model.output_names, outs)  # type: ignore[arg-type]  # set when err is None
                res = completed(outputs, status, w.name, delegate, end - req.arrival_ms, req.start_ms - req.arrival_ms,
                                req.model.name, req.id, req.deadline_ms, req.arrival_ms, req.frame, req.trace_id)
                self._complete_locked(req, res, w.name, end, done)
            elif not self._replace_locked(w, req, end):
                self._fail_locked(req, err, end, done)
        # Resolve first: completion callbacks submit the next cascade stages, which must be
        # pending when the freed processor is next decided on (else older work takes it).
        self._resolve(done)
        if self._pending:  # unlocked peek is safe: whoever adds to pending decides itself
            done = []
            with self._lock:
                self._schedule_locked(self.now_ms(), done)
            if done:
                self._resolve(done)

    def _observe(self, model: str, w: Worker, ms: float) -> None:
        """Fold a measured run (ms) into ``w``'s estimate and give its peers (the same processor) that
        one value: a single moving average over all their runs."""
        est = self.estimator
        if self._unmeasured and (model, w.name) in self._unmeasured:
            for proc in w.peers:   # learnt without a seed: the first measurement is the prior
                self._unmeasured.discard((model, proc))
                if est.expected_ms(model, proc) is not None:
                    est.seed(model, proc, ms)
            return
        new = est.update(model, w.name, ms)
        for proc in w.peers:
            if proc != w.name:
                est.reset(model, proc, new)   # a pair the peer does not know stays unknown

    def _replace_locked(self, w: Worker, req: Request, now: float) -> bool:
        """After a fault on an accelerator, mark it unhealthy and re-place the request if time allows."""
        if w.kind == "cpu" or req.attempts >= 2 or now >= req.deadline_ms:
            return False
        if not any(o is not w and self._can_run(o, req) for o in self._workers):
            return False
        w.unhealthy_until_ms = now + REPROBE_MS
        req.attempts += 1
        req.worker = None
        self._pending[req.id] = req
        return True

    # -- terminal states -------------------------------------------------------------------
    def _complete_locked(self, req: Request, res: Result, proc: str, end: float,
                         done: list[tuple[Request, Result]]) -> None:
        self._stats[req.model.name].add(res.status, proc, res.latency_ms)
        # RequestRecord's fields: records() makes the records when asked, not one per request
        self._records.append((req.id, req.model.name, res.status, req.arrival_ms, req.deadline_ms, proc,
                              req.start_ms, end, req.frame, str(res.error) if res.error is not None else ""))
        done.append((req, res))
        self._inflight -= 1
        if not self._inflight:
            self._idle.notify_all()

    def _drop_locked(self, req: Request, reason: str, now: float, done: list[tuple[Request, Result]]) -> None:
        res = Result(None, DROPPED, "", "", now - req.arrival_ms, now - req.arrival_ms,
                     RequestDropped(req.model.name, reason), req.model.name, req.id, req.deadline_ms,
                     req.arrival_ms, req.frame, req.trace_id)
        self._complete_locked(req, res, "", now, done)

    def _fail_locked(self, req: Request, err: EdgeRTError, now: float, done: list[tuple[Request, Result]]) -> None:
        proc = req.worker.name if req.worker is not None else ""
        res = Result(None, FAILED, proc, "", now - req.arrival_ms,
                     (req.start_ms if not math.isnan(req.start_ms) else now) - req.arrival_ms, err,
                     req.model.name, req.id, req.deadline_ms, req.arrival_ms, req.frame, req.trace_id)
        self._complete_locked(req, res, proc, now, done)

    def _resolve(self, done: Iterable[tuple[Request, Result]]) -> None:
        """Hand each terminal result to its request and future, and its outcome to the trace (if any).

        Outside the lock: completion callbacks may submit the next cascade stages."""
        trace = self._trace
        for req, res in done:
            if trace is not None:
                trace.finish(res)
            req.result = res
            fut = req.future
            if fut is not None and not fut.cancelled():
                fut.set_result(res)
