"""The driver contract, once: what a policy's decision means to whatever runs it, applied here.

Two drivers run the same policies: the live runtime (``edgert/_core/_run.py``'s ``Decider``) and
the simulator (``scheduler/sim/driver.py``). Both apply a decision with :func:`apply`, sweep what
it left with :func:`sweep_unplaced` and show a processor with :func:`processor_view`; each gives
them its requests and processors through the :class:`Driver` interface (a processor is idle when
it has a free slot and nothing queued: :class:`Processor`)::

    decide(view, now_ms) -> [Assignment, ...]      each, in order:
        request_id not pending ............ broken decision (not_pending)
        processor None .................... the request is dropped: reason or dropped_by(policy)
        processor unknown / cannot run it . broken decision (misplaced)
        otherwise ......................... appended to that processor's FIFO queue
    then, for every request still pending:
        every processor that could run it idle -> dropped: left_unplaced(policy)
        (else it waits: a completion is coming, and with it the next decision)

A broken decision is a bug of the policy. The one place the drivers differ is what
they do about it, the switch :class:`OnBroken`:

* ``RAISE`` (the simulator): the run stops with an :class:`EdgeRTError` naming the
  policy, the request and the processor. A simulated run exists to judge the
  policy; fixing its decision up would measure something else, and the run can be
  replayed to find the bug.
* ``DROP`` (the live runtime): an app is running and its requests must each end
  once; a misplaced request ends ``dropped`` with the same words as its reason, and
  an id that is not pending (nothing to drop) is ignored. The runtime keeps serving.

Pure: no clock, no I/O, nothing of the drivers' state.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

from scheduler.errors import EdgeRTError
from scheduler.types import Assignment, ProcessorView

R = TypeVar("R")   # a driver's request (the live Request; the simulator's RequestView)
P = TypeVar("P", bound="Processor")   # a driver's processor (a live Worker; a SimProcessor)
R_contra = TypeVar("R_contra", contravariant=True)

#: The drop reason for a request a decision left pending while every processor that could run it was
#: idle (formatted by :func:`left_unplaced`).
LEFT_UNPLACED = "left unplaced by scheduler {name!r} while every processor that could run it was idle"


class OnBroken(enum.Enum):
    """What a driver does with a decision that breaks the contract (see the module doc)."""

    #: stop with an EdgeRTError (the simulator)
    RAISE = "raise"
    #: drop the request with the reason, or ignore an id that is not pending (the live runtime)
    DROP = "drop"


def left_unplaced(policy_name: str) -> str:
    """The reason a request is dropped when a decision left it pending while its processors were idle."""
    return LEFT_UNPLACED.format(name=policy_name)


def dropped_by(policy_name: str) -> str:
    """The reason of a drop (``Assignment(processor=None)``) whose policy gave none."""
    return f"dropped by scheduler {policy_name!r}"


def misplaced(policy_name: str, processor: str, exists: bool, request: str = "it") -> str:
    """A placement on ``processor``, which does not exist (``exists`` False) or cannot run the request.

    ``request`` names the request in the sentence ("it" inside a drop reason; "request 7 (model 'hand')"
    in an error)."""
    return (f"scheduler {policy_name!r} placed {request} on {processor!r}, which "
            + ("cannot run it" if exists else "does not exist"))


def not_pending(policy_name: str, request_id: int) -> str:
    """A decision about request ``request_id``, which is not pending (unknown, already decided, or named twice)."""
    return (f"policy {policy_name!r} decided about request {request_id}, which is not pending "
            "(decide must only name view.pending ids)")


def broken(reason: str, on: OnBroken) -> str:
    """A broken decision under switch ``on``: raise (``RAISE``) or return ``reason`` for the drop (``DROP``).

    Raises:
        EdgeRTError: ``on`` is ``OnBroken.RAISE``; the message is ``reason``.
    """
    if on is OnBroken.RAISE:
        raise EdgeRTError(reason)
    return reason


class Processor(Protocol):
    """What the contract reads of a driver's processor (a live Worker, a SimProcessor)."""

    def is_idle(self) -> bool:
        """A free slot and nothing queued: a request placed on it would start now."""


