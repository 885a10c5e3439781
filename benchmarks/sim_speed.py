"""Simulator speed: our event kernel vs an equivalent SimPy model of the same system, in one run.

The system: the AR Assistant scenario (XRBench) on the galaxy-s23 profile for
one simulated hour (~250k requests); the same policy object deciding over the
same :class:`SchedulerView` snapshots under the same driver contract (one
decision per instant with arrivals or completions, "left unplaced" drops),
the same seeded latency draws, the same workload (``build_scenario``, built
inside each timed region). Two SimPy models are timed:

* ``simpy-textbook``: SimPy's own idiom (its bank / car-wash examples): a
  source process per stream, a process per request, each processor a
  ``simpy.Resource`` (one slot per server, FIFO); a request waits for the
  policy's placement event, then ``with res.request(): yield ...; yield
  env.timeout(latency)``.
* ``simpy-lean``: hand-tuned for speed: a source process per stream and one
  worker process per processor slot pulling a ``simpy.Store`` (no process per
  request).

Like ``run_simulation``, the SimPy runs are timed with the cyclic garbage
collector off. Both print the same figures as ours (requests, ok, late, dropped, p50, p99)
so the equivalence is visible; a tie of two events at one virtual instant can
be ordered differently by the two kernels, so tiny differences are possible.

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
from collections import deque
from pathlib import Path

import numpy as np
import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduler.estimator import LatencyEstimator  # noqa: E402
from scheduler.registry import make_policy  # noqa: E402
from scheduler.sim import SimConfig, build_scenario, load_profile, run_simulation  # noqa: E402
from scheduler.sim.driver import LEFT_UNPLACED  # noqa: E402
from scheduler.sim.metrics import summarize  # noqa: E402
from scheduler.types import ProcessorView, RequestView, SchedulerView  # noqa: E402

KEYS = ("requests", "ok", "late", "dropped", "p50_ms", "p99_ms")


class TimedPolicy:
    """Wraps a policy and adds up the wall time spent inside its ``decide`` (the same on every side)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.spent_s = 0.0
        self.calls = 0

    def decide(self, view, now_ms):
        t = time.perf_counter()
        out = self.inner.decide(view, now_ms)
        self.spent_s += time.perf_counter() - t
        self.calls += 1
        return out


