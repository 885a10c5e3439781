"""Simulator speed: our simulator vs an equivalent SimPy model of the same system, in one run.

The system: the AR Assistant scenario (XRBench) on the galaxy-s23 profile for
one simulated hour (~250k requests); the same policy class deciding over the
same :class:`SchedulerView` snapshots under the same driver contract (one
decision per instant with arrivals or completions, cascade stages pending
before that decision, "left unplaced" drops), the same seeded latency draws,
the same workload (``build_scenario``, built inside each timed region). What
is not the event machinery is shared code on every side: the workload
columns, the :class:`SimProcessor` bookkeeping and its live-runtime
``ProcessorView``, the views' constructors, the estimator and the summary. Two SimPy models are timed:

* ``simpy-textbook``: SimPy's own idiom (its bank / car-wash examples): a
  source process emitting each instant's frames, a process per request, each
  processor a ``simpy.Resource`` (one slot per server, FIFO); a request waits
  for the policy's placement event, then ``with res.request(): yield ...;
  yield env.timeout(latency)``.
* ``simpy-lean``: hand-tuned for speed: the source process and one worker
  process per processor slot pulling a ``simpy.Store`` (no process per
  request).

Simultaneous arrivals are scheduled at exactly the same SimPy time
(``_delay_to``) and made pending in id order, as ours does, so all three
sides make the same decisions and print the same figures (requests, ok, late,
dropped, p50, p99). As ``edgert simulate`` runs a simulation, every side is timed with
the cyclic garbage collector off. The timed runs call the policy bare; one
more run per side wraps it in ``TimedPolicy`` to measure the time spent
inside ``decide`` (the wrapper's two clock reads per decision would
otherwise be billed to both engines), so the ratio of the engines alone is
printed too.

Usage::

    python benchmarks/sim_speed.py [--duration 3600] [--scheduler fixed_worker] [--repeat 3]

Bar (issue 4): ours >= 5x SimPy's requests/s.
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import TimedPolicy  # noqa: E402

from scheduler.estimator import LatencyEstimator  # noqa: E402
from scheduler.registry import make_policy  # noqa: E402
from scheduler.sim import (  # noqa: E402
    SimConfig,
    build_scenario,
    left_unplaced,
    load_profile,
    run_simulation,
)
from scheduler.sim.columns import arrival_groups, downstream_ms  # noqa: E402
from scheduler.sim.metrics import Outcome, summarize  # noqa: E402
from scheduler.sim.processor import RunTimes, SimProcessor  # noqa: E402
from scheduler.types import RequestView, SchedulerView  # noqa: E402

KEYS = ("requests", "ok", "late", "dropped", "p50_ms", "p99_ms")



def _delay_to(now: float, t: float) -> float:
    """The delay d with ``now + d == t`` exactly (SimPy schedules at ``now + delay``; plain ``t - now`` can
    land one ulp off, which would split arrivals of one instant into two and change the decisions)."""
    d = t - now
    while now + d < t:
        d = math.nextafter(d, math.inf)
    while now + d > t:
        d = math.nextafter(d, -math.inf)
    return d


class _SimpyBase:
    """What both SimPy models share with ours: the workload columns, profile tables, estimator, view
    builders, policy and the driver contract (the same bookkeeping as ``scheduler.sim.driver``);
    only the clock and the event machinery are SimPy's."""

    def __init__(self, scenario: str, profile_name: str, scheduler: str, duration_s: float, seed: int,
                 noise: float = 0.1, cloud_noise: float = 0.2, cloud_slots: int = 4, instrument: bool = False) -> None:
        self.env = env = simpy.Environment()
        prof = load_profile(profile_name)
        self.policy = TimedPolicy(make_policy(scheduler)) if instrument else make_policy(scheduler)
        self.wl = wl = build_scenario(scenario, duration_s, 1.0, None, seed)
        n = len(wl)
        procs = [(p.name, p.kind, 1) for p in prof.processors]
        if prof.cloud is not None:
            procs.append(("cloud", "cloud", cloud_slots))
        self.procs = [SimProcessor(name, kind, slots, i) for i, (name, kind, slots) in enumerate(procs)]
        self.by_name = {p.name: p for p in self.procs}
        z = np.random.default_rng([seed, 4]).standard_normal(n)
        fac = {s: np.exp(s * z - 0.5 * s * s).tolist() for s in {noise, cloud_noise}}
        code = {m: i for i, m in enumerate(wl.models)}
        table: dict[str, dict[str, float]] = {}
        for p in self.procs:
            p.run_times = [None] * len(wl.models)
            p.keys = [(m, p.name) for m in wl.models]
        for model, row in prof.latency_ms.items():
            for pn, ms in row.items():
                table.setdefault(model, {})[pn] = ms
                if model in code:
                    self.by_name[pn].run_times[code[model]] = RunTimes(ms, 0.0, fac[noise])
        if prof.cloud is not None:
            c = prof.cloud
            for model, server in c.latency_ms.items():
                total = c.expected_ms(model)
                table.setdefault(model, {})["cloud"] = total
                if model in code:
                    self.by_name["cloud"].run_times[code[model]] = RunTimes(c.rtt_ms + server,
                                                                            total - c.rtt_ms - server, fac[cloud_noise])
        self.est = LatencyEstimator(0.1, table)
        self.cands = [[self.by_name[pn] for pn in table[m]] for m in wl.models]
        best = np.array([min(table[m].values()) for m in wl.models])
        self.down = downstream_ms(wl, best)
        self.mcode = wl.model.tolist()
        self.mname = [wl.models[c] for c in self.mcode]
        self.sname = [wl.streams[c] for c in wl.stream.tolist()]
        self.frame = wl.frame.tolist()
        self.deadline = (wl.t_ms + wl.slo_ms).tolist()
        self.children: dict[int, list[int]] = {}
        for c in np.flatnonzero((wl.parent >= 0) & wl.fires).tolist():
            self.children.setdefault(int(wl.parent[c]), []).append(c)
        self.ready_ms = [math.nan] * n
        self.start_ms = [math.nan] * n
        self.end_ms = [math.nan] * n
        self.status = [-1] * n
        self.proc: list = [None] * n
        self.reasons: dict[int, str] = {}
        self.done: list[int] = []
        self.pending: dict[int, object] = {}
        self.decide_due = False
        self.unplaced = left_unplaced(self.policy.name)
        # one source process: the frames of every stream, instant by instant, each instant's requests in
        # id order (so simultaneous arrivals are pending in the same order as in ours)
        env.process(self.source(*arrival_groups(wl)))

    def ready(self, rid: int) -> None:
        now = self.env.now
        self.ready_ms[rid] = now
        self.pending[rid] = RequestView(rid, self.mname[rid], now, self.deadline[rid], self.sname[rid],
                                        self.frame[rid], self.down[rid])
        self.want_decision()

    def want_decision(self) -> None:
        """One decision per instant, after the events already due at this instant (a zero timeout)."""
        if not self.decide_due:
            self.decide_due = True
            self.env.timeout(0).callbacks.append(self._decide_cb)

    def _decide_cb(self, _ev) -> None:
        self.decide_due = False
        self.decide()

    def decide(self) -> None:
        if not self.pending:
            return
        now = self.env.now
        pending = self.pending
        mcode, ema = self.mcode, self.est.ema_table()
        view = SchedulerView(tuple(pending.values()), tuple(p.make_view(self.start_ms, mcode, ema) for p in self.procs),
                             self.est)
        for a in self.policy.decide(view, now):
            rid = a.request_id
            del pending[rid]
            if a.processor is None:
                self.drop(rid, a.reason)
                continue
            p = self.by_name[a.processor]
            p.queue.append(rid)
            m = mcode[rid]
            p.qcount[m] = p.qcount.get(m, 0) + 1
            self.place(rid, p)
        for rid in list(pending):
            if all(not p.queue and len(p.running) < p.slots for p in self.cands[mcode[rid]]):
                del pending[rid]
                self.drop(rid, self.unplaced)

    def begin(self, rid: int, p: SimProcessor) -> float:
        """Bookkeeping when ``rid`` starts on ``p``; returns its simulated latency (ms)."""
        p.running.append(rid)
        p.queue.remove(rid)
        m = self.mcode[rid]
        p.qcount[m] -= 1
        if not p.qcount[m]:
            del p.qcount[m]
        self.start_ms[rid] = self.env.now
        self.proc[rid] = p
        return p.run_times[m].run_ms(rid)

    def end(self, rid: int, p: SimProcessor, ms: float) -> None:
        now = self.env.now
        p.running.remove(rid)
        p.busy_ms += ms
        p.n_runs += 1
        self.est.update(self.mname[rid], p.name, ms)
        self.end_ms[rid] = now
        self.status[rid] = 0 if now <= self.deadline[rid] else 1
        self.done.append(rid)

    def drop(self, rid: int, reason: str) -> None:
        if math.isnan(self.ready_ms[rid]):
            self.ready_ms[rid] = self.env.now
        self.status[rid] = 2
        self.reasons[rid] = reason
        self.done.append(rid)
        for c in self.children.get(rid, ()):
            self.drop(c, f"upstream request {self.wl.key(rid)!r} was dropped")

    def run(self) -> None:
        self.env.run()

    def outcome(self) -> Outcome:
        """Every request's terminal state as arrays (ours builds its Outcome inside the timed run too)."""
        wl = self.wl
        order = np.array(self.done, np.int64)
        self.out = Outcome(list(wl.models), [p.name for p in self.procs], order, wl.model[order],
                           wl.frame[order], np.array(self.status, np.int8)[order], np.array(self.ready_ms)[order],
                           np.array(self.start_ms)[order], np.array(self.end_ms)[order],
                           (wl.t_ms + wl.slo_ms)[order],
                           np.array([-1 if p is None else p.index for p in self.proc], np.int32)[order],
                           self.reasons)
        return self.out

    def summary(self) -> dict:
        procs = [(p.name, p.kind, p.slots, p.busy_ms, p.n_runs) for p in self.procs]
        return summarize(self.out, procs, self.env.now)


