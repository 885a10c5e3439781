"""A request's life in the live runtime: admitted, decided, queued, run, ended, resolved.

:class:`edgert.Runtime` holds one :class:`Dispatcher`; every :class:`edgert.Model` call enters it. Read it top to
bottom; each section is one step of a request's life, in order:

* **the request** (:class:`Request`): what the runtime holds of it from admission to resolution.
* **admit, decide, run, end** (:class:`Dispatcher`): :meth:`~Dispatcher.call` and :meth:`~Dispatcher.submit`
  check the inputs and admit the request pending with its deadline (its frame's, its parent's, or arrival + the
  model's SLO); the policy decides (:class:`Decider`); a worker's thread runs it outside the lock and ends it
  (``Dispatcher._run``), or a sync caller runs it on its own thread (``Dispatcher._run_inline``) when every
  idle worker lets it.
* **decide** (:class:`Decider`): the policy's decision over the pending requests and the workers, applied as
  :mod:`scheduler.contract` says (as the simulator applies it).
* **queue** (:class:`Worker`): a FIFO queue per worker; :meth:`Worker.start` is the one start transition.
* **end** (:class:`Ends`): every request ends once, as one record and (unless a sync caller takes its outputs
  straight back) one :class:`~edgert._core._result.Result`.
* **resolve** (:class:`Ending`, :func:`resolve`, the hand-off): one lock guards all of it. ``with ending:``
  holds it, and on leaving takes what ended (:meth:`Ending.take_locked`, the one place) and resolves it
  outside the lock, so a completion callback may submit the next stage of a cascade. A worker whose ended
  request cannot submit work (:func:`quiet`) starts its next run first and hands the rest to the
  :class:`ResolverThread` (a :class:`Handed`) while a core is free to run that thread
  (``Dispatcher._hands_off``): the processor's idle gap between two runs is the bookkeeping only. With nothing
  queued or pending, or every core running a CPU worker's request, it resolves on its own thread (a hand-off
  would only add a thread switch, or take a core from a run); it resolves before the freed processor is
  decided on, so the cascade's next stage is pending for that decision.

The GIL. A ``submit`` that wakes an idle worker would otherwise keep the GIL while the caller goes on running
Python, its worker's processor idle with work queued (``benchmarks/handoff.py``): :func:`wait_started` naps
until that worker has started (typically ~0.1 ms, at most :data:`HANDOFF_WAIT_MS`). :func:`nap` is the one
nap a burst's submit loop takes when a run should already have ended: its worker is back from the delegate
and waiting for the GIL to finish it (``benchmarks/serving.py``).
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from delegates.base import Delegate, Session
from edgert._core import _validate
from edgert._core._frame import Frame, current_frame
from edgert._core._records import RecordBuffer, Row
from edgert._core._result import DROPPED, FAILED, LATE, OK, Result, WatchedFuture, completed, unwrap
from edgert._core._stats import ModelStats
from edgert._core._thread_priority import ThreadNice, ThreadPriority
from edgert._core._trace import TraceWriter
from edgert.errors import ConfigError, EdgeRTError, RequestDropped
from scheduler.contract import OnBroken, apply, left_unplaced, processor_view, sweep_unplaced
from scheduler.estimator import LatencyEstimator
from scheduler.host import cores
from scheduler.priority import URGENT_LEVELS
from scheduler.streams import WINDOW_MS as BUSY_WINDOW_MS
from scheduler.streams import Backlog, Work
from scheduler.types import Assignment, Policy, ProcessorView, RequestView, SchedulerView

if TYPE_CHECKING:
    from edgert._core._model import LoadedModel

#: With at least this many requests pending (a burst, deeper than a frame's cascades), a busy worker is
#: shown to the policy as free while it runs, so its next request is queued ahead (``_decide_freed_locked``); a
#: completion decides only once no worker still holds a request queued ahead, and a submit only while a worker
#: could start a request (``_nothing_could_start_locked``).
#: The simulator does not: its decisions take no virtual time, so there is no gap between runs to hide.
AHEAD_PENDING = 16
#: After a runtime fault, an accelerator is kept out of placement this long before it is tried again (ms).
REPROBE_MS = 2_000.0
#: Frames kept for cascade stages to find theirs by index.
FRAMES_KEPT = 4096
#: A request's end appends its row only; every this many, the rows are counted into the per-model
#: stats (and kept, when the runtime keeps records) by :meth:`Ends.fold`, as ``stats()`` / ``records()`` do
#: first: a stats call per request cost ~0.7 µs of a sync call's ~10, a fold ~30 µs every 64 requests.
FOLD_EVERY = 64
#: A decision that breaks the driver contract drops the request it names (the simulator raises instead):
#: the app keeps running and every request still ends once. See scheduler.contract.
ON_BROKEN = OnBroken.DROP
#: The most a ``submit`` that woke an idle worker waits for that worker to start its request (ms).
HANDOFF_WAIT_MS = 1.0
#: The naps it takes meanwhile (s): each releases the GIL and the core (the worker may need the core too).
HANDOFF_NAP_S = 1e-5

bug_log = logging.getLogger("edgert.bug")

_Class = TypeVar("_Class", bound=type)
try:   # read by mypyc when tools/compile.py compiles this module; the pure-Python module needs nothing of it
    from mypy_extensions import mypyc_attr
except ImportError:  # pragma: no cover - a core install without mypy: the class stays as written
    def mypyc_attr(**_attrs: object) -> Callable[[_Class], _Class]:  # type: ignore[misc]
        """Without mypy installed: a decorator that leaves the class as it is."""
        return lambda cls: cls


# --- the request ----------------------------------------------------------------------------------------------

class Request:
    """One request in flight (internal): owned by the dispatcher from admission to resolution, held by its
    ``pending`` map until placed, then by a worker's queue. Mutated only under the runtime lock."""

    __slots__ = ("id", "model", "feeds", "arrival_ms", "deadline_ms", "view", "future",
                 "worker", "start_ms", "_key", "attempts", "frame", "result", "watch", "parent_id")

    def __init__(self, rid: int, model: LoadedModel, feeds: list[np.ndarray], arrival_ms: float,
                 deadline_ms: float, view: RequestView, key: str | None, frame: int = -1) -> None:
        self.id = rid
        self.model = model
        self.feeds = feeds
        self.arrival_ms = arrival_ms
        self.deadline_ms = deadline_ms
        self.view = view
        #: Created only when someone waits (submit, or a sync call that did not run inline).
        self.future: Future[Result] | None = None
        #: Where its result lands when it ends (:func:`resolve`; the future, if any, is given the same). A sync
        #: caller's request that ran ok or late on the caller's thread makes none: its outputs go straight back.
        self.result: Result | None = None
        self.worker: Worker | None = None
        self.start_ms = math.nan
        self._key = key   # None: its default, made when asked (a sync call's request seldom is)
        self.attempts = 0
        self.frame = frame
        #: its stream frame's watch (``edgert._core._streams.FrameWatch``), told when it ends; None outside streams
        self.watch: Any = None
        #: its cascade parent's id within a stream frame (None: a root)
        self.parent_id: int | None = None

    @property
    def trace_id(self) -> str:
        """Its id in the trace and its Result's ``key``: its frame's (``f7/hand``), else ``r42/hand``."""
        return self._key if self._key is not None else f"r{self.id}/{self.model.name}"

    def dropped(self, reason: str, now_ms: float) -> Result:
        """Its ``dropped`` result at ``now_ms``, saying ``reason``."""
        waited = now_ms - self.arrival_ms
        return Result(None, DROPPED, "", "", waited, waited, RequestDropped(self.model.name, reason),
                      self.model.name, self.id, self.deadline_ms, self.arrival_ms, self.frame, self.trace_id)

    def failed(self, err: EdgeRTError, now_ms: float) -> Result:
        """Its ``failed`` result at ``now_ms``, carrying ``err``, on the worker it was given (if any)."""
        proc = self.worker.name if self.worker is not None else ""
        start = self.start_ms if not math.isnan(self.start_ms) else now_ms
        return Result(None, FAILED, proc, "", now_ms - self.arrival_ms, start - self.arrival_ms, err,
                      self.model.name, self.id, self.deadline_ms, self.arrival_ms, self.frame, self.trace_id)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<Request {self.id} {self.model.name} deadline={self.deadline_ms:.1f}ms>"


