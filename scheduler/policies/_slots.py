"""Slot moves within one decision of edgert's policy: a swap between two requests, a newer frame's takeover.

Both act on the decision's working state (``out``, the assignments so far; ``ready``, each processor's
expected free time in ms with this decision's claims; ``last`` / ``last_start``, the request each processor
was last given in this decision and its start; ``placed``, each stream's latest placement) and keep it
consistent, so the policy's main loop stays one pass. Times are ms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from scheduler.types import Assignment, LatencyModel, ProcessorView, RequestView

_INF = float("inf")
#: a free processor this many times slower than the fastest is taken only when it finishes sooner (no eft_slack)
_SLOWER = 4.0
#: how the reason of a request dropped on arrival because the work queued ahead leaves it no time begins
BEHIND_REASON = "cannot meet its deadline behind the work queued ahead of it"


class Processors:
    """The available processors as one decision sees them, by index (the profile's order)."""

    __slots__ = ("cloud_name", "cloud_slots", "free", "is_cloud", "local", "names", "ready", "slots")

    def __init__(self, names: list[str], ready: list[float], is_cloud: list[bool], free: list[int],
                 slots: list[int], local: list[str], cloud_name: str | None, cloud_slots: int) -> None:
        self._set(names, ready, is_cloud, free, slots, local, cloud_name, cloud_slots)

    def _set(self, names: list[str], ready: list[float], is_cloud: list[bool], free: list[int], slots: list[int],
             local: list[str], cloud_name: str | None, cloud_slots: int) -> None:
        """Its fields, as :meth:`__init__` takes them (and :meth:`fill` refills them)."""
        self.names = names
        #: when each can start one more request (ms), counting the claims of the decision so far
        self.ready = ready
        self.is_cloud = is_cloud
        #: idle slots of a multi-slot processor (the cloud), 0 otherwise
        self.free = free
        self.slots = slots
        #: the local processors' names
        self.local = local
        self.cloud_name = cloud_name
        self.cloud_slots = cloud_slots

    def fill(self, processors: Sequence[ProcessorView], now_ms: float) -> Processors:
        """This table made that of the available ``processors`` at ``now_ms`` (new lists; the policy keeps one table
        and fills it at each decision): a processor is ready when it could start one more request."""
        names: list[str] = []
        ready: list[float] = []
        is_cloud: list[bool] = []
        free: list[int] = []
        slots: list[int] = []
        local: list[str] = []
        cloud_name: str | None = None
        cloud_slots = 0
        for p in processors:
            if p.available:
                name, n_slots = p.name, p.slots
                names.append(name)
                c = p.kind == "cloud"
                is_cloud.append(c)
                if c:
                    cloud_name, cloud_slots = name, n_slots
                else:
                    local.append(name)
                busy_until = p.busy_until_ms
                start = busy_until if busy_until > now_ms else now_ms   # (a conditional: max() is a call)
                if n_slots > 1:
                    free.append(p.free_slots)
                    slots.append(n_slots)
                    ready.append(now_ms if p.free_slots > 0 else start + p.queued_ms / n_slots)
                else:
                    free.append(0)
                    slots.append(1)
                    ready.append(start + p.queued_ms)
        self._set(names, ready, is_cloud, free, slots, local, cloud_name, cloud_slots)
        return self

    def at(self, now_ms: float) -> Processors:
        """A copy of this table of idle processors at ``now_ms``: each is ready now (the counts are copied:
        a decision counts them down)."""
        return Processors(self.names, [now_ms] * len(self.names), self.is_cloud, self.free[:], self.slots,
                          self.local, self.cloud_name, self.cloud_slots)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Processors) and all(getattr(self, a) == getattr(other, a) for a in self.__slots__)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "Processors(" + ", ".join(f"{a}={getattr(self, a)!r}" for a in self.__slots__) + ")"


