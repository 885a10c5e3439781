"""The simulator's driver: applies a policy to simulated processors exactly per the driver contract.

The contract (``scheduler/types.py``), as this driver implements it:

* ``policy.decide(view, now_ms)`` runs at every instant at which a request
  arrives (or a cascade stage becomes ready) or a processor finishes one:
  once per instant, after all of that instant's finishes and arrivals (a
  decision event at lower priority, or a direct call when the heap holds
  nothing more for this instant), so simultaneous frames of several
  streams are decided together, as the live runtime's scheduler thread sees
  them. With nothing pending there is nothing to decide and the call is
  skipped (a pure policy can only return ``[]``). A completion whose cascade
  stages fire is decided before those stages arrive, as in the live runtime,
  where a stage is submitted by its parent's completion callback after the
  runtime has re-scheduled the freed processor.
* An assignment appends the request to that processor's FIFO queue; the
  processor starts it as soon as it is free. ``Assignment(processor=None)``
  drops it with the policy's reason.
* After applying a decision, a request still pending whose every candidate
  processor (supports its model, available) is idle is dropped with reason
  ``"left unplaced by the policy"``.

Latency model: a run of ``model`` on processor ``p`` takes the profile's
mean ``latency_ms[model][p]`` times a seeded log-normal factor with mean 1
and ``sigma`` = ``noise``. Where the profile also gives ``latency_p90_ms``
(as ``edgert profile`` does, with ``latency_ms`` its p50), the run time is the
log-normal whose median is ``latency_ms`` and whose 90th percentile is
``latency_p90_ms``. One standard-normal draw per request (seeded,
``default_rng([seed, 4])``), so a request's draw does not depend on where it
runs. The cloud is one processor of kind ``"cloud"`` with ``cloud_slots``
parallel server slots; a run takes ``(rtt_ms + server latency) × factor +
input/output bytes over the link`` (``CloudSpec``; the factor's sigma is
``cloud_noise``, network jitter). Each slot has its own link (the uplink is
not shared between slots).

``dispatch_ms`` (default 0) models a driver's hand-off: a processor given a
request is busy from that instant but starts running it ``dispatch_ms``
later (the live runtime's thread wake-up; the fidelity benchmark measures it). Its
:class:`ProcessorView` shows ``busy_until_ms`` = now while a slot is free
(else the earliest expected slot release) and ``queued_ms`` = the queued
expected latencies divided by the number of slots, so ``ready_at_ms`` is
when a new request could start.

The estimator the policy sees is a :class:`LatencyEstimator` seeded from
the profile means (and the cloud's expected latency) and updated by EMA
with every simulated run.
"""

from __future__ import annotations

import difflib
import math
from collections import deque
from collections.abc import Callable

import numpy as np

from scheduler.errors import EdgeRTError, TraceError
from scheduler.estimator import LatencyEstimator
from scheduler.profile import DeviceProfile
from scheduler.sim.kernel import PRIO_ARRIVAL, PRIO_DECIDE, PRIO_FINISH, EventLoop
from scheduler.sim.workload import Request, Workload
from scheduler.types import Policy, ProcessorView, RequestView, SchedulerView

LEFT_UNPLACED = "left unplaced by the policy"
_Z90 = 1.2815515655446004   # standard normal 90th percentile


class SimProcessor:
    """A simulated processor: a FIFO queue, ``slots`` parallel runs (1 except for the cloud)."""

    __slots__ = ("name", "kind", "slots", "running", "queue", "queued_ms", "exp_ends", "view",
                 "busy_ms", "n_runs", "lat")

    def __init__(self, name: str, kind: str, slots: int = 1) -> None:
        self.name = name
        self.kind = kind
        self.slots = slots
        self.running = 0
        self.queue: deque[Request] = deque()
        self.queued_ms = 0.0
        self.exp_ends: list[float] = []     # expected end of each running invocation
        self.view: ProcessorView | None = None
        self.busy_ms = 0.0
        self.n_runs = 0
        #: model -> (mean_ms, extra_ms, per-request noise factor list)
        self.lat: dict[str, tuple[float, float, list[float]]] = {}

    def make_view(self, now_ms: float) -> ProcessorView:
        """The policy's snapshot of this processor at ``now_ms``."""
        busy = now_ms if self.running < self.slots else min(self.exp_ends)
        return ProcessorView(self.name, self.kind, busy, self.queued_ms / self.slots, len(self.queue), True)