# --- the dispatcher: admit, decide, run, end ---------------------------------------------------------------

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
        #: ``with self._ending:`` holds the lock and resolves what ended meanwhile once it is released
        self._ending = Ending(self._lock, self.ends, trace)
        self.decider = Decider(policy, estimator, self.ends)
        self.workers: list[Worker] = []
        self.models: dict[str, LoadedModel] = {}   # Runtime.load adds them
        self.unmeasured: set[tuple[str, str]] = set()   # (model, processor) pairs seeded with no measurement
        self._then_ok: set[str] = set()       # models whose then= names were all found loaded
        self._frames: dict[int, Frame] = {}   # frame index -> frame (cascade stages find theirs)
        self._next_frame = 0
        self._next_id = 0
        self._stopping = False                # workers exit when their queue is empty
        self._resolver: ResolverThread | None = None
        self.thread_priority = ThreadPriority(False)   # the runtime sets its own (Runtime(thread_priority=))
        self._not_urgent: tuple[str, ...] | None = None   # with urgent lanes: every other worker's name
        #: the urgent lanes take work of any level: set by the streams while none of them needs its urgent level
        #: (``edgert._core._streams``), so a lane is capacity while no critical stream misses frames
        self.lanes_open = False
        self._runs: deque[tuple[float, float]] = deque()   # (end ms, run ms) of local runs over the busy window
        self._cores = cores()   # the host's cores this process may run on

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
        if any(w.urgent for w in workers):
            self._not_urgent = tuple(w.name for w in workers if not w.urgent)
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
            return self.new_frame_locked(now, now + budget_ms)

    def new_frame_locked(self, t_ms: float, deadline_ms: float) -> Frame:
        """A frame captured at ``t_ms`` and due by ``deadline_ms`` (absolute ms; the lock held)."""
        f = Frame(self._next_frame, t_ms, deadline_ms)
        self._next_frame += 1
        self._frames[f.index] = f
        self._frames.pop(f.index - FRAMES_KEPT, None)
        return f

    # -- what the stream controller reads (scheduler.streams.Backlog) -----------------------
    def backlog_locked(self, now: float) -> Backlog:
        """The work this dispatcher holds at ``now`` (ms), as the stream controller reads it: every request pending,
        queued or running with its expected run left, and the local workers' capacity and recent busy share (the
        lock held)."""
        exp = self.estimator.expected_ms
        work = [Work(self.fastest_ms(r.model.name), r.deadline_ms, r.view.priority, False)
                for r in self.decider.pending.values()]
        for w in self.workers:
            if w.kind == "cloud":
                continue
            for r in w.queue:
                work.append(Work(exp(r.model.name, w.name) or self.fastest_ms(r.model.name), r.deadline_ms,
                                 r.view.priority, False))
            for r in w.running:
                left = (exp(r.model.name, w.name) or 0.0) - (now - r.start_ms)
                work.append(Work(max(0.0, left), r.deadline_ms, r.view.priority, True))
        local = [w for w in self.workers if w.kind != "cloud"]
        lanes = 0 if self.lanes_open else sum(w.urgent for w in local)   # an open lane is capacity like the rest
        return Backlog(now, max(1, len(local) - lanes), lanes, self.busy_share_locked(now), tuple(work),
                       len(local) < len(self.workers))

    def busy_share_locked(self, now: float) -> float:
        """The local workers' (urgent lanes aside) busy share over the last ``scheduler.streams.WINDOW_MS``: run ms
        ended in that window over the window times those workers (more than 1 when the lanes helped)."""
        runs = self._runs
        while runs and runs[0][0] < now - BUSY_WINDOW_MS:
            runs.popleft()
        workers = max(1, sum(w.kind != "cloud" and (self.lanes_open or not w.urgent) for w in self.workers))
        return sum(ms for _, ms in runs) / (BUSY_WINDOW_MS * workers)

    def fastest_ms(self, model: str, unknown_ms: float = 0.0) -> float:
        """Expected ms of ``model`` on its fastest worker (``unknown_ms`` before any is known)."""
        exp = self.estimator.expected_ms
        vals = [v for w in self.workers if (v := exp(model, w.name)) is not None]
        return min(vals) if vals else unknown_ms

    # -- admit ---------------------------------------------------------------------------
    def checked(self, m: LoadedModel, inputs: Any, after: Any = None) -> tuple[list[np.ndarray], Result | None]:
        """Every entry point's one check, before anything is queued: ``inputs`` as arrays in ``m``'s input order
        (:meth:`~edgert._core._model.LoadedModel.feeds`), the cascade parent ``after`` (a Result, a Future of one,
        or None), and, at ``m``'s first request, its ``then=`` names loaded.

        Raises:
            InputError: the inputs do not fit the model (naming the input, what it takes and what it got).
            ConfigError: ``after`` is not a Result or Future, or a ``then=`` name is not loaded.
        """
        feeds = m.feeds(inputs)
        parent = _validate.after(after) if after is not None else None
        if m.name not in self._then_ok:
            self._then_ok.add(_validate.then(m.name, m.then, self.models))
        return feeds, parent

    def call(self, m: LoadedModel, inputs: Any) -> dict[str, np.ndarray]:
        """A sync call: the outputs of a request of ``m`` on ``inputs`` (ok or late), or its error raised."""
        feeds, _ = self.checked(m, inputs)
        with self._ending:
            now = self.now_ms()
            req = self._admit_locked(m, feeds, None, now)
            inline = self._taken_locked(req, now) and self._decide_sync_locked(req, now)
            if not inline:
                req.future = WatchedFuture()
        if inline:
            outputs = self._run_inline(req.worker, req)   # type: ignore[arg-type]  # set when inline
            if outputs is not None:
                return outputs
        if req.result is None:
            req.future.result()   # type: ignore[union-attr]  # (it waits until the request ends)
        return unwrap(req.result)   # type: ignore[arg-type]  # set by resolve

    def _decide_sync_locked(self, req: Request, now: float) -> bool:
        """Decide on a sync caller's request: True when it was placed at the head of a free worker that lets the
        caller run it (started now, on the caller's thread)."""
        if len(self.decider.pending) == 1 and self.decider.all_idle(now):
            return self.decider.lone(req, now)
        self.decider.decide(now, wake=False)
        w = req.worker
        inline = bool(w is not None and w.inline_ok and w.queue and w.queue[0] is req and w.has_free_slot())
        if inline:
            w.start_next(now)   # type: ignore[union-attr]  # (inline says so)
        self.decider.wake()   # after taking what it runs: a worker woken for nothing costs this thread the GIL
        return inline

    def submit(self, m: LoadedModel, inputs: Any, after: Any = None) -> Future[Result]:
        """Queue a request of ``m`` on ``inputs``; ``after``: its cascade parent (Result / Future, or None)."""
        feeds, parent = self.checked(m, inputs, after)
        with self._ending:
            now = self.now_ms()
            req = self._admit_locked(m, feeds, parent, now)
            fut = req.future = WatchedFuture()
            if self._stopping:   # a cascade stage submitted by a callback while closing: dropped, not raised
                del self.decider.pending[req.id]
                self.ends.drop(req, "the runtime closed before it ran", now)
            elif self._taken_locked(req, now) and not self._nothing_could_start_locked():
                self.decider.decide(now)
            w = req.worker   # handed to a thread waiting for work (not this worker's own next stage)?
            handed = bool(w is not None and w.queue and w.queue[0] is req and w.has_free_slot()
                          and threading.current_thread() not in w.threads)
            overdue = not handed and overdue_run(self.workers, self.estimator, now)
        if overdue:
            nap()
        if handed:
            wait_started(req)
        return fut

    def _taken_locked(self, req: Request, now: float) -> bool:
        """Whether ``req`` may run: False, and it ended ``dropped`` with the frame's reason, when it belongs to a
        stream frame that was not taken."""
        watch = req.watch
        if watch is None or watch.taken:
            return True
        del self.decider.pending[req.id]
        self.ends.drop(req, watch.drop_reason, now)
        return False

    def _admit_locked(self, m: LoadedModel, feeds: list[np.ndarray], parent: Result | None, now: float) -> Request:
        """A new pending request of ``m``; its deadline its frame's, else its parent's, else ``now`` + the SLO."""
        if self.ends.closing and parent is None:
            # while draining, cascade stages of in-flight frames are still accepted; once stopped,
            # submit drops them (a completion callback must not raise into concurrent.futures)
            raise EdgeRTError("the runtime is closed; create a new edgert.Runtime")
        rid = self._next_id
        self._next_id += 1
        f = current_frame.get()
        if parent is not None:   # a cascade stage: its parent's stream frame, else the frame it is issued in
            of_parent = self._frames.get(parent.frame)
            if f is None or (of_parent is not None and of_parent.watch is not None):
                f = of_parent
        after_key = parent.key if parent is not None else None
        stream, key, t_trace = m.name, None, now   # key None: Request.trace_id's default
        if f is not None:
            deadline, key, t_trace, stream = f.deadline_ms, f.key(m.name), f.t_ms, f.stream(m.name)
        elif parent is not None:
            deadline, t_trace = parent.deadline_ms, parent.arrival_ms
        else:
            deadline = now + m.slo_ms if m.slo_ms is not None else math.inf
        frame = f.index if f is not None else -1
        downstream = sum(self.fastest_ms(n) for n in m.then) if m.then else 0.0
        priority = f.priority if f is not None and f.priority is not None else m.priority
        allowed = f.allowed if f is not None and f.allowed is not None else m.allowed
        if self._not_urgent is not None and priority not in URGENT_LEVELS and not self.lanes_open:   # not its lanes
            allowed = self._not_urgent if allowed is None else tuple(p for p in allowed if p in self._not_urgent)
        view = RequestView(rid, m.name, now, deadline, stream, frame, downstream, allowed, priority)
        req = Request(rid, m, feeds, now, deadline, view, key, frame)
        if f is not None and f.watch is not None:
            f.watch.opened(req, parent.id if parent is not None else None)
        self.decider.pending[rid] = req
        self.ends.inflight += 1
        if self.trace is not None:
            self.trace.request(t_trace, m.name, deadline, req.trace_id, after_key, priority, frame)
        return req

    # -- run ---------------------------------------------------------------------------------
    def _loop(self, w: Worker) -> None:
        """A worker's thread: start its queue's head when it has a free slot, run it (at its level's OS priority,
        :mod:`edgert._core._thread_priority`), repeat until stopped."""
        req: Request | None = None
        nice = ThreadNice(self.thread_priority)
        while True:
            if req is None:
                with w.cond:
                    while not (w.queue and w.has_free_slot()):
                        if self._stopping:
                            return
                        w.wait_for_work()
                    req = w.start_next(self.now_ms())
            nice.run_at(req.view.priority)
            req = self._run(w, req)

    def _run(self, w: Worker, req: Request) -> Request | None:
        """On ``w``'s thread: run ``req`` and end it (or place it again); the request this thread runs next, already
        started, when resolving cannot submit work (the hand-off, in the module doc, or its next queued ahead), else
        None."""
        outs, delegate, err = execute(w, req)
        with self._ending:
            end = self.now_ms()
            w.running.remove(req)
            if err is None and w.queue and w.capacity == 1 and self._hands_off(w) and quiet(req):
                # its next request was queued ahead: it starts now; this one's end waits for the resolver thread
                nxt = w.start_next(end)
                ran = Ran(w, req, outs, delegate, end)  # type: ignore[arg-type]  # (err is None: outs is set)
                assert self._resolver is not None   # (_hands_off says so)
                self._resolver.hand(Handed([], decide_for=w, ran=ran))
                return nxt
            self._end_run_locked(w, req, outs, delegate, err, end, make_result=True)
            if all(quiet(r) for r, _ in self.ends.results):   # resolving them cannot submit work
                if self._hands_off(w) and (w.queue or self.decider.pending):   # (with neither: a thread switch only)
                    return self._next_locked(w)
                # its next request, queued ahead, starts now, so that the decision sees it running; decided before
                # they are resolved (leaving the block): a caller the result wakes finds the GIL free
                started = w.start_next(end) if w.queue and w.has_free_slot() else None
                self._decide_freed_locked()
                return started
        # Resolved first (leaving the block): completion callbacks submit the next cascade stages, which must be
        # pending when the freed processor is next decided on (else older work takes it).
        self._decide_freed()
        return None

    def _hands_off(self, w: Worker) -> bool:
        """Whether ``w``'s thread hands the bookkeeping of its ended run to the resolver thread (and starts its next run
        first): there is one, and a core is free to run it while ``w`` runs, i.e. ``w`` is no CPU worker or fewer CPU
        workers run than the host has cores. With every core running a CPU worker's request, the resolver thread
        would take a core from one of them, and a thread switch each way: the worker does it itself."""
        if self._resolver is None:
            return False
        if w.kind != "cpu":
            return True
        return sum(len(v.running) for v in self.workers if v.kind == "cpu") + 1 < self._cores

    def _run_inline(self, w: Worker, req: Request) -> dict[str, np.ndarray] | None:
        """On a sync caller's thread: run ``req`` and end it; its outputs when it ran ok or late and nothing else
        reads its result (no trace, no future), else None (its result, or its re-run's, lands in ``req.result``)."""
        outs, delegate, err = execute(w, req)
        with self._ending:
            end = self.now_ms()
            w.running.remove(req)
            made = req.future is not None or self.trace is not None
            outputs = self._end_run_locked(w, req, outs, delegate, err, end, make_result=made)
        self._decide_freed()
        return None if made else outputs

    def _end_run_locked(self, w: Worker, req: Request, outs: list[np.ndarray] | None, delegate: str,
                        err: EdgeRTError | None, end: float, make_result: bool) -> dict[str, np.ndarray] | None:
        """``req`` came back from ``w`` at ``end``: it ended ok or late (its outputs returned), or it is placed again
        after an accelerator fault, or it failed with ``err``. ``w`` is notified when it has more queued."""
        if w.queue:
            w.notify()
        if err is None:
            return self._ran_locked(w, req, outs, delegate, end, make_result)  # type: ignore[arg-type]  # set
        if not self._replace_locked(w, req, end):
            self.ends.fail(req, err, end)
        return None

    def _decide_freed(self) -> None:
        """After a run ended and what ended was resolved: :meth:`_decide_freed_locked`, under the lock."""
        if self.decider.pending:  # unlocked peek is safe: whoever adds to pending decides itself
            with self._ending:
                self._decide_freed_locked()

    def _decide_freed_locked(self) -> None:
        """The decision over what is pending that a freed worker leaves (the lock held). With a backlog of at least
        :data:`AHEAD_PENDING`, every running worker with nothing queued is shown to the policy as free, so that the
        request the policy would start on each is queued ahead and its next completion starts that one with no
        decision between the two runs (a burst's decision over hundreds pending took 60-80 µs between 1.3 ms runs).
        One decision serves every worker it finds so: while no worker could start a request and one still holds
        its request queued ahead, the completion leaves the decision to a later one, which finds them all running
        with nothing queued (a steady burst decides at every other completion on two workers, not at each: a
        decision, ~45 µs on a cache the run left cold, was the largest share of a worker's gap between runs)."""
        now = self.now_ms()
        burst = len(self.decider.pending) >= AHEAD_PENDING
        ahead = tuple([v for v in self.workers if v.running and not v.queue and v.capacity == 1
                       and now >= v.unhealthy_until_ms]) if burst else ()
        if self._nothing_could_start_locked() and (not ahead or any(v.queue for v in self.workers)):
            return
        self.decider.decide(now, ahead=ahead)

    def _nothing_could_start_locked(self) -> bool:
        """In a burst (at least :data:`AHEAD_PENDING` pending), whether no worker could start a request now (each
        runs, or has its next queued): a decision would place nothing, so the next completion decides (a request
        admitted meanwhile waits for it, one run at most)."""
        return len(self.decider.pending) >= AHEAD_PENDING and all(v.queue or not v.has_free_slot() for v in self.workers)

    def _next_locked(self, w: Worker) -> Request | None:
        """On ``w``'s thread after a run whose ends are quiet: start its next request now, and hand what ended
        and the decision to the resolver thread. A request already queued ahead starts first, and the decision
        waits for the resolver; else the decision is made here, first."""
        pending = self.decider.pending
        queued = bool(w.queue)
        if pending and not queued:
            self.decider.decide(self.now_ms())
        started = w.start_next(self.now_ms()) if w.queue and w.has_free_slot() else None
        decide = queued and bool(pending) or (started is not None and w.capacity == 1 and len(pending) >= AHEAD_PENDING)
        done = self._ending.take_locked()
        if done or decide:
            assert self._resolver is not None   # (the caller checked)
            self._resolver.hand(Handed(done, w if decide else None))   # under the lock: before close's end mark
        return started

    def _resolve_and_decide(self, item: Handed) -> None:
        """The resolver thread's work, while the worker that handed ``item`` runs its next request: the bookkeeping
        it left, the resolution, then (a worker named) the decision its completion left (:meth:`_decide_freed`)."""
        if item.ran is not None:
            r = item.ran
            with self._ending:
                self._ran_locked(r.worker, r.req, r.outputs, r.delegate, r.end_ms, True)
        if item.done:
            resolve(item.done, self.trace)
        if item.decide_for is not None:
            self._decide_freed()

    def _ran_locked(self, w: Worker, req: Request, outs: list[np.ndarray], delegate: str, end: float,
                    make_result: bool) -> dict[str, np.ndarray]:
        """``req`` ran on ``w`` until ``end``: its latency into the estimator, its end recorded; its outputs. With
        ``make_result`` False (a sync caller's request that ran on its thread, no trace) no Result is made."""
        self._observe(req.model.name, w, end - req.start_ms)
        if w.kind != "cloud":   # the busy window, pruned as it grows: memory stays flat with no stream reading it
            runs = self._runs
            runs.append((end, end - req.start_ms))
            while runs[0][0] < end - BUSY_WINDOW_MS:
                runs.popleft()
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
        self.decider.pending[req.id] = req
        while w.queue:   # given to it ahead: decided again, elsewhere
            queued = w.queue.popleft()
            queued.worker = None
            self.decider.pending[queued.id] = queued
        return True

    # -- closing -----------------------------------------------------------------------------
    def close(self, timeout_s: float) -> None:
        """Finish in-flight requests (up to ``timeout_s``), drop what is left, stop the workers and the resolver
        thread, close the trace."""
        with self._ending:
            if self._stopping:
                return
            self.ends.closing = True
            self.ends.wait_idle(timeout_s)
            now = self.now_ms()
            for req in list(self.decider.pending.values()):
                self.ends.drop(req, "the runtime closed before it ran", now)
            self.decider.pending.clear()
            for w in self.workers:
                while w.queue:
                    self.ends.drop(w.queue.popleft(), "the runtime closed before it ran", now)
            self._stopping = True
            for w in self.workers:
                w.cond.notify_all()
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

