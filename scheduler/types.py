"""The plain data a policy decides over (DESIGN.md §2).

A policy never reads the clock and never does I/O: the driver (the live
runtime or the simulator) builds a frozen :class:`SchedulerView`, passes
``now_ms`` in, and applies the returned :class:`Assignment` list. All times
are milliseconds on the driver's clock (monotonic live, virtual simulated);
deadlines are absolute on that clock.

Driver contract, the same in both drivers (:mod:`scheduler.contract` holds what each outcome means,
its words, and the one switch where the drivers differ):

* ``decide`` is called whenever a request arrives (or becomes ready, for a
  cascade stage) and whenever a processor finishes one.
* A request the policy does not mention stays pending and is offered again
  at the next decision. An assignment appends the request to that
  processor's queue; a processor runs its queue first-in first-out, one
  invocation at a time.
* ``Assignment(processor=None)`` drops the request; ``reason`` is what the
  caller is told.
* If a decision leaves requests pending while every processor that could run
  them is idle, the driver drops them ("left unplaced by scheduler …") so no
  request waits forever.

:class:`RequestView` and :class:`ProcessorView` are slots dataclasses: a policy reads their fields in its
inner loops, and a slot is read in one step where a ``NamedTuple`` field is a descriptor call (a decision
over a burst's pending requests costs about a fifth less). They are built with their plain constructor (a
frozen dataclass would store each field through ``object.__setattr__``, several times the cost), so they
are read-only by convention: a policy never writes to one, and a driver builds a new one (or
``dataclasses.replace``) for a change. :class:`SchedulerView` and :class:`Assignment` stay ``NamedTuple``
classes: built once per decision and per answer, and an assignment is unpacked where it is applied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, NamedTuple, Protocol, runtime_checkable

#: Processor kinds, in the order a profile usually lists them.
PROCESSOR_KINDS: tuple[str, ...] = ("cpu", "gpu", "dsp", "npu", "cloud")


@dataclass(slots=True)
class RequestView:
    """One pending request as a policy sees it.

    Attributes:
        id: unique per driver run.
        model: the model name the request invokes.
        arrival_ms: when it became ready to run.
        deadline_ms: absolute deadline (``math.inf`` when it has none).
        stream: key of the periodic stream it belongs to (by default the
            model name; the live runtime keys a frame's second request of a
            model ``model#2`` and so on); a newer request of one stream may
            supersede an older one that has not started.
        frame: frame number within the stream (``-1`` when not framed).
        downstream_ms: expected time that later cascade stages still need
            after this one finishes (0 for a last stage); a cascade-aware
            policy aims to finish by ``deadline_ms - downstream_ms``.
        allowed: processors the caller restricted the request to, or
            ``None`` for any processor that supports the model.
        priority: the importance its app declared (:data:`scheduler.priority.PRIORITIES`:
            ``critical``, ``high``, ``normal``, ``low``); under overload the lowest gives way first.
    """

    id: int
    model: str
    arrival_ms: float
    deadline_ms: float = math.inf
    stream: str = ""
    frame: int = -1
    downstream_ms: float = 0.0
    allowed: tuple[str, ...] | None = None
    priority: str = "normal"


@dataclass(slots=True)
class ProcessorView:
    """One processor (worker) as a policy sees it.

    Attributes:
        name: unique name (``cpu0``, ``gpu``, ``npu``, ``cloud`` …).
        kind: one of :data:`PROCESSOR_KINDS`.
        busy_until_ms: expected finish of the invocation it is running;
            ``<= now`` when it runs nothing.
        queued_ms: sum of expected latencies of requests assigned to it but
            not started.
        n_queued: how many requests are assigned to it but not started.
        available: False while the processor is marked unhealthy.
        slots: invocations it can run at once (1 for a phone accelerator or a CPU
            core; a cloud pool has several). ``busy_until_ms`` is then the expected
            finish of the earliest-ending one when every slot is busy, else ``<= now``.
        free_slots: slots idle right now (``<= slots``).
    """

    name: str
    kind: str
    busy_until_ms: float = 0.0
    queued_ms: float = 0.0
    n_queued: int = 0
    available: bool = True
    slots: int = 1
    free_slots: int = 1

    def ready_at_ms(self, now_ms: float) -> float:
        """When this processor could start a newly assigned request (Band's wait)."""
        return max(now_ms, self.busy_until_ms) + self.queued_ms

    def is_idle(self, now_ms: float) -> bool:
        """True when it runs nothing and has nothing queued."""
        return self.n_queued == 0 and self.busy_until_ms <= now_ms


@runtime_checkable
class LatencyModel(Protocol):
    """What a policy asks about latencies (the estimator implements it)."""

    def expected_ms(self, model: str, processor: str) -> float | None:
        """Expected latency in ms of ``model`` on ``processor``; None if unsupported."""


class SchedulerView(NamedTuple):
    """A frozen snapshot: pending requests (arrival order), processors, estimator."""

    pending: tuple[RequestView, ...]
    processors: tuple[ProcessorView, ...]
    estimator: LatencyModel

    def candidates(self, request: RequestView) -> list[ProcessorView]:
        """Available processors that can run ``request`` (support + ``allowed``)."""
        est = self.estimator.expected_ms
        return [
            p
            for p in self.processors
            if p.available
            and (request.allowed is None or p.name in request.allowed)
            and est(request.model, p.name) is not None
        ]


class Assignment(NamedTuple):
    """A decision about one request: run it on ``processor``, or drop it (None)."""

    request_id: int
    processor: str | None
    reason: str = ""

    @classmethod
    def drop(cls, request_id: int, reason: str) -> Assignment:
        """Drop ``request_id``; ``reason`` is reported to the caller."""
        return cls(request_id, None, reason)


class Policy(Protocol):
    """A scheduling policy: a pure function of a snapshot and ``now_ms``."""

    name: ClassVar[str]

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """Return assignments for some (or all, or none) of ``view.pending``."""
