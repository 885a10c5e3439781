"""Step 5 of a request's life: every request ends once, as one record, and (unless a sync caller takes its
outputs straight back) one :class:`~edgert._core._result.Result` to resolve.

:class:`Ends` is called under the runtime's lock by whichever thread ends a request; it collects the
Results, and that thread takes them (:meth:`Ends.take`) before it releases the lock and resolves them
(:mod:`edgert._core._handoff`). It counts them into the per-model stats, and keeps them only when the app asked for records
(:mod:`edgert._core._records`).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from edgert._core._records import RecordBuffer, Row
from edgert._core._stats import ModelStats

if TYPE_CHECKING:
    from edgert._core._result import Result
    from edgert._core._worker import Request
    from edgert.errors import EdgeRTError

#: A request's end appends its row only; every this many, the rows are counted into the per-model
#: stats (and kept, when the runtime keeps records) by :meth:`Ends.fold`, as ``stats()`` / ``records()`` do
#: first: a stats call per request cost ~0.7 µs of a sync call's ~10, a fold ~30 µs every 64 requests.
FOLD_EVERY = 64


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
        """The Results collected since the last take: the caller resolves them once it has released the lock."""
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
