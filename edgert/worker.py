"""Workers: one per processor, each running its queue one invocation at a time.

A worker owns the sessions of every model on its processor (single-threaded,
opened at load time) and the queue the policy assigns to. All its mutable
state is guarded by the runtime's lock; ``execute`` runs without it.
Subclasses (the cloud worker) override ``open_model``/``execute`` and may run
several invocations at once (``capacity``).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from delegates.base import Delegate, Session
from scheduler.types import ProcessorView

if TYPE_CHECKING:
    from edgert.model import LoadedModel
    from edgert.result import Request


class Worker:
    """One processor (``cpu0``, ``gpu``, ``npu`` …) and its delegates, queue and sessions."""

    #: How many invocations it runs at once (1 for a phone accelerator or a CPU core).
    capacity: int = 1
    #: Whether a sync caller may run an assigned request on its own thread (saves two thread hand-offs).
    inline_ok: bool = True

    def __init__(self, name: str, kind: str, delegates: list[Delegate], lock: threading.Lock) -> None:
        self.name = name
        self.kind = kind
        self.delegates = delegates
        self.queue: deque[Request] = deque()
        self.running: list[Request] = []
        self.queued_ms = 0.0
        self.unhealthy_until_ms = -math.inf
        self.cond = threading.Condition(lock)
        self.sessions: dict[str, tuple[Delegate, Session]] = {}
        self.threads: list[threading.Thread] = []

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

    # -- state the policy sees (call under the lock) -------------------------------
    def view(self, now_ms: float, expected: dict[tuple[str, str], float]) -> ProcessorView:
        """This worker as a ProcessorView: busy-until of its running work, queued ms."""
        busy = 0.0
        if len(self.running) >= self.capacity:
            busy = min(r.start_ms + expected.get((r.model.name, self.name), 0.0) for r in self.running)
        return ProcessorView(self.name, self.kind, busy, self.queued_ms, len(self.queue),
                             now_ms >= self.unhealthy_until_ms)

    def has_free_slot(self) -> bool:
        """True when it can start another invocation now."""
        return len(self.running) < self.capacity

    def is_idle(self) -> bool:
        """Nothing running and nothing queued."""
        return not self.running and not self.queue

    def close(self) -> None:
        """Release every session."""
        for _, s in self.sessions.values():
            s.close()
        self.sessions.clear()
