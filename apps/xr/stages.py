"""The per-frame request loop: stages submitted through the runtime, continued as they finish.

A continuation (a decoder, a tracker update) that raises ends its stage on this frame ``failed``
with the exception's type and message in :attr:`StageInfo.error`; the other stages of the frame
go on, and so does the stream's thread (nothing of ours dies on an exception).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass

import numpy as np

import edgert


@dataclass(slots=True)
class StageInfo:
    """How one stage fared on a frame.

    Attributes:
        ran: a request of this stage was submitted on the frame (False: skipped, e.g. tracking held).
        status: the worst request status (``ok`` < ``late`` < ``dropped`` < ``failed``), ``skipped``.
        processor: the worker of the last request ("" when none ran).
        latency_ms: the slowest request's end-to-end latency (ms; 0 when none ran).
        runs: requests submitted (one per hand / face / eye).
        error: ``"ValueError: …"`` when code of ours on this stage raised (the first such), else "".
        model: the model (variant) the stage's last request ran ("" when none ran).
        reason: why the stage did not run, when its stream's frame said so (an optional
            stage without time or spare capacity, or a whole frame shed); "" otherwise.
    """

    ran: bool = False
    status: str = "skipped"
    processor: str = ""
    latency_ms: float = 0.0
    runs: int = 0
    error: str = ""
    model: str = ""
    reason: str = ""


#: Where a raising continuation's traceback goes, at DEBUG: the frame's result and the demo's summary name
#: the exception (type and message); the traceback is there for whoever turns this logger up.
bug_log = logging.getLogger("apps.xr.bug")


def describe(exc: BaseException) -> str:
    """``"ValueError: message"``: the exception's type and message, as a failed stage carries them."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


#: ``shed``: the whole frame was shed before any of its requests was submitted (it never counts
#: as on time).
_RANK = {"skipped": -1, "ok": 0, "late": 1, "dropped": 2, "shed": 2, "failed": 3}

OnDone = Callable[[edgert.Result], None]


class Runner:
    """Submits stage requests and runs each one's continuation in the caller's thread as it finishes.

    Continuations may submit further stages (``after=`` the result they got), so independent
    streams overlap on the runtime's workers while each cascade keeps its order.

    :attr:`frame` is the stream frame (``edgert.StreamFrame``) of the stage being submitted, or None outside
    streams: a stage asks it whether optional work has room and which variant fits. A continuation sees the
    frame of the request it continues.
    """

    def __init__(self) -> None:
        self.stages: dict[str, StageInfo] = {}
        self.frame: edgert.StreamFrame | None = None
        self._pending: dict[Future[edgert.Result], tuple[str, OnDone, edgert.StreamFrame | None]] = {}

    def skip(self, stage: str, reason: str = "") -> None:
        """Record that ``stage`` did not run on this frame (unless it already did), and why if its frame said so."""
        info = self.stages.setdefault(stage, StageInfo())
        if reason and not info.ran:
            info.reason = reason

    def shed(self, stage: str, reason: str) -> None:
        """Record that ``stage``'s frame was shed as a whole (``reason``): nothing of it was submitted."""
        info = self.stages.setdefault(stage, StageInfo())
        info.status, info.reason = "shed", reason

    def submit(self, stage: str, model: edgert.Model, x: np.ndarray, then: OnDone,
               after: edgert.Result | None = None) -> None:
        """Submit ``x`` to ``model`` as ``stage``; ``then(result)`` runs when it finishes."""
        fut = model.submit(x, after=after)
        self._pending[fut] = (stage, then, self.frame)

    def _note(self, stage: str, res: edgert.Result) -> None:
        info = self.stages.setdefault(stage, StageInfo())
        info.ran = True
        info.runs += 1
        if _RANK[res.status] >= _RANK[info.status]:
            info.status = res.status
        info.processor = res.processor or info.processor
        info.model = res.model
        info.latency_ms = max(info.latency_ms, res.latency_ms)

    def fail(self, stage: str, exc: BaseException) -> None:
        """End ``stage`` on this frame ``failed`` because code of ours raised ``exc`` (the first reason kept)."""
        info = self.stages.setdefault(stage, StageInfo())
        info.status = "failed"
        info.error = info.error or describe(exc)
        bug_log.debug("stage %s raised", stage, exc_info=exc)

    def run(self) -> dict[str, StageInfo]:
        """Wait for every request (and those their continuations submit); return the stage log.

        A continuation that raises fails its stage (:meth:`fail`); the others still run.
        """
        while self._pending:
            done, _ = wait(list(self._pending), return_when=FIRST_COMPLETED)
            for fut in done:
                stage, then, self.frame = self._pending.pop(fut)
                try:
                    res = fut.result()
                    self._note(stage, res)
                    then(res)
                except Exception as exc:  # noqa: BLE001 - a decoder's bug fails its stage, not the stream
                    self.fail(stage, exc)
        return self.stages

    def errors(self) -> dict[str, str]:
        """Stage -> the first exception (type: message) raised on it this frame."""
        return {k: v.error for k, v in self.stages.items() if v.error}


def outputs(res: edgert.Result) -> list[np.ndarray] | None:
    """The result's output arrays in model order, or None when it never ran (dropped / failed)."""
    return None if res.outputs is None else list(res.outputs.values())