class SimpyTextbook(_SimpyBase):
    """SimPy's idiom: a process per request, a ``simpy.Resource`` per processor."""

    def __init__(self, *args, **kwargs) -> None:
        self.placed: dict[int, simpy.Event] = {}
        super().__init__(*args, **kwargs)
        self.res = {p.name: simpy.Resource(self.env, capacity=p.slots) for p in self.procs}

    def source(self, times: list[float], groups: list[list[int]]):
        env = self.env
        for t, ids in zip(times, groups):
            yield env.timeout(_delay_to(env.now, t))
            for rid in ids:
                env.process(self.request(rid))

    def request(self, rid: int):
        env = self.env
        placed = self.placed[rid] = env.event()
        self.ready(rid)
        p = yield placed
        if p is None:
            return
        with self.res[p.name].request() as slot:
            yield slot
            ms = self.begin(rid, p)
            yield env.timeout(ms)
            self.end(rid, p, ms)
        for c in self.children.get(rid, ()):   # cascade stages: pending before the decision of this instant
            env.process(self.request(c))
        self.want_decision()

    def place(self, rid: int, p: SimProcessor) -> None:
        self.placed.pop(rid).succeed(p)

    def drop(self, rid: int, reason: str) -> None:
        ev = self.placed.pop(rid, None)
        if ev is not None:
            ev.succeed(None)
        super().drop(rid, reason)


