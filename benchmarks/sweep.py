"""``edgert sweep`` on a grid of 32 ten-minute cells: processes, a Dask cluster, resuming, a bad grid.

Grid: 2 scenarios (ar_assistant, social_a) × 2 devices (galaxy-s23, xr2-gen2) × 2 schedulers
(edgert, fixed_worker) × 2 loads (1, 2) × 2 seeds (0, 1), 600 simulated seconds each. Every
run is the real command line (``python -m edgert.cli sweep``) in a subprocess, timed end to end.

Bars (issue 41), each printed PASS/FAIL:

1. ``--jobs 2`` at least 1.6x faster than ``--jobs 1`` (best of ``--rounds`` alternating runs);
2. identical figures (``wall_s`` aside) from ``--jobs 1``, ``--jobs 2`` and ``--cluster`` to a
   local Dask scheduler with two worker processes;
3. ``requests`` and ``ok`` of ``--check`` cells equal ``edgert simulate --json``'s;
4. a second run to the same output at least 5x faster than the first;
5. a grid with an unknown scheduler fails in under 2 s with one line naming it.

    python benchmarks/sweep.py [--duration 600] [--rounds 1] [--check 4] [--markdown benchmarks/results/sweep.md]
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GRID = """scenario = ["ar_assistant", "social_a"]
device = ["galaxy-s23", "xr2-gen2"]
scheduler = ["edgert", "fixed_worker"]
load = [1, 2]
seed = [0, 1]
duration = {duration}
"""
SPEEDUP_BAR, RESUME_BAR, BAD_GRID_S = 1.6, 5.0, 2.0


#: CPU seconds (user + system) of each finished ``sweep`` run, its worker processes included.
CPU_S: list[float] = []
#: Cores busy on average (CPU s / wall s) of each timed run, by --jobs.
BUSY: dict[int, list[float]] = {1: [], 2: []}
#: Per-run lines for the report (wall, CPU, cores busy: how much of the host the run got).
NOTES: list[str] = []


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def sweep(*argv: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run ``edgert sweep ARGV`` in a subprocess; (wall s, process); its CPU seconds go to :data:`CPU_S`."""
    c0, t0 = _children_cpu_s(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "edgert.cli", "sweep", *argv], capture_output=True, text=True,
                          timeout=3600)
    wall = time.perf_counter() - t0
    CPU_S.append(_children_cpu_s() - c0)
    return wall, proc


def figures(path: Path) -> list[dict[str, str]]:
    """The rows without ``wall_s`` (the one figure that differs between runs)."""
    with path.open(newline="") as fh:
        return [{k: v for k, v in r.items() if k != "wall_s"} for r in csv.DictReader(fh)]


