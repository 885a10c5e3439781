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

Event order. The loop is the kernel's ``(time, priority, seq)`` order
(:mod:`~scheduler.sim.kernel`) fused into one function for speed: the heap
holds only completions, ``(end_ms, seq, request id)``; root arrivals come
from the workload's sorted columns; at each instant, completions run first
(priority 0, FIFO by ``seq``), then arrivals (priority 1), then one decision
(priority 2). A start at an instant whose run takes 0 ms completes at that
same instant, in a second round.

Latency model: a run of ``model`` on processor ``p`` takes the profile's
mean ``latency_ms[model][p]`` times a seeded log-normal factor with mean 1
and ``sigma`` = ``noise``. Where the profile also gives ``latency_p90_ms``
(as ``edgert profile`` does, with ``latency_ms`` its p50), the run time is the
log-normal whose median is ``latency_ms`` and whose 90th percentile is
``latency_p90_ms``. One standard-normal draw per request (seeded,
``default_rng([seed, 4])``, in bulk), so a request's draw does not depend on
where it runs. The cloud is one processor of kind ``"cloud"`` with
``cloud_slots`` parallel server slots; a run takes ``(rtt_ms + server
latency) × factor + input/output bytes over the link`` (``CloudSpec``; the
factor's sigma is ``cloud_noise``, network jitter). Each slot has its own
link (the uplink is not shared between slots).

``dispatch_ms`` (default 0) models a driver's hand-off: a processor given a
request is busy from that instant but starts running it ``dispatch_ms``
later (the live runtime's thread wake-up; the fidelity benchmark measures it).
It is one number, or samples of a measured hand-off (ms) from which each
request draws its own (seeded): a live runtime's wake-up is mostly a fraction
of a ms with a tail of a few ms (the thread waits for the GIL or the host's
scheduler), and the tail is what moves a short model's median.

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

import numpy as np

from scheduler.errors import EdgeRTError, TraceError
from scheduler.estimator import LatencyEstimator
from scheduler.profile import DeviceProfile
from scheduler.sim._views import scheduler_view
from scheduler.sim.columns import Workload, arrival_groups, downstream_ms
from scheduler.sim.metrics import Outcome
from scheduler.sim.processor import SimProcessor
from scheduler.types import Policy, ProcessorView, RequestView

#: The drop reason for a request a decision left pending while every processor that could run it was
#: idle; the live runtime's wording (``edgert/runtime.py``), formatted by :func:`left_unplaced`.
LEFT_UNPLACED = "left unplaced by scheduler {name!r} while every processor that could run it was idle"

_Z90 = 1.2815515655446004   # standard normal 90th percentile
_OK, _LATE, _DROPPED = 0, 1, 2   # codes into scheduler.timeline.STATUSES
_NAN = math.nan


def left_unplaced(policy_name: str) -> str:
    """The "left unplaced" drop reason for policy ``policy_name``, worded as the live runtime words it."""
    return LEFT_UNPLACED.format(name=policy_name)


class Simulation:
    """One run: a workload on a profile under a policy. Build it, call :meth:`run`, read :meth:`outcome`.

    Raises (from the constructor, before anything runs):
        TraceError: a model of the workload that the profile lacks, or that no processor supports.
    """

    def __init__(self, workload: Workload, profile: DeviceProfile, policy: Policy, *, seed: int = 0,
                 noise: float = 0.1, cloud_noise: float = 0.2, offload: bool = True, cloud_slots: int = 4,
                 dispatch_ms: float | Sequence[float] = 0.0) -> None:
        try:
            hand = np.atleast_1d(np.asarray(dispatch_ms, np.float64))
        except (TypeError, ValueError):
            hand = np.empty(0)
        if hand.ndim != 1 or not hand.size or not bool((hand >= 0.0).all()):
            raise ValueError(f"dispatch_ms must be >= 0 ms, or a non-empty sequence of such samples; "
                             f"got {dispatch_ms!r}")
        self.workload = workload
        self.profile = profile
        self.policy = policy
        self.policy_name: str = getattr(policy, "name", type(policy).__name__)
        #: by request id: its hand-off delay (ms)
        self._hand: list[float] = ([float(hand[0])] * len(workload) if hand.size == 1 else
                                   hand[np.random.default_rng([seed, 5]).integers(0, hand.size, len(workload))]
                                   .tolist())
        procs = [SimProcessor(p.name, p.kind, cloud_slots if p.kind == "cloud" else 1) for p in profile.processors]
        cloud = profile.cloud if offload else None
        if not offload:
            procs = [p for p in procs if p.kind != "cloud"]
        if cloud is not None and not any(p.kind == "cloud" for p in procs):
            procs.append(SimProcessor("cloud", "cloud", cloud_slots))
        for i, p in enumerate(procs):
            p.index = i
        self.processors = procs
        self.by_name = {p.name: p for p in procs}
        # latency table: (model, proc) -> (mean_ms, sigma, extra_ms); extra is not scaled by noise
        lat: dict[tuple[str, str], tuple[float, float, float]] = {}
        table: dict[str, dict[str, float]] = {}
        for model, row in profile.latency_ms.items():
            for pname, ms in row.items():
                if pname not in self.by_name:
                    continue
                p90 = profile.latency_p90_ms.get(model, {}).get(pname)
                if p90 is not None and ms > 0:
                    # latency_ms is the median (what `edgert profile` writes as p50): log-normal through both
                    sigma = max(0.0, math.log(p90 / ms)) / _Z90
                    lat[(model, pname)] = (ms * math.exp(0.5 * sigma * sigma), sigma, 0.0)
                else:
                    lat[(model, pname)] = (ms, noise, 0.0)
                table.setdefault(model, {})[pname] = ms
        if cloud is not None:
            cname = next(p.name for p in procs if p.kind == "cloud")
            for model, server in cloud.latency_ms.items():
                total = cloud.expected_ms(model)
                assert total is not None
                transfer = total - cloud.rtt_ms - server
                lat[(model, cname)] = (cloud.rtt_ms + server, cloud_noise, transfer)
                table.setdefault(model, {})[cname] = total
        self.estimator = LatencyEstimator(alpha=0.1, seed=table)
        self._validate(table)
        models = workload.models
        code = {m: i for i, m in enumerate(models)}
        #: by model code: the processors that can run it (for the "left unplaced" sweep)
        self._cands = [[self.by_name[p] for p in table[m]] for m in models]
        z = np.random.default_rng([seed, 4]).standard_normal(len(workload))
        factors: dict[float, list[float]] = {}
        for p in procs:
            p.lat = [None] * len(models)
            p.keys = [(m, p.name) for m in models]
        for (model, pname), (mean, sigma, extra) in lat.items():
            if model not in code:
                continue
            f = factors.get(sigma)
            if f is None:
                f = factors[sigma] = np.exp(sigma * z - 0.5 * sigma * sigma).tolist()
            self.by_name[pname].lat[code[model]] = (mean, extra, f)
        best = np.array([min(table[m].values()) for m in models], np.float64)
        self._downstream = downstream_ms(workload, best)
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
        wl = self.workload
        n = len(wl)
        models, streams = wl.models, wl.streams
        mcode = wl.model.tolist()
        mname = [models[c] for c in mcode]
        sname = [streams[c] for c in wl.stream.tolist()]
        frame = wl.frame.tolist()
        deadline = (wl.t_ms + wl.slo_ms).tolist()
        down = self._downstream
        fires = wl.fires
        # firing cascade stages of each request, in id order
        children: list[list[int] | None] = [None] * n
        parent = wl.parent
        kids = np.flatnonzero((parent >= 0) & fires)
        for c, pa in zip(kids.tolist(), parent[kids].tolist()):
            if children[pa] is None:
                children[pa] = [c]
            else:
                children[pa].append(c)
        group_t, group_ids = arrival_groups(wl)
        n_groups = len(group_t)
        inf = math.inf
        self._ready = ready = [_NAN] * n
        self._start = start = [_NAN] * n
        self._end = end = [_NAN] * n
        self._dropped = bytearray(n)   # 1 = dropped; a request that ran is ok or late by its end
        proc: list[SimProcessor | None] = [None] * n
        self._proc = proc
        self._reasons: dict[int, str] = {}
        self._done = done = []
        self._children = children
        pending: dict[int, object] = {}
        self._pending = pending
        procs = self.processors
        by_name = self.by_name
        cands = self._cands
        est = self.estimator
        ema, alpha = est.ema_table(), est.alpha   # update() inlined: every (model, processor) that runs is seeded
        decide = self.policy.decide
        pname = self.policy_name
        unplaced = left_unplaced(pname)
        dropped_by = f"dropped by scheduler {pname!r}"
        hand = self._hand
        heap: list[tuple[float, int, int]] = []
        push, pop = heappush, heappop
        done_append = done.append
        tnew, RV = tuple.__new__, RequestView   # RequestView(...) built in C (see scheduler.sim._views)
        seq = 0
        gi = 0
        ta = group_t[0] if n_groups else inf   # time of the next root arrival group
        pv: list[ProcessorView] = [p.idle_view for p in procs]   # the views, rebuilt where stale
        pviews = tuple(pv)
        stale: list[SimProcessor] = []          # processors whose state changed since the last decision
        for p in procs:
            p.view = p.idle_view
        decisions = 0
        now = 0.0
        try:
            while True:
                if heap:
                    now = heap[0][0]
                    if ta < now:
                        now = ta
                elif ta != inf:
                    now = ta
                else:
                    break
                # priority 0: completions at this instant, FIFO
                while heap and heap[0][0] == now:
                    rid = pop(heap)[2]
                    p = proc[rid]
                    p.running.remove(rid)
                    k = p.keys[mcode[rid]]
                    old = ema[k]
                    ema[k] = old + alpha * (now - start[rid] - old)
                    end[rid] = now
                    done_append(rid)
                    queue = p.queue
                    if queue:   # the processor starts the head of its FIFO queue
                        q = queue.popleft()
                        m = mcode[q]
                        qc = p.qcount
                        if qc[m] == 1:
                            del qc[m]
                        else:
                            qc[m] -= 1
                        mean, extra, fac = p.lat[m]
                        ms = mean * fac[q] + extra
                        s = now + hand[q]
                        start[q] = s
                        proc[q] = p
                        p.running.append(q)
                        seq += 1
                        push(heap, (s + ms, seq, q))
                    if p.view is not None:
                        p.view = None
                        stale.append(p)
                    kids = children[rid]
                    if kids is not None:   # its firing cascade stages become ready now
                        for c in kids:
                            ready[c] = now
                            pending[c] = tnew(RV, (c, mname[c], now, deadline[c], sname[c], frame[c], down[c], None))
                # priority 1: root arrivals at this instant
                if ta == now:
                    for r in group_ids[gi]:
                        ready[r] = now
                        pending[r] = tnew(RV, (r, mname[r], now, deadline[r], sname[r], frame[r], down[r], None))
                    gi += 1
                    ta = group_t[gi] if gi < n_groups else inf
                    if on_tick is not None and gi % tick_every == 0:
                        on_tick(now)
                if not pending:
                    continue
                # priority 2: one decision for the instant
                if stale:
                    for p in stale:   # an idle processor's view is the one built ahead (most of them)
                        pv[p.index] = p.view = p.idle_view if not p.running and not p.queue else \
                            p.make_view(start, mcode, ema)
                    stale.clear()
                    pviews = tuple(pv)
                decisions += 1
                out = decide(scheduler_view(tuple(pending.values()), pviews, est), now)
                for rid, name, reason in out:   # Assignment(request_id, processor, reason)
                    if pending.pop(rid, None) is None:
                        raise EdgeRTError(f"policy {pname!r} decided about request {rid}, which is not pending "
                                          "(decide must only name view.pending ids)")
                    if name is None:
                        self._drop(rid, reason or dropped_by, now)
                        continue
                    m = mcode[rid]
                    try:
                        p = by_name[name]
                        lat = p.lat[m]
                        if lat is None:
                            raise KeyError(name)
                    except KeyError:
                        raise EdgeRTError(f"policy {pname!r} placed request {rid} (model {mname[rid]!r}) on "
                                          f"{name!r}, which " + ("cannot run it" if name in by_name
                                                                 else "does not exist")) from None
                    if len(p.running) < p.slots and not p.queue:   # free: start it now
                        mean, extra, fac = lat
                        ms = mean * fac[rid] + extra
                        s = now + hand[rid]
                        start[rid] = s
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
                            self._drop(rid, unplaced, now)
        except Exception as exc:
            exc.add_note(f"raised at simulated t = {now:.3f} ms")
            raise
        finally:
            self.now_ms = now
            self.decisions = decisions
            self._groups_done = gi
        if pending:   # cannot happen under the contract; never lose a request silently
            raise EdgeRTError(f"{len(pending)} request(s) still pending when the simulation ran out of events")
        self._tally()

    def _drop(self, rid: int, reason: str, now: float) -> None:
        if self._ready[rid] != self._ready[rid]:   # NaN: a cascade stage dropped with its upstream, never ready
            self._ready[rid] = now
        self._dropped[rid] = 1
        self._reasons[rid] = reason
        self._done.append(rid)
        kids = self._children[rid]
        if kids is not None:
            why = f"upstream request {self.workload.key(rid)!r} was dropped"
            for c in kids:
                self._drop(c, why, now)

    def _tally(self) -> None:
        """Each processor's ``busy_ms`` and ``n_runs`` from the runs' start and end times (after :meth:`run`)."""
        self._start_a = start = np.array(self._start)
        self._end_a = end = np.array(self._end)
        took = end - start
        self._where = where = np.array([-1 if p is None else p.index for p in self._proc], np.int64)
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
            order = np.array(self._done, np.int64)
            wl = self.workload
            deadline = (wl.t_ms + wl.slo_ms)[order]
            end = self._end_a[order]
            dropped = np.frombuffer(self._dropped, np.uint8)[order].astype(bool)
            status = np.where(dropped, _DROPPED, np.where(end <= deadline, _OK, _LATE)).astype(np.int8)
            self._out = Outcome(
                models=list(wl.models), processors=[p.name for p in self.processors], id=order,
                model=wl.model[order], frame=wl.frame[order], status=status,
                ready_ms=np.array(self._ready)[order], start_ms=self._start_a[order],
                end_ms=end, deadline_ms=deadline, processor=self._where[order].astype(np.int32),
                reasons=self._reasons)
        return self._out
