"""The dispatcher: a request's life in the live runtime, in the order it is lived. :class:`edgert.Runtime` holds one.

1. **admit** (:meth:`Dispatcher.call`, :meth:`Dispatcher.submit`, ``_admit_locked``): a :class:`Request`,
   pending, with its deadline (its frame's, its parent's, or arrival + the model's SLO).
2. **decide** (:class:`~edgert._core._decide.Decider`): the policy's decision over the pending requests and
   the workers, applied as :mod:`scheduler.contract` says (as the simulator applies it). A sync call's lone
   request with every worker idle is decided by ``Decider.lone``, which lets the caller run it itself.
3. **queue**: a worker's FIFO queue; the worker's thread (``_loop``) starts its head when it has a free slot.
4. **run** (``_run``): the delegate runs it outside the lock; then, under it, its latency goes into the
   estimator (``_observe``) and it ends ok or late, or it is placed again after an accelerator fault
   (``_replace_locked``), or it fails.
5. **resolve**: every end is one record and, unless a sync caller takes its outputs straight back, one
   :class:`Result` (:class:`~edgert._core._ends.Ends`), resolved outside the lock by the thread that ended it
   or by the resolver thread: :mod:`edgert._core._handoff` explains who and why.

One lock guards all of it. A thread that ends requests under it takes them (``Ends.take``) before it
releases the lock, and resolves them after.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from edgert._core import _validate
from edgert._core._decide import Decider
from edgert._core._ends import Ends
from edgert._core._frame import Frame, current_frame
from edgert._core._handoff import (
    Handed, Ran, ResolverThread, WatchedFuture, bug_log, nap, overdue_run, quiet, resolve, wait_started,
)
from edgert._core._result import LATE, OK, Result, completed, unwrap
from edgert._core._trace import TraceWriter
from edgert._core._worker import Request, Worker
from edgert.errors import EdgeRTError
from scheduler.estimator import LatencyEstimator
from scheduler.types import Policy, RequestView

if TYPE_CHECKING:
    from concurrent.futures import Future

    from edgert._core._model import LoadedModel

_new = tuple.__new__   # a RequestView from a ready tuple, without the keyword-handling constructor
#: With at least this many requests pending (a burst, deeper than a frame's cascades), a busy worker is
#: shown to the policy as free while it runs, so its next request is queued ahead (``_resolve_and_decide``).
#: The simulator does not: its decisions take no virtual time, so there is no gap between runs to hide.
AHEAD_PENDING = 16
#: After a runtime fault, an accelerator is kept out of placement this long before it is tried again (ms).
REPROBE_MS = 2_000.0
#: Frames kept for cascade stages to find theirs by index.
FRAMES_KEPT = 4096


class Dispatcher:
    """Owns every request from admission to resolution (see the module doc), and the runtime clock.

    Args:
        policy: the policy object (``decide(view, now_ms)``).
        estimator: the latency estimator the policy reads and every completed run updates.
        trace: where every request's line goes, given its outcome when it ends (None: nowhere).
    """

    def __init__(self, policy: Policy, estimator: LatencyEstimator, trace: TraceWriter | None = None) -> None:
        self._lock = threading.Lock()   # guards all of it (the workers' conditions are built on it)
        self._t0 = time.perf_counter()  # the clock's zero
        self.estimator = estimator
        self.trace = trace
        self.ends = Ends(self._lock)
        self.decider = Decider(policy, estimator, self.ends)
        self._pending = self.decider.pending   # (the decider's map: admission adds to it)
        self.workers: list[Worker] = []
        self.models: dict[str, LoadedModel] = {}   # Runtime.load adds them
        self.unmeasured: set[tuple[str, str]] = set()   # (model, processor) pairs seeded with no measurement
        self._then_ok: set[str] = set()       # models whose then= names were all found loaded
        self._frames: dict[int, Frame] = {}   # frame index -> frame (cascade stages find theirs)
        self._next_frame = 0
        self._next_id = 0
        self._stopping = False                # workers exit when their queue is empty
        self._resolver: ResolverThread | None = None

    def now_ms(self) -> float:
        """The runtime clock: ms since the runtime started (monotonic)."""
        return (time.perf_counter() - self._t0) * 1e3

    @property
    def processors(self) -> list[str]:
        """Worker names."""
        return [w.name for w in self.workers]

    @property
    def lock(self) -> threading.Lock:
        """The one lock (the workers' conditions are built on it)."""
        return self._lock

    def start(self, workers: list[Worker]) -> None:
        """Adopt ``workers``, start their threads (``capacity`` each) and the resolver thread."""
        self.workers = workers
        self.decider.adopt(workers)
        self._resolver = ResolverThread(self._resolve_and_decide)
        for w in workers:
            for i in range(w.capacity):
                t = threading.Thread(target=self._loop, args=(w,), name=f"edgert-{w.name}-{i}", daemon=True)
                w.threads.append(t)
                t.start()

    def new_frame(self, budget_ms: float) -> Frame:
        """A frame from now, its deadline ``budget_ms`` later."""
        with self._lock:
            now = self.now_ms()
            f = Frame(self._next_frame, now, now + budget_ms)
            self._next_frame += 1
            self._frames[f.index] = f
            self._frames.pop(f.index - FRAMES_KEPT, None)
        return f

    # -- 1. admit ---------------------------------------------------------------------------
    def call(self, m: LoadedModel, inputs: Any) -> dict[str, np.ndarray]:
        """A sync call: the outputs of a request of ``m`` on ``inputs`` (ok or late), or its error raised."""
        feeds = m.feeds(inputs)
        if m.name not in self._then_ok:
            self._check_then(m)
        with self._lock:
            now = self.now_ms()
            req = self._admit_locked(m, feeds, None, now)
            if len(self._pending) == 1 and self.decider.all_idle(now):
                inline = self.decider.lone(req, now)
            else:
                self.decider.decide(now, wake=False)
                w = req.worker   # placed at the head of a free worker's queue: this thread runs it
                inline = bool(w is not None and w.inline_ok and w.queue and w.queue[0] is req and w.has_free_slot())
                if inline:
                    assert w is not None   # (inline says so)
                    w.start_next(now)
                self.decider.wake()   # after taking what it runs: a worker woken for nothing costs this thread the GIL
            if not inline and req.result is None:
                req.future = WatchedFuture()
            done = self.ends.take() if self.ends.results else None
        if done:
            resolve(done, self.trace)
        if inline:
            self._run(req.worker, req)   # type: ignore[arg-type]  # set when inline
            if req.outputs is not None:
                return req.outputs
        return unwrap(req.result if req.result is not None else req.future.result())  # type: ignore[union-attr]

    def submit(self, m: LoadedModel, feeds: list[np.ndarray], after: Any) -> Future[Result]:
        """Queue a request of ``m`` on ``feeds`` (validated); ``after``: its cascade parent (Result / Future)."""
        parent = _validate.after(after)
        if m.name not in self._then_ok:
            self._check_then(m)
        with self._lock:
            now = self.now_ms()
            req = self._admit_locked(m, feeds, parent, now)
            fut = req.future = WatchedFuture()
            if self._stopping:   # a cascade stage submitted by a callback while closing: dropped, not raised
                del self._pending[req.id]
                self.ends.drop(req, "the runtime closed before it ran", now)
            else:
                self.decider.decide(now)
            w = req.worker   # handed to a thread waiting for work (not this worker's own next stage)?
            handed = bool(w is not None and w.queue and w.queue[0] is req and w.has_free_slot()
                          and threading.current_thread() not in w.threads)
            overdue = not handed and overdue_run(self.workers, self.estimator, now)
            done = self.ends.take() if self.ends.results else None
        if done:
            resolve(done, self.trace)
        if overdue:
            nap()
        if handed:
            wait_started(req)
        return fut

    def _check_then(self, m: LoadedModel) -> None:
        """At ``m``'s first request: its ``then=`` names are loaded (else ConfigError)."""
        self._then_ok.add(_validate.then(m.name, m.then, self.models))

    def _admit_locked(self, m: LoadedModel, feeds: list[np.ndarray], parent: Result | None, now: float) -> Request:
        """A new pending request of ``m``; its deadline its frame's, else its parent's, else ``now`` + the SLO."""
        if self.ends.closing and parent is None:
            # while draining, cascade stages of in-flight frames are still accepted; once stopped,
            # submit drops them (a completion callback must not raise into concurrent.futures)
            raise EdgeRTError("the runtime is closed; create a new edgert.Runtime")
        rid = self._next_id
        self._next_id += 1
        f = current_frame.get()
        if f is None and parent is not None:
            f = self._frames.get(parent.frame)
        after_key = parent.key if parent is not None else None
        stream, key, t_trace = m.name, None, now   # key None: Request.trace_id's default
        if f is not None:
            deadline, key, t_trace, stream = f.deadline_ms, f.key(m.name), f.t_ms, f.stream(m.name)
        elif parent is not None:
            deadline, t_trace = parent.deadline_ms, parent.arrival_ms
        else:
            deadline = now + m.slo_ms if m.slo_ms is not None else math.inf
        frame = f.index if f is not None else -1
        downstream = sum(self._fastest_ms(n) for n in m.then) if m.then else 0.0
        priority = f.priority if f is not None and f.priority is not None else m.priority
        allowed = f.allowed if f is not None and f.allowed is not None else m.allowed
        view = _new(RequestView, (rid, m.name, now, deadline, stream, frame, downstream, allowed, priority))
        req = Request(rid, m, feeds, now, deadline, view, key, frame)
        self._pending[rid] = req
        self.ends.inflight += 1
        if self.trace is not None:
            self.trace.request(t_trace, m.name, deadline, req.trace_id, after_key, priority)
        return req

    def _fastest_ms(self, model: str) -> float:
        exp = self.estimator.expected_ms
        vals = [v for w in self.workers if (v := exp(model, w.name)) is not None]
        return min(vals) if vals else 0.0

    # -- 3. queue, 4. run -------------------------------------------------------------------
    def _loop(self, w: Worker) -> None:
        """A worker's thread: start its queue's head when it has a free slot, run it, repeat until stopped."""
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
        """Run ``req`` on ``w`` and end it (or place it again). With ``chain`` (``w``'s own thread), when resolving
        cannot submit work, the next run starts first and is returned, already running, for this thread to run
        next, while the resolver thread does the rest (:mod:`edgert._core._handoff`)."""
        outs: list[np.ndarray] | None = None
        err: EdgeRTError | None = None
        delegate = ""
        try:   # the delegate runs it, outside the lock
            outs, delegate = w.execute(req)
        except EdgeRTError as exc:
            err = exc
        except Exception as exc:  # noqa: BLE001 - not a backend error (sessions map those): a bug, logged
            bug_log.error("%s raised running %r (request %d)", w.name, req.model.name, req.id, exc_info=exc)
            err = EdgeRTError(f"{w.name} raised {exc!r} running {req.model.name!r} (a bug: see the edgert.bug log)")
            err.__cause__ = exc
        with self._lock:
            end = self.now_ms()
            w.running.remove(req)
            if chain and err is None and w.queue and w.capacity == 1 and self._resolver is not None and quiet(req):
                # its next request was queued ahead: it starts now; this one's end waits for the resolver thread
                nxt = w.start_next(end)
                self._resolver.hand(Handed([], decide_for=w, ran=Ran(w, req, outs, delegate, end)))  # type: ignore[arg-type]
                return nxt
            if w.queue:
                w.cond.notify()
            if err is None:   # a sync caller's request run on its thread, untraced: it wants the outputs only
                made = chain or req.future is not None or self.trace is not None
                outputs = self._ran_locked(w, req, outs, delegate, end, made)  # type: ignore[arg-type]  # set
                if not made:
                    req.outputs = outputs
            elif not self._replace_locked(w, req, end):
                self.ends.fail(req, err, end)
            if chain and self._resolver is not None and all(quiet(r) for r, _ in self.ends.results):
                return self._next_locked(w)
            done = self.ends.take() if self.ends.results else None
        # Resolve first: completion callbacks submit the next cascade stages, which must be
        # pending when the freed processor is next decided on (else older work takes it).
        if done:
            resolve(done, self.trace)
        if self._pending:  # unlocked peek is safe: whoever adds to pending decides itself
            with self._lock:
                self.decider.decide(self.now_ms())
                done = self.ends.take() if self.ends.results else None
            if done:
                resolve(done, self.trace)
        return None

    def _next_locked(self, w: Worker) -> Request | None:
        """On ``w``'s thread after a run whose ends are quiet: start its next request now, and hand what ended
        and the decision to the resolver thread. A request already queued ahead starts first, and the decision
        waits for the resolver; else the decision is made here, first."""
        queued = bool(w.queue)
        if self._pending and not queued:
            self.decider.decide(self.now_ms())
        started = w.start_next(self.now_ms()) if w.queue and w.has_free_slot() else None
        decide = queued and bool(self._pending) or (
            started is not None and w.capacity == 1 and len(self._pending) >= AHEAD_PENDING)
        done = self.ends.take()
        if done or decide:
            assert self._resolver is not None   # (the caller checked)
            self._resolver.hand(Handed(done, w if decide else None))   # under the lock: before close's end mark
        return started

    def _resolve_and_decide(self, item: Handed) -> None:
        """The resolver thread's work, while the worker that handed ``item`` runs its next request: the bookkeeping
        it left, the resolution, then (a worker named) the decision its completion left. With a backlog of at least
        :data:`AHEAD_PENDING`, every running worker with nothing queued is shown to the policy as free, so that the
        request the policy would start on each is queued ahead and its next completion starts that one with no
        decision between the two runs (issue 28: a burst's decision over hundreds pending took 60-80 µs between
        1.3 ms runs); one decision serves every worker it finds so."""
        done = item.done
        if item.ran is not None:
            r = item.ran
            with self._lock:
                self._ran_locked(r.worker, r.req, r.outputs, r.delegate, r.end_ms, True)
                done = done + self.ends.take()
        if done:
            resolve(done, self.trace)
        if item.decide_for is None:
            return
        with self._lock:
            now = self.now_ms()
            burst = len(self._pending) >= AHEAD_PENDING
            ahead = tuple([v for v in self.workers if v.running and not v.queue and v.capacity == 1
                           and now >= v.unhealthy_until_ms]) if burst else ()
            if burst and not ahead and all(v.queue or not v.has_free_slot() for v in self.workers):
                return   # every worker runs with its next queued: nothing could start; the next completion decides
            self.decider.decide(now, ahead=ahead)
            done = self.ends.take()
        if done:
            resolve(done, self.trace)

    def _ran_locked(self, w: Worker, req: Request, outs: list[np.ndarray], delegate: str, end: float,
                    make_result: bool) -> dict[str, np.ndarray]:
        """``req`` ran on ``w`` until ``end``: its latency into the estimator, its end recorded; its outputs. With
        ``make_result`` False (a sync caller's request that ran on its thread, no trace) no Result is made."""
        self._observe(req.model.name, w, end - req.start_ms)
        status = OK if end <= req.deadline_ms else LATE
        outputs = dict(zip(req.model.output_names, outs))
        if make_result:
            res = completed(outputs, status, w.name, delegate, end - req.arrival_ms, req.start_ms - req.arrival_ms,
                            req.model.name, req.id, req.deadline_ms, req.arrival_ms, req.frame, req.trace_id)
            self.ends.complete(req, res, w.name, end)
        else:
            self.ends.record(req, status, w.name, end, "")
        return outputs

    def _observe(self, model: str, w: Worker, ms: float) -> None:
        """Fold a measured run (ms) into ``w``'s estimate and give its peers (the same processor) that
        one value: a single moving average over all their runs."""
        est = self.estimator
        if self.unmeasured and (model, w.name) in self.unmeasured:
            for proc in w.peers:   # learnt without a seed: the first measurement is the prior
                self.unmeasured.discard((model, proc))
                if est.expected_ms(model, proc) is not None:
                    est.seed(model, proc, ms)
            return
        est.update_shared(model, w.name, w.peers, ms)   # a pair a peer does not know stays unknown

    def _replace_locked(self, w: Worker, req: Request, now: float) -> bool:
        """After a fault on an accelerator, mark it unhealthy and place the request again if time allows."""
        if w.kind == "cpu" or req.attempts >= 2 or now >= req.deadline_ms:
            return False
        if not any(o is not w and self.decider.can_run(o, req) for o in self.workers):
            return False
        w.unhealthy_until_ms = now + REPROBE_MS
        req.attempts += 1
        req.worker = None
        if req.future is None:   # a sync caller's request it ran on its own thread: the caller waits for the re-run
            req.future = WatchedFuture()
        self._pending[req.id] = req
        while w.queue:   # given to it ahead: decided again, elsewhere
            queued = w.queue.popleft()
            queued.worker = None
            self._pending[queued.id] = queued
        return True

    # -- closing -----------------------------------------------------------------------------
    def close(self, timeout_s: float) -> None:
        """Finish in-flight requests (up to ``timeout_s``), drop what is left, stop the workers and the resolver
        thread, close the trace."""
        with self._lock:
            if self._stopping:
                return
            self.ends.closing = True
            self.ends.wait_idle(timeout_s)
            now = self.now_ms()
            for req in list(self._pending.values()):
                self.ends.drop(req, "the runtime closed before it ran", now)
            self._pending.clear()
            for w in self.workers:
                while w.queue:
                    self.ends.drop(w.queue.popleft(), "the runtime closed before it ran", now)
            self._stopping = True
            for w in self.workers:
                w.cond.notify_all()
            done = self.ends.take()
        resolve(done, self.trace)
        for w in self.workers:
            for t in w.threads:
                t.join(timeout=5.0)
            w.close()
        with self._lock:   # a worker stuck past the join resolves its own requests from now on
            resolver, self._resolver = self._resolver, None
            if resolver is not None:
                resolver.close()
        if resolver is not None:
            resolver.join()
        if self.trace is not None:
            self.trace.close()