class _SimpyBase:
    """What both SimPy models share: profile tables, estimator, policy, the driver contract."""

    def __init__(self, scenario: str, profile_name: str, scheduler: str, duration_s: float, seed: int,
                 noise: float = 0.1, cloud_slots: int = 4) -> None:
        self.env = env = simpy.Environment()
        prof = load_profile(profile_name)
        self.policy = TimedPolicy(make_policy(scheduler))
        self.wl = build_scenario(scenario, duration_s, 1.0, None, seed)
        self.procs: list[dict] = [{"name": p.name, "kind": p.kind, "slots": 1} for p in prof.processors]
        if prof.cloud is not None:
            self.procs.append({"name": "cloud", "kind": "cloud", "slots": cloud_slots})
        z = np.random.default_rng([seed, 4]).standard_normal(len(self.wl.all))
        fac = {s: np.exp(s * z - 0.5 * s * s).tolist() for s in {noise, max(noise, 0.2)}}
        self.lat: dict[tuple[str, str], tuple[float, float, list[float]]] = {}
        table: dict[str, dict[str, float]] = {}
        for model, row in prof.latency_ms.items():
            for pn, ms in row.items():
                self.lat[(model, pn)] = (ms, 0.0, fac[noise])
                table.setdefault(model, {})[pn] = ms
        if prof.cloud is not None:
            c = prof.cloud
            for model, server in c.latency_ms.items():
                total = c.expected_ms(model)
                self.lat[(model, "cloud")] = (c.rtt_ms + server, total - c.rtt_ms - server, fac[max(noise, 0.2)])
                table.setdefault(model, {})["cloud"] = total
        self.est = LatencyEstimator(0.1, table)
        best = {m: min(r.values()) for m, r in table.items()}

        def down(r):
            if r.children:
                r.downstream_ms = max(best[c.model] + down(c) for c in r.children)
            return r.downstream_ms

        for r in self.wl.roots:
            down(r)
        self.by_name = {p["name"]: p for p in self.procs}
        for p in self.procs:
            p.update(queued=deque(), queued_ms=0.0, running=0, exp_ends=[], busy_ms=0.0, runs=0)
        self.cands = {m: [self.by_name[pn] for pn in row] for m, row in table.items()}
        self.pending: dict[int, object] = {}
        self.done: list = []
        self.decide_due = False
        by_stream: dict[str, list] = {}
        for r in self.wl.roots:
            by_stream.setdefault(r.stream, []).append(r)
        for reqs in by_stream.values():
            env.process(self.source(reqs))

    def ready(self, r) -> None:
        r.ready_ms = self.env.now
        r.view = RequestView(r.id, r.model, r.ready_ms, r.deadline_ms, r.stream, r.frame, r.downstream_ms)
        self.pending[r.id] = r
        self.want_decision()

    def want_decision(self) -> None:
        """One decision per instant, after the events already due at this instant (a zero timeout)."""
        if not self.decide_due:
            self.decide_due = True
            self.env.timeout(0).callbacks.append(self._decide_cb)

    def _decide_cb(self, _ev) -> None:
        self.decide_due = False
        self.decide()

    def view_of(self, p: dict, now: float) -> ProcessorView:
        busy = now if p["running"] < p["slots"] else min(p["exp_ends"])
        return ProcessorView(p["name"], p["kind"], busy, p["queued_ms"] / p["slots"], len(p["queued"]), True)

    def decide(self) -> None:
        if not self.pending:
            return
        now = self.env.now
        view = SchedulerView(tuple(r.view for r in self.pending.values()),
                             tuple(self.view_of(p, now) for p in self.procs), self.est)
        for a in self.policy.decide(view, now):
            r = self.pending.pop(a.request_id)
            if a.processor is None:
                self.drop(r, a.reason)
                continue
            p = self.by_name[a.processor]
            r.exp_ms = self.est.expected_ms(r.model, a.processor)
            p["queued"].append(r)
            p["queued_ms"] += r.exp_ms
            self.place(r, p)
        for r in list(self.pending.values()):
            if all(not p["queued"] and p["running"] < p["slots"] for p in self.cands[r.model]):
                del self.pending[r.id]
                self.drop(r, LEFT_UNPLACED)

    def begin(self, r, p: dict) -> float:
        """Bookkeeping when ``r`` starts on ``p``; returns its simulated latency (ms)."""
        now = self.env.now
        p["running"] += 1
        p["queued"].remove(r)
        p["queued_ms"] = p["queued_ms"] - r.exp_ms if p["queued"] else 0.0
        mean, extra, fac = self.lat[(r.model, p["name"])]
        ms = mean * fac[r.id] + extra
        r.start_ms = now
        r.processor = p["name"]
        r.exp_ms = now + self.est.expected_ms(r.model, p["name"])
        p["exp_ends"].append(r.exp_ms)
        return ms

    def end(self, r, p: dict, ms: float) -> None:
        now = self.env.now
        p["running"] -= 1
        p["exp_ends"].remove(r.exp_ms)
        p["busy_ms"] += ms
        p["runs"] += 1
        self.est.update(r.model, p["name"], ms)
        r.end_ms = now
        r.status = "ok" if now <= r.deadline_ms else "late"
        self.done.append(r)

    def drop(self, r, reason: str) -> None:
        r.status, r.reason, r.end_ms = "dropped", reason, math.nan
        self.done.append(r)
        if r.children:
            for c in r.children:
                if c.fires:
                    self.drop(c, f"upstream request {r.key!r} was dropped")

    def run(self) -> None:
        self.env.run()

    def summary(self) -> dict:
        procs = [(p["name"], p["kind"], p["slots"], p["busy_ms"], p["runs"]) for p in self.procs]
        return summarize(self.done, procs, self.env.now)