# --- decide ------------------------------------------------------------------------------------------------

class Decider:
    """The policy's decisions over the pending requests, applied to the workers (see the module doc).

    Args:
        policy: the policy object (``decide(view, now_ms)``).
        estimator: the latency estimator the policy reads.
        ends: where a dropped or failed request ends.
    """

    def __init__(self, policy: Policy, estimator: LatencyEstimator, ends: Ends) -> None:
        self.policy = policy
        self.policy_name: str = getattr(policy, "name", type(policy).__name__)
        self.on_broken = ON_BROKEN
        self.estimator = estimator
        self.ends = ends
        self.workers: list[Worker] = []
        self.by_name: dict[str, Worker] = {}
        #: request id -> request awaiting a decision (the dispatcher admits into it)
        self.pending: dict[int, Request] = {}
        self._given: list[Worker] = []   # workers the last decision queued work on, to notify
        self._idle_procs: tuple[ProcessorView, ...] = ()   # every worker's idle view

    def adopt(self, workers: list[Worker]) -> None:
        """Decide over ``workers`` from now on."""
        self.workers = workers
        self.by_name = {w.name: w for w in workers}
        self._idle_procs = tuple(w.idle_view for w in workers)

    def lone(self, req: Request, now: float) -> bool:
        """Decide on ``req``, the only request pending, every worker idle: True when placed on a worker the sync
        caller may run it on (started at ``now``: nothing else was placed); else the decision is applied as any
        other, and the workers it gave work are notified."""
        decisions = self._ask(SchedulerView((req.view,), self._idle_procs, self.estimator), now)
        if decisions is None:
            return False
        if len(decisions) == 1:
            rid, name, _ = decisions[0]
            w = self.by_name.get(name) if rid == req.id and name is not None else None
            if w is not None and w.inline_ok and self.can_run(w, req):
                del self.pending[rid]
                w.start(req, now)
                return True
        self._apply(decisions, now)
        self.wake()
        return False

    def decide(self, now: float, ahead: tuple[Worker, ...] = (), wake: bool = True) -> None:
        """Ask the policy about every pending request and apply its answer; ``wake``: notify the workers given
        work now (else :meth:`wake`). ``ahead``: busy workers shown as free, to queue their next requests ahead."""
        if not self.pending:
            return
        if self.all_idle(now):   # a sync caller's usual case: one tuple, so the policy may reuse what it derived
            procs = self._idle_procs
        else:
            procs = tuple([w.idle_view if w in ahead or not (w.running or w.queue) and now >= w.unhealthy_until_ms
                           else self.view(w, now) for w in self.workers])
        views = tuple([r.view for r in self.pending.values()])
        decisions = self._ask(SchedulerView(views, procs, self.estimator), now)
        if decisions is not None:
            self._apply(decisions, now)
        if wake:
            self.wake()

    def _ask(self, view: SchedulerView, now: float) -> list[Assignment] | None:
        """The policy's decision on ``view``; None when it raised: it is logged as a bug, and every pending
        request fails with it (a policy bug must not lose requests)."""
        try:
            return self.policy.decide(view, now)
        except Exception as exc:  # noqa: BLE001 - logged, and chained to each request's error
            bug_log.error("scheduler %r raised deciding %d request(s)", self.policy_name, len(self.pending),
                          exc_info=exc)
            err = EdgeRTError(f"scheduler {self.policy_name!r} raised {exc!r} (a bug: see the edgert.bug log)")
            err.__cause__ = exc
            for stranded in list(self.pending.values()):
                self.ends.fail(stranded, err, now)
            self.pending.clear()
            return None

    def _apply(self, decisions: list[Assignment], now: float) -> None:
        """The decision applied, then the "left unplaced" sweep (:mod:`scheduler.contract`)."""
        apply(self, self.pending, decisions, now)
        if self.pending:
            sweep_unplaced(self, self.pending, now)

    def wake(self) -> None:
        """Notify each worker the last decision queued work on (once per request), if that work still waits.
        After the decision, not at each placement: a sync caller takes the request it runs itself first, and a
        worker woken for nothing would cost that caller the GIL."""
        for w in self._given:
            if w.queue:
                w.notify()
        self._given.clear()

    def all_idle(self, now: float) -> bool:
        """Every worker runs nothing, has nothing queued and is healthy."""
        for w in self.workers:
            if w.running or w.queue or now < w.unhealthy_until_ms:
                return False
        return True

    def view(self, w: Worker, now: float) -> ProcessorView:
        """``w`` as the policy sees it, from the estimator now (a run or a queued request without an estimate
        counts 0 ms)."""
        exp = self.estimator.expected_ms
        ends = [r.start_ms + (exp(r.model.name, w.name) or 0.0) for r in w.running]
        queued = sum((exp(r.model.name, w.name) or 0.0) for r in w.queue) if w.queue else 0.0
        return processor_view(w.name, w.kind, w.capacity, ends, queued, len(w.queue), now >= w.unhealthy_until_ms)

    # -- the driver interface (scheduler.contract.Driver) ----------------------------------------
    def can_run(self, w: Worker, req: Request) -> bool:
        """``w`` has an estimate for ``req``'s model (a session) and ``req`` may run there."""
        allowed = req.view.allowed
        return self.estimator.expected_ms(req.model.name, w.name) is not None and (allowed is None or w.name in allowed)

    def place(self, req: Request, w: Worker, now_ms: float) -> None:
        """``req`` joins ``w``'s queue; ``w`` is notified when the decision is done (:meth:`wake`)."""
        req.worker = w
        w.queue.append(req)
        self._given.append(w)

    def drop(self, req: Request, reason: str, now_ms: float) -> None:
        """``req`` ends dropped."""
        self.ends.drop(req, reason, now_ms)

    def candidates(self, req: Request) -> Sequence[Worker]:
        """The workers that can run ``req``."""
        return [w for w in self.workers if self.can_run(w, req)]

    def unplaced(self, req: Request, able: Sequence[Worker], now_ms: float) -> str:
        """Why ``req`` is dropped with every worker that could run it idle (or with none that could)."""
        if not able:
            return f"no processor of this runtime can run model {req.model.name!r}"
        unhealthy = [w.name for w in able if now_ms < w.unhealthy_until_ms]
        return f"its processors {unhealthy} are unhealthy after a fault" if unhealthy else left_unplaced(self.policy_name)

