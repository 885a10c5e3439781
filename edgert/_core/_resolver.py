"""The end of a request's walk: its terminal result handed to the request, its future and the trace.

Whoever ends requests outside a worker's run resolves them on its own thread (:func:`resolve`). A
worker's own thread hands what it ended to the :class:`ResolverThread` and starts its next run at
once, when resolving cannot submit work (:func:`quiet`); with the list it names itself when its
completion left a decision for that thread to make (the dispatcher's ``_resolve_and_decide``): the
processor's idle gap between two runs is then the bookkeeping only (issue 28).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgert._core._result import Result
    from edgert._core._trace import TraceWriter
    from edgert._core._worker import Request, Worker

Ended = list[tuple["Request", "Result"]]
#: What a worker hands the resolver thread: what it ended; itself when a decision is left to make; and a
#: request that ran whose bookkeeping it left, with its outputs, delegate and end (ms), or None.
Handed = tuple[Ended, "Worker | None", "tuple[Request, list[Any], str, float] | None"]

bug_log = logging.getLogger("edgert.bug")


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
    decision should see: its model declares no ``then=`` stages and its future has no completion
    callback (CPython's Future keeps them in ``_done_callbacks``; where it does not, never quiet).

    A caller blocked in ``concurrent.futures.wait`` that submits the next stage when it wakes is not
    seen here: that stage reaches the policy a moment after the freed processor's decision."""
    fut = req.future
    return fut is not None and not req.model.then and not getattr(fut, "_done_callbacks", True)


class ResolverThread:
    """One thread that resolves the lists of ended requests workers hand it, in order, until closed.

    Args:
        resolve_fn: resolves one handed item (the dispatcher's, so it sees the runtime's trace).
    """

    def __init__(self, resolve_fn: Callable[[Handed], None]) -> None:
        self._resolve = resolve_fn
        self._queue: queue.SimpleQueue[Handed | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="edgert-resolver", daemon=True)
        self._thread.start()

    def hand(self, done: Handed) -> None:
        """Queue ``done`` for resolution (under the runtime's lock: before :meth:`close`'s end mark, or not at all)."""
        self._queue.put(done)

    def close(self) -> None:
        """Mark the end (under the runtime's lock); what was handed before it is still resolved."""
        self._queue.put(None)

    def join(self) -> None:
        """Wait until everything handed before :meth:`close` is resolved and the thread has ended."""
        self._thread.join()

    def is_alive(self) -> bool:
        """Whether the thread still runs."""
        return self._thread.is_alive()

    def _loop(self) -> None:
        while True:
            done = self._queue.get()
            if done is None:
                return
            try:
                self._resolve(done)
            except Exception as exc:  # noqa: BLE001 - this thread must not die: a bug of ours, logged
                bug_log.error("resolving %d request(s) raised", len(done[0]) + (done[2] is not None), exc_info=exc)
