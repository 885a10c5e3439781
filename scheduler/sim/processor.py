"""A simulated processor: its FIFO queue, its runs, and the ``ProcessorView`` a policy sees of it."""

from __future__ import annotations

from collections import deque

from scheduler.sim._views import processor_view
from scheduler.types import ProcessorView

_new = tuple.__new__   # processor_view(...) without its Python call: built once per busy view


class SimProcessor:
    """A simulated processor: a FIFO queue of request ids, ``slots`` parallel runs (1 except for the cloud)."""

    __slots__ = ("name", "kind", "index", "slots", "running", "queue", "qcount", "view", "idle_view",
                 "busy_ms", "n_runs", "lat", "keys")

    def __init__(self, name: str, kind: str, slots: int = 1, index: int = 0) -> None:
        self.name = name
        self.kind = kind
        self.index = index
        self.slots = slots
        self.running: list[int] = []         # ids of the requests it runs
        self.queue: deque[int] = deque()     # ids assigned to it, not started (FIFO)
        self.qcount: dict[int, int] = {}     # model code -> how many of the queue
        self.view: ProcessorView | None = None
        #: the view while it runs and queues nothing (the same every time, so built once)
        self.idle_view = processor_view(name, kind, 0.0, 0.0, 0, True, slots, slots)
        self.busy_ms = 0.0
        self.n_runs = 0
        #: by model code: (mean_ms, extra_ms, per-request noise factors by request id), None if unsupported
        self.lat: list[tuple[float, float, list[float]] | None] = []
        #: by model code: the estimator key ``(model, name)`` of this processor
        self.keys: list[tuple[str, str]] = []

    def make_view(self, start_ms: list[float], mcode: list[int], ema: dict[tuple[str, str], float]) -> ProcessorView:
        """The policy's snapshot of this processor, as ``edgert.Runtime._view`` builds it.

        ``busy_until_ms``: 0 while a slot is free, else the earliest ``start + expected latency`` of
        its runs; ``queued_ms``: the expected latencies of its queue; both from the estimator now.
        ``start_ms`` and ``mcode`` (model code) are by request id; ``ema`` is the estimator's table
        (``LatencyEstimator.ema_table()``), read through :attr:`keys` (every model this processor
        runs or queues is in it).
        """
        free = self.slots - len(self.running)
        queue = self.queue
        if free == self.slots and not queue:
            return self.idle_view
        keys = self.keys
        if free > 0:
            busy = 0.0
        elif self.slots == 1:
            r = self.running[0]
            busy = start_ms[r] + ema[keys[mcode[r]]]
        else:
            busy = min([start_ms[r] + ema[keys[mcode[r]]] for r in self.running])
        queued = 0.0
        if queue:
            for m, k in self.qcount.items():
                queued += k * ema[keys[m]]
        return _new(ProcessorView, (self.name, self.kind, busy, queued, len(queue), True, self.slots, free))