# --- queue: the workers --------------------------------------------------------------------------

@mypyc_attr(allow_interpreted_subclasses=True)   # the cloud's workers subclass it (edgert.offload)
class Worker:
    """One processor (``cpu0``, ``gpu``, ``npu`` …) and its delegates, queue and sessions.

    ``capacity`` is how many invocations it runs at once: 1 for a phone accelerator or a
    CPU core, several for a cloud pool.
    """

    #: Whether a sync caller may run an assigned request on its own thread (saves two thread hand-offs).
    inline_ok: bool = True
    #: An urgent lane (``Runtime(urgent_workers=)``): it runs only critical and high requests.
    urgent: bool = False

    def __init__(self, name: str, kind: str, delegates: list[Delegate], lock: threading.Lock,
                 capacity: int = 1) -> None:
        self.name = name
        self.capacity = capacity
        self.kind = kind
        self.delegates = delegates
        self.queue: deque[Request] = deque()
        self.running: list[Request] = []
        self.unhealthy_until_ms = -math.inf
        self.cond = threading.Condition(lock)
        #: How many of its threads wait on ``cond`` for work now (:meth:`wait_for_work`, :meth:`notify`).
        self.waiting = 0
        self.sessions: dict[str, tuple[Delegate, Session]] = {}
        self.threads: list[threading.Thread] = []
        #: Names of the workers that are the same processor as this one (itself included): they learn
        #: one latency estimate together (see ``make_workers``).
        self.peers: tuple[str, ...] = (name,)
        #: What the policy sees while it runs nothing and is healthy (built once: the hot path reuses it).
        self.idle_view = ProcessorView(name, kind, 0.0, 0.0, 0, True, self.capacity, self.capacity)

    # -- model sessions ------------------------------------------------------------
    def candidates(self, model: LoadedModel, allowed_delegates: tuple[str, ...] | None) -> list[Delegate]:
        """Delegates of this worker that can open one of ``model``'s artifact formats."""
        formats = {a.format for a in model.artifacts}
        return [d for d in self.delegates
                if formats.intersection(d.formats)
                and (allowed_delegates is None or d.name in allowed_delegates)]

    def open_model(self, model: LoadedModel, delegate: Delegate) -> Session:
        """Open ``model`` on ``delegate`` (the artifact in a format it takes), single-threaded."""
        art = next(a for a in model.artifacts if a.format in delegate.formats)
        return delegate.open(art, threads=1)

    def execute(self, req: Request) -> tuple[list[np.ndarray], str]:
        """Run ``req`` (outside the lock); returns (outputs, delegate name). Raises on failure."""
        delegate, session = self.sessions[req.model.name]
        return session.run(req.feeds), delegate.name


    # -- state (call under the lock) ----------------------------------------------------
    def wait_for_work(self) -> None:
        """On one of its threads: wait on ``cond`` until notified (the lock held, and released while it waits)."""
        self.waiting += 1
        try:
            self.cond.wait()
        finally:
            self.waiting -= 1

    def notify(self) -> None:
        """Wake one of its threads that waits for work, if one does. While all of them run, there is no one to wake
        and nothing to do: ``Condition.notify`` would still build its list of waiters, ~5 µs on a cache that a run
        left cold, about three times a request in a burst."""
        if self.waiting:
            self.cond.notify()

    def has_free_slot(self) -> bool:
        """True when it can start another invocation now."""
        return len(self.running) < self.capacity

    def start(self, req: Request, now_ms: float) -> Request:
        """The one start transition (under the runtime's lock): ``req`` runs on this worker from ``now_ms``."""
        req.worker = self
        self.running.append(req)
        req.start_ms = now_ms
        return req

    def start_next(self, now_ms: float) -> Request:
        """Start the queue's head (:meth:`start`) and return it."""
        return self.start(self.queue.popleft(), now_ms)

    def is_idle(self) -> bool:
        """A free slot and nothing queued: a request placed on it starts now (:class:`scheduler.contract.Processor`)."""
        return not self.queue and len(self.running) < self.capacity

    def close(self) -> None:
        """Release every session."""
        for _, s in self.sessions.values():
            s.close()
        self.sessions.clear()


