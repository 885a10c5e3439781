"""XRBench's score under overload: edgert's default (its policy and the stream controller, priorities declared)
vs each of Band's five schedulers as Band runs them (no stream controller, each with its own dropping rules).

Every cell is simulated (deterministic: one seed, one result). A cell is a shipped device profile, an XRBench
scenario and a load: ``users`` copies of the scenario's streams, phase-shifted (``edgert simulate --load X``
with streams), where the load factor is relative to what the device serves: ``served`` is the most users
(whole) whose frames edgert's policy, open-loop, runs with at least :data:`SERVED_MET` of them on time. Band's
schedulers run the very same requests (the users as a :class:`scheduler.sim.Burst` over the whole run, no
controller). A frame the controller does not take is a dropped frame in the score, as XRBench counts a frame
not processed (its requests end ``dropped``); a frame at a lower rung is due at its period there.

Usage::

    python benchmarks/stream_score.py [--profiles ...] [--scenarios ...] [--factors 1.5 2 3 4] [--duration 10]
                                      [--jobs 2] [--out benchmarks/results/stream_score.md]

Prints, per cell, edgert's score, each Band scheduler's, and edgert over the best of them; then the geomean.
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import time
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduler.sim import Burst, SimConfig, run_simulation  # noqa: E402

PROFILES = ("galaxy-s23", "xr2-gen2", "pixel4")
SCENARIOS = ("ar_gaming", "vr_gaming", "ar_assistant", "social_a", "social_b", "outdoor_a", "outdoor_b")
BAND = ("fixed_worker", "round_robin", "shortest_expected_latency", "heterogeneous_earliest_finish_time",
        "least_slack_time_first")
#: the levels an app would declare: what the user sees and acts with is critical, what can wait is low
PRIORITIES: dict[str, dict[str, str]] = {
    "ar_gaming": {"hand_tracking": "critical", "plane_detection": "low"},
    "vr_gaming": {"eye_segmentation": "critical"},
    "ar_assistant": {"depth_estimation": "critical", "plane_detection": "low", "semantic_segmentation": "low"},
    "social_a": {"eye_segmentation": "critical", "depth_refinement": "low"},
    "social_b": {"eye_segmentation": "critical", "action_segmentation": "low"},
    "outdoor_a": {"object_detection": "critical", "semantic_segmentation": "low"},
    "outdoor_b": {"object_detection": "critical"},
}
#: the on-time share a device serves a user count with
SERVED_MET = 0.95
MAX_USERS = 16


def _run(cfg: SimConfig) -> dict:
    return run_simulation(cfg).summary()


def served(profile: str, scenario: str, duration: float, seed: int) -> int:
    """The most users (whole) whose requests edgert's policy, open-loop, meets SERVED_MET of the deadlines of."""
    best = 1
    for users in range(1, MAX_USERS + 1):
        burst = Burst(0.0, duration, float(users)) if users > 1 else None
        s = _run(SimConfig(scenario=scenario, profile=profile, duration_s=duration, burst=burst, seed=seed))
        if s["slo_met_rate"] < SERVED_MET:
            break
        best = users
    return best


def cell(profile: str, scenario: str, users: float, duration: float, seed: int) -> dict[str, float]:
    """XRBench's score of edgert (with the stream controller) and of each Band scheduler (without) in one cell."""
    out = {}
    s = _run(SimConfig(scenario=scenario, profile=profile, duration_s=duration, load=users, seed=seed,
                       priorities=PRIORITIES[scenario]))
    out["edgert"] = s["xrbench"]["score"]
    burst = Burst(0.0, duration, users) if users > 1 else None
    alone = _run(SimConfig(scenario=scenario, profile=profile, duration_s=duration, burst=burst, seed=seed))
    out["policy"] = alone["xrbench"]["score"]   # edgert's policy alone, no stream controller (not in the ratio)
    for name in BAND:
        b = _run(SimConfig(scenario=scenario, profile=profile, duration_s=duration, scheduler=name, burst=burst,
                           seed=seed))
        out[name] = b["xrbench"]["score"]
    return out


