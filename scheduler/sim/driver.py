"""The simulator's driver: applies a policy to simulated processors exactly per the driver contract.

The loop is SimPy's (:meth:`Simulation._step`, after ``simpy.Environment.step``): take the next instant,
then at that instant

1. the events due, in ``(at_ms, priority, seq)`` order (:class:`Event`): a cascade stage that becomes
   ready after the app's own gap (:data:`STAGE_READY`), then the runs that end (:data:`RUN_END`), FIFO.
   A run's end (:meth:`~Simulation._run_ends`) teaches the estimator, frees its processor, which starts
   its queue's head (:meth:`~Simulation._start_run`, the one start step), and makes its firing cascade
   stages ready (:meth:`~Simulation._stages_after`), at once or after the app's gap;
2. the root arrivals (from the workload's sorted columns, :class:`RootArrivals`);
3. one decision, if anything is pending (:meth:`~Simulation._decide`): ``policy.decide(view, now_ms)``
   over the pending requests and the processors' views, applied by :func:`scheduler.contract.apply`
   and swept by :func:`scheduler.contract.sweep_unplaced`, the live runtime's two steps, this driver
   giving them its processors (the :class:`scheduler.contract.Driver` methods). So simultaneous
   frames of several streams are decided together, and a completion's cascade stages are pending
   when the freed processor is decided on, as in the live runtime.

A run that starts at an instant and takes 0 ms completes at that same instant. A decision that breaks
the contract stops the run (``ON_BROKEN = OnBroken.RAISE``: the live runtime drops instead;
:mod:`scheduler.contract` says why).

Latency model (:mod:`~scheduler.sim.latency`): each run's time is the profile's latency times a
seeded log-normal factor (plus the cloud's transfer), and a hand-off delay (``dispatch_ms``) may pass
between a processor taking a request and running it; both in the start step, whichever way the
request got there. With a profile's ``thermal`` section (and ``thermal=True``) that step also heats
the device and divides the run time by the processor's speed (:meth:`scheduler.sim.heat.Heat.start`).

A :class:`ProcessorView` is :func:`scheduler.contract.processor_view`, as the live runtime's. The
estimator the policy sees is a :class:`LatencyEstimator` seeded from the profile means (and the
cloud's expected latency) and updated (:meth:`LatencyEstimator.update`) with every simulated run.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence
from heapq import heappop, heappush
from typing import Any, NamedTuple

import numpy as np

from scheduler.contract import OnBroken, apply, left_unplaced, sweep_unplaced
from scheduler.errors import EdgeRTError, TraceError
from scheduler.estimator import LatencyEstimator
from scheduler.priority import URGENT_LEVELS
from scheduler.profile import DeviceProfile
from scheduler.sim.columns import Workload, downstream_ms, root_arrivals
from scheduler.sim.heat import Heat
from scheduler.sim.latency import bind_latencies, hand_offs, latency_table, make_processors
from scheduler.sim.memory import fit_memory
from scheduler.sim.metrics import Outcome, outcome_of
from scheduler.sim.processor import SimProcessor
from scheduler.sim.streams import SimStreams, StreamPlan
from scheduler.types import Policy, RequestView, SchedulerView

#: A broken decision stops a simulated run (the live runtime drops the request instead): see scheduler.contract
ON_BROKEN = OnBroken.RAISE

#: Event priorities at one instant (SimPy's ``URGENT`` / ``NORMAL``): a cascade stage whose app-side gap is
#: over becomes ready before the runs that end at that instant are handled.
STAGE_READY, RUN_END = 0, 1


class Event(NamedTuple):
    """A heap entry: at ``at_ms``, ``request``'s run ends (``RUN_END``) or, after the app's own gap, the
    cascade stage ``request`` becomes ready (``STAGE_READY``). Ordered as SimPy orders its queue,
    ``(time, priority, seq)``: ``seq`` counts the events pushed, so one instant's events are FIFO."""

    at_ms: float
    priority: int
    seq: int
    request: int


