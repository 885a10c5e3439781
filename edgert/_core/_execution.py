"""The worker side of the dispatcher (:class:`Execution`, mixed into :class:`~edgert._core._dispatch.Dispatcher`):
a worker's loop, a run and its completion, the resolver thread's work, the estimator's update, and a request
re-placed after an accelerator fault; and every request's end: one terminal status, one record (counted into
the per-model stats in batches), resolved.

A worker's thread runs a request (``Worker.execute``), then, under the runtime's lock, ends it (its latency into
the estimator, its result: ``_ran_locked``) or re-places it (``_replace_locked``), and starts the next request
of its queue. When resolving cannot submit work (:func:`~edgert._core._resolver.quiet`) the resolver thread
resolves what ended, and makes the decision the completion left, while the next run executes; with a burst
pending, the request after that is queued ahead (:data:`AHEAD_PENDING`), so two runs have no decision between
them (issue 28). The state these methods use is the dispatcher's, declared and set there.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import numpy as np

from edgert._core._resolver import Handed, ResolverThread, quiet, resolve
from edgert._core._result import LATE, OK, Result, completed
from edgert._core._stats import ModelStats
from edgert._core._worker import Request, Worker
from edgert.errors import EdgeRTError
from scheduler.estimator import LatencyEstimator

_clock = time.perf_counter

#: Where a bug of ours (or of a user's policy) is logged, at ERROR with its traceback: the request it
#: hit ends ``failed`` with the bug chained, and the runtime keeps serving. tests/conftest.py fails a
#: test that logs here.
bug_log = logging.getLogger("edgert.bug")

#: With at least this many requests pending (a burst, deeper than a frame's cascades), a busy worker is
#: shown to the policy as free while it runs, so its next request is queued ahead (see ``_resolve_and_decide``).
#: The simulator does not: its decisions take no virtual time, so there is no gap between runs to hide.
AHEAD_PENDING = 16
#: After a runtime fault, an accelerator is kept out of placement this long before it is tried again (ms).
REPROBE_MS = 2_000.0
#: A request's end appends its record only; every this many, the records are counted into the per-model
#: stats and kept (``_fold_locked``), as ``stats()`` / ``records()`` do first: a stats call per request
#: cost ~0.7 µs of a sync call's ~10 (issue 29), a fold ~30 µs every 64 requests.
FOLD_EVERY = 64


class Execution:
    """A worker's runs and their ends, for :class:`~edgert._core._dispatch.Dispatcher` (see the module doc)."""

    # the dispatcher's state and steps these methods use (declared, set and defined there)
    _lock: threading.Lock
    _t0: float
    _workers: list[Worker]
    _pending: dict[int, Request]
    _unmeasured: set[tuple[str, str]]
    _stopping: bool
    _resolver: ResolverThread | None
    _trace: Any
    estimator: LatencyEstimator
    _stats: dict[str, ModelStats]
    _records: deque[tuple[Any, ...]]
    _fresh: list[tuple[Any, ...]]
    _inflight: int
    _closing: bool
    _idle: threading.Condition

    if TYPE_CHECKING:
        def now_ms(self) -> float: ...
        def _schedule_locked(self, now: float, done: list[tuple[Request, Result]],
                             wake: list[Worker] | None = None, ahead: tuple[Worker, ...] = ()) -> None: ...
        def _can_run(self, w: Worker, req: Request) -> bool: ...

    def _loop(self, w: Worker) -> None:
        req: Request | None = None
        while True:
            if req is None:
                with w.cond:
                    while not (w.queue and w.has_free_slot()):
                        if self._stopping:
                            return
                        w.cond.wait()
                    req = w.start_next(self.now_ms())
            req = self._run(w, req, chain=True)

    def _run(self, w: Worker, req: Request, chain: bool = False) -> Request | None:
        """Run ``req`` on ``w`` and end it (or re-place it). With ``chain`` (a worker's own thread), when
        resolving what ended cannot submit work (no completion callbacks), the completion's decision
        comes first and the request it starts here is returned, already running, for this thread to
        run next, while the resolver thread resolves the ended one: the processor's idle gap between
        two runs is then the bookkeeping and the decision only (issue 28)."""
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
            end = (_clock() - self._t0) * 1e3   # now_ms(), inline
            w.running.remove(req)
            if chain and err is None and w.queue and w.capacity == 1 and self._resolver is not None and quiet(req):
                # Its next request was queued ahead: start it now, and leave this one's bookkeeping, its
                # resolution and the decision to the resolver thread, which does them while that run executes.
                nxt = w.start_next(end)
                self._resolver.hand(([], w, (req, outs, delegate, end)))   # type: ignore[arg-type]  # outs set
                return nxt
            if w.queue:
                w.cond.notify()
            if err is None:
                if chain or req.future is not None or self._trace is not None:
                    self._ran_locked(w, req, outs, delegate, end, done)  # type: ignore[arg-type]  # set when err is None
                else:   # a sync caller's request run on its thread: it wants the outputs (see _ran_locked)
                    req.outputs = self._ran_locked(w, req, outs, delegate, end, None)  # type: ignore[arg-type]
            elif not self._replace_locked(w, req, end):
                self._fail_locked(req, err, end, done)
            if chain and self._resolver is not None and all(quiet(r) for r, _ in done):
                queued = bool(w.queue)   # given ahead: it starts now, and the decision waits for the resolver
                if self._pending and not queued:
                    self._schedule_locked(self.now_ms(), done)
                started = w.start_next(self.now_ms()) if w.queue and w.has_free_slot() else None
                decide = queued and bool(self._pending) or (
                    started is not None and w.capacity == 1 and len(self._pending) >= AHEAD_PENDING)
                if done or decide:
                    self._resolver.hand((done, w if decide else None, None))   # under the lock: before _stop_resolver's end mark
                return started
        # Resolve first: completion callbacks submit the next cascade stages, which must be
        # pending when the freed processor is next decided on (else older work takes it).
        if done:
            self._resolve(done)
        if self._pending:  # unlocked peek is safe: whoever adds to pending decides itself
            done = []
            with self._lock:
                self._schedule_locked(self.now_ms(), done)
            if done:
                self._resolve(done)
        return None

    def _resolve_and_decide(self, item: Handed) -> None:
        """The resolver thread's work, while the worker that handed ``item`` runs its next request: resolve
        what it ended, then (a worker named) make the decision its completion left: with a backlog of at least
        :data:`AHEAD_PENDING`, every running worker with nothing queued is shown to the policy as free, so that
        the request the policy would start on each is queued ahead and its next completion starts that one
        with no decision between the two runs (issue 28: a burst's decision over hundreds pending took 60-80 µs
        between 1.3 ms runs); one decision serves every worker it finds so."""
        done, w, ran = item
        if ran is not None:   # the bookkeeping the worker left (see _run)
            with self._lock:
                self._ran_locked(w, *ran, done)   # type: ignore[arg-type]  # a worker hands ran with itself
        if done:
            self._resolve(done)
        if w is None:
            return
        done = []
        with self._lock:
            now = self.now_ms()
            burst = len(self._pending) >= AHEAD_PENDING
            ahead = tuple([v for v in self._workers if v.running and not v.queue and v.capacity == 1
                           and now >= v.unhealthy_until_ms]) if burst else ()
            if burst and not ahead and all(v.queue or not v.has_free_slot() for v in self._workers):
                return   # every worker runs with its next queued: nothing could start; the next completion decides
            self._schedule_locked(now, done, ahead=ahead)
        if done:
            self._resolve(done)

    def _ran_locked(self, w: Worker, req: Request, outs: list[np.ndarray], delegate: str, end: float,
                    done: list[tuple[Request, Result]] | None) -> dict[str, np.ndarray]:
        """``req`` ran on ``w`` until ``end``: its latency into the estimator, its result into ``done``; its outputs.
        With ``done`` None (a sync caller's request that ran on its thread, no trace) it is recorded and no
        Result is made: nothing but that caller reads it, and the caller wants the outputs."""
        self._observe(req.model.name, w, end - req.start_ms)
        status = OK if end <= req.deadline_ms else LATE
        outputs = dict(zip(req.model.output_names, outs))
        if done is None:
            self._ended_locked(req, status, w.name, end, "")
        else:
            res = completed(outputs, status, w.name, delegate, end - req.arrival_ms, req.start_ms - req.arrival_ms,
                            req.model.name, req.id, req.deadline_ms, req.arrival_ms, req.frame, req.trace_id)
            self._complete_locked(req, res, w.name, end, done)
        return outputs

    def _stop_resolver(self) -> None:
        """After the workers stopped: resolve what they handed over, then end the resolver thread."""
        with self._lock:   # a worker stuck past close's join resolves its own requests from now on
            resolver, self._resolver = self._resolver, None
            if resolver is not None:
                resolver.close()
        if resolver is not None:
            resolver.join()

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
        est.update_shared(model, w.name, w.peers, ms)   # a pair a peer does not know stays unknown

    def _replace_locked(self, w: Worker, req: Request, now: float) -> bool:
        """After a fault on an accelerator, mark it unhealthy and re-place the request if time allows."""
        if w.kind == "cpu" or req.attempts >= 2 or now >= req.deadline_ms:
            return False
        if not any(o is not w and self._can_run(o, req) for o in self._workers):
            return False
        w.unhealthy_until_ms = now + REPROBE_MS
        req.attempts += 1
        req.worker = None
        if req.future is None:   # a sync caller's request it ran on its own thread: the caller waits for the re-run
            req.future = Future()
        self._pending[req.id] = req
        while w.queue:   # given to it ahead: decided again, elsewhere
            queued = w.queue.popleft()
            queued.worker = None
            self._pending[queued.id] = queued
        return True

    # -- terminal states: every request ends once, as one record -------------------------------
    def _complete_locked(self, req: Request, res: Result, proc: str, end: float,
                         done: list[tuple[Request, Result]]) -> None:
        """``req`` ended as ``res`` at ``end`` (ms) on ``proc``: recorded, and handed to ``done`` to resolve."""
        self._ended_locked(req, res.status, proc, end, str(res.error) if res.error is not None else "")
        done.append((req, res))

    def _ended_locked(self, req: Request, status: str, proc: str, end: float, error: str) -> None:
        """Record ``req``'s end (``status`` at ``end`` ms on ``proc``; ``error`` its text or ""): its latency is
        ``end - arrival``, as its Result says."""
        # RequestRecord's fields: records() makes the records when asked, not one per request
        fresh = self._fresh
        fresh.append((req.id, req.model.name, status, req.arrival_ms, req.deadline_ms, proc,
                      req.start_ms, end, req.frame, error))
        if len(fresh) >= FOLD_EVERY:
            self._fold_locked()
        self._inflight -= 1
        if not self._inflight and self._closing:   # only close() waits for it
            self._idle.notify_all()

    def _fold_locked(self) -> None:
        """Count the records ended since the last fold into the per-model stats, and keep them."""
        stats = self._stats
        for rec in self._fresh:
            stats[rec[1]].add(rec[2], rec[5], rec[7] - rec[3])   # status, processor, end - arrival
        self._records.extend(self._fresh)
        self._fresh = []

    def _drop_locked(self, req: Request, reason: str, now: float, done: list[tuple[Request, Result]]) -> None:
        """``req`` never ran: dropped at ``now`` (ms), saying ``reason``."""
        self._complete_locked(req, req.dropped(reason, now), "", now, done)

    def _fail_locked(self, req: Request, err: EdgeRTError, now: float, done: list[tuple[Request, Result]]) -> None:
        """``req`` failed with ``err`` at ``now`` (ms)."""
        res = req.failed(err, now)
        self._complete_locked(req, res, res.processor, now, done)

    def _resolve(self, done: Iterable[tuple[Request, Result]]) -> None:
        """Resolve ``done`` (:func:`edgert._core._resolver.resolve`) with this runtime's trace."""
        resolve(done, self._trace)
