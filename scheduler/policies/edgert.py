"""edgert's default policy: deadline order, idle-first / earliest-finish placement, cloud on overflow.

XR work is periodic streams with frame deadlines and cascades, on a device
whose processors run one invocation at a time. One decision:

1. **Order** pending requests by *effective deadline*
   ``deadline_ms - downstream_ms`` (earliest first): a
   cascade's first stage must leave its later stages time to run (EDF with
   cascade-aware deadlines); ties keep the snapshot's (arrival) order.
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
   still make it. One that could make it but for more urgent claims stays
   pending.

5. **Overload plan** (``scheduler/policies/_overload.py``): the policy keeps
   every stream's rate and, when the device could not run everything
   locally with headroom (utilization above ``target``), solves one small LP
   for the shares of each model to send to the cloud *from their arrival*
   (when the round trip's odds are best and the cloud has a free slot) and,
   past ``shed_target``, to shed (the requests that cost the most local time
   per met deadline), so the rest meet their deadlines. A long model the
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
   finish twice as fast. Conversely, a request with time to spare (more than
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

No clock, no I/O, no randomness. The only state carried between decisions
is the overload plan's (stream rates, shares, each pending request's fate), which
changes only with requests not seen before and with ``now_ms``; the same
sequence of snapshots gives the same decisions, and deciding twice on one
snapshot gives one answer. Times are ms.
"""

from __future__ import annotations

import heapq
from typing import ClassVar