class Simulation:
    """One run: a workload on a profile under a policy. Build it, call :meth:`run`, read ``done``.

    Raises (from the constructor, before anything runs):
        TraceError: a model of the workload that the profile lacks, or that no processor supports.
    """

    def __init__(self, workload: Workload, profile: DeviceProfile, policy: Policy, *, seed: int = 0,
                 noise: float = 0.1, cloud_noise: float = 0.2, offload: bool = True, cloud_slots: int = 4,
                 dispatch_ms: float = 0.0) -> None:
        self.workload = workload
        self.profile = profile
        self.policy = policy
        self.loop = EventLoop()
        procs = [SimProcessor(p.name, p.kind, cloud_slots if p.kind == "cloud" else 1) for p in profile.processors]
        cloud = profile.cloud if offload else None
        if not offload:
            procs = [p for p in procs if p.kind != "cloud"]
        if cloud is not None and not any(p.kind == "cloud" for p in procs):
            procs.append(SimProcessor("cloud", "cloud", cloud_slots))
        self.processors = procs
        self.by_name = {p.name: p for p in procs}
        # latency table: (model, proc) -> (mean_ms, sigma, extra_ms) ; extra is not scaled by noise
        self._lat: dict[tuple[str, str], tuple[float, float, float]] = {}
        seed_table: dict[str, dict[str, float]] = {}
        for model, row in profile.latency_ms.items():
            for pname, ms in row.items():
                if pname not in self.by_name:
                    continue
                p90 = profile.latency_p90_ms.get(model, {}).get(pname)
                if p90 is not None and ms > 0:
                    # latency_ms is the median (what `edgert profile` writes as p50): log-normal through both
                    sigma = max(0.0, math.log(p90 / ms)) / _Z90
                    self._lat[(model, pname)] = (ms * math.exp(0.5 * sigma * sigma), sigma, 0.0)
                else:
                    self._lat[(model, pname)] = (ms, noise, 0.0)
                seed_table.setdefault(model, {})[pname] = ms
        if cloud is not None:
            cname = next(p.name for p in procs if p.kind == "cloud")
            for model, server in cloud.latency_ms.items():
                total = cloud.expected_ms(model)
                assert total is not None
                transfer = total - cloud.rtt_ms - server
                self._lat[(model, cname)] = (cloud.rtt_ms + server, cloud_noise, transfer)
                seed_table.setdefault(model, {})[cname] = total
        self.estimator = LatencyEstimator(alpha=0.1, seed=seed_table)
        self._validate(seed_table)
        # per model: the processors that can run it (for the "left unplaced" sweep)
        self._cands = {m: [self.by_name[p] for p in row] for m, row in seed_table.items()}
        best = {m: min(row.values()) for m, row in seed_table.items()}
        _set_downstream(workload, best)
        z = np.random.default_rng([seed, 4]).standard_normal(len(workload.all))
        factors: dict[float, list[float]] = {}
        for (model, pname), (mean, sigma, extra) in self._lat.items():
            f = factors.get(sigma)
            if f is None:
                f = factors[sigma] = np.exp(sigma * z - 0.5 * sigma * sigma).tolist()
            self.by_name[pname].lat[model] = (mean, extra, f)
        self.pending: dict[int, Request] = {}
        self.done: list[Request] = []
        self._pviews: tuple[ProcessorView, ...] = ()
        self._dirty = True
        self._next_root = 0
        self._decide_due = False
        self.decisions = 0
        if not dispatch_ms >= 0.0:
            raise ValueError(f"dispatch_ms must be >= 0, got {dispatch_ms}")
        self.dispatch_ms = dispatch_ms

    def _validate(self, table: dict[str, dict[str, float]]) -> None:
        known = set(self.profile.latency_ms) | set(table)
        for model in sorted({r.model for r in self.workload.all}):
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
    def run(self, on_tick: Callable[[float], None] | None = None) -> None:
        """Run every request to a terminal status."""
        roots = self.workload.roots
        if roots:
            self.loop.push(roots[0].t_ms, PRIO_ARRIVAL, self._arrive_root, None)
        self.loop.run(on_tick=on_tick)
        if self.pending:   # cannot happen under the contract; never lose a request silently
            raise EdgeRTError(f"{len(self.pending)} request(s) still pending when the simulation ran out of events")

    def _arrive_root(self, _: object) -> None:
        """Every root request whose time is now arrives; one decision follows at this instant."""
        roots = self.workload.roots
        loop = self.loop
        now = loop.now_ms
        pending = self.pending
        i = self._next_root
        n = len(roots)
        while i < n:
            r = roots[i]
            if r.t_ms != now:
                break
            i += 1
            r.ready_ms = now
            r.view = RequestView(r.id, r.model, now, r.deadline_ms, r.stream, r.frame, r.downstream_ms)
            pending[r.id] = r
        self._next_root = i
        if i < n:
            loop.push(roots[i].t_ms, PRIO_ARRIVAL, self._arrive_root, None)
        if not self._decide_due:
            heap = loop.heap
            if heap and heap[0][0] <= now:   # more of this instant to come: decide after it
                self._decide_due = True
                loop.push(now, PRIO_DECIDE, self._decide_event, None)
            else:
                self._decide()

    def _decide_event(self, _: object) -> None:
        self._decide_due = False
        self._decide()

    def _make_ready(self, r: Request, now: float) -> None:
        r.ready_ms = now
        r.view = RequestView(r.id, r.model, now, r.deadline_ms, r.stream, r.frame, r.downstream_ms)
        self.pending[r.id] = r

    def _decide(self) -> None:
        pending = self.pending
        if not pending:
            return
        now = self.loop.now_ms
        if self._dirty:
            pv = []
            for p in self.processors:
                v = p.view
                if v is None:
                    v = p.view = p.make_view(now)
                pv.append(v)
            self._pviews = tuple(pv)
            self._dirty = False
        self.decisions += 1
        out = self.policy.decide(SchedulerView(tuple([r.view for r in pending.values()]), self._pviews,
                                               self.estimator), now)
        if out:
            by_name = self.by_name
            expected = self.estimator.expected_ms
            for a in out:
                r = pending.pop(a.request_id, None)
                if r is None:
                    raise EdgeRTError(f"policy {self.policy.name!r} decided about request {a.request_id}, "
                                      f"which is not pending (decide must only name view.pending ids)")
                name = a.processor
                if name is None:
                    self._drop(r, a.reason or "dropped by the policy")
                    continue
                p = by_name.get(name)
                if p is None or r.model not in p.lat:
                    raise EdgeRTError(f"policy {self.policy.name!r} placed request {r.id} (model {r.model!r}) on "
                                      f"{name!r}, which " + ("does not exist" if p is None else "cannot run it"))
                if p.running < p.slots and not p.queue:
                    self._start(p, r, now)
                else:
                    exp = expected(r.model, name)
                    r.exp_ms = exp
                    p.queue.append(r)
                    p.queued_ms += exp
                    p.view = None
                    self._dirty = True
        if pending:
            for r in list(pending.values()):
                for p in self._cands[r.model]:
                    if p.queue or p.running >= p.slots:
                        break
                else:
                    del pending[r.id]
                    self._drop(r, LEFT_UNPLACED)

    def _start(self, p: SimProcessor, r: Request, now: float) -> None:
        """Start ``r`` on ``p`` (which has a free slot); ``r`` is no longer in ``p.queue``."""
        mean, extra, factor = p.lat[r.model]
        ms = mean * factor[r.id] + extra
        r.start_ms = now + self.dispatch_ms
        r.processor = p.name
        r.proc = p
        p.running += 1
        exp = self.estimator.expected_ms(r.model, p.name)
        r.exp_ms = r.start_ms + (ms if exp is None else exp)   # from here on: the expected end
        p.exp_ends.append(r.exp_ms)
        p.view = None
        self._dirty = True
        self.loop.push(r.start_ms + ms, PRIO_FINISH, self._finish, r)

    def _finish(self, r: Request) -> None:
        now = self.loop.now_ms
        p = r.proc
        ms = now - r.start_ms
        p.running -= 1
        if p.slots > 1:
            p.exp_ends.remove(r.exp_ms)
        else:
            p.exp_ends.clear()
        p.busy_ms += ms
        p.n_runs += 1
        self.estimator.update(r.model, p.name, ms)
        r.end_ms = now
        r.status = "ok" if now <= r.deadline_ms else "late"
        self.done.append(r)
        if p.queue:
            q = p.queue.popleft()
            if p.queue:
                p.queued_ms -= q.exp_ms
            else:
                p.queued_ms = 0.0   # no float drift
            self._start(p, q, now)
        else:
            p.view = None
            self._dirty = True
        if r.children:
            kids = [c for c in r.children if c.fires]
            if kids:
                if self.pending:   # as live: the completion is decided before its cascade stages arrive
                    self._decide()
                for c in kids:
                    self._make_ready(c, now)
        if self.pending and not self._decide_due:
            heap = self.loop.heap
            if heap and heap[0][0] <= now:
                self._decide_due = True
                self.loop.push(now, PRIO_DECIDE, self._decide_event, None)
            else:
                self._decide()

    def _drop(self, r: Request, reason: str) -> None:
        if r.ready_ms != r.ready_ms:   # NaN: a cascade stage dropped with its upstream, never ready
            r.ready_ms = self.loop.now_ms
        r.status = "dropped"
        r.reason = reason
        r.end_ms = math.nan
        self.done.append(r)
        if r.children:
            for c in r.children:
                if c.fires:
                    self._drop(c, f"upstream request {r.key!r} was dropped")


def _set_downstream(wl: Workload, best_ms: dict[str, float]) -> None:
    """``downstream_ms`` of each request: the longest chain of best-case latencies of its cascade stages."""
    def down(r: Request) -> float:
        if r.children:
            r.downstream_ms = max(best_ms.get(c.model, 0.0) + down(c) for c in r.children)
        return r.downstream_ms

    for r in wl.roots:
        down(r)
