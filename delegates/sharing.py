"""One copy of a model however many workers run it.

A runtime has one CPU worker per core, and every one of them may run every model. Opening a
session per worker multiplies the model's memory by the worker count (each LiteRT interpreter
holds its own XNNPACK-packed weights and tensor arena; each ONNX Runtime session its own
initializers and kernels). :func:`shared_session` returns one session that all of them run:

* **ONNX Runtime**: ``InferenceSession.run`` is thread-safe and keeps each run's state apart, so
  the one session is run by every worker at once (measured: two threads on one single-threaded
  session reach the throughput of two sessions, ``benchmarks/memory.py``).
* **LiteRT**: an ``Interpreter`` is not thread-safe (its input and output tensors live in one
  arena). A :class:`SessionPool` lends each run an idle interpreter and opens another only when
  every one is busy, so a model has as many interpreters as it ever had *concurrent* runs, not
  one per worker. The interpreters of a pool share one model buffer where the delegate takes
  bytes (``model_content``), instead of each mapping the file.

A delegate says which kind it is through its sessions' :attr:`~delegates.base.Session.concurrent`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from delegates._batching import check_requests, run_requests
from delegates.base import Session
from delegates.errors import EdgeRTError, InferenceError


class SessionPool(Session):
    """Sessions of one model for runs from several threads; each run borrows an idle one.

    Args:
        first: an open session (its specs, placement and coverage are the pool's).
        opener: opens one more session of the same model and delegate, when every one is busy.
        limit: the most sessions it opens (the number of threads that may run it at once);
            a run beyond it waits for one to come back.
    """

    concurrent = True

    def __init__(self, first: Session, opener: Callable[[], Session], limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a session pool needs limit >= 1, got {limit}")
        self._first = first
        self._opener = opener
        self._limit = limit
        self._idle: list[Session] = [first]
        self._all: list[Session] = [first]
        self._opening = 0
        self._cond = threading.Condition()
        self._closed = False
        self.inputs = first.inputs
        self.outputs = first.outputs
        self.coverage = first.coverage

    @property
    def size(self) -> int:
        """Sessions opened so far (1 until two runs overlapped)."""
        with self._cond:
            return len(self._all)

    def _borrow(self) -> Session:
        with self._cond:
            while True:
                if self._closed:
                    raise InferenceError("the session pool is closed (its runtime closed)")
                if self._idle:
                    return self._idle.pop()
                if len(self._all) + self._opening < self._limit:
                    self._opening += 1
                    break
                self._cond.wait()
        try:
            s = self._opener()
        except EdgeRTError as exc:
            with self._cond:
                self._opening -= 1
                self._cond.notify()
            raise InferenceError(f"could not open another session for a concurrent run: {exc}") from exc
        with self._cond:
            self._opening -= 1
            self._all.append(s)
        return s

    def run(self, feeds: list[np.ndarray]) -> list[np.ndarray]:
        """Run on an idle session of the pool (opening one if all are busy and the limit allows)."""
        s = self._borrow()
        try:
            return s.run(feeds)
        finally:
            with self._cond:
                self._idle.append(s)
                self._cond.notify()

    def _check_batch(self) -> str:
        """The first session's answer (every session of the pool is the same model on the same delegate)."""
        return self._first.batch_refusal

    def run_batch(self, feeds_list: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        """Run the batch on an idle session of the pool (:meth:`delegates.base.Session.run_batch`)."""
        if len(feeds_list) <= 1 or len(feeds_list) > self.max_batch:   # one run, or refused: nothing to borrow
            return super().run_batch(feeds_list)
        check_requests(self.inputs, feeds_list)
        s = self._borrow()
        try:   # the batch check was the first session's: the others are not probed again
            return run_requests(s.run, feeds_list, "a pooled session")
        finally:
            with self._cond:
                self._idle.append(s)
                self._cond.notify()

    def placement(self) -> dict[str, int]:
        """The first session's placement (every session of the pool is the same model on the same delegate)."""
        return self._first.placement()

    def close(self) -> None:
        """Close every session of the pool (idempotent); a run after it raises InferenceError."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            sessions, self._all, self._idle = self._all, [], []
            self._cond.notify_all()
        for s in sessions:
            s.close()


def shared_session(first: Session, opener: Callable[[], Session], users: int) -> Session:
    """A session ``users`` threads may run at once: ``first`` itself where its runs are thread-safe
    (``first.concurrent``), else a :class:`SessionPool` that opens more with ``opener`` as runs overlap."""
    if users <= 1 or first.concurrent:
        return first
    return SessionPool(first, opener, users)
