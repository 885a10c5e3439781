"""The stream controller's constants, tried in the simulator: the three shipped device profiles x three XRBench
scenarios x loads of 1x to 4x what each device serves, priorities declared.

Each candidate sets constants of :mod:`scheduler.streams` in a worker process of its own (the controller reads
them at each decision) and runs every cell there; a cell's figures are XRBench's score, the on-time share of
its critical streams and the mean on-time share of its streams. Deterministic: one seed, one result.

The grid with the shipped constants is also an ``edgert sweep`` grid (``--write-grid`` writes it: the sweep's
``streams`` and ``priority`` keys), so the shipped cells can be re-run by the sweep itself; the constants
are not a sweep key (they are the controller's, not a run's), hence this harness for the candidates.

Usage::

    python benchmarks/stream_tuning.py [--duration 10] [--jobs 2] [--out benchmarks/results/stream_tuning.md]
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from stream_score import PRIORITIES, served  # noqa: E402

PROFILES = ("galaxy-s23", "xr2-gen2", "pixel4")
SCENARIOS = ("ar_gaming", "vr_gaming", "ar_assistant")
FACTORS = (1.0, 2.0, 3.0, 4.0)
#: candidates: the shipped constants first, then one or two changed at a time
CANDIDATES: tuple[dict[str, float], ...] = (
    {},
    {"ADMIT_UTIL_MAX": 0.85},
    {"ADMIT_UTIL_MAX": 0.95},
    {"ADMIT_UTIL_MAX": 0.95, "UP_BUSY_MAX": 0.9},
    {"DOWN_MISS": 0.3},
)

def _label(c: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in c.items()) or "shipped"


def _cell(args: tuple[dict[str, float], str, str, float, float, int, bool]) -> tuple[float, float, float]:
    """(XRBench score, critical streams' on-time share, mean on-time share) of one cell under ``constants``."""
    constants, profile, scenario, users, duration, seed, offload = args
    import scheduler.streams as controller  # noqa: PLC0415

    for k, v in constants.items():
        if not hasattr(controller, k):
            raise SystemExit(f"scheduler.streams has no constant {k}")
        setattr(controller, k, v)
    from scheduler.sim import SimConfig, run_simulation  # noqa: PLC0415

    gc.disable()
    s = run_simulation(SimConfig(scenario=scenario, profile=profile, duration_s=duration, load=users, seed=seed,
                                 priorities=PRIORITIES[scenario], offload=offload)).summary()
    gc.enable()
    per = s["per_stream"].values()
    on = [st["on_time"] / st["frames"] for st in per if st["frames"]]
    crit = [st["on_time"] / st["frames"] for st in per if st["frames"] and st["priority"] == "critical"]
    return s["xrbench"]["score"], statistics.fmean(crit) if crit else math.nan, statistics.fmean(on)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--offload", action="store_true", help="give the profiles' cloud to the policy (default: off)")
    ap.add_argument("--write-grid", type=Path, default=None, help="write the shipped grid as an edgert sweep TOML")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    gc.disable()
    srv = {(p, s): served(p, s, args.duration, args.seed) for p in PROFILES for s in SCENARIOS}
    gc.enable()
    cells = [(p, s, round(srv[p, s] * x, 2)) for p in PROFILES for s in SCENARIOS for x in FACTORS]
    if args.write_grid is not None:
        users = sorted({u for _, _, u in cells})
        args.write_grid.write_text(
            "# the stream controller's grid with the shipped constants (benchmarks/stream_tuning.py --write-grid)\n"
            f"scenario = {list(SCENARIOS)}\ndevice = {list(PROFILES)}\nload = {users}\nstreams = true\n"
            f"duration = {args.duration:g}\nseed = {args.seed}\n")
    results: dict[str, list[tuple[float, float, float]]] = {}
    for c in CANDIDATES:
        with ProcessPoolExecutor(args.jobs) as pool:   # fresh workers: each candidate's constants alone
            results[_label(c)] = list(pool.map(_cell, [(c, p, s, u, args.duration, args.seed, args.offload)
                                                                for p, s, u in cells]))
        r = results[_label(c)]
        print(f"{_label(c):40} score {statistics.fmean(x[0] for x in r):6.2f}  critical on time "
              f"{100 * statistics.fmean(x[1] for x in r):5.1f}%  mean on time {100 * statistics.fmean(x[2] for x in r):5.1f}%",
              flush=True)
    base = results["shipped"]
    lines = ["# The stream controller's constants in the simulator (benchmarks/stream_tuning.py)", "",
             f"`python benchmarks/stream_tuning.py --duration {args.duration:g}"
             + (" --offload" if args.offload else "") + "`", "",
             f"{len(cells)} cells: {', '.join(PROFILES)} x {', '.join(SCENARIOS)} x loads "
             f"{', '.join(f'{x:g}' for x in FACTORS)} x what the device serves (users: "
             + ", ".join(f"{p}/{s} {srv[p, s]}" for p, s in srv) + f"); seed {args.seed}, {args.duration:g} s a run, "
             f"cloud {'on' if args.offload else 'off'} (the users a device serves are counted with its cloud, as "
             "benchmarks/stream_score.py counts them). Priorities as benchmarks/stream_score.py declares them.", "",
             "| constants | XRBench score (mean) | cells better / worse than shipped | critical on time | "
             "mean on time |", "|---|---|---|---|---|"]
    for label, r in results.items():
        better = sum(a[0] > b[0] + 0.5 for a, b in zip(r, base))
        worse = sum(a[0] < b[0] - 0.5 for a, b in zip(r, base))
        lines.append(f"| {label} | {statistics.fmean(x[0] for x in r):.2f} | {better} / {worse} | "
                     f"{100 * statistics.fmean(x[1] for x in r):.1f}% | {100 * statistics.fmean(x[2] for x in r):.1f}% |")
    lines += ["", f"({time.perf_counter() - t0:.0f} s wall on a shared 2-core host)", ""]
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
