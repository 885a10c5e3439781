"""The public result of one request (the request in flight is ``edgert._core._run.Request``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
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


# Result's slot setters, in field order, for completed() (unpacking fails loudly if a field is added)
(_outputs, _status, _processor, _delegate, _latency_ms, _queued_ms, _error, _model, _id, _deadline_ms,
 _arrival_ms, _frame, _key, _precision) = (Result.__dict__[f.name].__set__ for f in fields(Result))
_object_new = object.__new__

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
    """``Result(outputs, status, …, error=None, …)`` for a request that ran, at half the cost of the frozen
    dataclass's ``__init__`` (13 ``object.__setattr__`` calls, ~0.4 µs of a ~10 µs dispatch): the hot path."""
    r = _object_new(Result)
    _outputs(r, outputs)
    _status(r, status)
    _processor(r, processor)
    _delegate(r, delegate)
    _latency_ms(r, latency_ms)
    _queued_ms(r, queued_ms)
    _error(r, None)
    _model(r, model)
    _id(r, rid)
    _deadline_ms(r, deadline_ms)
    _arrival_ms(r, arrival_ms)
    _frame(r, frame)
    _key(r, key)
    _precision(r, _PRECISION.get(delegate, ""))
    return r


def unwrap(res: Result) -> dict[str, np.ndarray]:
    """Outputs of a result, raising its error for dropped / failed requests."""
    if res.outputs is not None:
        return res.outputs
    if res.status in (DROPPED, FAILED) and res.error is not None:
        raise res.error
    raise InferenceError(f"request {res.id} for {res.model!r} ended {res.status} without outputs")