def execute(w: Worker, req: Request) -> tuple[list[np.ndarray] | None, str, EdgeRTError | None]:
    """Run ``req`` on ``w``, outside the lock: ``(outputs, delegate name, None)``, or ``(None, "", error)`` when it
    raised (a backend's error as it is; anything else is a bug of ours, logged and wrapped)."""
    try:
        outs, delegate = w.execute(req)
        return outs, delegate, None
    except EdgeRTError as exc:
        return None, "", exc
    except Exception as exc:  # noqa: BLE001 - not a backend error (sessions map those): a bug, logged
        bug_log.error("%s raised running %r (request %d)", w.name, req.model.name, req.id, exc_info=exc)
        err = EdgeRTError(f"{w.name} raised {exc!r} running {req.model.name!r} (a bug: see the edgert.bug log)")
        err.__cause__ = exc
        return None, "", err


def make_workers(delegates: list[Delegate], cpu_workers: int | None, lock: threading.Lock,
                 urgent_workers: int = 0) -> list[Worker]:
    """The local workers: ``cpu_workers`` CPU workers (None = one per core) sharing the cpu
    delegates, ``urgent_workers`` more of them as urgent lanes (``cpu-urgent``, ``cpu-urgent1`` …: they run
    only critical and high requests, see ``Runtime(urgent_workers=)``), and one worker per accelerator kind
    (gpu, dsp, npu) that has a delegate.

    The CPU workers are one processor seen as several slots (their threads are not pinned to
    cores), so they are each other's ``peers``: a latency measured on one updates the estimate of
    all. Separate moving averages of the same quantity would drift apart by noise and by which
    model happened to run before (cache state), and a policy would read that drift as one core
    being faster (edgert's placement reserves a processor a tight stream needs when the next one
    takes 1.25x as long).

    Raises:
        ConfigError: ``cpu_workers`` is not a non-negative int or None.
    """
    by_kind: dict[str, list[Delegate]] = {}
    for d in delegates:
        by_kind.setdefault(d.processor, []).append(d)
    n_cpu = cores() if cpu_workers is None else cpu_workers
    if not isinstance(n_cpu, int) or isinstance(n_cpu, bool) or n_cpu < 0:
        raise ConfigError(f"cpu_workers must be a non-negative int or None, got {cpu_workers!r}")
    workers = [Worker(f"cpu{i}", "cpu", by_kind["cpu"], lock) for i in range(n_cpu if by_kind.get("cpu") else 0)]
    for i in range(urgent_workers if by_kind.get("cpu") else 0):
        lane = Worker("cpu-urgent" + (str(i) if i else ""), "cpu", by_kind["cpu"], lock)
        lane.urgent = True
        workers.append(lane)
    for w in workers:
        w.peers = tuple(c.name for c in workers)
    for kind in ("gpu", "dsp", "npu"):
        if by_kind.get(kind):
            workers.append(Worker(kind, kind, by_kind[kind], lock))
    return workers


