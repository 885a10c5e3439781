"""Per-frame deadlines: requests issued inside ``rt.frame(deadline_ms=…)`` share one absolute deadline."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Frame:
    """One XR frame: its index, start time and absolute deadline (ms on the runtime clock)."""

    index: int
    t_ms: float
    deadline_ms: float
    #: the importance of the requests issued inside it (``rt.frame(priority=)``); None: each model's own
    priority: str | None = None
    #: the processors its requests may run on (``rt.frame(processors=)``); None: each model's own
    allowed: tuple[str, ...] | None = None
    #: a stream frame's watch (``edgert._core._streams.FrameWatch``): its requests are counted and, when the frame
    #: was not taken, dropped at once; None outside streams
    watch: Any = None
    _keys: dict[str, int] = field(default_factory=dict, repr=False)

    def key(self, model: str) -> str:
        """Trace id of a request of ``model`` in this frame: ``f7/hand`` (``f7/hand#2`` for a repeat)."""
        n = self._keys.get(model, 0) + 1
        self._keys[model] = n
        base = f"f{self.index}/{model}"
        return base if n == 1 else f"{base}#{n}"

    def stream(self, model: str) -> str:
        """The stream of the request :meth:`key` last named: ``model``, ``model#2`` for the frame's second
        request of it (the right eye's iris after the left's). Each is a periodic stream of its own:
        the policy measures stream rates from arrivals, and two requests of one stream 0.2 ms apart
        would read as thousands a second."""
        n = self._keys.get(model, 1)
        return model if n == 1 else f"{model}#{n}"


#: The frame of the current thread / asyncio task, if any.
current_frame: contextvars.ContextVar[Frame | None] = contextvars.ContextVar("edgert_frame", default=None)
