"""A simulated processor: its FIFO queue, its runs, and the ``ProcessorView`` a policy sees of it."""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from scheduler.contract import processor_view
from scheduler.types import ProcessorView


class RunTimes(NamedTuple):
    """How long one model's runs take on one processor (:mod:`scheduler.sim.latency` draws them)."""

    #: the profile's mean (or median) latency, scaled by each request's noise factor (ms)
    mean_ms: float
    #: added unscaled: the cloud's transfer over the link (ms; 0 on a local processor)
    extra_ms: float
    #: by request id: its seeded log-normal factor (mean 1)
    factors: list[float]

    def run_ms(self, rid: int) -> float:
        """Request ``rid``'s run time here (ms), at full speed."""
        return self.mean_ms * self.factors[rid] + self.extra_ms


class SimProcessor:
    """A simulated processor: a FIFO queue of request ids, ``slots`` parallel runs (1 except for the cloud)."""

    __slots__ = ("name", "kind", "index", "slots", "running", "queue", "qcount", "view", "idle_view",
                 "busy_ms", "n_runs", "run_times", "keys", "urgent")

    def __init__(self, name: str, kind: str, slots: int = 1, index: int = 0, urgent: bool = False) -> None:
        self.name = name
        self.kind = kind
        self.index = index
        self.slots = slots
        #: an urgent lane: only critical and high requests run on it while the lanes are closed
        self.urgent = urgent
        self.running: list[int] = []         # ids of the requests it runs
        self.queue: deque[int] = deque()     # ids assigned to it, not started (FIFO)
        self.qcount: dict[int, int] = {}     # model code -> how many of the queue
        self.view: ProcessorView | None = None
        #: the view while it runs and queues nothing (the same every time, so built once)
        self.idle_view = processor_view(name, kind, slots, (), 0.0, 0, True)
        self.busy_ms = 0.0
        self.n_runs = 0
        #: by model code: how long its runs take here, None if unsupported
        self.run_times: list[RunTimes | None] = []
        #: by model code: the estimator key ``(model, name)`` of this processor
        self.keys: list[tuple[str, str]] = []

    def make_view(self, start_ms: list[float], mcode: list[int], ema: dict[tuple[str, str], float]) -> ProcessorView:
        """The policy's snapshot of this processor while it runs or queues something (else it is :attr:`idle_view`):
        :func:`scheduler.contract.processor_view`, as the live runtime's, from the estimator now.

        ``start_ms`` and ``mcode`` (model code) are by request id; ``ema`` is the estimator's table
        (``LatencyEstimator.ema_table()``), read through :attr:`keys` (every model this processor
        runs or queues is in it).
        """
        queue = self.queue
        keys = self.keys
        queued = 0.0
        for m, k in self.qcount.items():   # by model: k runs of one expected latency
            queued += k * ema[keys[m]]
        ends = [start_ms[r] + ema[keys[mcode[r]]] for r in self.running]
        return processor_view(self.name, self.kind, self.slots, ends, queued, len(queue), True)

    def enqueue(self, rid: int, model: int) -> None:
        """Request ``rid`` (of model code ``model``) joins the back of the queue."""
        self.queue.append(rid)
        self.qcount[model] = self.qcount.get(model, 0) + 1

    def dequeue(self, mcode: list[int]) -> int:
        """Take the head of the (non-empty) queue; ``mcode``: model code by request id."""
        rid = self.queue.popleft()
        model = mcode[rid]
        if self.qcount[model] == 1:
            del self.qcount[model]
        else:
            self.qcount[model] -= 1
        return rid

    def is_idle(self) -> bool:
        """A free slot and nothing queued: a request placed on it starts now."""
        if self.queue or len(self.running) >= self.slots:   # (a test that jumps: CPython specializes it, as it
            return False                                    # does not a comparison whose value is returned)
        return True
