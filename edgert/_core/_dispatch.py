"""The dispatch core of the live runtime: the policy's decisions applied to the workers.

:class:`Dispatcher` owns a request from admission to resolution. A request's walk, in one
direction: ``Model.__call__`` / ``submit`` -> :meth:`Dispatcher._call` / ``_submit`` (admitted:
``_new_locked``; a sync call's lone request with every worker idle: ``_lone_locked``) -> the policy
(``_schedule_locked``, its decision applied as :mod:`scheduler.contract` says) -> a worker's queue,
run on the caller's thread or the worker's -> the delegate (``Worker.execute``) -> its end
(:mod:`edgert._core._execution`: its latency into the estimator, re-placed after an accelerator fault,
or ended with exactly one terminal status: ``_complete_locked``, ``_resolve``; on a worker's own thread
the next run starts first and the resolver thread resolves, unless a completion callback could submit
a cascade stage; a sync caller's request that ran on its thread hands its outputs back without a Result,
which nothing else would read) -> the model's caller. Every end is one record (``_ended_locked``), counted
into the per-model stats in batches (``_fold_locked``). It owns the state it works on — declared below and set by its
own ``__init__`` — and the clock (:meth:`Dispatcher.now_ms`). :class:`edgert.Runtime` extends it with
the public API and model loading.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import numpy as np

from edgert._core import _validate
from edgert._core._frame import Frame, current_frame
from edgert._core._execution import Execution, bug_log
from edgert._core._resolver import ResolverThread
from edgert._core._result import Result, unwrap
from edgert._core._stats import ModelStats
from edgert._core._trace import TraceWriter
from edgert._core._worker import Request, Worker
from edgert.errors import EdgeRTError
from scheduler.contract import OnBroken, broken, dropped_by, left_unplaced, misplaced
from scheduler.estimator import LatencyEstimator
from scheduler.types import Assignment, Policy, ProcessorView, RequestView, SchedulerView

if TYPE_CHECKING:
    from edgert._core._model import LoadedModel

_clock = time.perf_counter
_new = tuple.__new__   # a NamedTuple from a ready tuple, without the keyword-handling constructor


#: A decision that breaks the driver contract drops the request it names (the simulator raises instead):
#: the app keeps running and every request still ends once. See scheduler.contract.
ON_BROKEN = OnBroken.DROP
#: The most a ``submit`` that woke an idle worker waits for that worker to start its request (ms), and
#: the naps it takes meanwhile (s): each releases the GIL and the core; see ``Runtime._submit``.
HANDOFF_WAIT_MS = 1.0
HANDOFF_NAP_S = 1e-5
#: Finished requests kept for ``records()`` / timelines.
RECORDS_KEPT = 200_000


class Dispatcher(Execution):
    """Applies the policy's decisions to the workers and ends every request once (see the module doc).

    Args:
        policy: the policy object (``decide(view, now_ms)``).
        estimator: the latency estimator the policy reads and every completed run updates.
    """

    _lock: threading.Lock                  #: guards every field below
    _idle: threading.Condition             #: notified when nothing is in flight while closing
    _t0: float                             #: perf_counter() at start: the clock's zero
    _policy: Policy
    estimator: LatencyEstimator
    _workers: list[Worker]
    _by_name: dict[str, Worker]
    _pending: dict[int, Request]           #: request id -> request awaiting a decision
    _unmeasured: set[tuple[str, str]]      #: (model, processor) pairs seeded with no measurement
    _stats: dict[str, ModelStats]          #: model name -> counters
    _records: deque[tuple[Any, ...]]       #: RequestRecord fields of the last RECORDS_KEPT finished (folded)
    _fresh: list[tuple[Any, ...]]          #: records ended since the last fold: not yet in _stats or _records
    _inflight: int                         #: requests submitted and not yet terminal
    _stopping: bool                        #: workers exit when their queue is empty
    _trace: TraceWriter | None             #: every request's line, given its outcome when it ends
    _models: dict[str, LoadedModel]        #: model name -> model (Runtime.load adds them)
    _then_ok: set[str]                     #: models whose then= names were all found loaded
    _frames: dict[int, Frame]              #: frame index -> frame, the most recent 4096 (cascade stages find theirs)
    _next_id: int                          #: the next request's id
    _closing: bool                         #: close() began: new requests are refused, cascade stages still run
    _resolver: ResolverThread | None       #: resolves what a worker ended while that worker runs its next request
    _idle_procs: tuple[ProcessorView, ...]  #: every worker's idle view: the snapshot's processors when all are idle

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
        self._fresh = []
        self._inflight = 0
        self._stopping = False
        self._trace = None
        self._models = {}
        self._then_ok = set()
        self._frames = {}
        self._next_id = 0
        self._closing = False
        self._resolver = None
        self._idle_procs = ()

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
        self._idle_procs = tuple(w.idle_view for w in workers)
        self._resolver = ResolverThread(lambda item: self._resolve_and_decide(item))   # late-bound: tests may wrap _resolve
        for w in workers:
            for i in range(w.capacity):
                t = threading.Thread(target=self._loop, args=(w,), name=f"edgert-{w.name}-{i}", daemon=True)
                w.threads.append(t)
                t.start()

    # -- admission (hot path): a request from its call to its placement -------------------
    def _call(self, m: LoadedModel, inputs: Any) -> dict[str, np.ndarray]:
        """A sync call: the outputs of a request of ``m`` on ``inputs`` (ok or late), or its error raised."""
        feeds = m.feeds(inputs)
        if m.name not in self._then_ok:
            self._then_ok.add(_validate.then(m.name, m.then, self._models))
        done: list[tuple[Request, Result]] = []
        wake: list[Worker] = []
        with self._lock:
            now = (_clock() - self._t0) * 1e3   # now_ms(), inline
            req = self._new_locked(m, feeds, None, now)
            if len(self._pending) == 1 and self._all_idle(now):
                inline = self._lone_locked(req, now, done, wake)
                w = req.worker
            else:
                self._schedule_locked(now, done, wake)
                w = req.worker
                inline = (w is not None and w.inline_ok and bool(w.queue) and w.queue[0] is req
                          and len(w.running) < w.capacity)   # w.has_free_slot(), inline
                if inline:
                    assert w is not None
                    w.start_next(now)
            if not inline and req.result is None:
                req.future = Future()
            for v in wake:
                if v.queue:
                    v.cond.notify()
        if done:
            self._resolve(done)
        if inline:
            self._run(w, req)  # type: ignore[arg-type]
            if req.outputs is not None:
                return req.outputs
        return unwrap(req.result if req.result is not None else req.future.result())  # type: ignore[union-attr]

    def _all_idle(self, now: float) -> bool:
        """Every worker runs nothing, has nothing queued and is healthy (the snapshot is ``_idle_procs``)."""
        for w in self._workers:
            if w.running or w.queue or now < w.unhealthy_until_ms:
                return False
        return True

    def _lone_locked(self, req: Request, now: float, done: list[tuple[Request, Result]], wake: list[Worker]) -> bool:
        """Decide on ``req``, the only request pending, every worker idle: True when placed on a worker the sync
        caller may run it on (started at ``now``), else the decision applied as :meth:`_apply_locked` does."""
        try:   # _decide_locked, inline (a call per sync request)
            decisions = self._policy.decide(_new(SchedulerView, ((req.view,), self._idle_procs, self.estimator)), now)
        except Exception as exc:  # noqa: BLE001 - a policy bug must not lose requests; it is logged
            self._policy_raised_locked(exc, now, done)
            return False
        if len(decisions) == 1:
            rid, proc, _ = decisions[0]
            w = self._by_name.get(proc) if rid == req.id and proc is not None else None
            allowed = req.view.allowed   # _can_run, inline
            if w is not None and w.inline_ok and self.estimator.expected_ms(req.model.name, w.name) is not None \
                    and (allowed is None or w.name in allowed):
                del self._pending[rid]
                req.worker = w
                w.running.append(req)
                req.start_ms = now
                return True
        self._apply_locked(decisions, now, done, wake)
        return False

    def _submit(self, m: LoadedModel, feeds: list[np.ndarray], after: Any) -> Future[Result]:
        parent = _validate.after(after)
        if m.name not in self._then_ok:
            self._then_ok.add(_validate.then(m.name, m.then, self._models))
        done: list[tuple[Request, Result]] = []
        with self._lock:
            now = self.now_ms()
            req = self._new_locked(m, feeds, parent, now)
            fut = req.future = Future()
            if self._stopping:   # a cascade stage submitted by a callback while closing: dropped, not raised
                del self._pending[req.id]
                self._drop_locked(req, "the runtime closed before it ran", now, done)
            else:
                self._schedule_locked(now, done)
            w = req.worker   # handed to a thread waiting for work (not this worker's own next stage)?
            handed = bool(w is not None and w.queue and w.queue[0] is req and w.has_free_slot()
                          and threading.current_thread() not in w.threads)
            overdue = not handed and self._overdue_locked(now)
        if done:
            self._resolve(done)
        if overdue:
            # A run expected to have ended: its worker is most likely back from the delegate and
            # waiting for the GIL to finish it and start the next, while this caller keeps it (a
            # burst's submit loop is pure Python; a woken thread waits up to CPython's 5 ms switch
            # interval). One nap hands it over: measured on a 1.4 ms CNN, runs during a burst's
            # submit loop took ~5 ms each without it (benchmarks/serving.py, issue 28).
            time.sleep(HANDOFF_NAP_S)
        if handed:
            # Hand the GIL to the woken worker until it has started: the caller usually goes on running
            # Python (the next submit, its own frame work), and the worker would otherwise wait for the
            # caller to block or for CPython's switch interval (5 ms), its processor idle with work
            # queued (benchmarks/handoff.py). Typically ~0.1 ms; a worker slow to get a core costs the
            # caller at most HANDOFF_WAIT_MS.
            give_up = time.perf_counter() + HANDOFF_WAIT_MS / 1000.0
            time.sleep(0)
            while req.start_ms != req.start_ms and time.perf_counter() < give_up:   # NaN: not started
                time.sleep(HANDOFF_NAP_S)   # a real nap: the worker may need this core, not only the GIL
        return fut

    def _overdue_locked(self, now: float) -> bool:
        """Whether a worker's run should have ended by ``now`` on the estimate (its thread then wants the GIL)."""
        exp = self.estimator.expected_ms
        for w in self._workers:
            for r in w.running:
                if r.start_ms + (exp(r.model.name, w.name) or 0.0) <= now:
                    return True
        return False

    def _new_locked(self, m: LoadedModel, feeds: list[np.ndarray], parent: Result | None,
                    now: float) -> Request:
        if self._closing and parent is None:
            # while draining, cascade stages of in-flight frames are still accepted; once stopped,
            # _submit drops them (a completion callback must not raise into concurrent.futures)
            raise EdgeRTError("the runtime is closed; create a new edgert.Runtime")
        rid = self._next_id
        self._next_id += 1
        f = current_frame.get()
        after_key = None
        if f is None and parent is not None:
            f = self._frames.get(parent.frame)
            after_key = parent.key
        elif parent is not None:
            after_key = parent.key
        stream = m.name
        if f is not None:
            deadline, key, t_trace, stream = f.deadline_ms, f.key(m.name), f.t_ms, f.stream(m.name)
        else:
            if parent is not None:
                deadline = parent.deadline_ms
                t_trace = parent.arrival_ms
            else:
                deadline = now + m.slo_ms if m.slo_ms is not None else math.inf
                t_trace = now
            key = None   # Request.trace_id's default
        downstream = sum(self._fastest_ms(n) for n in m.then) if m.then else 0.0
        view = _new(RequestView, (rid, m.name, now, deadline, stream, f.index if f is not None else -1,
                                  downstream, m.allowed))
        req = Request(rid, m, feeds, now, deadline, view, key, f.index if f is not None else -1)
        self._pending[rid] = req
        self._inflight += 1
        if self._trace is not None:
            self._trace.request(t_trace, m.name, deadline, req.trace_id, after_key)
        return req

    def _fastest_ms(self, model: str) -> float:
        exp = self.estimator.expected_ms
        vals = [v for w in self._workers if (v := exp(model, w.name)) is not None]
        return min(vals) if vals else 0.0

    # -- scheduling ------------------------------------------------------------------------
    def _schedule_locked(self, now: float, done: list[tuple[Request, Result]],
                         wake: list[Worker] | None = None, ahead: tuple[Worker, ...] = ()) -> None:
        """Ask the policy about every pending request and apply its answer (:meth:`_apply_locked`).
        ``ahead``: busy workers shown to the policy as free, to queue their next requests ahead."""
        if not self._pending:
            return
        if self._all_idle(now):   # a sync caller's usual case: one tuple, so the policy may reuse what it derived
            procs = self._idle_procs
        else:
            exp = self.estimator.expected_ms
            procs = tuple([w.idle_view if w in ahead or not (w.running or w.queue) and now >= w.unhealthy_until_ms
                           else self._view(w, now, exp) for w in self._workers])
        pending = self._pending
        views = tuple([r.view for r in pending.values()]) if len(pending) > 1 else (next(iter(pending.values())).view,)
        decisions = self._decide_locked(_new(SchedulerView, (views, procs, self.estimator)), now, done)
        if decisions is not None:
            self._apply_locked(decisions, now, done, wake)

    def _decide_locked(self, view: SchedulerView, now: float, done: list[tuple[Request, Result]]) -> list[Assignment] | None:
        """The policy's decision on ``view``; None when the policy raised (every pending request then failed)."""
        try:
            return self._policy.decide(view, now)
        except Exception as exc:  # noqa: BLE001 - a policy bug must not lose requests; it is logged
            self._policy_raised_locked(exc, now, done)
            return None

    def _policy_raised_locked(self, exc: Exception, now: float, done: list[tuple[Request, Result]]) -> None:
        """The policy raised ``exc`` deciding: it is logged as a bug, and every pending request fails with it."""
        bug_log.error("scheduler %r raised deciding %d request(s)", self.scheduler, len(self._pending), exc_info=exc)
        err = EdgeRTError(f"scheduler {self.scheduler!r} raised {exc!r} (a bug: see the edgert.bug log)")
        err.__cause__ = exc
        for stranded in list(self._pending.values()):
            self._fail_locked(stranded, err, now, done)
        self._pending.clear()

    def _apply_locked(self, decisions: list[Assignment], now: float, done: list[tuple[Request, Result]],
                      wake: list[Worker] | None) -> None:
        """Apply a decision as scheduler.contract says. Workers given work are notified at once, or appended
        to ``wake`` for the caller to notify after it has taken what it runs inline."""
        exp = self.estimator.expected_ms
        for a in decisions:
            req = self._pending.pop(a.request_id, None)
            if req is None:   # a broken decision: nothing to drop (ON_BROKEN)
                continue
            if a.processor is None:
                self._drop_locked(req, a.reason or dropped_by(self.scheduler), now, done)
                continue
            w = self._by_name.get(a.processor)
            allowed = req.view.allowed   # _can_run, inline (a call per request)
            if w is None or exp(req.model.name, w.name) is None or allowed is not None and w.name not in allowed:
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