# --- end ---------------------------------------------------------------------------------------------------

class Ends:
    """Ends requests under the runtime's lock: one row each, counted into the per-model stats in batches of
    :data:`FOLD_EVERY` (and kept in :attr:`kept` when the app asked for records), the Results collected in
    :attr:`results`.

    Args:
        lock: the runtime's lock (``close()`` waits on it until nothing is in flight).
    """

    __slots__ = ("stats", "inflight", "closing", "results", "_idle", "kept", "_fresh")

    def __init__(self, lock: threading.Lock) -> None:
        #: model name -> counters (a model is added when loaded)
        self.stats: dict[str, ModelStats] = {}
        #: requests admitted and not yet ended
        self.inflight = 0
        #: close() began: it waits for ``inflight`` to reach 0 (:meth:`wait_idle`)
        self.closing = False
        #: Results collected and not yet taken (:meth:`take`): the thread that holds the lock takes them before it
        #: releases it, when there are any
        self.results: list[tuple[Request, Result]] = []
        self._idle = threading.Condition(lock)
        #: the latest finished requests, when the app asked for them (``Runtime(records=)``); None: none kept
        self.kept: RecordBuffer | None = None
        self._fresh: list[Row] = []   # ended since the last fold: not yet in stats or kept

    def complete(self, req: Request, res: Result, proc: str, end_ms: float) -> None:
        """``req`` ended as ``res`` at ``end_ms`` on ``proc``: recorded, and collected to resolve."""
        self.record(req, res.status, proc, end_ms, str(res.error) if res.error is not None else "")
        self.results.append((req, res))

    def record(self, req: Request, status: str, proc: str, end_ms: float, error: str) -> None:
        """Record ``req``'s end (``status`` at ``end_ms`` on ``proc``; ``error`` its text or ""), no Result."""
        fresh = self._fresh
        fresh.append((req.id, req.model.name, status, req.arrival_ms, req.deadline_ms, proc,
                      req.start_ms, end_ms, req.frame, error))
        if len(fresh) >= FOLD_EVERY:
            self.fold()
        self.inflight -= 1
        if req.watch is not None:   # a stream frame's request: the frame may end with it
            req.watch.request_ended(req, status, end_ms)
        if not self.inflight and self.closing:   # only close() waits for it
            self._idle.notify_all()

    def drop(self, req: Request, reason: str, now_ms: float) -> None:
        """``req`` never ran: dropped at ``now_ms``, saying ``reason``."""
        self.complete(req, req.dropped(reason, now_ms), "", now_ms)

    def fail(self, req: Request, err: EdgeRTError, now_ms: float) -> None:
        """``req`` failed with ``err`` at ``now_ms``."""
        res = req.failed(err, now_ms)
        self.complete(req, res, res.processor, now_ms)

    def take(self) -> list[tuple[Request, Result]]:
        """The Results collected since the last take (only :meth:`Ending.take_locked` takes them)."""
        done = self.results
        self.results = []
        return done

    def fold(self) -> None:
        """Count the rows ended since the last fold into the stats, and keep them when records are kept."""
        stats = self.stats
        for _id, model, status, arrival_ms, _dl, proc, _start, end_ms, _frame, _why in self._fresh:
            stats[model].add(status, proc, end_ms - arrival_ms)
        if self.kept is not None:
            self.kept.extend(self._fresh)
        self._fresh = []

    def wait_idle(self, timeout_s: float) -> None:
        """Wait (the lock held) until nothing is in flight, at most ``timeout_s``."""
        until = time.monotonic() + timeout_s
        while self.inflight and time.monotonic() < until:
            self._idle.wait(timeout=max(0.0, until - time.monotonic()))

