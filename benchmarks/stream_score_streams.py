"""Why edgert trails Band's best in some cells of the XRBench grid: per model, who serves what.

For every cell of ``benchmarks/stream_score.py``'s grid where edgert (policy and stream controller, priorities
declared) and edgert's policy alone are both below the best of Band's five, this runs the three again and
prints, per model, its share of frames served on time and its part of XRBench's score, the model declared
critical marked. XRBench weighs every model the same and, in its code, weighs a model's drop rate twice (its
part is about the square of its served share), so a scheduler that gives up one model whole and serves the
rest scores more than one that serves each a little less: the table shows which model Band's winner gave up.

Usage::

    python benchmarks/stream_score_streams.py [--profiles ...] [--scenarios ...] [--factors 1.5 2 3 4]
                                              [--duration 4] [--jobs 2] [--starved 0.5] [--out FILE.md]

``--starved``: below this on-time share (0..1) the critical model counts as given up.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import stream_score as grid  # noqa: E402
from scheduler.sim import Burst, SimConfig, run_simulation  # noqa: E402

#: the status of a request done on time (its code in scheduler.timeline.STATUSES)
OK_STATUS = 0
SHORT = {"fixed_worker": "FW", "round_robin": "RR", "shortest_expected_latency": "SEL",
         "heterogeneous_earliest_finish_time": "HEFT", "least_slack_time_first": "LST"}


def per_model(cfg: SimConfig) -> tuple[float, dict[str, float]]:
    """XRBench's score of one run, and per model its share of requests done on time (0..1)."""
    res = run_simulation(cfg)
    out = res.outcome
    codes = out.model.astype(np.int64)
    shares = {}
    for i, name in enumerate(out.models):
        mine = codes == i
        n = int(mine.sum())
        if n:
            shares[name] = float((out.status[mine] == OK_STATUS).sum()) / n
    return res.summary()["xrbench"]["score"], shares


def systems(profile: str, scenario: str, users: float, duration: float, seed: int) -> dict[str, SimConfig]:
    """The runs of one cell, as ``stream_score.cell`` makes them: edgert, its policy alone, Band's five."""
    burst = Burst(0.0, duration, users) if users > 1 else None
    base = {"scenario": scenario, "profile": profile, "duration_s": duration, "seed": seed}
    cfgs = {"edgert": SimConfig(**base, load=users, priorities=grid.PRIORITIES[scenario]),
            "policy": SimConfig(**base, burst=burst)}
    for name in grid.BAND:
        cfgs[name] = SimConfig(**base, scheduler=name, burst=burst)
    return cfgs


def cells(job: tuple[str, str, list[float], float, int]) -> list[dict]:
    """One profile and scenario: each load's cell where edgert and its policy alone are both below Band's best,
    with per model shares of edgert, the policy and Band's winner."""
    profile, scenario, factors, duration, seed = job
    gc.disable()   # a benchmark's own process (as stream_score.py)
    srv = grid.served(profile, scenario, duration, seed)
    rows = []
    for x in factors:
        users = round(srv * x, 2)
        runs = {k: per_model(c) for k, c in systems(profile, scenario, users, duration, seed).items()}
        winner = max(grid.BAND, key=lambda b: runs[b][0])
        best = runs[winner][0]
        if runs["edgert"][0] < best and runs["policy"][0] < best:
            rows.append({"profile": profile, "scenario": scenario, "x": x, "users": users, "winner": winner,
                         "scores": {k: runs[k][0] for k in ("edgert", "policy", winner)},
                         "shares": {k: runs[k][1] for k in ("edgert", "policy", winner)}})
        gc.collect()
    return rows


def critical_of(scenario: str) -> str:
    """The model declared critical in ``scenario`` (stream_score.PRIORITIES)."""
    return next(m for m, level in grid.PRIORITIES[scenario].items() if level == "critical")


def lines_of(row: dict, starved: float) -> tuple[list[str], bool]:
    """A cell's Markdown lines (per model: on-time share of edgert / policy / winner) and whether the winner gave
    up the critical model (served it under ``starved`` on time, and less than edgert did)."""
    crit = critical_of(row["scenario"])
    w = row["winner"]
    sh = row["shares"]
    sc = row["scores"]
    gave_up = sh[w][crit] < min(starved, sh["edgert"][crit])
    head = (f"| {row['profile']} {row['scenario']} {row['x']:g}x | {sc['edgert']:.1f} | {sc['policy']:.1f} | "
            f"{SHORT[w]} {sc[w]:.1f} | ")
    models = " · ".join(f"{'**' if m == crit else ''}{m}{'**' if m == crit else ''} "
                        f"{100 * sh['edgert'][m]:.0f}/{100 * sh['policy'][m]:.0f}/{100 * sh[w][m]:.0f}"
                        for m in sh["edgert"])
    return [head + models + f" | {100 * sh[w][crit]:.0f} % vs {100 * sh['edgert'][crit]:.0f} % |"], gave_up


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", nargs="+", default=list(grid.PROFILES))
    ap.add_argument("--scenarios", nargs="+", default=["ar_gaming", "vr_gaming", "ar_assistant", "social_a",
                                                       "outdoor_a"])
    ap.add_argument("--factors", nargs="+", type=float, default=[1.5, 2.0, 3.0, 4.0])
    ap.add_argument("--duration", type=float, default=4.0, help="simulated seconds per run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="processes, each one profile and scenario at a time")
    ap.add_argument("--starved", type=float, default=0.5, help="the critical model's on-time share under which it "
                    "counts as given up (0..1)")
    ap.add_argument("--out", type=Path, default=None, help="write the table as Markdown here")
    args = ap.parse_args()
    t0 = time.perf_counter()
    jobs = [(p, s, args.factors, args.duration, args.seed) for p in args.profiles for s in args.scenarios]
    with Pool(args.jobs) as pool:
        rows = [r for part in pool.imap(cells, jobs) for r in part]
    table = ["| cell | edgert | policy | Band's winner | on time %, edgert/policy/winner (critical in bold) | "
             "critical on time: winner vs edgert |", "|---|---|---|---|---|---|"]
    gave_up = 0
    for row in rows:
        lines, g = lines_of(row, args.starved)
        table += lines
        gave_up += g
    summary = (f"{len(rows)} cells where edgert and its policy alone are both below Band's best; in {gave_up} of "
               f"them Band's winner serves the critical model under {args.starved:.0%} of its frames on time and "
               f"less than edgert does ({time.perf_counter() - t0:.0f} s wall)")
    print("\n".join(table + ["", summary]))
    if args.out is not None:
        command = " ".join(["python benchmarks/stream_score_streams.py", *sys.argv[1:]])
        args.out.write_text("\n".join(["# Per model, where edgert trails Band's best "
                                       "(benchmarks/stream_score_streams.py)", "", f"`{command}`", ""]
                                      + table + ["", summary, ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