from scheduler.policies._overload import CLOUD, LOCAL, SHED, OverloadPlan
from scheduler.policies._slots import swap_slot, take_older_slot
from scheduler.types import Assignment, RequestView, SchedulerView

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
        **plan_options: :class:`~scheduler.policies._overload.OverloadPlan`
            options (``target``, ``shed_target``, ``replan_ms`` …).

    Raises:
        ValueError: a negative margin, guard or slack; a non-positive plan option.
    """

    name: ClassVar[str] = "edgert"

    __slots__ = ("cloud_margin", "eft_slack", "guard_ms", "margin", "plan", "risky_margin", "supersede",
                 "use_plan", "window")

    def __init__(self, supersede: bool = True, margin: float = 0.2, cloud_margin: float = 0.4,
                 guard_ms: float = 5.0, eft_slack: float = 1.0, plan: bool = True, risky_margin: float = 0.05,
                 window: int = 32, **plan_options: float) -> None:
        for label, value in (("margin", margin), ("cloud_margin", cloud_margin), ("guard_ms", guard_ms),
                             ("eft_slack", eft_slack), ("risky_margin", risky_margin)):
            if not value >= 0:
                raise ValueError(f"{label} must be >= 0, got {value}")
        if not (isinstance(window, int) and window >= 1):
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        self.window = window
        self.supersede = supersede
        self.margin = margin
        self.cloud_margin = cloud_margin
        self.guard_ms = guard_ms
        self.eft_slack = eft_slack
        self.risky_margin = risky_margin
        self.use_plan = plan
        self.plan = OverloadPlan(risky_margin=risky_margin, **plan_options)

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        """Assign what should start now, drop the hopeless, leave the rest pending; see the module doc."""
        pending = view.pending
        if not pending:
            return []
        est = view.estimator.expected_ms
        names: list[str] = []
        ready: list[float] = []
        cloud: list[bool] = []
        free: list[int] = []      # idle slots of a multi-slot processor (the cloud), 0 otherwise
        slots: list[int] = []
        local: list[str] = []
        cloud_name: str | None = None
        cloud_slots = 0
        for p in view.processors:
            if p.available:
                names.append(p.name)
                b = p.busy_until_ms
                c = p.kind == "cloud"
                cloud.append(c)
                if c:
                    cloud_name, cloud_slots = p.name, p.slots
                else:
                    local.append(p.name)
                if p.slots > 1:
                    free.append(p.free_slots)
                    slots.append(p.slots)
                    ready.append(now_ms if p.free_slots > 0 else
                                 (b if b > now_ms else now_ms) + p.queued_ms / p.slots)
                else:
                    free.append(0)
                    slots.append(1)
                    ready.append((b if b > now_ms else now_ms) + p.queued_ms)
        plan = self.plan
        fates = plan.fates
        use_plan = self.use_plan
        if use_plan:
            plan.update(pending, now_ms, est, local, cloud_name, cloud_slots)
        whole = plan.whole if use_plan else ()
        reserved = plan.reserved if use_plan else None
        # a local run longer than this (ms) holds a processor a tight stream needs, while overloaded
        overloaded = use_plan and plan.overloaded
        long_ms = 0.5 * plan.tight_ms if overloaded else _INF
        base = ready[:]          # without this decision's claims
        n_proc = len(names)
        rows: dict[str, list[tuple[int, float]]] = {}
        k_local = 1.0 + self.margin
        cm = self.cloud_margin
        rm = self.risky_margin
        guard = self.guard_ms
        slack = self.eft_slack
        supersede = self.supersede
        # stream -> (index in out, or -1 for a claim; processor index; expected finish; request)
        placed: dict[str, tuple[int, int, float, RequestView]] = {}
        out: list[Assignment] = []
        # per local processor: the request it was last given in this decision and its start (ms), for swap_slot
        last: list[RequestView | None] = [None] * n_proc
        last_start = [0.0] * n_proc

        if len(pending) > self.window:   # nsmallest is sorted(...)[:n], stable: ties keep arrival order
            ordered = heapq.nsmallest(self.window, pending, key=_urgency)
        else:
            ordered = sorted(pending, key=_urgency) if len(pending) > 1 else pending
        for req in ordered:
            fate = 0
            if use_plan:
                fate = fates.get(req.id)
                if fate is None:
                    fate = plan.fate(req)
                if fate == SHED:
                    out.append(Assignment.drop(req.id, _shed(req.model, plan.utilization)))
                    continue
                if fate == LOCAL and req.model in whole:
                    fate = CLOUD     # seen before the plan sent its whole model to the cloud: it goes too
            model = req.model
            row = rows.get(model)
            if row is None:
                row = rows[model] = [(i, ms) for i in range(n_proc)
                                     if (ms := est(model, names[i])) is not None]
            if req.allowed is not None:
                row = [(i, ms) for i, ms in row if names[i] in req.allowed]
            if not row:
                out.append(Assignment.drop(req.id, _unsupported(req)))
                continue
            deadline = req.deadline_ms
            if deadline == _INF and ready and min(ready) > now_ms:
                continue  # best-effort work (it sorts last) and nothing can start now: it waits
            target = deadline - req.downstream_ms
            # earliest local finish; earliest among local processors free now that make it; earliest cloud
            li, lf, ii, iff, ci, cf, cms = -1, _INF, -1, _INF, -1, _INF, 0.0
            for i, ms in row:
                start = ready[i]
                f = start + ms
                if cloud[i]:
                    if f < cf:
                        ci, cf, cms = i, f, ms
                    continue
                if f < lf:
                    li, lf = i, f
                if start <= now_ms and f < iff and start + k_local * ms <= target:
                    ii, iff = i, f
            if fate == CLOUD and ci >= 0 and ready[ci] <= now_ms and cf + rm * cms <= target:
                pick, finish = ci, cf                     # planned offload, a cloud slot is free now
            elif overloaded and long_ms < lf - ready[li] and li >= 0 and ci >= 0 and ready[ci] <= now_ms \
                    and cf + cm * cms <= target:
                pick, finish = ci, cf                     # a long run would hold a tight stream's processor
            elif ii >= 0 and (li == ii or ready[li] + k_local * (lf - ready[li]) > target
                              or lf + slack * (lf - ready[li]) >= iff):
                pick, finish = ii, iff                    # free now and in time (no much faster wait)
                if reserved:
                    r = reserved.get(names[ii])
                    if r is not None and r[0] != model and target - now_ms > 2.0 * r[1]:
                        # a request with time to spare leaves a tighter stream's fastest processor to it
                        # when another one finishes it in time (now, or after a wait: a claim)
                        for i, ms in row:
                            if cloud[i] or i == ii:
                                continue
                            q = reserved.get(names[i])
                            if q is not None and q[0] != model:
                                continue
                            st = ready[i]
                            if st + k_local * ms <= target and (pick == ii or st + ms < finish):
                                pick, finish = i, st + ms
            elif li >= 0 and (fm := ready[li] + k_local * (lf - ready[li])) <= target:
                pick, finish = li, lf                     # in time after a wait: claim
                if ci >= 0 and target - guard < cf + cm * cms <= target and (
                        ready[li] - now_ms >= target - fm or lf - ready[li] > long_ms):
                    pick, finish = ci, cf                 # ... unless the cloud's last safe moment is now and
                                                          # the claim is fragile (its wait >= its slack) or long
            elif li >= 0 and swap_slot(req, row, target, last, last_start, rows, ready, cloud, names, k_local, now_ms,
                                   out, placed if supersede else None):
                continue                                  # took a slot whose holder moves elsewhere in time
            elif cf <= target:
                pick, finish = ci, cf                     # no local processor makes it: cloud
            elif lf <= deadline or cf <= deadline:
                pick, finish = (li, lf) if lf <= cf else (ci, cf)   # own deadline, not its cascade's
            else:
                if supersede and take_older_slot(req, placed, out, names, deadline, last):
                    continue
                own = min(base[i] + ms for i, ms in row)
                if own > deadline:
                    out.append(Assignment.drop(req.id, _late(own, deadline)))
                continue   # could make it but for more urgent claims: stays pending, claims nothing
            start = ready[pick]
            last[pick] = req
            last_start[pick] = start
            if free[pick] > 0:                            # a free slot of a multi-slot processor
                free[pick] -= 1
                if free[pick] == 0:
                    ready[pick] = finish
            elif slots[pick] > 1:
                ready[pick] = start + (finish - start) / slots[pick]
            else:
                ready[pick] = finish
            if start <= now_ms:
                if supersede:
                    placed[req.stream or model] = (len(out), pick, finish, req)
                out.append(Assignment(req.id, names[pick]))
            elif supersede:
                placed[req.stream or model] = (-1, pick, finish, req)
        return out


def _urgency(r: RequestView) -> float:
    """Effective deadline (ms); ``sorted`` is stable, so ties keep the snapshot's arrival order."""
    return r.deadline_ms - r.downstream_ms


def _unsupported(req: RequestView) -> str:
    where = "" if req.allowed is None else f" among the allowed processors {list(req.allowed)}"
    return f"no available processor can run model {req.model!r}{where}"


def _shed(model: str, utilization: float) -> str:
    return (f"{SHED_REASON}: the device can run at most {1 / utilization:.0%} of the current work "
            f"in time, so a share of {model!r}, the costliest per request, is dropped on arrival")


def _late(finish_ms: float, deadline_ms: float) -> str:
    return (f"cannot meet its deadline: earliest expected finish {finish_ms:.2f} ms "
            f"> deadline {deadline_ms:.2f} ms")