# --- resolve, and the hand-off --------------------------------------------------------------------------------------------

class Ending:
    """``with ending:`` holds the runtime's lock; leaving it, the requests that ended meanwhile are taken
    (:meth:`take_locked`, the one place that takes them) and resolved once the lock is released (:func:`resolve`),
    so that a completion callback may submit the next stage of a cascade. The hand-off takes them with
    :meth:`take_locked` too, for the resolver thread. It holds no state of one use: threads share one.

    Args:
        lock: the runtime's lock.
        ends: where requests end.
        trace: where each outcome goes as it is resolved (None: nowhere).
    """

    __slots__ = ("ends", "lock", "trace")

    def __init__(self, lock: threading.Lock, ends: Ends, trace: TraceWriter | None) -> None:
        self.lock = lock
        self.ends = ends
        self.trace = trace

    def __enter__(self) -> None:
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        if not self.ends.results:   # the usual case: nothing ended meanwhile
            self.lock.release()
            return
        done = self.take_locked()
        self.lock.release()
        resolve(done, self.trace)

    def take_locked(self) -> list[tuple[Request, Result]]:
        """The requests ended since the last take, with their Results (the lock held)."""
        ends = self.ends
        return ends.take() if ends.results else []


def resolve(done: Iterable[tuple[Request, Result]], trace: TraceWriter | None) -> None:
    """Hand each terminal result to its request and future, and its outcome to ``trace`` (if any).

    Outside the runtime's lock: completion callbacks may submit the next cascade stages."""
    for req, res in done:
        if trace is not None:
            trace.finish(res)
        req.result = res
        fut = req.future
        if fut is not None:
            try:   # one pass through the future's lock; a check first would race a cancel() between the two
                fut.set_result(res)
            except InvalidStateError:   # its holder cancelled it: the request still ended (recorded) as res says
                pass