class SimpyLean(_SimpyBase):
    """Hand-tuned SimPy: stream processes and one worker process per slot on a ``simpy.Store``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.store = {}
        for p in self.procs:
            self.store[p.name] = simpy.Store(self.env)
            for _ in range(p.slots):
                self.env.process(self.worker(p))

    def source(self, times: list[float], groups: list[list[int]]):
        env = self.env
        for t, ids in zip(times, groups):
            yield env.timeout(_delay_to(env.now, t))
            for rid in ids:
                self.ready(rid)

    def worker(self, p: SimProcessor):
        env = self.env
        store = self.store[p.name]
        while True:
            rid = yield store.get()
            ms = self.begin(rid, p)
            yield env.timeout(ms)
            self.end(rid, p, ms)
            for c in self.children.get(rid, ()):   # cascade stages: pending before this instant's decision
                self.ready(c)
            self.want_decision()

    def place(self, rid: int, p: SimProcessor) -> None:
        self.store[p.name].put(rid)


def _run_side(name: str, device: str, scheduler: str, duration_s: float, seed: int, instrument: bool = False
              ) -> tuple[dict, float, TimedPolicy | None]:
    """One timed run of one side: (figures, wall seconds, the timed policy when ``instrument``)."""
    if name == "ours":
        pol = TimedPolicy(make_policy(scheduler)) if instrument else make_policy(scheduler)
        gc.disable()   # as `edgert simulate` runs it (and the SimPy sides below)
        try:
            t0 = time.perf_counter()
            res = run_simulation(SimConfig(scenario="ar_assistant", profile=device, scheduler=pol, duration_s=duration_s,
                                           seed=seed, thermal=False))   # the SimPy models have no heat
            t = time.perf_counter() - t0
        finally:
            gc.enable()
        s = res.summary()
    else:
        cls = SimpyTextbook if name == "simpy-textbook" else SimpyLean
        gc.disable()   # the same treatment `edgert simulate` gives a run
        try:
            t0 = time.perf_counter()
            m = cls("ar_assistant", device, scheduler, duration_s, seed, instrument=instrument)
            m.run()
            m.outcome()   # as run_simulation returns ours: per-request arrays built in the timed region
            t = time.perf_counter() - t0
        finally:
            gc.enable()
        s = m.summary()
        pol = m.policy
    gc.collect()
    return {k: s[k] for k in KEYS}, t, pol if instrument else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=3600.0, help="simulated seconds (default: one hour)")
    ap.add_argument("--scheduler", default="fixed_worker", help="any registered policy (default: fixed_worker)")
    ap.add_argument("--device", default="galaxy-s23")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="alternate the sides this many times")
    args = ap.parse_args(argv)
    print(f"ar_assistant on {args.device}, scheduler {args.scheduler}, {args.duration:.0f} simulated s, "
          f"seed {args.seed}; wall-clock seconds include building the workload")
    sides = ("ours", "simpy-textbook", "simpy-lean")
    rates: dict[str, list[float]] = {k: [] for k in sides}
    walls: dict[str, list[float]] = {k: [] for k in sides}
    spent: dict[str, float] = {}
    for name in sides:   # warm-up (untimed): the first run in a process pays for growing the heap
        _run_side(name, args.device, args.scheduler, min(args.duration, 300.0), args.seed)
    for i in range(args.repeat):
        order = sides if i % 2 == 0 else sides[::-1]   # alternate who goes first
        figs = {name: _run_side(name, args.device, args.scheduler, args.duration, args.seed) for name in order}
        print(f"run {i + 1} (order: {', '.join(order)}):")
        for name in sides:
            f, t, _ = figs[name]
            n = f["requests"]
            rates[name].append(n / t)
            walls[name].append(t)
            print(f"  {name:15s} {t:7.2f} s  {n / t:9.0f} req/s   {f}")
    print("one more run per side with the policy wrapped in TimedPolicy (time inside decide):")
    for name in sides:
        f, t, p = _run_side(name, args.device, args.scheduler, args.duration, args.seed, instrument=True)
        assert p is not None
        spent[name] = p.spent_s
        eng = statistics.median(walls[name]) - p.spent_s
        print(f"  {name:15s} {p.calls} decisions, {p.spent_s:5.2f} s inside decide; engine alone (median wall "
              f"minus that) {eng:5.2f} s, {f['requests'] / eng:9.0f} req/s")
    med = {k: statistics.median(v) for k, v in rates.items()}
    eng = {k: statistics.median(walls[k]) - spent[k] for k in sides}
    for name in ("simpy-textbook", "simpy-lean"):
        print(f"ratio ours / {name}: {med['ours'] / med[name]:.2f}x end to end; {eng[name] / eng['ours']:.2f}x "
              f"for the engine alone (time inside the shared policy's decide taken out); "
              f"medians over {args.repeat} run(s)")
    print("bar: >= 5x end to end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
