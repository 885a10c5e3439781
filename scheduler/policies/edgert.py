"""edgert's default policy: deadline order, idle-first / earliest-finish placement, cloud on overflow.

XR work is periodic streams with frame deadlines and cascades, on a device
whose processors run one invocation at a time. One decision:

1. **Order** pending requests by *effective deadline*
   ``deadline_ms - downstream_ms`` (earliest first): a
   cascade's first stage must leave its later stages time to run (EDF with
   cascade-aware deadlines); ties keep the snapshot's (arrival) order.
   While the overload plan finds the device overloaded (see 5), a request's
   key adds ``short_first`` × its fastest local run: with more work than the
   deadlines allow, of two requests due about together the shorter goes
   first, which finishes more of them (EDF's order is optimal only when
   everything fits). Measured: three users' MediaPipe streams on a 2-core
   host (``benchmarks/mediapipe_peer.py``), face mesh 84-92 % → 99-100 %
   of frames in time with hands up too; the scheduler table's deadline-only
   run, +278 deadlines met over its 168 cells (21 cells more, 4 fewer, by
   at most 16). Each ms of run counts 2 ms (``short_first=2``); against 1
   (four 10 s runs each, three users): the worst face or segmentation
   stream 97.7-99.3 → 98.7-100 % and pose 36-46 → 40-56 %; beside a CPU
   hog, face and segmentation 86.7-95 → 96.7-99.3 %; at two users beside
   the hog pose gives some frames to face (32-37 → 27-40 %). 3 and 4 left
   pose less there (17-26 %); 8 left pose less at three users idle too
   (27-42 %).
2. **Place** each request, in that order, counting the time that more urgent
   requests of this decision already claimed:

   * on a local processor that is free now and finishes it by its effective
     deadline with ``margin`` headroom (the earliest such finish); this keeps
     the fastest processors for work that needs them, as Band's idle-worker
     policies do, instead of queueing behind them;
   * else on the local processor where it finishes first, if that makes the
     effective deadline with headroom: it stays pending there with a claim
     (*late dispatch*: no queue builds up behind a slow job, and a more
     urgent arrival can still go first at the next decision);
   * the **cloud** only when no local processor is expected to make the
     effective deadline, or at its last safe moment (expected cloud finish
     plus ``cloud_margin`` of the cloud latency within ``guard_ms`` of the
     effective deadline) for a request that still cannot start locally and
     whose local claim is fragile: its wait is at least the slack it would
     have left (one more such wait makes it late), or the device is
     overloaded and the run is long (see 7). A claim that starts in 1 ms with
     30 ms to spare stays local (xr2-gen2 social_b: 3 of 138 such offloads
     came back late). The cloud is *safe* only with that headroom: a round
     trip varies far more than a local run. Nothing here is state, so work
     returns to local processors as soon as they keep up again.
   * **swap**: a request that would miss its effective deadline everywhere
     takes a local processor given in this decision to a more urgent request
     that another local processor also serves in time; EDF had placed that
     one on its earliest finish without asking who needed the processor
     more (pixel4 vr_gaming x2: gaze took the gpu from a hand frame while
     the cpu sat idle).
   * if neither makes the effective deadline but one makes the frame deadline,
     the earliest finish (the request itself counts, its cascade may not).
3. **Supersede** (``supersede=True``): when a request cannot be placed in
   time and an older unstarted frame of its stream holds a slot, the newer
   frame takes that slot (same model, same processor, later deadline) and the
   older one is dropped as superseded: a stale hand pose is worth less than
   a fresh one, and when both fit both run.
4. **Drop early**: a request that cannot finish by its own deadline on any
   processor even with that processor to itself is dropped now, with the
   expected finish in the reason, so it does not take time from work that can
   still make it. On arrival (the decision that first sees it), one that
   cannot finish by its deadline behind the work queued ahead of it (the
   claims of more urgent requests, on every processor that can run it, the
   cloud included) is dropped too, with that finish in the reason: a caller
   who submits a burst learns at once which requests do not fit, and the kept
   ones do not wait behind them. Later, one that could make it but for more
   urgent claims stays pending (a claim ahead may end early or be dropped).

5. **Overload plan** (``scheduler/policies/_overload.py``): the policy keeps
   every stream's rate and, when the device could not run everything
   locally with headroom (utilization above ``target``), solves one small LP
   for the shares of each model to send to the cloud *from their arrival*
   (when the round trip's odds are best and the cloud has a free slot) and,
   past ``shed_target``, to shed (the requests that cost the most local time
   per met deadline), so the rest meet their deadlines. Only an *established*
   stream is shed by rate (one that has shown its rate over one budget:
   ``_streams.py``); requests submitted together, read over microseconds,
   are no rate to shed by, and are dropped on arrival only by 4. A long model the
   cloud serves safely goes there whole while the device is that busy (a
   pending request of it seen before the plan goes too), since each local
   run would hold a non-preemptive processor longer than a tighter stream
   can wait. The LP is solved again only when a stream starts, stops or
   changes its rate, so it costs nothing on almost every decision; when the
   burst passes, its streams stop and the plan empties.
6. **Placement prefers the earliest finish**: a request free to start now on
   a slower processor waits (late dispatch) for a faster one instead when
   that finishes it sooner by more than ``eft_slack`` × its run time, still in
   time; this keeps slow processors from soaking up work the fast ones would
   finish twice as fast. A free processor at least ``_SLOWER`` (4) times
   slower than the fastest is taken only when it finishes sooner than the
   fastest after its queue (no ``eft_slack``): a burst on a GPU 20x faster
   than the CPU then never ends later than on the GPU alone (before, the CPU
   took a request it finished up to a GPU run later, plus its own noise:
   ``scheduler/sim/burst.py``); on the schedulers' grid six of 168 cells
   moved by 1-4 requests, 13,031 → 13,030 misses in all.
   Conversely, a request with time to spare (more than
   twice the budget of the tightest stream that needs a processor, i.e. whose
   next fastest processor takes 1.25× as long) leaves that processor to it
   when another one finishes the request in time, now or after a wait.

7. **Long runs leave an overloaded device**: while the plan finds the device
   overloaded, a request whose fastest local run exceeds half the tightest
   running model's budget goes to a free cloud slot that finishes it with
   ``cloud_margin`` headroom, whatever its stream's rate (the plan's rule for
   long models needs a rate, which a sparse cascade stage never shows:
   pixel4 outdoor_a, a 74 ms speech run on the cpu cost two detections).

8. **Window**: one decision looks at the ``window`` most urgent pending
   requests (Band's planner likewise schedules within a window); the rest
   wait for a later decision. This bounds a decision's cost when a client
   floods the runtime (a decision runs under the runtime's lock); XR
   workloads rarely have that many pending.

9. **Objective** (``objective``; :mod:`~scheduler.policies._energy`): with the device's energy figures,
   ``"balanced"`` (the default) moves a request the rules above placed in time to its model's *home*,
   the cheapest processor that has room for that model's stream, or to a free cloud slot (the radio's
   energy), when that saves >= 20 % of its energy and still makes the effective deadline with 40 %
   headroom (the cloud: its round trip's) after a wait for the home of at most one run there or 0.3
   of the time left, whichever is longer; ``"energy"`` takes any saving with the usual headroom;
   ``"deadlines"`` never moves. While the policy's own heat estimate sees the next throttling level
   within ``heat_horizon_ms``, any saving counts, with the usual headroom (less heat).

10. **Stale estimates age** (:class:`~scheduler.estimator.EstimateAger`): only a run measures a model,
   so one slow run would shut out a model whose estimate then misses every deadline (the XR demo on a
   loaded host: pose_landmark_full dropped 97 of 98 times). A local estimate no run refreshed for
   ``stale_ms`` ages toward its prior while the model is refused on it; the first request it then
   fits is the probe.

11. **Priorities** (:mod:`~scheduler.policies._reserve`; ``RequestView.priority``): once a request
   declares a level other than ``normal``, the urgency key takes a lead by level (critical first among
   requests due about together); with ``keep_room`` a request below critical does not take the last local
   processor free in time for a critical stream's next frame (its arrival predicted from the stream's
   period): it waits while another processor is busy. With every request ``normal`` nothing changes.

No clock, no I/O, no randomness. The only state carried between decisions
is the overload plan's (stream rates, shares, each pending request's fate), the heat estimate and
the ager's (when each estimate last changed, which models were refused on it), which
change only with requests not seen before and with ``now_ms``; the same
sequence of snapshots gives the same decisions, and deciding twice on one
snapshot gives one answer. Times are ms.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any, ClassVar

from scheduler.policies._energy import EnergyTable, make_objective
from scheduler.policies._late import late_choice, wait_choice
from scheduler.policies._lone import best_effort, lone
from scheduler.policies._overload import CLOUD, LOCAL, SHED, OverloadPlan
from scheduler.policies._reserve import CriticalRoom, priority_urgency, room_gate
from scheduler.policies._slots import BEHIND_REASON  # noqa: F401 - re-exported: benchmarks and tests count by it
from scheduler.policies._slots import (
    _SLOWER,
    Processors,
    Work,
    _idle_choice,
    _processor_table,
    _row,
    _slot_ready,
)
from scheduler.estimator import EstimateAger, LatencyEstimator
from scheduler.types import Assignment, LatencyModel, RequestView, SchedulerView

_INF = float("inf")
#: how the reason of a request the overload plan sheds on arrival begins (benchmarks count them by it)
SHED_REASON = "shed under overload"


class EdgertPolicy:
    """EDF with cascade-aware deadlines, earliest-finish placement, late dispatch, cloud and shedding on overload.

    Args:
        supersede: a newer frame may take an older unstarted frame's slot
            when both cannot be served (see the module docstring).
        margin: headroom for a local run, as a fraction of its expected
            latency (0.2: a 10 ms run must be expected to end 2 ms before the
            effective deadline to count as making it).
        cloud_margin: the same for the cloud when it is the fallback of a
            request that waited (network round trips vary more than local runs).
        guard_ms: how long before the cloud's last safe moment a waiting
            request is sent there (decisions happen at arrivals and
            completions, not continuously).
        eft_slack: a free slower processor is passed over for a busy faster
            one when the faster one, after its wait, finishes sooner by more
            than this fraction of its own run time (and in time).
        plan: enable the overload plan (offload / shed shares by model).
        risky_margin: headroom for a request the plan sends to the cloud (the plan prices the
            round trip's odds of coming back late, so this only rules out a run that barely fits).
        window: most pending requests one decision looks at (the most urgent).
        short_first: while the device is overloaded, how many ms of a request's fastest local run
            count against its urgency (ms per ms; 0: plain EDF always; see the module docstring).
        objective: ``"deadlines"`` (placement by deadlines alone), ``"balanced"`` (the default: among
            placements that make the deadline with extra headroom, the cloud included, one that spends at
            least 20 % less energy; frugal when the throttle is near) or ``"energy"`` (the cheapest placement that makes
            it with the usual headroom). Without ``energy`` every objective places as ``"deadlines"``.
        energy: the device's energy figures (:class:`~scheduler.policies._energy.EnergyTable`), or None.
        heat_horizon_ms: how far ahead the policy looks for the next throttling level (ms).
        stale_ms: a local estimate no run has refreshed for this long (ms), of a model refused on it,
            starts aging back toward its prior (see the module docstring, 10); None: estimates never age.
        stale_half_life_ms: how fast a stale estimate then ages (ms: the gap to its prior halves).
        keep_room: a request below critical leaves the last processor free in time for a critical stream's
            next frame (see the module docstring, 11); False (the default): priorities only order. Measured on
            the XR demo's streams on 2 cores it cost more than it gave (``benchmarks/xr_overload.py``, system
            ``edgert+prio+room``): held runs left a core idle until the critical frame came, and the held
            frames then missed; the pipelines keep the critical streams' room in their admission instead.
        **plan_options: :class:`~scheduler.policies._overload.OverloadPlan`
            options (``target``, ``shed_target``, ``replan_ms`` …).

    Raises:
        ValueError: a negative margin, guard or slack; a non-positive plan option or aging time.
    """

    name: ClassVar[str] = "edgert"
    #: it takes ``objective`` and ``energy`` (``scheduler.registry.make_policy`` passes the profile's)
    energy_aware: ClassVar[bool] = True

    __slots__ = ("_idle", "ager", "cloud_margin", "eft_slack", "green", "guard_ms", "k_local", "keep_room", "margin", "objective", "plan",
                 "prioritized", "refused", "room", "risky_margin", "short_first", "supersede", "use_plan", "watch", "window")

    def __init__(self, supersede: bool = True, margin: float = 0.2, cloud_margin: float = 0.4,
                 guard_ms: float = 5.0, eft_slack: float = 1.0, plan: bool = True, risky_margin: float = 0.05,
                 window: int = 32, objective: str = "balanced", energy: EnergyTable | None = None,
                 heat_horizon_ms: float = 60_000.0, short_first: float = 2.0, stale_ms: float | None = 1000.0,
                 stale_half_life_ms: float = 500.0, keep_room: bool = False, **plan_options: Any) -> None:
        for label, value in (("margin", margin), ("cloud_margin", cloud_margin), ("guard_ms", guard_ms),
                             ("eft_slack", eft_slack), ("risky_margin", risky_margin), ("short_first", short_first)):
            if not value >= 0:
                raise ValueError(f"{label} must be >= 0, got {value}")
        if not (isinstance(window, int) and window >= 1):
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        self.window = window
        #: an all-idle processors tuple seen last and its table (a live runtime passes one such tuple while
        #: every worker is idle; its table differs only in the clock, so it is not built again)
        self._idle: tuple[Any, Processors | None] = (None, None)
        self.ager = None if stale_ms is None else EstimateAger(stale_ms, stale_half_life_ms)
        self.refused: set[str] = set()   # models dropped on their estimate since their last observation
        self.supersede = supersede
        self.margin = margin
        self.k_local = 1.0 + margin   # a local run's headroom factor
        self.cloud_margin = cloud_margin
        self.guard_ms = guard_ms
        self.eft_slack = eft_slack
        self.risky_margin = risky_margin
        self.short_first = short_first
        self.use_plan = plan
        self.keep_room = keep_room
        self.prioritized = False   # a request declared a level other than normal (then _reserve's rules apply)
        self.room = CriticalRoom()
        self.plan = OverloadPlan(risky_margin=risky_margin, **plan_options)
        self.objective = objective
        self.green, self.watch = make_objective(objective, energy, margin, cloud_margin, heat_horizon_ms)
        if self.green is not None:
            self.plan.on_demand = self.green.plan

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """Assign what should start now, drop the hopeless, leave the rest pending; see the module doc.

        The steps: the processors' table (:func:`_processor_table`); rate tracking and planning (the
        overload plan's ``update``); the window of the most urgent requests; placement (:meth:`_place`:
        each one's fate under the plan, where it would finish — inline, since a call per request
        would cost ~6 % —, the choice, the claim).
        """
        pending, processors, estimator = view   # one unpack: cheaper than a field read at each use
        if not pending:
            return []
        if len(pending) == 1 and pending[0].deadline_ms == _INF and self.green is None and (not self.use_plan or self.plan.idle):
            out = self._best_effort(pending[0], view, now_ms)   # a sync caller's request with no deadline
            if out is not None:
                return out
        est = estimator.expected_ms
        idle_procs, idle_table = self._idle
        if processors is idle_procs and idle_table is not None:   # the same all-idle snapshot: only the clock moved
            # free is counted down within a decision: a copy
            procs = idle_table._replace(ready=[now_ms] * len(idle_table.names), free=idle_table.free[:])
        else:
            procs = _processor_table(processors, now_ms)
            for p in processors:   # (a loop, not all() over a generator: per decision)
                if not (p.busy_until_ms <= 0.0 and p.queued_ms == 0.0 and p.available and p.kind != "cloud"):
                    break
            else:
                self._idle = (processors, procs)   # ready = now, whatever now: every processor idle
        if self.ager is not None and isinstance(estimator, LatencyEstimator):   # before anything reads it
            self.ager.age(estimator, now_ms, procs.local, self.refused)
        if self.use_plan:
            self.plan.update(pending, now_ms, est, procs.local, procs.cloud_name, procs.cloud_slots)
        if self.watch is not None:
            self.green.frugal = self.watch.observe(procs, now_ms)   # type: ignore[union-attr]  # set together
        plan, use_plan = self.plan, self.use_plan
        if len(pending) == 1 and self.green is None and (not use_plan or plan.idle) and not (
                self.keep_room and self._prioritize(pending)):   # a lone request's order is moot; the room is not
            lone = self._lone(pending[0], procs, estimator, now_ms)
            if lone is not None:
                return lone
        overloaded = use_plan and plan.overloaded
        key = _overload_urgency(est, procs.local, self.short_first) if overloaded and self.short_first else _urgency
        key, gate = self._priorities(key, pending, est, procs, now_ms)
        ordered: Sequence[RequestView]
        if len(pending) > self.window:   # the most urgent first; nsmallest is sorted(...)[:n], stable
            if key is _urgency:   # sorted in C over C-level keys (the same order): a burst leaves hundreds pending
                urg = [r[3] - r[6] for r in pending]   # deadline_ms - downstream_ms, as _urgency
                ordered = [pending[i] for i in sorted(range(len(pending)), key=urg.__getitem__)[:self.window]]
            else:
                ordered = heapq.nsmallest(self.window, pending, key=key)
        else:
            ordered = sorted(pending, key=key) if len(pending) > 1 else pending
        setting = (plan, use_plan, plan.fates, plan.whole, plan.reserved if use_plan else None, overloaded,
                   0.5 * plan.tight_ms if overloaded else _INF,   # a longer local run holds a tight stream's processor
                   estimator.ema_table().get if type(estimator) is LatencyEstimator else None,
                   None if self.green is None or overloaded else self.green, gate)   # energy objective; room check
        n = len(procs.names)   # the decision's state (see Work), which _place fills
        work = Work(procs.ready[:], [], {} if self.supersede else None, [None] * n, [0.0] * n, {})
        return self._place(ordered, procs, estimator, now_ms, setting, work)

    def _place(self, ordered: Sequence[RequestView], procs: Processors, estimator: LatencyModel,
               now_ms: float, setting: tuple[Any, ...], work: Work) -> list[Assignment]:
        """Place each request (most urgent first) against what more urgent ones claimed; see decide."""
        (names, ready, is_cloud, free, slots, _, _, _), (_, out, placed, last, last_start, rows) = procs, work   # Work
        plan, use_plan, known_fates, whole, reserved, overloaded, long_ms, lookup, green, gate = setting   # see decide
        k_local, cloud_margin, risky_margin, guard_ms = self.k_local, self.cloud_margin, self.risky_margin, self.guard_ms
        for req in ordered:
            rid, model, _, deadline, stream, _, downstream_ms, allowed, level = req   # faster than 8 attribute reads
            if new := (fate := known_fates.get(rid, -1) if use_plan else LOCAL) < 0:   # the plan's fate: fixed
                fate = plan.fate(req)                                                # when the request is first seen
            row = rows.get(model) or rows.setdefault(model, _row(lookup, estimator, model, names))   # [(i, ms)]
            row = row if allowed is None else [(i, ms) for i, ms in row if names[i] in allowed]
            if fate == SHED or not row:
                out.append(Assignment.drop(rid, _shed(model, plan.utilization) if fate == SHED else _unsupported(req)))
                continue
            if deadline == _INF and min(ready) > now_ms:
                continue  # best-effort work (it sorts last) and nothing can start now: it waits
            fate = CLOUD if fate == LOCAL and use_plan and model in whole else fate   # its model went whole: it goes
            target = deadline - downstream_ms   # the earliest local finish; local, free now and in time; cloud
            local, local_f, idle, idle_f, cloud, cloud_f, cloud_ms = -1, _INF, -1, _INF, -1, _INF, 0.0
            for i, ms in row:
                f = (start := ready[i]) + ms
                if is_cloud[i]:
                    if f < cloud_f:
                        cloud, cloud_f, cloud_ms = i, f, ms
                    continue
                if f < local_f:
                    local, local_f = i, f
                if start <= now_ms and f < idle_f and start + k_local * ms <= target:
                    idle, idle_f = i, f
            local_ms = local_f - ready[local]             # the earliest local finish's run time
            if fate == CLOUD and cloud >= 0 and ready[cloud] <= now_ms and cloud_f + risky_margin * cloud_ms <= target \
                    or overloaded and long_ms < local_ms and local >= 0 and cloud >= 0 and ready[cloud] <= now_ms \
                    and cloud_f + cloud_margin * cloud_ms <= target:
                pick, finish = cloud, cloud_f   # planned offload, or a long run would hold a tight stream's processor
            elif idle >= 0 and (local == idle or ready[local] + k_local * local_ms > target
                                or local_f + (self.eft_slack * local_ms if idle_f - ready[idle] < _SLOWER * local_ms
                                              else 0.0) >= idle_f):
                pick, finish = idle, idle_f               # free now and in time (no much faster wait)
                if green is not None or reserved and names[idle] in reserved:
                    pick, finish = _idle_choice(model, row, idle, idle_f, target, reserved, procs, k_local, now_ms, green)
            elif local >= 0 and (fm := ready[local] + k_local * local_ms) <= target:
                pick, finish = local, local_f             # in time after a wait: claim (or the cloud, or cheaper)
                if cloud >= 0 and target - guard_ms < cloud_f + cloud_margin * cloud_ms <= target:
                    pick, finish = wait_choice(self, model, row, (local, local_f, fm, cloud, cloud_f, cloud_ms),
                                                     long_ms, procs, target, now_ms, green)
                elif green is not None:   # a cheaper placement in time
                    pick, finish = green.choose(model, row, local, local_f, procs, target, now_ms)
            else:   # no local processor makes it in time, even after a wait
                pick, finish = late_choice(self, req, row, target, (local, local_f, cloud, cloud_f), procs, now_ms,
                                           work, new) or (-1, 0.0)
            if pick < 0 or gate is not None and gate(level, pick, finish, ready, now_ms):
                continue   # swapped, superseded, dropped or left pending; or it would take a critical frame's room
            last[pick], last_start[pick] = req, (start := ready[pick])   # the claim (dispatched when it starts now)
            ready[pick] = finish if slots[pick] == 1 else _slot_ready(pick, start, finish, ready, free, slots)
            if placed is not None:
                placed[stream or model] = (len(out) if start <= now_ms else -1, pick, finish, req)
            if start <= now_ms:
                out.append(Assignment(rid, names[pick]))
        return out

    def _prioritize(self, pending: Sequence[RequestView]) -> bool:
        """Whether the priority rules (11) apply: a request declared a level other than normal, now or before."""
        if not self.prioritized and _declares(pending):
            self.prioritized = True
        return self.prioritized

    def _priorities(self, key: Any, pending: Sequence[RequestView], est: Any, procs: Processors,
                    now_ms: float) -> tuple[Any, Any]:
        """The urgency key with the levels' leads, and the room check for this decision (None: no critical
        stream is expected), once the priority rules apply (11); else ``key`` and None."""
        if not self._prioritize(pending):
            return key, None
        if not self.keep_room:   # the room's bookkeeping only where its gate is used
            return priority_urgency(key), None
        room = self.room
        for r in pending:
            if r.priority == "critical":
                room.see(r, min((ms for p in procs.local if (ms := est(r.model, p)) is not None), default=0.0))
        starts = [] if room.empty else room.next_starts(now_ms, self.k_local)
        return priority_urgency(key), room_gate(starts, procs.is_cloud) if starts else None

    #: the lone-request shortcuts (:mod:`scheduler.policies._lone`), as methods so a test double can switch
    #: them off, bound straight to the functions (a delegating method would cost a call on every sync request)
    _best_effort = best_effort
    _lone = lone


def _urgency(r: RequestView) -> float:
    """Effective deadline (ms); ``sorted`` is stable, so ties keep the snapshot's arrival order."""
    return r.deadline_ms - r.downstream_ms


def _overload_urgency(est: Any, local: Sequence[str], short_first: float) -> Any:
    """The sort key under overload: effective deadline + ``short_first`` × the fastest local run (ms)."""
    fastest: dict[str, float] = {}

    def key(r: RequestView) -> float:
        run = fastest.get(r.model)
        if run is None:
            run = fastest[r.model] = min((ms for p in local if (ms := est(r.model, p)) is not None), default=0.0)
        return r.deadline_ms - r.downstream_ms + short_first * run

    return key


def _declares(pending: Sequence[RequestView]) -> bool:
    """Whether a pending request declares a priority other than ``normal``."""
    for r in pending:
        if r.priority != "normal":
            return True
    return False


def _unsupported(req: RequestView) -> str:
    where = "" if req.allowed is None else f" among the allowed processors {list(req.allowed)}"
    return f"no available processor can run model {req.model!r}{where}"


def _shed(model: str, utilization: float) -> str:
    return (f"{SHED_REASON}: the device can run at most {1 / utilization:.0%} of the current work "
            f"in time, so a share of {model!r}, the costliest per request, is dropped on arrival")
