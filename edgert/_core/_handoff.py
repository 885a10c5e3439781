"""The hand-off, explained once: how an ended request reaches its caller, and how the next one starts.

Three kinds of thread end requests, each under the runtime's lock, and each resolves what it ended
(:func:`resolve`: the Result to the request, its future and the trace) after releasing it, so that a
completion callback may submit the next stage of a cascade:

* **a caller's thread.** A sync call whose request every idle worker let it run runs it inline and
  takes the outputs straight back (no Result is made: nothing else would read it). A submit whose
  request is dropped at once resolves it there.
* **a worker's thread.** It runs a request, ends it, and starts its next. When resolving cannot
  submit work (:func:`quiet`: no ``then=`` stages, no completion callback), it starts that next run
  first and hands the ended request to the :class:`ResolverThread` (a :class:`Handed`), which does
  the bookkeeping, resolves it, and makes the decision the completion left while the next run
  executes: the processor's idle gap between two runs is then the bookkeeping only (issue 28).
  Otherwise it resolves on its own thread before the freed processor is decided on, so that the
  cascade's next stage is pending for that decision.
* **the resolver thread**, as above.

The GIL hand-off. A ``submit`` that wakes an idle worker would otherwise keep the GIL: the caller
usually goes on running Python (the next submit, its own frame work), and the woken worker waits for
the caller to block or for CPython's switch interval (5 ms), its processor idle with work queued
(``benchmarks/handoff.py``). :func:`wait_started` naps until that worker has started the request
(typically ~0.1 ms, at most :data:`HANDOFF_WAIT_MS`). :func:`nap` is the one nap a burst's submit loop
takes when a run should already have ended: its worker is back from the delegate and waiting for the
GIL to finish it (measured on a 1.4 ms CNN: runs during a burst's submit loop took ~5 ms each without
it, ``benchmarks/serving.py``, issue 28).
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from edgert._core._result import Result
    from edgert._core._trace import TraceWriter
    from edgert._core._worker import Request, Worker
    from scheduler.estimator import LatencyEstimator

#: The most a ``submit`` that woke an idle worker waits for that worker to start its request (ms).
HANDOFF_WAIT_MS = 1.0
#: The naps it takes meanwhile (s): each releases the GIL and the core (the worker may need the core too).
HANDOFF_NAP_S = 1e-5

bug_log = logging.getLogger("edgert.bug")


class WatchedFuture(Future["Result"]):
    """A request's future that knows whether anything was asked to run when it resolves (:func:`quiet`)."""

    _watched = False   # a class default: set on the instance by the first add_done_callback

    def add_done_callback(self, fn: Callable[[Future[Result]], object]) -> None:
        """As :meth:`concurrent.futures.Future.add_done_callback`; marks the future as watched."""
        self._watched = True
        super().add_done_callback(fn)


def resolve(done: Iterable[tuple[Request, Result]], trace: TraceWriter | None) -> None:
    """Hand each terminal result to its request and future, and its outcome to ``trace`` (if any).

    Outside the runtime's lock: completion callbacks may submit the next cascade stages."""
    for req, res in done:
        if trace is not None:
            trace.finish(res)
        req.result = res
        fut = req.future
        if fut is not None and not fut.cancelled():
            fut.set_result(res)


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
        self._thread = threading.Thread(target=self._loop, name="edgert-resolver", daemon=True)
        self._thread.start()

    def hand(self, item: Handed) -> None:
        """Queue ``item`` (under the runtime's lock: before :meth:`close`'s end mark, or not at all)."""
        self._queue.put(item)

    def close(self) -> None:
        """Mark the end (under the runtime's lock); what was handed before it is still done."""
        self._queue.put(None)

    def join(self) -> None:
        """Wait until everything handed before :meth:`close` is done and the thread has ended."""
        self._thread.join()

    def is_alive(self) -> bool:
        """Whether the thread still runs."""
        return self._thread.is_alive()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._work(item)
            except Exception as exc:  # noqa: BLE001 - this thread must not die: a bug of ours, logged
                bug_log.error("resolving %d request(s) raised", len(item.done) + (item.ran is not None), exc_info=exc)