class Candidates:
    """Where one request would finish on the processors that run it, after the claims of more urgent requests
    of this decision (ms; a processor is an index into :class:`Processors`, -1 for none). One instance serves
    a whole decision: :meth:`find` fills it for each request in turn."""

    __slots__ = ("cloud", "cloud_f", "cloud_ms", "idle", "idle_f", "local", "local_f", "local_ms")

    def __init__(self) -> None:
        #: the local processor that finishes it first, after its wait, and that finish
        self.local, self.local_f = -1, _INF
        #: that processor's run time (inf: no local processor)
        self.local_ms = _INF
        #: the local processor free now that finishes it first by its target with headroom, and that finish
        self.idle, self.idle_f = -1, _INF
        #: the cloud, its finish and its expected round trip
        self.cloud, self.cloud_f, self.cloud_ms = -1, _INF, 0.0

    def find(self, row: list[tuple[int, float]], ready: list[float], is_cloud: list[bool], now_ms: float,
             k_local: float, target: float) -> Candidates:
        """Fill in the candidates of a request that runs as ``row`` says (``[(processor, expected ms)]``), given
        each processor's ready time with this decision's claims (``ready``, ms), a local run's headroom factor
        ``k_local`` (1 + margin) and the request's effective deadline ``target`` (ms)."""
        local = idle = cloud = -1          # the best processor of each kind (-1: none yet)
        local_f = idle_f = cloud_f = _INF   # and its finish (ms)
        cloud_ms = 0.0
        for i, ms in row:
            start = ready[i]
            finish = start + ms
            if is_cloud[i]:
                if finish < cloud_f:
                    cloud, cloud_f, cloud_ms = i, finish, ms
            else:
                if finish < local_f:
                    local, local_f = i, finish
                if start <= now_ms and finish < idle_f and start + k_local * ms <= target:
                    idle, idle_f = i, finish
        self.local, self.local_f, self.local_ms = local, local_f, local_f - ready[local]
        self.idle, self.idle_f = idle, idle_f
        self.cloud, self.cloud_f, self.cloud_ms = cloud, cloud_f, cloud_ms
        return self


class Claims:
    """One decision's working state: what more urgent requests of this decision claimed, shared with the slot
    moves of :mod:`~scheduler.policies._slots`. (Each processor's ready time with the claims so far is
    :attr:`Processors.ready`.)"""

    __slots__ = ("base", "last", "last_start", "out", "placed", "rows")

    def __init__(self, base: list[float], out: list[Assignment],
                 placed: dict[str, tuple[int, int, float, RequestView]] | None, last: list[RequestView | None],
                 last_start: list[float], rows: dict[str, list[tuple[int, float]]]) -> None:
        #: each processor's ready time without this decision's claims (ms)
        self.base = base
        #: the assignments so far
        self.out = out
        #: stream -> (index in out, or -1 for a claim; processor index; expected finish; request); None: no supersede
        self.placed = placed
        #: per processor: the request it was last given in this decision and its start (ms)
        self.last = last
        self.last_start = last_start
        #: model -> [(processor index, expected ms)] over the processors that run it
        self.rows = rows

    def start(self, ready: list[float], supersede: bool) -> Claims:
        """This state emptied for a new decision over processors ready at ``ready`` (ms, copied as :attr:`base`):
        nothing claimed or assigned yet; ``supersede``: each stream's placement is tracked (:attr:`placed`). The
        policy keeps one and starts it at each decision, as it keeps its :class:`Candidates`."""
        n = len(ready)
        self.base = ready[:]
        self.out = []
        self.placed = {} if supersede else None
        self.last = [None] * n
        self.last_start = [0.0] * n
        self.rows = {}
        return self


def swap_slot(req: RequestView, row: list[tuple[int, float]], target: float, work: Claims, procs: Processors, *,
              k_local: float, now_ms: float) -> bool:
    """Give ``req`` a local processor's latest placement of this decision when its holder fits elsewhere.

    ``req`` takes processor i from its holder's start if it then makes ``target`` with headroom, and the
    holder (a more urgent request: EDF placed it first) moves to the local processor where it finishes
    first, also with headroom; of several such i, the one where ``req`` finishes first. Only the latest
    placement on each processor can move (nothing placed after it depends on its finish). Returns True
    when it swapped, with ``work`` (out, last, placed) and ``procs.ready`` updated. Rarely called (only for a
    request about to miss), so it recomputes what the hot path does not store.
    """
    last = work.last
    last_start = work.last_start
    rows = work.rows
    out = work.out
    placed = work.placed
    names, ready, cloud = procs.names, procs.ready, procs.is_cloud
    best_f, best_i, best_j, best_fr = _INF, -1, -1, _INF
    for i, ms in row:
        held = last[i]
        if held is None or cloud[i]:
            continue
        start = last_start[i]
        if start + k_local * ms > target or start + ms >= best_f:
            continue
        target_r = held.deadline_ms - held.downstream_ms
        alt, alt_f = -1, _INF
        for j, ms_r in rows[held.model]:
            if j != i and not cloud[j] and (held.allowed is None or names[j] in held.allowed) \
                    and ready[j] + k_local * ms_r <= target_r and ready[j] + ms_r < alt_f:
                alt, alt_f = j, ready[j] + ms_r
        if alt >= 0:
            best_f, best_i, best_j, best_fr = start + ms, i, alt, alt_f
    if best_i < 0:
        return False
    r = last[best_i]
    assert r is not None
    start = last_start[best_i]
    start_r = ready[best_j]
    slot = -1
    if start <= now_ms:                  # the holder was dispatched now: req is, in its place
        slot = next(k for k, a in enumerate(out) if a.request_id == r.id)
        out[slot] = Assignment(req.id, names[best_i])
    slot_r = -1                          # the holder waits for its new processor (a claim) ...
    if start_r <= now_ms:                # ... or starts there now
        slot_r = len(out)
        out.append(Assignment(r.id, names[best_j]))
    ready[best_i] = best_f
    ready[best_j] = best_fr
    last[best_i], last_start[best_i] = req, start
    last[best_j], last_start[best_j] = r, start_r
    if placed is not None:
        placed[req.stream or req.model] = (slot, best_i, best_f, req)
        placed[r.stream or r.model] = (slot_r, best_j, best_fr, r)
    return True


