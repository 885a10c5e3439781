"""Workers: one per processor, each running its queue one invocation at a time; the requests they queue.

A worker owns the sessions of every model on its processor (single-threaded,
opened at load time) and the queue the policy assigns to. All its mutable
state is guarded by the runtime's lock; ``execute`` runs without it.
Subclasses (the cloud worker) override ``open_model``/``execute`` and may run
several invocations at once (``capacity``).
"""

from __future__ import annotations

import math
import os
import threading
from collections import deque
from concurrent.futures import Future
from typing import TYPE_CHECKING

import numpy as np

from delegates.base import Delegate, Session
from edgert._core._result import DROPPED, FAILED, Result
from edgert.errors import ConfigError, EdgeRTError, RequestDropped
from scheduler.types import ProcessorView, RequestView

if TYPE_CHECKING:
    from edgert._core._model import LoadedModel


class Request:
    """One request in flight (internal): owned by the dispatcher from admission to resolution, held by its
    ``pending`` map until placed, then by a worker's queue. Mutated only under the runtime lock."""

    __slots__ = ("id", "model", "feeds", "arrival_ms", "deadline_ms", "view", "future",
                 "worker", "start_ms", "_key", "attempts", "frame", "result", "outputs")

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
        self.result: Result | None = None
        #: A sync caller's request that ran on its thread ok or late: its outputs, and no Result (see ``_ran_locked``).
        self.outputs: dict[str, np.ndarray] | None = None
        self.worker: Worker | None = None
        self.start_ms = math.nan
        self._key = key   # None: its default, made when asked (a sync call's request seldom is)
        self.attempts = 0
        self.frame = frame

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


class Worker:
    """One processor (``cpu0``, ``gpu``, ``npu`` …) and its delegates, queue and sessions.

    ``capacity`` is how many invocations it runs at once: 1 for a phone accelerator or a
    CPU core, several for a cloud pool.
    """

    #: Whether a sync caller may run an assigned request on its own thread (saves two thread hand-offs).
    inline_ok: bool = True

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
    def has_free_slot(self) -> bool:
        """True when it can start another invocation now."""
        return len(self.running) < self.capacity

    def start_next(self, now_ms: float) -> Request:
        """Take the queue's head as running from ``now_ms`` (under the runtime's lock) and return it."""
        req = self.queue.popleft()
        self.running.append(req)
        req.start_ms = now_ms
        return req

    def is_idle(self) -> bool:
        """A free slot and nothing queued: a request placed on it starts now (:class:`scheduler.contract.Processor`)."""
        return not self.queue and len(self.running) < self.capacity

    def close(self) -> None:
        """Release every session."""
        for _, s in self.sessions.values():
            s.close()
        self.sessions.clear()


def make_workers(delegates: list[Delegate], cpu_workers: int | None, lock: threading.Lock) -> list[Worker]:
    """The local workers: ``cpu_workers`` CPU workers (None = one per core) sharing the cpu
    delegates, and one worker per accelerator kind (gpu, dsp, npu) that has a delegate.

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
    for w in workers:
        w.peers = tuple(c.name for c in workers)
    for kind in ("gpu", "dsp", "npu"):
        if by_kind.get(kind):
            workers.append(Worker(kind, kind, by_kind[kind], lock))
    return workers


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS
        return os.cpu_count() or 1