class RequestColumns(NamedTuple):
    """What a request's :class:`RequestView` is built from, each a list by request id."""

    model: list[str]
    stream: list[str]
    frame: list[int]
    deadline_ms: list[float]
    downstream_ms: list[float]
    #: its stream's level (``Workload.priorities``; ``normal`` unless the trace says otherwise)
    priority: list[str]
    #: the processors it may run on (None: any; a stream frame on the cloud rung: the cloud only)
    allowed: list[tuple[str, ...] | None]


class RootArrivals:
    """The workload's root arrivals, instant by instant (its sorted columns, read once)."""

    __slots__ = ("_t_ms", "_ids", "_next", "next_ms")

    def __init__(self, workload: Workload) -> None:
        self._t_ms, self._ids = root_arrivals(workload)   # in arrival order; the times end with inf
        self._next = 0
        #: when the next root requests arrive (ms; inf when none is left)
        self.next_ms: float = self._t_ms[0]

    def take(self) -> list[int]:
        """The ids of every request arriving at :attr:`next_ms`, in id order; the instant is consumed."""
        t_ms, i = self._t_ms, self._next
        j = i + 1
        while t_ms[j] == t_ms[i]:
            j += 1
        self._next = j
        self.next_ms = t_ms[j]
        return self._ids[i:j]


def _firing_children(wl: Workload) -> list[list[int] | None]:
    """By request id: its cascade stages that fire, in id order (None: none)."""
    children: list[list[int] | None] = [None] * len(wl)
    parent = wl.parent
    kids = np.flatnonzero((parent >= 0) & wl.fires)
    for c, pa in zip(kids.tolist(), parent[kids].tolist()):
        got = children[pa]
        if got is None:
            children[pa] = [c]
        else:
            got.append(c)
    return children


