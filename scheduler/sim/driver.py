"""The simulator's driver: applies a policy to simulated processors exactly per the driver contract.

The contract (``scheduler/types.py``), as this driver implements it:

* ``policy.decide(view, now_ms)`` runs at every instant at which a request
  arrives (or a cascade stage becomes ready) or a processor finishes one:
  once per instant, after all of that instant's completions and arrivals,
  so simultaneous frames of several streams are decided together, as the
  live runtime's scheduler thread sees them. With nothing pending there is
  nothing to decide and the call is skipped (a pure policy can only return
  ``[]``). A completion's cascade stages are pending when the freed
  processor is decided on, as in the live runtime (``Runtime._run``
  resolves the finished request, whose callbacks submit the next stages,
  before it asks the policy again).
* An assignment appends the request to that processor's FIFO queue; the
  processor starts it as soon as it has a free slot.
  ``Assignment(processor=None)`` drops it with the policy's reason.
* After applying a decision, a request still pending whose every candidate
  processor (supports its model, available) is idle is dropped with the
  live runtime's reason (:func:`left_unplaced`).
* What each assignment means, and its wording, is :mod:`scheduler.contract`'s; a decision that
  breaks the contract (an id not pending, a processor that cannot run the request) stops the run
  (``ON_BROKEN = OnBroken.RAISE``: the live runtime drops instead; the contract says why).

Event order: ``(time, priority, seq)``, in one loop (:meth:`Simulation._event_loop`;
a handler call per event would cost more than the rest of a request's
bookkeeping): the heap holds only completions, ``(end_ms, seq, request
id)``; root arrivals come from the workload's sorted columns; at each
instant, completions run first (priority 0, FIFO by ``seq``), then arrivals
(priority 1), then one decision (priority 2).
A run that starts at an instant and takes 0 ms completes at that same instant.

Latency model (:mod:`~scheduler.sim.latency`): each run's time is the profile's latency times a
seeded log-normal factor (plus the cloud's transfer), and a hand-off delay (``dispatch_ms``) may pass
between a processor taking a request and running it. Both are applied in the run's start
step (in :meth:`Simulation._event_loop`), whichever way the request got there: straight from a decision
to a free processor, or from the head of a processor's queue when a run ends. With a profile's
``thermal`` section (and ``thermal=True``) that step also heats the device and divides the run time by
the processor's speed at the throttling severity in force (:mod:`~scheduler.sim.heat`).

A :class:`ProcessorView` is built as the live runtime builds it
(``Runtime._view``): ``busy_until_ms`` 0 while a slot is free, else the
earliest expected end of its runs; ``queued_ms`` the sum of the expected
latencies queued on it; ``slots`` / ``free_slots`` (the cloud has
``cloud_slots``, a local processor 1). The estimator the policy sees is a
:class:`LatencyEstimator` seeded from the profile means (and the cloud's
expected latency) and updated by EMA with every simulated run.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence
from heapq import heappop, heappush
from typing import Any

import numpy as np

from scheduler.contract import OnBroken, broken, dropped_by, left_unplaced, misplaced, not_pending
from scheduler.errors import EdgeRTError, TraceError
from scheduler.estimator import LatencyEstimator
from scheduler.profile import DeviceProfile
from scheduler.sim.columns import Workload, downstream_ms, root_arrivals
from scheduler.sim.heat import Heat
from scheduler.sim.latency import bind_latencies, hand_offs, latency_table, make_processors
from scheduler.sim.memory import fit_memory
from scheduler.sim.metrics import Outcome, outcome_of
from scheduler.sim.processor import SimProcessor
from scheduler.types import Policy, ProcessorView, RequestView, SchedulerView

#: A broken decision stops a simulated run (the live runtime drops the request instead): see scheduler.contract
ON_BROKEN = OnBroken.RAISE

_NAN = math.nan
_new = tuple.__new__   # RequestView / SchedulerView built in C (see scheduler.sim._views)



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

    def __init__(self, workload: Workload, profile: DeviceProfile, policy: Policy, *, seed: int = 0,
                 noise: float = 0.1, cloud_noise: float = 0.2, offload: bool = True, cloud_slots: int = 4,
                 dispatch_ms: float | Sequence[float] = 0.0, thermal: bool = True,
                 stage_gap_ms: Sequence[float] | None = None) -> None:
        #: by request id: its hand-off delay (ms)
        self._hand = hand_offs(dispatch_ms, len(workload), seed)
        self._no_hand = isinstance(dispatch_ms, (int, float)) and dispatch_ms == 0   # (valid: hand_offs checked it)
        #: by request id: how long after its upstream request ends a cascade stage becomes ready (ms): the app's own
        #: work before it submits the stage, measured live; None: at once
        self._gap = None if stage_gap_ms is None or not any(g > 0 for g in stage_gap_ms) else list(stage_gap_ms)
        self.workload = workload
        self.profile = profile
        self.policy = policy
        self.policy_name: str = getattr(policy, "name", type(policy).__name__)
        self.processors = procs = make_processors(profile, offload, cloud_slots)
        self.by_name = {p.name: p for p in procs}
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
        n = len(self.workload)
        self._ready = [_NAN] * n
        self._start = [_NAN] * n
        self._end = [_NAN] * n
        self._dropped = bytearray(n)   # 1 = dropped; a request that ran is ok or late by its end
        self._proc: list[Any] = [None] * n   # by request id: the SimProcessor it ran on (None: it never ran)
        self._reasons: dict[int, str] = {}
        self._done: list[int] = []
        self._children = _firing_children(self.workload)
        self._pending: dict[int, RequestView] = {}
        self._heap: list[tuple[float, int, int]] = []   # completions: (end ms, seq, request id)
        self._stale: list[SimProcessor] = []              # processors whose view changed since the last decision
        self._mcode: list[int] = self.workload.model.tolist()   # by request id: its model's code
        for p in self.processors:
            p.view = p.idle_view
        try:
            self._event_loop(on_tick, tick_every)
        except Exception as exc:
            exc.add_note(f"raised at simulated t = {self.now_ms:.3f} ms")
            raise
        if self._pending:   # cannot happen under the contract; never lose a request silently
            raise EdgeRTError(f"{len(self._pending)} request(s) still pending when the simulation ran out of events")
        self._tally()

    def _request_columns(self) -> tuple[list[int], list[str], list[str], list[int], list[float], list[float]]:
        """By request id: model code, model, stream, frame, deadline (ms), downstream (ms)."""
        wl = self.workload
        mcode = self._mcode
        models, streams = wl.models, wl.streams
        return (mcode, np.array(models, object)[wl.model].tolist(), np.array(streams, object)[wl.stream].tolist(),
                wl.frame.tolist(), (wl.t_ms + wl.slo_ms).tolist(), self._downstream)

    def _ema(self) -> tuple[dict[Any, float], float]:
        """The estimator's table and weight, which the loop updates inline (a pair that runs is seeded)."""
        return self.estimator.ema_table(), self.estimator.alpha

    def _event_loop(self, on_tick: Callable[[float], None] | None, tick_every: int) -> None:
        """Every event in ``(time, priority, seq)`` order: at each instant the completions (a run frees its processor,
        which starts its queue's head; its cascade stages become ready), root arrivals, one decision if any pending.

        One function on purpose: the start step and the decision are written inline (a Python call per run and per
        decision cost more than the work they do). The start step -- written twice, for a queue's head and for a
        decision's free processor, the same statements -- makes processor ``p`` run request ``rid`` from ``now`` plus
        its hand-off delay, for its drawn run time (``lat = p.lat[model code]``: mean x the request's drawn factor +
        the extra, :mod:`~scheduler.sim.latency`; with a heat model, divided by the processor's speed and its energy
        counted: the heat start rule (scheduler.sim.heat's module doc), with the model's sync time, speeds and pending mJ in locals), and schedules its completion (ties at one end time complete in start order).
        The decision: one policy decision over the pending requests and the processors' views (rebuilt where stale),
        applied as the driver contract says: an assignment joins that processor's FIFO queue (starting at once if
        it is free), a drop drops; then the "left unplaced" sweep."""
        mcode, mname, sname, frame, deadline, down = self._request_columns()
        ready, start, end, children, gap, proc = self._ready, self._start, self._end, self._children, self._gap, self._proc
        pending, stale, heap, ema, alpha = self._pending, self._stale, self._heap, *self._ema()
        done_append, pop, push, inf, RV, SV = self._done.append, heappop, heappush, math.inf, RequestView, SchedulerView
        est, by_name, cands, drop = self.estimator, self.by_name, self._cands, self._drop
        # no hand-off delay: a run starts at ``now`` itself (``now + 0.0`` is ``now``: 0 <= now < inf), no float made
        hand: list[float] | None = None if self._no_hand else self._hand
        policy_decide, policy_name = self.policy.decide, self.policy_name
        unplaced, no_reason = left_unplaced(policy_name), dropped_by(policy_name)
        heat = self.heat   # throttle + energy, when modelled: the heat start rule inline, its state in locals while running
        next_sync, speed, hcost, mj = (heat.next_sync, heat.speed, heat.cost, heat.mj) if heat is not None \
            else (inf, [], [], 0.0)
        pv: list[ProcessorView] = [p.idle_view for p in self.processors]   # the views, rebuilt where stale
        pviews = tuple(pv)
        root_t, root_ids = root_arrivals(self.workload)   # in arrival order; root_t ends with inf
        ri, gi, decisions, now, ta = 0, 0, 0, 0.0, root_t[0]   # ta: the next root arrival's time
        seq = 0   # completions at one end time in start order: (end, seq, id) on the heap
        try:
            while True:
                if heap:   # the next event's time (statements: fewer opcodes than one conditional expression)
                    now = heap[0][0]
                    if ta < now:
                        now = ta
                elif ta == inf:
                    break
                else:
                    now = ta
                while heap and heap[0][0] == now:   # priority 0: completions at this instant, FIFO
                    if (rid := pop(heap)[2]) < 0:   # a cascade stage, its app-side gap over: ready now
                        ready[c := -rid - 1] = now
                        pending[c] = _new(RV, (c, mname[c], now, deadline[c], sname[c], frame[c], down[c], None))
                        continue
                    (p := proc[rid]).running.remove(rid)
                    old = ema[k := p.keys[mcode[rid]]]
                    ema[k] = old + alpha * (now - start[rid] - old)
                    end[rid] = now
                    done_append(rid)
                    if queue := p.queue:   # the processor starts the head of its FIFO queue
                        q = queue.popleft()
                        if (qc := p.qcount)[m := mcode[q]] == 1:
                            del qc[m]
                        else:
                            qc[m] -= 1
                        lat = p.lat[m]   # (queued only where supported)
                        ms = lat[0] * lat[2][q] + lat[1]   # the start step (see the doc)
                        if heat is not None:   # the heat start rule, inline
                            if now >= next_sync:
                                heat.mj = mj
                                heat.sync(now)
                                next_sync, speed, mj = heat.next_sync, heat.speed, heat.mj
                            ms = ms / speed[i := p.index]
                            fixed, w = hcost[i][m]
                            mj += fixed + w * ms
                        start[q] = s = now if hand is None else now + hand[q]
                        proc[q] = p
                        p.running.append(q)
                        seq += 1
                        push(heap, (s + ms, seq, q))
                    if p.view is not None:
                        p.view = None
                        stale.append(p)
                    if (kids := children[rid]) is not None:   # its firing cascade stages become ready now
                        for c in kids:
                            if gap is not None and gap[c] > 0.0:   # (or after the app's own work: an event then)
                                push(heap, (now + gap[c], -1, -c - 1))
                                continue
                            ready[c] = now
                            pending[c] = _new(RV, (c, mname[c], now, deadline[c], sname[c], frame[c], down[c], None))
                if ta == now:   # priority 1: root arrivals at this instant
                    while ta == now:
                        ready[r := root_ids[ri]] = now
                        pending[r] = _new(RV, (r, mname[r], now, deadline[r], sname[r], frame[r], down[r], None))
                        ta = root_t[ri := ri + 1]   # (inf after the last root)
                    gi += 1
                    if on_tick is not None and gi % tick_every == 0:
                        on_tick(now)
                if not pending:
                    continue
                decisions += 1   # priority 2: one decision for the instant (see the doc)
                if stale:
                    changed = False
                    for p in stale:   # an idle processor's view is the one built ahead (most of them)
                        p.view = v = p.idle_view if not p.running and not p.queue else p.make_view(start, mcode, ema)
                        if v is not pv[p.index]:
                            pv[p.index] = v
                            changed = True
                    stale.clear()
                    if changed:   # else the same snapshot again (a processor idle again, as it was): no new tuple,
                        pviews = tuple(pv)   # and a policy that caches by the tuple's identity keeps its cache
                for rid, name, reason in policy_decide(_new(SV, (tuple(pending.values()), pviews, est)), now):
                    try:
                        del pending[rid]
                    except KeyError:
                        broken(not_pending(policy_name, rid), ON_BROKEN)
                        continue   # (only under a switch that drops: nothing to drop)
                    if name is None:
                        drop(rid, reason or no_reason, now)
                        continue
                    try:
                        p = by_name[name]
                        lat = p.lat[m := mcode[rid]]
                    except KeyError:
                        lat = None
                    if lat is None:
                        drop(rid, self._misplaced(rid, name), now)
                        continue
                    if len(p.running) < p.slots and not p.queue:   # free: the start step (see the doc)
                        ms = lat[0] * lat[2][rid] + lat[1]
                        if heat is not None:   # the heat start rule, inline
                            if now >= next_sync:
                                heat.mj = mj
                                heat.sync(now)
                                next_sync, speed, mj = heat.next_sync, heat.speed, heat.mj
                            ms = ms / speed[i := p.index]
                            fixed, w = hcost[i][m]
                            mj += fixed + w * ms
                        start[rid] = s = now if hand is None else now + hand[rid]
                        proc[rid] = p
                        p.running.append(rid)
                        seq += 1
                        push(heap, (s + ms, seq, rid))
                    else:
                        p.queue.append(rid)
                        qc = p.qcount
                        qc[m] = qc.get(m, 0) + 1
                    if p.view is not None:
                        p.view = None
                        stale.append(p)
                if pending:   # left pending while every processor that could run it is idle: dropped
                    for rid in list(pending):
                        for p in cands[mcode[rid]]:
                            if p.queue or len(p.running) >= p.slots:
                                break
                        else:
                            del pending[rid]
                            drop(rid, unplaced, now)
        finally:   # run() notes this time on an exception
            self.now_ms, self.decisions, self._groups_done = now, decisions, gi
            if heat is not None:
                heat.mj = mj

    def _misplaced(self, rid: int, name: str) -> str:
        """A placement of request ``rid`` on ``name``, a processor that cannot run it: raises under ``ON_BROKEN``
        (else the drop reason)."""
        model = self.workload.models[int(self.workload.model[rid])]
        return broken(misplaced(self.policy_name, name, name in self.by_name, f"request {rid} (model {model!r})"),
                      ON_BROKEN)

    def _drop(self, rid: int, reason: str, now: float) -> None:
        """Drop ``rid`` and, depth first in order, every cascade stage downstream of it.

        An explicit stack, not recursion: a trace may chain stages thousands deep."""
        stack = [(rid, reason)]
        while stack:
            rid, reason = stack.pop()
            if self._ready[rid] != self._ready[rid]:   # NaN: a cascade stage dropped with its upstream, never ready
                self._ready[rid] = now
            self._dropped[rid] = 1
            self._reasons[rid] = reason
            self._done.append(rid)
            kids = self._children[rid]
            if kids is not None:
                why = f"upstream request {self.workload.key(rid)!r} was dropped"
                stack.extend((c, why) for c in reversed(kids))

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
                                   self._ready, self._start_a, self._end_a, self._where, self._reasons)
        return self._out
