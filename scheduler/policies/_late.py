"""edgert's placement of a request that misses the easy cases: one in time only after a wait
(:func:`wait_choice`: the cloud at its last safe moment, or a cheaper placement) and one no local processor
serves by its effective deadline (:func:`late_choice`: swap, cloud, its own deadline, supersede, drop).
Rules 2 and 4 of :mod:`scheduler.policies.edgert`; times are ms. Neither reads the policy: what they need of
it comes as arguments.
"""

from __future__ import annotations

from typing import Any

from scheduler.policies._slots import BEHIND_REASON, Candidates, Claims, Processors, swap_slot, take_older_slot
from scheduler.types import Assignment, RequestView


def wait_choice(model: str, row: list[tuple[int, float]], c: Candidates, target: float, procs: Processors,
                now_ms: float, *, k_local: float, cloud_margin: float, guard_ms: float, long_ms: float,
                green: Any) -> tuple[int, float]:
    """``(processor, finish)`` for a request that makes ``target`` on ``c.local`` only after a wait: the cloud
    when its last safe moment is now (its finish plus ``cloud_margin`` of the round trip within ``guard_ms``
    of ``target``) and the local claim is fragile (its wait is at least the slack it would leave) or long
    (over ``long_ms``); else, with an energy objective (``green``), a cheaper placement in time; else
    ``c.local``."""
    ready = procs.ready
    if c.cloud >= 0 and target - guard_ms < c.cloud_f + cloud_margin * c.cloud_ms <= target:
        wait = ready[c.local] - now_ms
        slack = target - (ready[c.local] + k_local * c.local_ms)
        if wait >= slack or c.local_ms > long_ms:
            return c.cloud, c.cloud_f
    if green is not None:
        return green.choose(model, row, c.local, c.local_f, procs, target, now_ms)
    return c.local, c.local_f


def late_choice(req: RequestView, row: list[tuple[int, float]], c: Candidates, target: float, procs: Processors,
                now_ms: float, claims: Claims, *, k_local: float, new: bool, refused: set[str]) -> tuple[int, float]:
    """For a request no local processor serves by its effective deadline ``target``, even after a wait:
    ``(processor, finish)`` to claim, or ``(-1, 0.0)`` when it was settled here or stays pending.

    In order: take a more urgent request's local slot when that one fits elsewhere (:func:`swap_slot`);
    the cloud when it makes ``target``; the earliest finish when it makes the request's own deadline
    (not its cascade's); the slot of an older frame of its stream (supersede); a drop when even a
    processor to itself would finish it late (its model is then added to ``refused``: its estimate may
    age); a drop on arrival (``new``: first seen now) when the work queued ahead of it leaves no processor
    that finishes it by its deadline; else it stays pending, claiming nothing.
    """
    settled = (-1, 0.0)
    if c.local >= 0 and swap_slot(req, row, target, claims, procs, k_local=k_local, now_ms=now_ms):
        return settled                        # took a slot whose holder moves elsewhere in time
    if c.cloud_f <= target:
        return c.cloud, c.cloud_f
    deadline = req.deadline_ms
    if c.local_f <= deadline or c.cloud_f <= deadline:
        return (c.local, c.local_f) if c.local_f <= c.cloud_f else (c.cloud, c.cloud_f)
    if claims.placed is not None and take_older_slot(req, claims.placed, claims.out, procs.names, deadline,
                                                     claims.last):
        return settled
    alone = min(claims.base[i] + ms for i, ms in row)   # its finish with a processor to itself
    if alone > deadline:
        claims.out.append(Assignment.drop(req.id, _late(alone, deadline)))
        refused.add(req.model)
    elif new:
        claims.out.append(Assignment.drop(req.id, _behind(min(c.local_f, c.cloud_f), deadline)))
    return settled


def _behind(finish_ms: float, deadline_ms: float) -> str:
    return (f"{BEHIND_REASON}: earliest expected finish {finish_ms:.2f} ms > deadline {deadline_ms:.2f} ms "
            "on every processor that can run it, so it is dropped on arrival")


def _late(finish_ms: float, deadline_ms: float) -> str:
    return (f"cannot meet its deadline: earliest expected finish {finish_ms:.2f} ms "
            f"> deadline {deadline_ms:.2f} ms")