def take_older_slot(req: RequestView, placed: dict[str, tuple[int, int, float, RequestView]],
                     out: list[Assignment], names: list[str], deadline: float,
                     last: list[RequestView | None]) -> bool:
    """Give ``req`` the slot of an older frame of its stream placed in this decision; drop that frame."""
    key = req.stream or req.model
    prev = placed.get(key)
    if prev is None:
        return False
    slot, pi, pf, old = prev
    if not (old.frame < req.frame and old.model == req.model and pf <= deadline
            and (req.allowed is None or names[pi] in req.allowed)):
        return False
    reason = f"superseded by frame {req.frame} of stream {key!r}"
    if slot >= 0:
        out[slot] = Assignment(req.id, names[pi])
    out.append(Assignment.drop(old.id, reason))
    placed[key] = (slot, pi, pf, req)
    if last[pi] is old:
        last[pi] = req           # the slot's holder is the newer frame now (for swap_slot)
    return True


def leave_to_tighter_stream(model: str, row: list[tuple[int, float]], idle: int, idle_f: float, target: float,
                             reserved: dict[str, tuple[str, float]], procs: Processors,
                             k_local: float) -> tuple[int, float]:
    """``(processor, finish)`` for a request with time to spare that would take processor ``idle``, the
    fastest one of a tighter stream: another local processor that finishes it in time (now, or after a
    wait: a claim) and is no other stream's, the earliest such finish; else ``idle`` itself."""
    names, ready, is_cloud = procs.names, procs.ready, procs.is_cloud
    pick, finish = idle, idle_f
    for i, ms in row:
        if is_cloud[i] or i == idle:
            continue
        q = reserved.get(names[i])
        if q is not None and q[0] != model:
            continue
        st = ready[i]
        if st + k_local * ms <= target and (pick == idle or st + ms < finish):
            pick, finish = i, st + ms
    return pick, finish


# -- the processor table and a request's finishes, read by EdgertPolicy._place ------------------------
def _processor_table(processors: Sequence[ProcessorView], now_ms: float) -> Processors:
    """The available processors' table; a processor is ready when it could start one more request."""
    return Processors([], [], [], [], [], [], None, 0).fill(processors, now_ms)


def _row(lookup: Callable[[tuple[str, str]], float | None] | None, estimator: LatencyModel, model: str,
         names: list[str]) -> list[tuple[int, float]]:
    """``[(processor index, expected ms)]`` over the processors that run ``model``.

    ``lookup``: a :class:`LatencyEstimator`'s table's ``get``, what its ``expected_ms`` reads (a decision
    builds a row per model with a lookup per processor: the method calls cost a twentieth of a decision).
    """
    row = []
    for i, name in enumerate(names):   # (a loop: a comprehension costs a frame more per row, a third of its time)
        ms = lookup((model, name)) if lookup is not None else estimator.expected_ms(model, name)
        if ms is not None:
            row.append((i, ms))
    return row


def _idle_choice(model: str, row: list[tuple[int, float]], idle: int, idle_f: float, target: float,
                 reserved: Any, procs: Processors, k_local: float, now_ms: float, green: Any) -> tuple[int, float]:
    """A request in time on ``idle`` (free now): leave it to a tighter stream that reserved it when
    this one has time to spare, then, with an energy objective, a cheaper placement in time."""
    pick, finish = idle, idle_f
    if reserved and (held := reserved.get(procs.names[idle])) is not None and held[0] != model \
            and target - now_ms > 2.0 * held[1]:
        pick, finish = leave_to_tighter_stream(model, row, idle, idle_f, target, reserved, procs, k_local)
    if green is not None:                         # a cheaper placement that is in time too
        pick, finish = green.choose(model, row, pick, finish, procs, target, now_ms)
    return pick, finish


def _slot_ready(pick: int, start: float, finish: float, ready: list[float], free: list[int],
                slots: list[int]) -> float:
    """A multi-slot processor's ready time once it is given a request from ``start`` to ``finish``."""
    if free[pick] > 0:                # a free slot: the processor is ready again while one stays free
        free[pick] -= 1
        return finish if free[pick] == 0 else ready[pick]
    return start + (finish - start) / slots[pick]