class Driver(Protocol, Generic[R_contra, P]):
    """What a driver gives :func:`apply` and :func:`sweep_unplaced`: its processors (each a :class:`Processor`)
    and what it does with a request the decision placed or dropped (the live runtime, the simulator)."""

    @property
    def policy_name(self) -> str:
        """The policy's name, in every reason."""

    @property
    def on_broken(self) -> OnBroken:
        """What a broken decision does (:class:`OnBroken`)."""

    @property
    def by_name(self) -> Mapping[str, P]:
        """Processor name -> processor."""

    def can_run(self, p: P, req: R_contra) -> bool:
        """Whether ``p`` can run ``req`` (its model is there, and ``req`` may run on it)."""

    def place(self, req: R_contra, p: P, now_ms: float) -> None:
        """Append ``req`` to ``p``'s FIFO queue (the driver starts it when ``p`` has a free slot)."""

    def drop(self, req: R_contra, reason: str, now_ms: float) -> None:
        """End ``req`` dropped at ``now_ms``, saying ``reason``."""

    def candidates(self, req: R_contra) -> Sequence[P]:
        """The processors that can run ``req``."""

    def unplaced(self, req: R_contra, able: Sequence[P], now_ms: float) -> str:
        """The reason ``req`` is dropped when left pending while every processor in ``able`` is idle
        (usually :func:`left_unplaced`)."""


def apply(driver: Driver[R, P], pending: dict[int, R], decisions: Iterable[Assignment], now_ms: float) -> None:
    """Apply ``decisions`` in order, as the module doc says, taking each decided request out of ``pending``.

    Raises:
        EdgeRTError: a broken decision under ``OnBroken.RAISE``.
    """
    policy, on = driver.policy_name, driver.on_broken
    by_name = driver.by_name
    for rid, name, reason in decisions:
        req = pending.pop(rid, None)
        if req is None:
            broken(not_pending(policy, rid), on)
            continue   # (under DROP: nothing to drop)
        if name is None:
            driver.drop(req, reason or dropped_by(policy), now_ms)
            continue
        p = by_name.get(name)
        if p is None or not driver.can_run(p, req):
            what = "it" if on is OnBroken.DROP else f"request {rid}"
            driver.drop(req, broken(misplaced(policy, name, p is not None, what), on), now_ms)
            continue
        driver.place(req, p, now_ms)


def sweep_unplaced(driver: Driver[R, P], pending: dict[int, R], now_ms: float) -> None:
    """After a decision: drop each request still pending whose every candidate processor is idle (no
    completion is coming that would decide on it again): ``driver.unplaced`` says why. While no processor
    at all is idle, nothing is dropped (a completion is coming, and with it the next decision)."""
    for p in driver.by_name.values():
        if p.is_idle():
            break
    else:
        return
    candidates = driver.candidates
    for rid, req in list(pending.items()):
        able = candidates(req)
        for p in able:
            if not p.is_idle():
                break   # a completion is coming, and with it the next decision
        else:
            del pending[rid]
            driver.drop(req, driver.unplaced(req, able, now_ms), now_ms)


def processor_view(name: str, kind: str, slots: int, ends_ms: Sequence[float], queued_ms: float, n_queued: int,
                   available: bool) -> ProcessorView:
    """What a policy sees of a processor running ``len(ends_ms)`` requests, each expected to end at ``ends_ms``
    (start + expected latency, ms), with ``n_queued`` queued that are expected to take ``queued_ms`` in all.

    ``busy_until_ms`` is 0 while a slot is free, else the earliest expected end of its runs."""
    free = slots - len(ends_ms)
    busy = 0.0 if free > 0 else min(ends_ms)
    return ProcessorView(name, kind, busy, queued_ms, n_queued, available, slots, free)
