"""The driver contract, once: what a policy's decision means to whatever runs it.

Two drivers run the same policies: the live runtime (``edgert/_core/_dispatch.py``) and
the simulator (``scheduler/sim/driver.py``). Each applies a decision in its own
loop (the simulator's is its hot path), and each takes from here what every
outcome means and how it is worded::

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

from scheduler.errors import EdgeRTError

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
