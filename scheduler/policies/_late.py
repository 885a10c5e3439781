"""edgert's placement of a request that misses the easy cases: one in time only after a wait
(:func:`wait_choice`: the cloud at its last safe moment, or a cheaper placement) and one no local processor
serves by its effective deadline (:func:`late_choice`: swap, cloud, its own deadline, supersede, drop).
Rules 2 and 4 of :mod:`scheduler.policies.edgert`; times are ms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scheduler.policies._slots import BEHIND_REASON, Processors, Work, swap_slot, take_older_slot
from scheduler.types import Assignment, RequestView

if TYPE_CHECKING:
    from scheduler.policies.edgert import EdgertPolicy


def wait_choice(policy: EdgertPolicy, model: str, row: list[tuple[int, float]], finishes: tuple[int, float, float, int, float,
                float], long_ms: float, procs: Processors, target: float, now_ms: float,
                green: Any) -> tuple[int, float]:
    """A request that makes ``target`` on ``local`` only after a wait: the cloud when its last safe
    moment is now and the claim is fragile (its wait >= its slack) or long; else, with an energy
    objective, a cheaper placement in time; else ``local``."""
    local, local_f, fm, cloud, cloud_f, cloud_ms = finishes
    ready = procs.ready
    if cloud >= 0 and target - policy.guard_ms < cloud_f + policy.cloud_margin * cloud_ms <= target and (
            ready[local] - now_ms >= target - fm or local_f - ready[local] > long_ms):
        return cloud, cloud_f
    if green is not None:
        return green.choose(model, row, local, local_f, procs, target, now_ms)
    return local, local_f

def late_choice(policy: EdgertPolicy, req: RequestView, row: list[tuple[int, float]], target: float,
                 earliest: tuple[int, float, int, float], procs: Processors, now_ms: float,
                 work: Work, new: bool = False) -> tuple[int, float] | None:
    """For a request no local processor serves by its effective deadline ``target``, even after a wait:
    ``(processor, finish)`` to claim, or None when it was settled here or stays pending.

    In order: take a more urgent request's local slot when that one fits elsewhere (:func:`swap_slot`);
    the cloud when it makes ``target``; the earliest finish when it makes the request's own deadline
    (not its cascade's); the slot of an older frame of its stream (supersede); a drop when even a
    processor to itself would finish it late; a drop on arrival (``new``: first seen now) when the work
    queued ahead of it leaves no processor that finishes it by its deadline; else it stays pending,
    claiming nothing.
    ``earliest``: ``(local, local_f, cloud, cloud_f)``, the earliest local and cloud finishes (index -1: none).
    """
    local, local_f, cloud, cloud_f = earliest
    if local >= 0 and swap_slot(req, row, target, work, procs, k_local=policy.k_local, now_ms=now_ms):
        return None                               # took a slot whose holder moves elsewhere in time
    if cloud_f <= target:
        return cloud, cloud_f
    deadline = req.deadline_ms
    if local_f <= deadline or cloud_f <= deadline:
        return (local, local_f) if local_f <= cloud_f else (cloud, cloud_f)
    if work.placed is not None and take_older_slot(req, work.placed, work.out, procs.names, deadline, work.last):
        return None
    own = min(work.base[i] + ms for i, ms in row)
    if own > deadline:
        work.out.append(Assignment.drop(req.id, _late(own, deadline)))
        policy.refused.add(req.model)   # refused on its estimate: it may age (see decide)
    elif new:
        work.out.append(Assignment.drop(req.id, _behind(min(local_f, cloud_f), deadline)))
    return None


def _behind(finish_ms: float, deadline_ms: float) -> str:
    return (f"{BEHIND_REASON}: earliest expected finish {finish_ms:.2f} ms > deadline {deadline_ms:.2f} ms "
            "on every processor that can run it, so it is dropped on arrival")


def _late(finish_ms: float, deadline_ms: float) -> str:
    return (f"cannot meet its deadline: earliest expected finish {finish_ms:.2f} ms "
            f"> deadline {deadline_ms:.2f} ms")