def _rows(job: tuple[str, str, list[float], float, int]) -> list[tuple]:
    """One profile and scenario: what the device serves, then each load's cell (a worker's whole job)."""
    profile, scenario, factors, duration, seed = job
    gc.disable()   # a benchmark's own process: the simulator allocates much and frees little until a run's end
    srv = served(profile, scenario, duration, seed)
    rows = []
    for x in factors:
        users = round(srv * x, 2)
        sc = cell(profile, scenario, users, duration, seed)
        best = max(sc[b] for b in BAND)
        rows.append((profile, scenario, srv, x, users, sc, sc["edgert"] / best if best > 0 else math.inf))
        gc.collect()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", nargs="+", default=list(PROFILES))
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    ap.add_argument("--factors", nargs="+", type=float, default=[1.5, 2.0, 3.0, 4.0])
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds per run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="processes, each one profile and scenario at a time")
    ap.add_argument("--out", type=Path, default=None, help="write the table as Markdown here")
    args = ap.parse_args()
    t0 = time.perf_counter()
    short = {"fixed_worker": "FW", "round_robin": "RR", "shortest_expected_latency": "SEL",
             "heterogeneous_earliest_finish_time": "HEFT", "least_slack_time_first": "LST"}
    head = (f"{'profile':11} {'scenario':13} {'srv':>3} {'x':>4} {'users':>5} {'edgert':>7} {'policy':>6} "
            + " ".join(f"{short[b]:>6}" for b in BAND) + f" {'ratio':>6}")
    print(head)
    jobs = [(p, s, args.factors, args.duration, args.seed) for p in args.profiles for s in args.scenarios]
    rows = []
    with Pool(args.jobs) if args.jobs > 1 else _Serial() as pool:
        for part in pool.imap(_rows, jobs):   # in order: the table reads as a serial run prints it
            for profile, scenario, srv, x, users, sc, ratio in part:
                print(f"{profile:11} {scenario:13} {srv:>3} {x:>4g} {users:>5g} {sc['edgert']:>7.1f} "
                      f"{sc['policy']:>6.1f} " + " ".join(f"{sc[b]:>6.1f}" for b in BAND) + f" {ratio:>6.2f}",
                      flush=True)
            rows += part
    finite = [r[6] for r in rows if math.isfinite(r[6]) and r[6] > 0]
    geo = math.exp(sum(math.log(r) for r in finite) / len(finite)) if finite else math.nan
    wins = sum(r[6] >= 1.0 for r in rows)
    summary = (f"edgert >= the best of Band's five in {wins} of {len(rows)} cells; geomean of edgert / best "
               f"{geo:.2f}x ({time.perf_counter() - t0:.0f} s wall)")
    print(summary)
    if args.out is not None:
        lines = ["# XRBench's score under overload: edgert (policy + stream controller) vs Band's five "
                 "(benchmarks/stream_score.py)", "",
                 f"`python benchmarks/stream_score.py --factors {' '.join(f'{x:g}' for x in args.factors)} "
                 f"--duration {args.duration:g}"
                 + ("" if args.scenarios == list(SCENARIOS) else f" --scenarios {' '.join(args.scenarios)}")
                 + ("" if args.profiles == list(PROFILES) else f" --profiles {' '.join(args.profiles)}")
                 + f" --jobs {args.jobs}`", "",
                 f"Simulated, seed {args.seed}, {args.duration:g} s per run. `srv`: the most users edgert's policy "
                 f"serves open-loop with {SERVED_MET:.0%} on time; users = srv x load. Priorities declared: "
                 + "; ".join(f"{s}: " + ", ".join(f"{k}={v}" for k, v in p.items()) for s, p in PRIORITIES.items()
                             if s in args.scenarios) + ".", "",
                 "`policy`: edgert's policy alone on the same requests, no stream controller (not in the ratio).", "",
                 "| profile | scenario | srv | load | users | edgert | policy | " + " | ".join(short[b] for b in BAND)
                 + " | edgert / best |", "|" + "---|" * (8 + len(BAND))]
        for profile, scenario, srv, x, users, sc, ratio in rows:
            lines.append(f"| {profile} | {scenario} | {srv} | {x:g} | {users:g} | {sc['edgert']:.1f} | {sc['policy']:.1f} | "
                         + " | ".join(f"{sc[b]:.1f}" for b in BAND) + f" | {ratio:.2f} |")
        lines += ["", summary, ""]
        args.out.write_text("\n".join(lines))
        print(f"wrote {args.out}")
    return 0


class _Serial:
    """``Pool``'s ``imap`` in this process (``--jobs 1``)."""

    def __enter__(self) -> _Serial:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def imap(self, fn, items):   # type: ignore[no-untyped-def]
        return map(fn, items)


if __name__ == "__main__":
    raise SystemExit(main())