class Simulation:
    """One run: a workload on a profile under a policy. Build it, call :meth:`run`, read :meth:`outcome`.

    Raises (from the constructor, before anything runs):
        ValueError: a negative ``dispatch_ms``.
        TraceError: a model of the workload that the profile lacks, that no processor supports, or that
            fits in the memory of none (:mod:`~scheduler.sim.memory`).
    """

    # Fixed attributes: every step reads its state through ``self``, and a slot is read in a few
    # instructions where an instance dict this large (more keys than CPython shares) is looked up by name.
    __slots__ = ("_hand", "_no_hand", "_gap", "workload", "profile", "policy", "policy_name", "on_broken",
                 "processors", "by_name", "refused", "estimator", "_cands", "_downstream", "heat", "now_ms",
                 "decisions", "events", "_out", "_ready", "_start", "_end", "_dropped", "_proc", "_reasons", "_done",
                 "_children", "_pending", "_heap", "_seq", "_mcode", "_cols", "_expected", "_views", "_pviews",
                 "_unplaced", "_groups_done", "_start_a", "_end_a", "_where", "_on_tick", "_tick_every", "plan",
                 "streams", "_not_urgent", "lanes_open", "_shared", "_measured")

    def __init__(self, workload: Workload, profile: DeviceProfile, policy: Policy, *, seed: int = 0,
                 noise: float = 0.1, cloud_noise: float = 0.2, offload: bool = True, cloud_slots: int = 4,
                 dispatch_ms: float | Sequence[float] = 0.0, thermal: bool = True,
                 stage_gap_ms: Sequence[float] | None = None, streams: StreamPlan | None = None,
                 measured_ms: Sequence[tuple[str, float] | None] | None = None) -> None:
        #: by request id: its hand-off delay (ms)
        self._hand = hand_offs(dispatch_ms, len(workload), seed)
        self._no_hand = isinstance(dispatch_ms, (int, float)) and dispatch_ms == 0   # (valid: hand_offs checked it)
        #: by request id: how long after its upstream request ends a cascade stage becomes ready (ms): the app's own
        #: work before it submits the stage, measured live; None: at once
        self._gap = None if stage_gap_ms is None or not any(g > 0 for g in stage_gap_ms) else list(stage_gap_ms)
        #: by request id: the processor kind it ran on live and its run time there (ms), which it runs for on a
        #: processor of that kind (None: drawn from the profile); None: every run time drawn
        self._measured = None if measured_ms is None or not any(measured_ms) else list(measured_ms)
        self.workload = workload
        self.profile = profile
        self.policy = policy
        self.policy_name: str = getattr(policy, "name", type(policy).__name__)
        self.on_broken = ON_BROKEN
        self.processors = procs = make_processors(profile, offload, cloud_slots)
        self.by_name = {p.name: p for p in procs}
        #: with urgent lanes, every other processor's name (what a request below high may run on while the lanes
        #: are closed, as the live runtime restricts it); None: no lane
        self._not_urgent = tuple(p.name for p in procs if not p.urgent) if any(p.urgent for p in procs) else None
        #: the CPU processors that share the profile's ``cpu_cores`` (None: each has a core of its own)
        cpus = [p for p in procs if p.kind == "cpu"]
        self._shared = cpus if profile.cpu_cores is not None and len(cpus) > profile.cpu_cores else None
        #: the urgent lanes take any work (set by the streams while none of them needs its urgent level, as live)
        self.lanes_open = False
        lat, table = latency_table(profile, procs, noise, cloud_noise, profile.cloud if offload else None)
        #: (model, processor) pairs refused for want of memory (:mod:`~scheduler.sim.memory`)
        self.refused = fit_memory(profile, workload.models, table)
        for r in self.refused:
            del lat[(r.model, r.processor)]
        self.estimator = LatencyEstimator(alpha=0.1, seed=table)
        self._validate(table)
        models = workload.models
        #: by model code: the processors that can run it (for the "left unplaced" sweep)
        self._cands = [[self.by_name[p] for p in table[m]] for m in models]
        bind_latencies(procs, lat, models, seed, len(workload))
        best = np.array([min(table[m].values()) for m in models], np.float64)
        self._downstream = downstream_ms(workload, best)
        #: the device's heat and throttling (:mod:`~scheduler.sim.heat`); None: no thermal section, or off
        self.heat = Heat(profile, [(p.name, p.kind) for p in procs], models) \
            if thermal and profile.thermal is not None else None
        self.now_ms = 0.0
        self.decisions = 0
        self.events = 0
        self._out: Outcome | None = None
        #: the stream frames offered to the overload controller (:mod:`scheduler.sim.streams`); None: open-loop
        self.plan = streams
        #: the controller's driver of the latest run (None without a plan)
        self.streams: SimStreams | None = None

    def _validate(self, table: dict[str, dict[str, float]]) -> None:
        known = set(self.profile.latency_ms) | set(table)
        for model in sorted(self.workload.models):
            where = self.workload.origin.get(model, self.workload.name)
            if model not in known:
                close = difflib.get_close_matches(model, sorted(known), n=2, cutoff=0.5)
                hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
                raise TraceError(f"model {model!r} ({where}) is not in device profile {self.profile.name!r}; "
                                 f"{hint}(the profile has: {', '.join(sorted(known)) or 'no models'})")
            if not table.get(model):
                raise TraceError(f"no processor of device profile {self.profile.name!r} supports model {model!r} "
                                 f"({where}); add latency_ms[{model!r}] for one of: "
                                 f"{', '.join(p.name for p in self.processors)}")

    # ---- running -------------------------------------------------------------------------------
    def run(self, on_tick: Callable[[float], None] | None = None, tick_every: int = 2_000) -> None:
        """Run every request to a terminal status.

        ``on_tick(now_ms)`` (if given) is called every ``tick_every`` arrival instants (a progress bar).

        Raises:
            EdgeRTError: the policy named a request that is not pending, or placed one on a processor
                that does not exist or cannot run it (a policy bug; never silently fixed up).
        """
        self._reset()
        self._on_tick, self._tick_every = on_tick, tick_every
        arrivals = RootArrivals(self.workload)
        heap = self._heap
        try:
            while True:   # the next instant: the first event due or the next root arrivals, whichever is first
                now = heap[0].at_ms if heap and heap[0].at_ms < arrivals.next_ms else arrivals.next_ms
                if now == math.inf:
                    break
                self._step(now, arrivals)
        except Exception as exc:
            exc.add_note(f"raised at simulated t = {self.now_ms:.3f} ms")
            raise
        if self._pending:   # cannot happen under the contract; never lose a request silently
            raise EdgeRTError(f"{len(self._pending)} request(s) still pending when the simulation ran out of events")
        self._tally()

    def _reset(self) -> None:
        """Every request not yet ready (its times NaN), every processor idle, no event due."""
        wl = self.workload
        n = len(wl)
        self._ready = [math.nan] * n
        self._start = [math.nan] * n
        self._end = [math.nan] * n
        self._dropped = bytearray(n)   # 1 = dropped; a request that ran is ok or late by its end
        self._proc: list[Any] = [None] * n   # by request id: the SimProcessor it ran on (None: it never ran)
        self._reasons: dict[int, str] = {}
        self._done: list[int] = []
        self._children = _firing_children(wl)
        self._pending: dict[int, RequestView] = {}
        self._heap: list[Event] = []
        self._seq = 0
        self._mcode: list[int] = wl.model.tolist()        # by request id: its model's code
        levels = np.array([wl.priorities.get(s, "normal") for s in wl.streams] or ["normal"], object)
        self._cols = RequestColumns(np.array(wl.models, object)[wl.model].tolist(),
                                    np.array(wl.streams, object)[wl.stream].tolist(),
                                    wl.frame.tolist(), (wl.t_ms + wl.slo_ms).tolist(), self._downstream,
                                    levels[wl.stream].tolist(), [None] * n)
        self._expected = self.estimator.ema_table()   # read by the processors' views
        self._views = [p.idle_view for p in self.processors]
        self._pviews = tuple(self._views)
        self._unplaced = left_unplaced(self.policy_name)
        for p in self.processors:
            p.view = p.idle_view
        self._groups_done = 0
        self.decisions = 0
        self.now_ms = 0.0
        self.lanes_open = False
        self.streams = SimStreams(self.plan, self) if self.plan is not None else None

    def _step(self, now: float, arrivals: RootArrivals) -> None:
        """Everything that happens at instant ``now``, in SimPy's order: the events due, the root arrivals,
        then one decision over whatever is pending."""
        self.now_ms = now
        heap = self._heap
        while heap and heap[0].at_ms == now:
            event = heappop(heap)
            if event.priority == RUN_END:
                self._run_ends(event.request, now)
            else:
                self._ready_now((event.request,), now)
        if arrivals.next_ms == now:
            if self.streams is None:
                self._ready_now(arrivals.take(), now)
            else:   # each frame offered to the controller: taken, it becomes ready; not taken, it is dropped
                self.streams.arrive(arrivals.take(), now)
            self._groups_done += 1
            if self._on_tick is not None and self._groups_done % self._tick_every == 0:
                self._on_tick(now)
        if self._pending:
            self.decisions += 1
            self._decide(now)

    def _push(self, at_ms: float, priority: int, rid: int) -> None:
        """An event for request ``rid`` at ``at_ms``, after those already due then."""
        self._seq += 1
        heappush(self._heap, Event(at_ms, priority, self._seq, rid))

    def _ready_now(self, rids: Sequence[int], now: float) -> None:
        """Requests ``rids`` arrive (or, cascade stages, become ready): pending from ``now``, in order."""
        cols = self._cols
        for rid in rids:
            self._ready[rid] = now
            allowed = cols.allowed[rid]
            if self._not_urgent is not None:
                allowed = self._off_lanes(allowed, cols.priority[rid])
            self._pending[rid] = RequestView(rid, cols.model[rid], now, cols.deadline_ms[rid], cols.stream[rid],
                                             cols.frame[rid], cols.downstream_ms[rid], allowed,
                                             cols.priority[rid])

    def _off_lanes(self, allowed: tuple[str, ...] | None, priority: str) -> tuple[str, ...] | None:
        """The processors a request at ``priority`` that may run on ``allowed`` (None: any) may run on while it is
        made ready: not an urgent lane when it is below high and the lanes are closed (as the live runtime
        restricts a request when it is submitted)."""
        if priority in URGENT_LEVELS or self.lanes_open or self._not_urgent is None:
            return allowed
        lanes_off = self._not_urgent
        return lanes_off if allowed is None else tuple(p for p in allowed if p in lanes_off)

    def _run_ends(self, rid: int, now: float) -> None:
        """Request ``rid``'s run ends at ``now``: the estimator learns its time, its processor starts the head of
        its FIFO queue, and its firing cascade stages become ready."""
        p = self._proc[rid]
        p.running.remove(rid)
        self.estimator.update(self._cols.model[rid], p.name, now - self._start[rid])
        self._end[rid] = now
        self._done.append(rid)
        if p.queue:
            self._start_run(p, p.dequeue(self._mcode), now)
        p.view = None   # changed: rebuilt before the next decision
        if self._children[rid] is not None:   # (most requests end no cascade: no call)
            self._stages_after(rid, now)
        if self.streams is not None:
            self.streams.ran(rid, p, self._start[rid], now)

    def _stages_after(self, rid: int, now: float) -> None:
        """The cascade stages that fire after ``rid`` (ended at ``now``) become ready: at once, or after the
        app's own work before it submits each (an event then)."""
        kids = self._children[rid]
        if kids is None:
            return
        if self._gap is None:
            self._ready_now(kids, now)
            return
        for c in kids:
            if self._gap[c] > 0.0:
                self._push(now + self._gap[c], STAGE_READY, c)
            else:
                self._ready_now((c,), now)

    def _start_run(self, p: SimProcessor, rid: int, now: float) -> None:
        """The start step: ``p`` runs ``rid`` from ``now`` plus its hand-off delay, for its drawn time
        (:meth:`RunTimes.run_ms <scheduler.sim.processor.RunTimes.run_ms>`; under the heat model at the speed in
        force, :meth:`Heat.start`); its end goes on the heap."""
        m = self._mcode[rid]
        ms = p.run_times[m].run_ms(rid)   # type: ignore[union-attr]  # (placed only where supported)
        if self._measured is not None and (live := self._measured[rid]) is not None and live[0] == p.kind:
            ms = live[1]   # as long as it ran live, on a processor of the kind it ran on
        if self.heat is not None:
            ms = self.heat.start(p.index, m, ms, now)
        if self._shared is not None and p.kind == "cpu":
            ms *= self._core_share(p)
        s = now if self._no_hand else now + self._hand[rid]   # (now + 0.0 is now: no float made)
        self._start[rid] = s
        self._proc[rid] = p
        p.running.append(rid)
        self._push(s + ms, RUN_END, rid)

    def _core_share(self, p: SimProcessor) -> float:
        """How much longer a run starting on CPU processor ``p`` takes while more CPU processors run (``p`` with
        them) than the profile's ``cpu_cores``: that many runs share the cores evenly (1.0: a core of its own)."""
        others = [q for q in self._shared or () if q is not p and q.running]
        return max(1.0, (1 + len(others)) / (self.profile.cpu_cores or 1))

    def _decide(self, now: float) -> None:
        """One policy decision over the pending requests and the processors' views (rebuilt where changed), applied
        as the driver contract says (:func:`scheduler.contract.apply`), then its "left unplaced" sweep."""
        views, changed = self._views, False
        for p in self.processors:
            if p.view is None:   # changed since the last decision (an idle processor's view is the one built ahead)
                p.view = v = p.make_view(self._start, self._mcode, self._expected) if p.running or p.queue \
                    else p.idle_view
                if v is not views[p.index]:
                    views[p.index] = v
                    changed = True
        if changed:   # else the same snapshot again: no new tuple, and a policy that caches by its identity keeps it
            self._pviews = tuple(views)
        pending = self._pending
        view = SchedulerView(tuple(pending.values()), self._pviews, self.estimator)
        apply(self, pending, self.policy.decide(view, now), now)
        if pending:
            sweep_unplaced(self, pending, now)

    # ---- the driver interface (scheduler.contract.Driver) ----------------------------------------
    def can_run(self, p: SimProcessor, req: RequestView) -> bool:
        """``p`` supports ``req``'s model (and holds it in memory)."""
        return p.run_times[self._mcode[req.id]] is not None

    def place(self, req: RequestView, p: SimProcessor, now_ms: float) -> None:
        """``req`` joins ``p``'s FIFO queue: started now when ``p`` is free."""
        if p.is_idle():
            self._start_run(p, req.id, now_ms)
        else:
            p.enqueue(req.id, self._mcode[req.id])
        p.view = None   # changed: rebuilt before the next decision

    def drop(self, req: RequestView, reason: str, now_ms: float) -> None:
        """Drop ``req`` saying ``reason`` (and every cascade stage downstream of it)."""
        self._drop(req.id, reason, now_ms)

    def candidates(self, req: RequestView) -> Sequence[SimProcessor]:
        """The processors that support ``req``'s model."""
        return self._cands[self._mcode[req.id]]

    def unplaced(self, req: RequestView, able: Sequence[SimProcessor], now_ms: float) -> str:
        """:func:`scheduler.contract.left_unplaced`."""
        return self._unplaced

    def _drop(self, rid: int, reason: str, now: float) -> None:
        """Drop ``rid`` and, depth first in order, every cascade stage downstream of it.

        An explicit stack, not recursion: a trace may chain stages thousands deep."""
        stack = [(rid, reason)]
        while stack:
            rid, reason = stack.pop()
            if math.isnan(self._ready[rid]):   # a cascade stage dropped with its upstream, never ready
                self._ready[rid] = now
            self._dropped[rid] = 1
            self._reasons[rid] = reason
            self._done.append(rid)
            if self.streams is not None:
                self.streams.dropped(rid, now)
            kids = self._children[rid]
            if kids is not None:
                why = f"upstream request {self.workload.key(rid)!r} was dropped"
                stack.extend((c, why) for c in reversed(kids))

    # ---- what the stream controller's driver reads and does (scheduler.sim.streams) ----------------
    @property
    def request_columns(self) -> RequestColumns:
        """The columns each request's view is built from (a stream frame taken sets its requests' deadline,
        level and processors here before they are ready)."""
        return self._cols

    @property
    def start_ms(self) -> list[float]:
        """By request id: when its run started (ms; NaN before)."""
        return self._start

    def pending_views(self) -> Sequence[RequestView]:
        """The requests pending now (ready, not yet placed)."""
        return tuple(self._pending.values())

    def candidates_of(self, rid: int) -> Sequence[SimProcessor]:
        """The processors that support request ``rid``'s model."""
        return self._cands[self._mcode[rid]]

    def ready_now(self, rids: Sequence[int], now: float) -> None:
        """Requests ``rids`` become pending at ``now``."""
        self._ready_now(rids, now)

    def drop_request(self, rid: int, reason: str, now: float) -> None:
        """Drop request ``rid`` (and its cascade stages) at ``now``, saying ``reason``."""
        self._drop(rid, reason, now)

    def stream_stats(self) -> dict[str, dict[str, Any]]:
        """Each stream's figures, with the keys of the live ``s.stats()`` (after :meth:`run`; {} without streams)."""
        return self.streams.stats() if self.streams is not None else {}

    def _tally(self) -> None:
        """Each processor's ``busy_ms`` and ``n_runs`` from the runs' start and end times (after :meth:`run`)."""
        n = len(self._start)   # (np.fromiter: the same values as np.array of the lists, in two thirds of the time)
        self._start_a = start = np.fromiter(self._start, np.float64, n)
        self._end_a = end = np.fromiter(self._end, np.float64, n)
        took = end - start
        index: dict[SimProcessor | None, int] = {None: -1, **{p: p.index for p in self.processors}}
        self._where = where = np.fromiter(map(index.__getitem__, self._proc), np.int64, n)
        ran = where >= 0
        busy = np.bincount(where[ran], weights=took[ran], minlength=len(self.processors))
        runs = np.bincount(where[ran], minlength=len(self.processors))
        for p in self.processors:
            p.busy_ms = float(busy[p.index])
            p.n_runs = int(runs[p.index])
        self.events = self._groups_done + int(ran.sum())   # arrival instants + completions

    def outcome(self) -> Outcome:
        """Every request's terminal state, in the order they reached it (after :meth:`run`)."""
        if self._out is None:
            self._out = outcome_of(self.workload, [p.name for p in self.processors], self._done, self._dropped,
                                   self._ready, self._start_a, self._end_a, self._where, self._reasons,
                                   self._cols.deadline_ms if self.streams is not None else None)
        return self._out
