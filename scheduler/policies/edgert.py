"""edgert's default policy: deadline order, earliest-finish placement with late dispatch, cloud on overflow.

XR work is periodic streams with frame deadlines and cascades, on a device whose processors run one
invocation at a time. Each decision, in :meth:`EdgertPolicy.decide`:

1. **Urgency.** The pending requests are ordered by effective deadline, ``deadline_ms - downstream_ms``
   (a cascade's first stage leaves its later stages time), ties in arrival order. While the device is
   overloaded, a request's fastest run counts against it (``short_first``): with more work than the
   deadlines allow, the shorter of two requests due together finishes more of them. Declared priorities
   lead by level (:mod:`~scheduler.policies._reserve`). One decision looks at ``window`` of them.
2. **Candidates.** For each, most urgent first, where it would finish on each processor after the
   **claims** of the more urgent requests of this decision (:class:`~scheduler.policies._slots.Candidates`).
3. **Choice.** A processor free now that finishes it in time with ``margin`` headroom, unless a much
   faster one finishes it sooner after a wait; else the earliest finish in time after a wait (a claim:
   *late dispatch*, no queue builds behind a slow run); the cloud when the overload plan sends it there,
   when a long run would hold an overloaded device, or at its last safe moment; else a swap, the cloud,
   its own deadline, an older frame's slot, or a drop (:mod:`~scheduler.policies._late`).
4. **Overload plan** (:mod:`~scheduler.policies._overload`): from every stream's rate, the shares of each
   model to send to the cloud and to shed on arrival, solved again only when a stream's rate moves.
5. **Energy** (``objective``, :mod:`~scheduler.policies._energy`): a placement in time may move to a
   cheaper processor that still makes the deadline with more headroom; frugal when the throttle is near.
6. **Stale estimates age** (:class:`~scheduler.estimator.EstimateAger`): a model refused on a slow
   estimate is tried again once it ages toward its prior.

Each rule, why it is there and what it was measured against: ``docs/policy.md``; its figures:
BENCHMARKS.md (Schedulers). No clock, no I/O, no randomness: the same snapshots give the same decisions,
and deciding twice on one snapshot gives one answer. Times are ms.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from scheduler.estimator import EstimateAger, LatencyEstimator
from scheduler.policies._energy import EnergyTable, Greener, make_objective
from scheduler.policies._late import late_choice, wait_choice
from scheduler.policies._lone import IdleTable, best_effort, lone
from scheduler.policies._overload import CLOUD, LOCAL, SHED, OverloadPlan
from scheduler.policies._reserve import CriticalRoom, priority_urgency, room_gate
from scheduler.policies._slots import BEHIND_REASON  # noqa: F401 - re-exported: benchmarks and tests count by it
from scheduler.policies._slots import (
    _SLOWER,
    Candidates,
    Claims,
    Processors,
    _idle_choice,
    _row,
    _slot_ready,
)
from scheduler.types import Assignment, LatencyModel, RequestView, SchedulerView

_INF = float("inf")
#: how the reason of a request the overload plan sheds on arrival begins (benchmarks count them by it)
SHED_REASON = "shed under overload"


class Setting:
    """What holds for every request of one decision: the plan's state and the objective in force."""

    __slots__ = ("estimator", "fates", "gate", "green", "long_ms", "lookup", "overloaded", "reserved", "use_plan",
                 "whole")

    def __init__(self, policy: EdgertPolicy, estimator: LatencyModel, gate: Any) -> None:
        self.estimator: LatencyModel | None = None
        self.of(policy, estimator, gate)

    def of(self, policy: EdgertPolicy, estimator: LatencyModel, gate: Any) -> Setting:
        """This setting made ``policy``'s for a decision over ``estimator`` with the room check ``gate``."""
        plan, use_plan = policy.plan, policy.use_plan
        overloaded = use_plan and plan.overloaded
        self.use_plan = use_plan
        #: request id -> its fate (LOCAL, CLOUD, SHED) fixed when first seen
        self.fates = plan.fates
        #: models the plan sends to the cloud whole
        self.whole = plan.whole
        #: processor -> (model, budget ms) of the tight stream that needs it; None without a plan
        self.reserved = plan.reserved if use_plan else None
        self.overloaded = overloaded
        #: a local run longer than this holds a tight stream's processor (ms; inf unless overloaded)
        self.long_ms = 0.5 * plan.tight_ms if overloaded else _INF
        if estimator is not self.estimator:   # (an estimator's table is one dict for its life: looked up once)
            self.estimator = estimator
            #: the estimator's table lookup, when it is a LatencyEstimator (see _row)
            self.lookup = estimator.ema_table().get if type(estimator) is LatencyEstimator else None
        #: the energy objective, unless none or the device is overloaded
        self.green: Greener | None = None if policy.green is None or overloaded else policy.green
        #: the critical room's check (None: no critical stream expected)
        self.gate = gate
        return self


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

    __slots__ = ("candidates", "claims", "idle", "setting", "ager", "cloud_margin", "eft_slack", "green", "guard_ms", "k_local", "keep_room", "margin", "objective", "plan",
                 "prioritized", "refused", "room", "risky_margin", "short_first", "supersede", "table", "use_plan", "watch", "window")

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
        #: the table of the last all-idle snapshot (built once while every worker stays idle)
        self.idle = IdleTable()
        #: each request's candidates in turn (filled per request: :meth:`Candidates.find`)
        self.candidates = Candidates()
        #: the decision's processor table (filled by each that is not all idle: :meth:`Processors.fill`)
        self.table = Processors([], [], [], [], [], [], None, 0)
        #: the decision's claims (emptied by each: :meth:`Claims.start`)
        self.claims = Claims([], [], None, [], [], {})
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
        #: what holds for every request of a decision (made anew by each: :meth:`Setting.of`)
        self.setting = Setting(self, LatencyEstimator(), None)

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """Assign what should start now, drop the hopeless, leave the rest pending; see the module doc."""
        pending, processors, estimator = view.pending, view.processors, view.estimator
        if not pending:
            return []
        single = len(pending) == 1 and self.green is None   # the lone shortcuts: no plan or objective in force
        if single and pending[0].deadline_ms == _INF and (not self.use_plan or self.plan.idle):
            out = self._best_effort(pending[0], view, now_ms)   # a sync caller's request with no deadline
            if out is not None:
                return out
        procs = self.idle.of(processors, now_ms) or self.table.fill(processors, now_ms)
        if self.ager is not None and isinstance(estimator, LatencyEstimator):   # before anything reads it
            self.ager.age(estimator, now_ms, procs.local, self.refused)
        if self.use_plan:
            self.plan.update(pending, now_ms, estimator.expected_ms, procs.local, procs.cloud_name, procs.cloud_slots)
        if self.watch is not None:
            self.green.frugal = self.watch.observe(procs, now_ms)   # type: ignore[union-attr]  # set together
        if single and (not self.use_plan or self.plan.idle) and not (self.keep_room and self._prioritize(pending)):
            out = self._lone(pending[0], procs, estimator, now_ms)   # a lone request's order is moot
            if out is not None:
                return out
        overloaded = self.use_plan and self.plan.overloaded
        urgency = _overload_urgency(estimator.expected_ms, procs.local, self.short_first) \
            if overloaded and self.short_first else _urgency
        gate = None   # the room check of the priority rules (11), when they apply
        if self._prioritize(pending):
            urgency, gate = self._priorities(urgency, pending, estimator.expected_ms, procs, now_ms)
        if len(pending) > self.window and urgency is _urgency:   # a burst leaves hundreds pending: the same order,
            due = [r.deadline_ms - r.downstream_ms for r in pending]   # sorted in C on keys computed in one pass
            ordered: Sequence[RequestView] = [pending[i] for i in sorted(range(len(pending)), key=due.__getitem__)[
                :self.window]]
        elif len(pending) > self.window:   # the most urgent first (nsmallest is sorted(...)[:n], stable)
            ordered = heapq.nsmallest(self.window, pending, key=urgency)
        else:
            ordered = sorted(pending, key=urgency) if len(pending) > 1 else pending
        claims = self.claims.start(procs.ready, self.supersede)   # none yet
        return self._place(ordered, procs, estimator, now_ms, self.setting.of(self, estimator, gate), claims)

    def _place(self, ordered: Sequence[RequestView], procs: Processors, estimator: LatencyModel,
               now_ms: float, setting: Setting, claims: Claims) -> list[Assignment]:
        """Place each request, most urgent first, against what the more urgent ones claimed; see the module doc."""
        names, ready, is_cloud, k_local = procs.names, procs.ready, procs.is_cloud, self.k_local
        out, rows, placed = claims.out, claims.rows, claims.placed
        fates = setting.fates if setting.use_plan else None
        whole, lookup, gate = setting.whole, setting.lookup, setting.gate
        candidates = self.candidates
        for req in ordered:
            rid, model, allowed, deadline = req.id, req.model, req.allowed, req.deadline_ms
            fate = LOCAL if fates is None else fates.get(rid, -1)
            new = fate < 0
            if new:   # first seen: the plan fixes its fate now
                fate = self.plan.fate(req)
            row = rows.get(model) or rows.setdefault(model, _row(lookup, estimator, model, names))
            if allowed is not None:
                row = [(i, ms) for i, ms in row if names[i] in allowed]
            if fate == SHED or not row:
                why = _shed(model, self.plan.utilization) if fate == SHED else _unsupported(req)
                out.append(Assignment.drop(rid, why))
                continue
            if deadline == _INF and min(ready) > now_ms:
                continue   # best-effort work (it sorts last) and nothing can start now: it waits
            if fate == LOCAL and fates is not None and model in whole:
                fate = CLOUD   # its model went to the cloud whole
            target = deadline - req.downstream_ms   # the effective deadline
            c = candidates.find(row, ready, is_cloud, now_ms, k_local, target)
            pick, finish = self._choose(req, fate, new, row, c, target, procs, now_ms, setting, claims)
            if pick < 0 or gate is not None and gate(req.priority, pick, finish, ready, now_ms):
                continue   # swapped, superseded, dropped or left pending; or it would take a critical frame's room
            start = ready[pick]   # the claim: it starts now (an assignment) or when the processor frees
            claims.last[pick], claims.last_start[pick] = req, start
            if procs.slots[pick] == 1:
                ready[pick] = finish
            else:
                ready[pick] = _slot_ready(pick, start, finish, ready, procs.free, procs.slots)
            if placed is not None:
                placed[req.stream or model] = (len(out) if start <= now_ms else -1, pick, finish, req)
            if start <= now_ms:
                out.append(Assignment(rid, names[pick]))
        return out

    def _choose(self, req: RequestView, fate: int, new: bool, row: list[tuple[int, float]], c: Candidates,
                target: float, procs: Processors, now_ms: float, setting: Setting,
                claims: Claims) -> tuple[int, float]:
        """``(processor, finish)`` for ``req`` by the rules of the module doc (3); ``(-1, 0.0)``: it was swapped,
        superseded or dropped, or stays pending."""
        ready = procs.ready
        cloud_free = c.cloud >= 0 and ready[c.cloud] <= now_ms
        if cloud_free and fate == CLOUD and c.cloud_f + self.risky_margin * c.cloud_ms <= target:
            return c.cloud, c.cloud_f   # the plan's offload
        if cloud_free and setting.long_ms < c.local_ms and c.local >= 0 \
                and c.cloud_f + self.cloud_margin * c.cloud_ms <= target:
            return c.cloud, c.cloud_f   # a long run would hold a tight stream's processor on an overloaded device
        local_in_time = c.local >= 0 and ready[c.local] + self.k_local * c.local_ms <= target
        if c.idle >= 0:   # free now and in time, unless a faster one finishes it sooner after a wait (rule 6)
            if c.local != c.idle and local_in_time:
                slower = c.idle_f - ready[c.idle] >= _SLOWER * c.local_ms   # then any gain counts: no eft_slack
                faster_later = c.local_f + (0.0 if slower else self.eft_slack * c.local_ms) < c.idle_f
            else:
                faster_later = False
            if not faster_later:
                if setting.green is not None or setting.reserved and procs.names[c.idle] in setting.reserved:
                    return _idle_choice(req.model, row, c.idle, c.idle_f, target, setting.reserved, procs,
                                        self.k_local, now_ms, setting.green)
                return c.idle, c.idle_f
        if local_in_time:   # in time after a wait: a claim, unless the cloud's last safe moment is now, or cheaper
            if c.cloud >= 0 and target - self.guard_ms < c.cloud_f + self.cloud_margin * c.cloud_ms <= target:
                return wait_choice(req.model, row, c, target, procs, now_ms, k_local=self.k_local,
                                   cloud_margin=self.cloud_margin, guard_ms=self.guard_ms, long_ms=setting.long_ms,
                                   green=setting.green)
            if setting.green is not None:
                return setting.green.choose(req.model, row, c.local, c.local_f, procs, target, now_ms)
            return c.local, c.local_f
        return late_choice(req, row, c, target, procs, now_ms, claims, k_local=self.k_local, new=new,
                           refused=self.refused)

    def _prioritize(self, pending: Sequence[RequestView]) -> bool:
        """Whether the priority rules (11) apply: a request declared a level other than normal, now or before."""
        if not self.prioritized:
            for r in pending:
                if r.priority != "normal":
                    self.prioritized = True
                    break
        return self.prioritized

    def _priorities(self, key: Any, pending: Sequence[RequestView], est: Any, procs: Processors,
                    now_ms: float) -> tuple[Any, Any]:
        """The urgency key with the levels' leads, and the room check for this decision (None: no critical
        stream is expected), once the priority rules apply (11: :meth:`_prioritize`)."""
        if not self.keep_room:   # the room's bookkeeping only where its gate is used
            return priority_urgency(key), None
        room = self.room
        for r in pending:
            if r.priority == "critical":
                room.see(r, min((ms for p in procs.local if (ms := est(r.model, p)) is not None), default=0.0))
        starts = [] if room.empty else room.next_starts(now_ms, self.k_local)
        return priority_urgency(key), room_gate(starts, procs.is_cloud) if starts else None

    def _best_effort(self, req: RequestView, view: SchedulerView, now_ms: float) -> list[Assignment] | None:
        """The lone-request shortcut for a request without a deadline (:func:`~scheduler.policies._lone.best_effort`;
        a method, so that a test double can switch it off)."""
        return best_effort(req, view.processors, view.estimator, self.idle,
                           self.plan.reserved if self.use_plan else None)

    def _lone(self, req: RequestView, procs: Processors, estimator: LatencyModel,
              now_ms: float) -> list[Assignment] | None:
        """The lone-request shortcut (:func:`~scheduler.policies._lone.lone`; a method, so that a test double can
        switch it off)."""
        return lone(req, procs, estimator, now_ms, plan=self.plan if self.use_plan else None, k_local=self.k_local,
                    eft_slack=self.eft_slack)


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


def _unsupported(req: RequestView) -> str:
    where = "" if req.allowed is None else f" among the allowed processors {list(req.allowed)}"
    return f"no available processor can run model {req.model!r}{where}"


def _shed(model: str, utilization: float) -> str:
    return (f"{SHED_REASON}: the device can run at most {1 / utilization:.0%} of the current work "
            f"in time, so a share of {model!r}, the costliest per request, is dropped on arrival")