class SimpyTextbook(_SimpyBase):
    """SimPy's idiom: a process per request, a ``simpy.Resource`` per processor."""

    def __init__(self, *args, **kwargs) -> None:
        self.placed: dict[int, simpy.Event] = {}
        super().__init__(*args, **kwargs)
        for p in self.procs:
            p["res"] = simpy.Resource(self.env, capacity=p["slots"])

    def source(self, reqs):
        env = self.env
        for r in reqs:
            yield env.timeout(r.t_ms - env.now)
            env.process(self.request(r))

    def request(self, r):
        env = self.env
        placed = self.placed[r.id] = env.event()
        self.ready(r)
        p = yield placed
        if p is None:
            return
        with p["res"].request() as slot:
            yield slot
            ms = self.begin(r, p)
            yield env.timeout(ms)
            self.end(r, p, ms)
        kids = [c for c in r.children if c.fires] if r.children else []
        if kids:
            self.decide()   # the completion is decided before its cascade stages arrive
            for c in kids:
                env.process(self.request(c))
        self.want_decision()

    def place(self, r, p: dict) -> None:
        self.placed.pop(r.id).succeed(p)

    def drop(self, r, reason: str) -> None:
        ev = self.placed.pop(r.id, None)
        if ev is not None:
            ev.succeed(None)
        super().drop(r, reason)


class SimpyLean(_SimpyBase):
    """Hand-tuned SimPy: stream processes and one worker process per slot on a ``simpy.Store``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for p in self.procs:
            p["store"] = simpy.Store(self.env)
            for _ in range(p["slots"]):
                self.env.process(self.worker(p))

    def source(self, reqs):
        env = self.env
        for r in reqs:
            yield env.timeout(r.t_ms - env.now)
            self.ready(r)

    def worker(self, p: dict):
        env = self.env
        store = p["store"]
        while True:
            r = yield store.get()
            ms = self.begin(r, p)
            yield env.timeout(ms)
            self.end(r, p, ms)
            kids = [c for c in r.children if c.fires] if r.children else []
            if kids:
                self.decide()   # the completion is decided before its cascade stages arrive
                for c in kids:
                    self.ready(c)
            self.want_decision()

    def place(self, r, p: dict) -> None:
        p["store"].put(r)


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
    rates: dict[str, list[float]] = {"ours": [], "simpy-textbook": [], "simpy-lean": []}
    engine: dict[str, list[float]] = {k: [] for k in rates}
    for i in range(args.repeat):
        pol = TimedPolicy(make_policy(args.scheduler))
        t0 = time.perf_counter()
        res = run_simulation(SimConfig(scenario="ar_assistant", profile=args.device, scheduler=pol,
                                       duration_s=args.duration, seed=args.seed))
        t = time.perf_counter() - t0
        figs = {"ours": ({k: res.summary()[k] for k in KEYS}, t, pol)}
        for name, cls in (("simpy-textbook", SimpyTextbook), ("simpy-lean", SimpyLean)):
            gc.disable()   # the same treatment run_simulation gives itself
            try:
                t0 = time.perf_counter()
                m = cls("ar_assistant", args.device, args.scheduler, args.duration, args.seed)
                m.run()
                t = time.perf_counter() - t0
            finally:
                gc.enable()
            gc.collect()
            s = m.summary()
            figs[name] = ({k: s[k] for k in KEYS}, t, m.policy)
        print(f"run {i + 1}:")
        for name, (f, t, p) in figs.items():
            n = f["requests"]
            rates[name].append(n / t)
            engine[name].append(n / (t - p.spent_s))
            print(f"  {name:15s} {t:7.2f} s  {n / t:9.0f} req/s  ({p.calls} decisions, {p.spent_s:5.2f} s inside "
                  f"decide; without it {n / (t - p.spent_s):9.0f} req/s)   {f}")
    med = {k: statistics.median(v) for k, v in rates.items()}
    eng = {k: statistics.median(v) for k, v in engine.items()}
    for name in ("simpy-textbook", "simpy-lean"):
        print(f"ratio ours / {name}: {med['ours'] / med[name]:.2f}x end to end; {eng['ours'] / eng[name]:.2f}x "
              f"for the engine alone (time inside the shared policy's decide taken out); "
              f"medians over {args.repeat} run(s)")
    print("bar: >= 5x end to end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
