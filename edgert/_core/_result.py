"""The public result of one request (the request in flight is ``edgert._core._run.Request``), and the future that
carries it to a caller who waits (:class:`WatchedFuture`: a subclass of a Python class, so it lives here, in a module
that ``tools/compile.py`` leaves interpreted, and not beside the request in the compiled ``_run``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgert.errors import EdgeRTError, InferenceError

#: Terminal statuses: every request ends with exactly one.
OK, LATE, DROPPED, FAILED = "ok", "late", "dropped", "failed"


@dataclass(frozen=True, slots=True)
class Result:
    """How one request ended.

    Attributes:
        outputs: output name → array, in model output order (None when dropped/failed).
        status: ``ok`` (met its deadline), ``late`` (finished after it), ``dropped``
            (never ran; ``error`` says why) or ``failed`` (the backend raised).
        processor: the worker that ran it (``cpu0``, ``gpu``, ``cloud`` …), "" if none.
        delegate: the delegate path that ran it (``litert-xnnpack``, ``ort-cpu`` …), "" if none.
        latency_ms: end-to-end, from submission to completion (ms).
        queued_ms: time spent waiting before it started (ms).
        error: RequestDropped / InferenceError for dropped / failed requests, else None.
        model: the model name.
        id: the request id (unique per runtime).
        deadline_ms: absolute deadline on the runtime clock (ms; inf when none).
        arrival_ms: when it was submitted, on the runtime clock (ms).
        frame: index of the ``rt.frame`` it belongs to (-1 when none).
        key: its id in the trace (``f7/hand``, or ``r42/hand`` outside frames).
        precision: the arithmetic of the path that ran it (``fp32``, ``tf32``, ``fp16``, ``int8``,
            ``mixed``; :data:`delegates.base.PRECISIONS`), "" when none ran.
    """

    outputs: dict[str, np.ndarray] | None
    status: str
    processor: str
    delegate: str
    latency_ms: float
    queued_ms: float
    error: EdgeRTError | None
    model: str
    id: int
    deadline_ms: float = math.inf
    arrival_ms: float = 0.0
    frame: int = -1
    key: str = ""
    precision: str = ""

    @property
    def ok(self) -> bool:
        """True for ``ok`` and ``late`` (the outputs are there)."""
        return self.outputs is not None


#: Delegate name -> precision of the sessions it opened (set at load: :func:`note_precision`).
_PRECISION: dict[str, str] = {}


def note_precision(delegate: str, precision: str) -> None:
    """Record that sessions of ``delegate`` compute in ``precision`` (shown on every Result it runs).

    A delegate's precision changes only when it is reconfigured (``force_fp32``), which takes effect for
    sessions opened afterwards: the latest load's value is the one results carry."""
    _PRECISION[delegate] = precision


def completed(outputs: dict[str, np.ndarray], status: str, processor: str, delegate: str, latency_ms: float,
              queued_ms: float, model: str, rid: int, deadline_ms: float, arrival_ms: float, frame: int,
              key: str) -> Result:
    """The Result of a request that ran (no error), with the precision of ``delegate``'s sessions.

    A sync call that ran on its caller's thread makes no Result at all (``Dispatcher`` returns its
    outputs), so this plain constructor is paid by asynchronous requests only."""
    return Result(outputs, status, processor, delegate, latency_ms, queued_ms, None, model, rid,
                  deadline_ms, arrival_ms, frame, key, _PRECISION.get(delegate, ""))


def unwrap(res: Result) -> dict[str, np.ndarray]:
    """Outputs of a result, raising its error for dropped / failed requests."""
    if res.outputs is not None:
        return res.outputs
    if res.status in (DROPPED, FAILED) and res.error is not None:
        raise res.error
    raise InferenceError(f"request {res.id} for {res.model!r} ended {res.status} without outputs")


class WatchedFuture(Future["Result"]):
    """A request's future that knows whether anything was asked to run when it resolves
    (``edgert._core._run.quiet``)."""

    _watched = False   # a class default: set on the instance by the first add_done_callback

    def add_done_callback(self, fn: Callable[[Future[Result]], object]) -> None:
        """As :meth:`concurrent.futures.Future.add_done_callback`; marks the future as watched."""
        self._watched = True
        super().add_done_callback(fn)