def simulate_matches(rows: list[dict[str, str]], n: int, tmp: Path) -> list[str]:
    """``edgert simulate --json`` for ``n`` cells spread over the grid; mismatches as text (none: [])."""
    bad = []
    for r in rows[:: max(1, len(rows) // n)][:n]:
        js = tmp / "s.json"
        subprocess.run([sys.executable, "-m", "edgert.cli", "simulate", "--scenario", r["scenario"], "--device",
                        r["device"], "--scheduler", r["scheduler"], "--load", r["load"], "--seed", r["seed"],
                        "--duration", r["duration"], "--json", str(js)], capture_output=True, check=True, timeout=600)
        s = json.loads(js.read_text())
        for k in ("requests", "ok"):
            if str(s[k]) != r[k]:
                bad.append(f"{r['scenario']} {r['device']} {r['scheduler']} x{r['load']} seed {r['seed']}: "
                           f"{k} {r[k]} in the sweep, {s[k]} from simulate")
    return bad


def timed_pair(grid: Path, tmp: Path, rounds: int) -> tuple[list[float], list[float], Path, Path]:
    """``--jobs 1`` and ``--jobs 2`` alternating, each to a new output; walls and the last outputs."""
    one, two = [], []
    for k in range(rounds):
        for jobs, walls in ((1, one), (2, two)) if k % 2 == 0 else ((2, two), (1, one)):
            out = tmp / f"jobs{jobs}-{k}.csv"
            wall, proc = sweep(str(grid), "-o", str(out), "--jobs", str(jobs))
            if proc.returncode != 0:
                raise SystemExit(f"--jobs {jobs} failed: {proc.stderr}")
            walls.append(wall)
            BUSY[jobs].append(CPU_S[-1] / wall)
            NOTES.append(f"--jobs {jobs}: {wall:.1f} s wall, {CPU_S[-1]:.1f} s CPU ({CPU_S[-1] / wall:.2f} cores "
                         "busy on average)")
            print(NOTES[-1], flush=True)
    return one, two, tmp / f"jobs1-{rounds - 1}.csv", tmp / f"jobs2-{rounds - 1}.csv"


def on_dask(grid: Path, out: Path) -> tuple[float, str]:
    """The grid on a local Dask scheduler with two single-threaded worker processes."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1", silence_logs=logging.CRITICAL) as lc:   # no heartbeat noise at close
        wall, proc = sweep(str(grid), "-o", str(out), "--cluster", lc.scheduler_address)
    if proc.returncode != 0:
        raise SystemExit(f"--cluster failed: {proc.stderr}")
    return wall, proc.stdout.strip().splitlines()[-2]


def bad_grid(tmp: Path) -> tuple[float, int, list[str]]:
    p = tmp / "bad.toml"
    p.write_text('scenario = ["ar_assistant"]\ndevice = ["galaxy-s23"]\nscheduler = ["edgert", "round_robn"]\n')
    wall, proc = sweep(str(p), "-o", str(tmp / "bad.csv"))
    print(f"bad grid: {wall:.2f} s wall, {CPU_S[-1]:.2f} s CPU", flush=True)
    return wall, proc.returncode, proc.stderr.strip().splitlines()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=600.0, help="simulated seconds per cell (default 600)")
    ap.add_argument("--rounds", type=int, default=1, help="alternating --jobs 1 / --jobs 2 runs (best taken)")
    ap.add_argument("--check", type=int, default=4, help="cells checked against edgert simulate --json")
    ap.add_argument("--markdown", metavar="OUT.md", help="write the results as markdown")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        grid = tmp / "grid.toml"
        grid.write_text(GRID.format(duration=f"{args.duration:g}"))
        one, two, out1, out2 = timed_pair(grid, tmp, args.rounds)
        dask_wall, dask_line = on_dask(grid, tmp / "dask.csv")
        resume_wall, proc = sweep(str(grid), "-o", str(out1), "--jobs", "1")
        resume_cpu = CPU_S[-1]
        resumed = proc.returncode == 0 and "0 ran" in proc.stdout
        rows1 = figures(out1)
        same = rows1 == figures(out2) == figures(tmp / "dask.csv")
        mismatches = simulate_matches(rows1, args.check, tmp)
        bad_wall, bad_rc, bad_lines = bad_grid(tmp)
    speedup = min(one) / min(two)
    bars = [
        (f"1. --jobs 2 {speedup:.2f}x faster than --jobs 1 (>= {SPEEDUP_BAR})", speedup >= SPEEDUP_BAR),
        (f"2. identical figures from --jobs 1, --jobs 2 and --cluster (2 Dask workers): {len(rows1)} cells",
         same and len(rows1) == 32),
        (f"3. requests and ok equal edgert simulate --json's ({args.check} cells checked)", not mismatches),
        (f"4. a second run to the same output {min(one) / resume_wall:.1f}x faster than the first "
         f"(>= {RESUME_BAR})", resumed and min(one) / resume_wall >= RESUME_BAR),
        (f"5. unknown scheduler: exit {bad_rc} in {bad_wall:.2f} s (< {BAD_GRID_S}) with one line",
         bad_rc == 2 and bad_wall < BAD_GRID_S and len(bad_lines) == 1 and "round_robn" in bad_lines[0]),
    ]
    lines = [*NOTES,
             f"--cluster (local Dask, 2 worker processes): {dask_wall:.1f} s ({dask_line})",
             f"second run to the same output: {resume_wall:.2f} s wall, {resume_cpu:.2f} s CPU",
             f"bad grid: {bad_wall:.2f} s wall, {CPU_S[-1]:.2f} s CPU: {' | '.join(bad_lines)}",
             f"host: {os.cpu_count()} CPUs, load average {load0[0]:.2f} before, {os.getloadavg()[0]:.2f} after",
             *mismatches]
    busy2 = BUSY[2]
    if max(busy2) < SPEEDUP_BAR:
        lines.append(f"bar 1 not judged: --jobs 2 got at most {max(busy2):.2f} cores busy on average, less than "
                     f"the {SPEEDUP_BAR}x it is asked for: other jobs held the host's CPUs; rerun on an idle host")
    for ln in lines:
        print(ln)
    for name, ok in bars:
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    if args.markdown:
        write_markdown(Path(args.markdown), argv if argv is not None else sys.argv[1:], lines, bars)
        print(f"wrote {args.markdown}")
    return 0 if all(ok for _, ok in bars) else 1


def write_markdown(path: Path, argv: list[str], lines: list[str], bars: list[tuple[str, bool]]) -> None:
    out = ["# `edgert sweep`: 32 ten-minute cells", "",
           f"Command: `{' '.join(['python benchmarks/sweep.py', *argv])}`", "",
           "Grid: ar_assistant, social_a × galaxy-s23, xr2-gen2 × edgert, fixed_worker × load 1, 2 × seed 0, 1; "
           "each run is `python -m edgert.cli sweep` in a subprocess, timed end to end (start-up included). "
           "CPU: user + system seconds of the run and its worker processes; cores busy = CPU / wall, which "
           "shows how much of the host a run got when other jobs share it (the figures themselves do not "
           "depend on it).", "",
           "## Bars", ""]
    out += [f"- **{'PASS' if ok else 'FAIL'}** {name}" for name, ok in bars]
    out += ["", "## Measured", ""] + [f"- {ln}" for ln in lines]
    path.write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
