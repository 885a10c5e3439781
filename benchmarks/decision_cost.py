"""Decision cost: µs per ``decide()`` with 10 pending requests and 5 processors, every policy.

Bar (issue 5): the default policy decides in <= 20 µs, since policies run on
the live dispatch path. The snapshot is a realistic mid-burst state: 10
pending XR requests (5 models, 3 frames of some streams, one cascade stage,
deadlines 16.7–333 ms), 5 processors (cpu, gpu, dsp, npu, cloud) of which
three are busy, the real LatencyEstimator. Several snapshot variants (which
processors are busy, ``now``) are cycled so no single code path is measured.

Each policy: ``repeat`` rounds of ``number`` calls, report the best round
(least disturbed by other processes) and the median round, in µs per call.

edgert's overload plan solves a small LP (~0.3-0.6 ms) only when the demand
it plans for moved: a stream started, stopped or changed its rate by more
than 5 % (checked in O(1) per decision, at most every 50 ms of driver time),
so the fixed snapshots above never trigger it; ``--in-sim`` therefore also
times every decide() call of a real simulated overload run (pixel4 social_a,
load 3 with the 3x burst), re-plans included, and reports the mean, p99 and
max, and how many of the calls solved the LP.

``--profile galaxy-s23 --objective balanced`` gives edgert that profile's energy figures and objective
(issue 19's bar: <= 20 µs with the energy objective too; the live runtime without a profile has none).

    python benchmarks/decision_cost.py [--number 20000] [--repeat 7] [--in-sim] [--profile P --objective O]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed

from scheduler.estimator import LatencyEstimator  # noqa: E402
from scheduler.registry import DEFAULT_POLICY, make_policy, policy_names  # noqa: E402
from scheduler.types import ProcessorView, RequestView, SchedulerView  # noqa: E402

BAR_US = 20.0

LAT = {  # ms, galaxy-s23-like (cloud = RTT + transfer + server)
    "hand_tracking": {"cpu": 9.5, "gpu": 4.8, "dsp": 5.1, "npu": 1.75, "cloud": 25.2},
    "eye_segmentation": {"cpu": 1.67, "gpu": 0.84, "dsp": 0.9, "npu": 0.31, "cloud": 24.7},
    "gaze_estimation": {"cpu": 4.68, "gpu": 2.37, "dsp": 2.5, "npu": 0.86, "cloud": 21.3},
    "depth_estimation": {"cpu": 11.5, "gpu": 8.0, "dsp": 9.0, "npu": 3.29, "cloud": 26.8},
    "plane_detection": {"cpu": 14.5, "gpu": 8.0, "dsp": 9.5, "npu": 4.13, "cloud": 44.1},
}
#: (model, arrival offset ms, slo ms, stream, frame, downstream ms)
PENDING = [
    ("hand_tracking", -6.0, 22.2, "hand_tracking", 41, 0.0),
    ("eye_segmentation", -4.0, 16.7, "eye_segmentation", 60, 0.86),
    ("depth_estimation", -9.0, 33.3, "depth_estimation", 27, 0.0),
    ("plane_detection", -20.0, 66.7, "plane_detection", 13, 0.0),
    ("hand_tracking", -1.0, 22.2, "hand_tracking", 42, 0.0),
    ("gaze_estimation", -3.0, 16.7, "gaze_estimation", 59, 0.0),
    ("eye_segmentation", -0.5, 16.7, "eye_segmentation", 61, 0.86),
    ("depth_estimation", -2.0, 33.3, "depth_estimation", 28, 0.0),
    ("plane_detection", -5.0, 66.7, "plane_detection", 14, 0.0),
    ("hand_tracking", 0.0, 22.2, "hand_tracking#b1", 42, 0.0),
]


def snapshots(now: float = 1000.0) -> list[tuple[SchedulerView, float]]:
    """A few 10-pending / 5-processor snapshots that differ in which processors are busy."""
    est = LatencyEstimator(seed=LAT)
    pending = tuple(RequestView(i, m, now + dt, now + dt + slo, s, f, ds)
                    for i, (m, dt, slo, s, f, ds) in enumerate(PENDING))
    out = []
    for busy in (("gpu", "npu", "cloud"), ("cpu", "npu", "dsp"), ("npu",), ("cpu", "gpu", "dsp", "npu")):
        procs = tuple(ProcessorView(k, k, now + (3.0 if k in busy else -1.0), 0.0, 0) for k in LAT["hand_tracking"])
        assert len(procs) == 5 and len(pending) == 10
        out.append((SchedulerView(pending, procs, est), now))
    return out


def measure(name: str, number: int, repeat: int, **energy: Any) -> tuple[float, float]:
    """(best, median) µs per decide() over ``repeat`` rounds of ``number`` calls; ``energy``: the
    ``profile`` / ``objective`` make_policy gives an energy-aware policy."""
    policy = make_policy(name, **energy) if getattr(make_policy(name), "energy_aware", False) else make_policy(name)
    snaps = snapshots()
    k = len(snaps)
    decide = policy.decide
    rounds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for i in range(number):
            v, now = snaps[i % k]
            decide(v, now)
        rounds.append((time.perf_counter() - t0) / number * 1e6)
    return min(rounds), statistics.median(rounds)


def in_sim(name: str) -> tuple[int, float, float, float, int | None]:
    """(decisions, mean, p99, max µs, LP solves or None) of every decide() in a simulated pixel4 social_a
    x3 +burst run."""
    from scheduler.sim import Burst, SimConfig, run_simulation

    policy = make_policy(name)
    inner = policy.decide
    times: list[float] = []
    clock = time.perf_counter

    class Timed:
        """A test double around the real policy that times each call (the simulator accepts any policy)."""

        def __init__(self) -> None:
            self.name = name

        def decide(self, view, now):   # noqa: ANN001
            t0 = clock()
            out = inner(view, now)
            times.append(clock() - t0)
            return out

    run_simulation(SimConfig(scenario="social_a", profile="pixel4", scheduler=Timed(), load=3.0, duration_s=10.0,
                             seed=0, burst=Burst(4.0, 2.0, 3.0)))
    times.sort()
    n = len(times)
    plan = getattr(policy, "plan", None)
    return (n, sum(times) / n * 1e6, times[int(0.99 * (n - 1))] * 1e6, times[-1] * 1e6,
            getattr(plan, "replans", None))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=20000, help="calls per round")
    ap.add_argument("--repeat", type=int, default=7, help="rounds; the best and the median are reported")
    ap.add_argument("--in-sim", action="store_true", help="also time decide() inside a simulated overload run")
    ap.add_argument("--profile", help="give edgert this shipped profile's energy figures (e.g. galaxy-s23)")
    ap.add_argument("--objective", choices=("deadlines", "balanced", "energy"), help="edgert's objective")
    args = ap.parse_args(argv)
    energy: dict[str, Any] = {}
    if args.profile:
        from scheduler.sim.profiles import load_profile

        energy["profile"] = load_profile(args.profile)
    if args.objective:
        energy["objective"] = args.objective
    print(f"decide() cost, 10 pending x 5 processors; {args.repeat} rounds of {args.number} calls "
          f"(python {sys.version.split()[0]})" + (f"; edgert with {args.profile}'s energy figures, objective "
                                                  f"{args.objective or 'its default'}" if args.profile else ""))
    print(f"{'policy':<36} {'best µs':>8} {'median µs':>10}")
    ok = True
    for name in [DEFAULT_POLICY] + [n for n in policy_names() if n != DEFAULT_POLICY]:
        best, med = measure(name, args.number, args.repeat, **energy)
        print(f"{name:<36} {best:>8.2f} {med:>10.2f}")
        if name == DEFAULT_POLICY:
            ok = best <= BAR_US
            verdict = (f"bar: {DEFAULT_POLICY} <= {BAR_US:.0f} µs per decision (best round): "
                       f"{'PASS' if ok else 'FAIL'} ({best:.2f} µs)")
    print(verdict)
    if args.in_sim:
        print("\ninside a simulated run (pixel4 social_a x3 +burst, 10 s), every decide() timed:")
        print(f"{'policy':<36} {'calls':>7} {'mean µs':>8} {'p99 µs':>8} {'max µs':>8} {'LP solves':>9}")
        for name in (DEFAULT_POLICY, "least_slack_time_first"):
            n, mean, p99, mx, lp = in_sim(name)
            print(f"{name:<36} {n:>7} {mean:>8.2f} {p99:>8.2f} {mx:>8.0f} {'-' if lp is None else lp:>9}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