def quiet(req: Request) -> bool:
    """Whether resolving ``req`` cannot submit the next stage of a cascade that the freed processor's
    decision should see: its model declares no ``then=`` stages and no callback waits on its future.

    A caller blocked in ``concurrent.futures.wait`` that submits the next stage when it wakes is not
    seen here: that stage reaches the policy a moment after the freed processor's decision."""
    fut = req.future
    return type(fut) is WatchedFuture and not fut._watched and not req.model.then


def wait_started(req: Request) -> None:
    """Nap until a woken worker has started ``req`` (its ``start_ms`` set), at most :data:`HANDOFF_WAIT_MS`."""
    give_up = time.perf_counter() + HANDOFF_WAIT_MS / 1000.0
    time.sleep(0)
    while math.isnan(req.start_ms) and time.perf_counter() < give_up:
        time.sleep(HANDOFF_NAP_S)


def overdue_run(workers: Iterable[Worker], estimator: LatencyEstimator, now: float) -> bool:
    """Whether a worker's run should have ended by ``now`` (ms) on the estimate: its thread then wants the
    GIL to end it, so a submitting thread naps to hand it over (:func:`nap`)."""
    exp = estimator.expected_ms
    for w in workers:
        for r in w.running:
            if r.start_ms + (exp(r.model.name, w.name) or 0.0) <= now:
                return True
    return False


def nap() -> None:
    """One nap: a run expected to have ended wants the GIL to finish (see the module doc)."""
    time.sleep(HANDOFF_NAP_S)


class Ran(NamedTuple):
    """A run that ended ok on ``worker``, its bookkeeping left to the resolver thread."""

    worker: Worker
    req: Request
    outputs: list[Any]
    delegate: str
    end_ms: float


@dataclass(slots=True)
class Handed:
    """What a worker hands the resolver thread."""

    #: the requests it ended, with their results, to resolve
    done: list[tuple[Request, Result]]
    #: the worker whose completion left a decision to make; else None
    decide_for: Worker | None = None
    #: a run whose bookkeeping it left (:class:`Ran`), or None
    ran: Ran | None = None


class ResolverThread:
    """One thread that does the work workers hand it (:class:`Handed`), in order, until closed.

    Args:
        work: does one handed item (the dispatcher's: bookkeeping, resolution, the decision left).
    """

    def __init__(self, work: Callable[[Handed], None]) -> None:
        self._work = work
        self._queue: queue.SimpleQueue[Handed | None] = queue.SimpleQueue()
        self._runner = threading.Thread(target=self._loop, name="edgert-resolver", daemon=True)
        self._runner.start()

    def hand(self, item: Handed) -> None:
        """Queue ``item`` (under the runtime's lock: before :meth:`close`'s end mark, or not at all)."""
        self._queue.put(item)

    def close(self) -> None:
        """Mark the end (under the runtime's lock); what was handed before it is still done."""
        self._queue.put(None)

    def join(self) -> None:
        """Wait until everything handed before :meth:`close` is done and the thread has ended."""
        self._runner.join()

    def is_alive(self) -> bool:
        """Whether the thread still runs."""
        return self._runner.is_alive()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._work(item)
            except Exception as exc:  # noqa: BLE001 - this thread must not die: a bug of ours, logged
                bug_log.error("resolving %d request(s) raised", len(item.done) + (item.ran is not None), exc_info=exc)
                fail_unresolved(item, exc)


def fail_unresolved(item: Handed, exc: Exception) -> None:
    """After ``exc`` broke the resolution of ``item``: every request it held whose future is not yet resolved fails
    with the reason, so that no caller waits forever (a request already resolved keeps its result)."""
    held = [req for req, _ in item.done] + ([item.ran.req] if item.ran is not None else [])
    for req in held:
        fut = req.future
        if fut is None or fut.done():
            continue
        err = EdgeRTError(f"edgert failed resolving request {req.id} ({req.model.name!r}): {exc!r} "
                          "(a bug of edgert's: see the edgert.bug log)")
        err.__cause__ = exc
        res = req.failed(err, req.arrival_ms if math.isnan(req.start_ms) else req.start_ms)
        req.result = res
        try:
            fut.set_result(res)
        except InvalidStateError:   # resolved or cancelled meanwhile
            pass
