"""Priorities in edgert's policy: the order under contention, and room kept for the next critical frame.

Two rules, both inert when every request is ``normal`` (the default), so a workload without
declared priorities is decided exactly as before:

* **Order.** A request's urgency key is its effective deadline minus :data:`LEAD_MS` of its level:
  of two requests due about together, the more important goes first; a low one waits behind a
  normal one due up to 8 ms later. A lead is a bounded nudge, not a strict class order: a low
  request due long before a critical one still goes first, so EDF keeps every deadline it can.
* **Room** (Linux ``SCHED_DEADLINE``'s reservation, per processor): a critical stream is periodic,
  so its next frame's arrival is predictable from the arrivals seen (:class:`CriticalRoom`). A
  request below critical may not take the last local processor that would be free in time for
  that frame: when its run would end after the frame's *latest start* (its arrival plus
  :data:`SLACK_SHARE` of its slack: its budget less its chain's run with headroom; the rest is
  headroom for the estimates' spread and the app's own work on the frame) and no other local
  processor is free by then, it stays
  pending (it runs as soon as it no longer stands in the way, or is dropped when it can no longer
  make its deadline). A processor is never left idle this way while every processor is idle:
  the request only waits while another one is busy.

Pure: the state is the arrivals seen, updated from snapshots; ``now_ms`` is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scheduler.priority import LEAD_MS
from scheduler.types import RequestView
#: share of a critical frame's slack (budget - chain) another request's run may take from it
SLACK_SHARE = 0.5
#: a critical stream silent for this many of its periods is no longer expected
_SILENT_PERIODS = 3.0
#: weight of the newest inter-arrival gap in a stream's period estimate
_ALPHA = 0.25


class CriticalRoom:
    """Each critical stream's period and budget from its arrivals; when its next frame must start.

    ``_s``: stream -> [last arrival ms, period ms (0 until two arrivals), budget ms (deadline - arrival),
    chain ms (its fastest run + the downstream stages')].
    """

    __slots__ = ("_s",)

    def __init__(self) -> None:
        self._s: dict[str, list[float]] = {}

    @property
    def empty(self) -> bool:
        """No critical stream seen (the rule costs nothing then)."""
        return not self._s

    def see(self, req: RequestView, run_ms: float) -> None:
        """Note a critical request (its fastest local run ``run_ms``); one seen before changes nothing."""
        key = req.stream or req.model
        s = self._s.get(key)
        t = req.arrival_ms
        chain = run_ms + req.downstream_ms
        if s is None:
            self._s[key] = [t, 0.0, req.deadline_ms - t, chain]
            return
        if t <= s[0]:
            return
        gap = t - s[0]
        s[1] = gap if s[1] == 0.0 else (1.0 - _ALPHA) * s[1] + _ALPHA * gap
        s[0], s[2], s[3] = t, req.deadline_ms - t, chain

    def next_starts(self, now_ms: float, k_local: float) -> list[tuple[float, float]]:
        """``(arrival, latest start)`` (ms) of each critical stream's next frame, for the streams still
        running: arrival = last arrival + period; latest start = arrival + :data:`SLACK_SHARE` x (budget -
        ``k_local`` x chain)."""
        out = []
        for key, (last, period, budget, chain) in list(self._s.items()):
            if period <= 0.0:
                continue
            if now_ms - last > _SILENT_PERIODS * period:
                del self._s[key]
                continue
            arrival = last + period
            while arrival < now_ms - period:   # (a frame skipped by its app: the next one after now)
                arrival += period
            out.append((arrival, arrival + SLACK_SHARE * max(0.0, budget - k_local * chain)))
        return out


def stands_in_the_way(pick: int, finish_ms: float, ready: Sequence[float], local: Sequence[int],
                      starts: Sequence[tuple[float, float]]) -> bool:
    """Whether a run on processor ``pick`` ending at ``finish_ms`` takes the last local processor free in time
    for a critical frame of ``starts`` that arrives before it ends (``ready``: each processor's ready ms with
    this decision's claims; ``local``: the local processors' indices)."""
    for arrival, latest in starts:
        if arrival >= finish_ms or finish_ms <= latest:
            continue
        if not any(j != pick and ready[j] <= latest for j in local):
            return True
    return False


def room_gate(starts: Sequence[tuple[float, float]], is_cloud: Sequence[bool]) -> Callable[..., bool]:
    """``gate(level, pick, finish_ms, ready, now_ms)``: whether a request of ``level`` placed on processor ``pick``
    to end at ``finish_ms`` must wait because it starts now on a local processor and :func:`stands_in_the_way`
    of a critical frame of ``starts``."""
    local = [i for i, c in enumerate(is_cloud) if not c]

    def gate(level: str, pick: int, finish_ms: float, ready: Sequence[float], now_ms: float) -> bool:
        return (level != "critical" and not is_cloud[pick] and ready[pick] <= now_ms
                and stands_in_the_way(pick, finish_ms, ready, local, starts))

    return gate


def priority_urgency(base: Callable[[RequestView], float]) -> Callable[[RequestView], float]:
    """``base`` (an urgency key, ms) less the request's :data:`LEAD_MS`."""
    lead = LEAD_MS

    def key(r: RequestView) -> float:
        return base(r) - lead.get(r.priority, 0.0)

    return key
