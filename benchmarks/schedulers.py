"""Every policy on every XRBench scenario, shipped profile, load and burst, in the simulator, side by side.

Grid: 6 policies (Band's five baselines + edgert) × 7 XRBench scenarios ×
3 shipped profiles (galaxy-s23, xr2-gen2, pixel4) × loads 1, 1.5, 2, 3 ×
{no burst, a 3× burst of 2 s}. Each cell simulates ``--duration`` seconds
(default 10 s; the burst runs from 4 s to 6 s, so 4 s after it show whether
offload stops) with one seed per cell (``--seed`` picks it, ``--seeds`` adds more; figures are
then summed over seeds). Latency noise: the simulator's default (log-normal, sigma 0.1 local, 0.2
cloud). The cloud (4 server slots, the profile's RTT and link) is there for the baselines too.

Per cell and policy: deadline-met % (``ok`` / requests; drops and late
finishes are misses) and the XRBench real-time score (mean over requests of
1/(1+e^(15·(finish−deadline))), 0 for a drop).

Bars checked (issue 5), each printed PASS/FAIL with the failing cells:

1. edgert meets at least as many deadlines as the best Band baseline in
   every cell;
2. where load >= 2, edgert misses at most half as many as the best baseline;
3. bursts: at load 1 with the cloud available, >= 99 % of the requests that
   arrive during the 3× burst meet their deadlines, and no request arriving
   later than 1 s after the burst is offloaded beyond the rate offloaded
   before it (:func:`last_burst_offload`: the energy objective offloads
   some work all along; without it, no offload at all).

With ``--bounds``, every cell that fails bar 2 is also solved as a fluid LP
(``benchmarks/capacity_bound.py``: the most requests any scheduler could
meet there at mean latencies) and printed beside the table, so a cell where
even that ceiling misses more than half the best baseline is marked
infeasible rather than silently excused; every cell that fails bar 3 gets
the LP's ceiling over the burst window, plain and in expectation under the
simulator's cloud jitter (``--burst-only``, ``--cloud-odds``).

The cells run on ``edgert sweep``'s engine (:func:`edgert.sweep.run_tasks`: ``--jobs`` worker
processes, Ctrl-C stops them). A cell here is every policy on one workload, device, load and burst,
because the bars need per-request figures (the burst window, edgert's shed requests) that a sweep
row does not carry.

With ``--check-seeds 1,2`` the grid is run again on each of those seeds and
their bars are printed (and written under the markdown's bars): a policy
tuned to one seed's noise shows it there.

    python benchmarks/schedulers.py [--duration 10] [--seed 0] [--seeds 1] [--jobs 2] [--markdown OUT.md] [--bounds]
                                    [--check-seeds 1,2]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed

from _bounds import (  # noqa: E402  (benchmarks/ is on sys.path when run)
    BURST_MET,
    CLOUD_NOISE,
    BoundRow,
    bound_rows,
    burst_rows,
    last_burst_offload,
)
from _energy_bar import TODAY, energy_block  # noqa: E402
from edgert.sweep import run_tasks  # noqa: E402
from scheduler.policies.edgert import SHED_REASON  # noqa: E402
from scheduler.registry import BAND_POLICIES, DEFAULT_POLICY  # noqa: E402
from scheduler.sim import (  # noqa: E402
    Burst,
    SimConfig,
    profile_names,
    run_simulation,
    scenario_names,
)

LOADS = (1.0, 1.5, 2.0, 3.0)
POLICIES = (*BAND_POLICIES, DEFAULT_POLICY)
SHORT = {"fixed_worker": "FW", "round_robin": "RR", "shortest_expected_latency": "SEL",
         "heterogeneous_earliest_finish_time": "HEFT", "least_slack_time_first": "LST", DEFAULT_POLICY: "edgert"}
BURST_FACTOR, BURST_S = 3.0, 2.0
OFFLOAD_STOP_MS = 1000.0


@dataclass(frozen=True, slots=True)
class Figures:
    """One policy in one cell (summed over seeds)."""

    requests: int
    met: int
    rt_score_sum: float      # sum of per-request real-time scores (mean = / requests)
    offloaded: int
    burst_requests: int      # requests arriving in the burst window
    burst_met: int
    last_offload_after_burst_ms: float   # latest burst-driven offloaded arrival minus burst end (-inf: none)
    late: int = 0            # misses that ran and finished after their deadline
    shed: int = 0            # misses edgert's overload plan dropped on arrival (the rest of the misses: other drops)
    energy_mj: float = 0.0   # what the placement spends: inference + idle + radio (the device's total less baseline)
    total_mj: float = 0.0    # the device's total, baseline (display, cameras: no scheduler changes it) included
    xrbench: float = 0.0     # XRBench score with the profile's E_max, summed over seeds (mean = / seeds)

    @property
    def misses(self) -> int:
        return self.requests - self.met

    @property
    def met_pct(self) -> float:
        return 100.0 * self.met / self.requests if self.requests else 100.0

    @property
    def rt(self) -> float:
        return self.rt_score_sum / self.requests if self.requests else 1.0


def burst_for(duration_s: float) -> Burst:
    """The 3× / 2 s burst, starting at 40 % of the run (4 s of a 10 s run)."""
    return Burst(start_s=round(0.4 * duration_s, 3), duration_s=BURST_S, factor=BURST_FACTOR)


SHORT[TODAY] = "today"


def run_cell(cell: tuple) -> dict[str, Figures]:
    """Run every policy on one cell (seeds ``seed0 .. seed0 + seeds - 1``); returns figures by policy name.

    ``cell[7]`` (if there) is edgert's objective (None: its default); unless it is ``"deadlines"``, edgert
    also runs with that objective as :data:`TODAY`."""
    profile, scenario, load, burst, duration, seeds, seed0 = cell[:7]
    objective = cell[7] if len(cell) > 7 else None
    b = burst_for(duration) if burst else None
    out: dict[str, Figures] = {}
    for name in (*POLICIES, *(() if objective == "deadlines" else (TODAY,))):
        acc = [0, 0, 0.0, 0, 0, 0, -math.inf, 0, 0, 0.0, 0.0, 0.0]
        pol = DEFAULT_POLICY if name == TODAY else name
        obj = "deadlines" if name == TODAY else objective if name == DEFAULT_POLICY else None
        for seed in range(seed0, seed0 + seeds):
            res = run_simulation(SimConfig(scenario=scenario, profile=profile, scheduler=pol, load=load,
                                           duration_s=duration, seed=seed, burst=b, objective=obj))
            s = res.summary()
            e = s.get("energy_mj")
            if e is not None:
                acc[9] += e["total_mj"] - e["baseline_mj"]
                acc[10] += e["total_mj"]
                acc[11] += s["xrbench"].get("score_profile_e_max", 0.0)
            cloud = {p[0] for p in res.processors if p[1] == "cloud"}
            n = s["requests"]
            acc[0] += n
            acc[1] += s["ok"]
            acc[2] += s["realtime_score"] * n
            acc[3] += s["offloaded"]
            # burst window (ms); without a burst it is empty and no offload counts as after it
            w0, w1 = (b.start_s * 1000.0, (b.start_s + b.duration_s) * 1000.0) if b is not None else (0.0, 0.0)
            offloads = []
            for r in res.records:   # one pass: the miss split, the burst window, the offloads
                if r.status == "late":
                    acc[7] += 1
                elif r.status == "dropped" and r.reason.startswith(SHED_REASON):
                    acc[8] += 1
                if b is not None:
                    if w0 <= r.arrival_ms < w1:
                        acc[4] += 1
                        acc[5] += r.status == "ok"
                    if r.processor in cloud:
                        offloads.append(r.arrival_ms)
            if b is not None:
                acc[6] = max(acc[6], last_burst_offload(offloads, w0, w1))
        out[name] = Figures(*acc)
    return out


def run_grid(grid: list[tuple], jobs: int) -> list[dict[str, Figures]]:
    """:func:`run_cell` for every cell, in grid order, on ``edgert sweep``'s engine (``jobs`` worker
    processes; one: this process). A cell that raises stops the benchmark with its error."""
    figs: list[dict[str, Figures] | None] = [None] * len(grid)
    for d in run_tasks(run_cell, grid, jobs=jobs):
        if d.error is not None:
            raise RuntimeError(f"cell {label(grid[d.index])} failed") from d.error
        figs[d.index] = d.value
    return figs  # type: ignore[return-value]  (every index is filled)


def cells(duration: float, seeds: int, seed0: int = 0, objective: str | None = None) -> list[tuple]:
    """The grid, profile-major: ``(profile, scenario, load, burst, duration, seeds, seed0, objective)``."""
    profiles = [p for p in ("galaxy-s23", "xr2-gen2", "pixel4") if p in profile_names()]
    return [(p, s, load, burst, duration, seeds, seed0, objective)
            for p in profiles for s in scenario_names() for load in LOADS for burst in (False, True)]


def label(cell: tuple) -> str:
    p, s, load, burst = cell[:4]
    return f"{p} {s} x{load:g}{' +burst' if burst else ''}"


def check_bars(results: list[tuple[tuple, dict[str, Figures]]]) -> list[tuple[str, bool, str]]:
    """The issue's bars: (name, passed, detail)."""
    worse, half, burst_fail = [], [], []
    n_half = n_burst = 0
    for cell, figs in results:
        ours = figs[DEFAULT_POLICY]
        best_name = min(BAND_POLICIES, key=lambda n: figs[n].misses)
        best = figs[best_name]
        if ours.met < best.met:
            worse.append(f"{label(cell)}: {ours.met} < {best.met} ({SHORT[best_name]})")
        if cell[2] >= 2.0:
            n_half += 1
            if ours.misses > 0.5 * best.misses:
                half.append(f"{label(cell)}: {ours.misses} misses vs {best.misses} ({SHORT[best_name]})")
        if cell[3] and cell[2] == 1.0:
            n_burst += 1
            rate = ours.burst_met / ours.burst_requests if ours.burst_requests else 1.0
            late_off = ours.last_offload_after_burst_ms
            if rate < BURST_MET or late_off > OFFLOAD_STOP_MS:
                burst_fail.append(f"{label(cell)}: {100 * rate:.1f} % met in the burst, last offload "
                                  + ("none" if late_off == -math.inf else f"{late_off / 1000:+.2f} s")
                                  + " after it")
    total = len(results)
    return [
        (f"1. edgert meets >= the best Band baseline in every cell ({total - len(worse)}/{total})",
         not worse, "\n".join(worse)),
        (f"2. load >= 2: edgert misses <= half the best baseline ({n_half - len(half)}/{n_half})",
         not half, "\n".join(half)),
        ((f"3. 3x burst for 2 s at load 1: >= 99 % met during it, offload stops <= 1 s after "
          f"({n_burst - len(burst_fail)}/{n_burst})"), not burst_fail, "\n".join(burst_fail)),
    ]


def text_table(results: list[tuple[tuple, dict[str, Figures]]]) -> str:
    head = f"{'cell':<36}" + "".join(f"{SHORT[n]:>8}" for n in POLICIES) + f"{'rt':>7}{'miss':>7}{'best':>7}"
    lines = [head, "-" * len(head)]
    for cell, figs in results:
        best = min(figs[n].misses for n in BAND_POLICIES)
        ours = figs[DEFAULT_POLICY]
        lines.append(f"{label(cell):<36}" + "".join(f"{figs[n].met_pct:>8.1f}" for n in POLICIES)
                     + f"{ours.rt:>7.3f}{ours.misses:>7}{best:>7}")
    return "\n".join(lines)


def markdown(results: list[tuple[tuple, dict[str, Figures]]], bars: list[tuple[str, bool, str]],
             command: str, conditions: str, bounds: list[BoundRow] | None = None,
             bursts: list[tuple[str, float, float, float, str]] | None = None,
             other_seeds: list[tuple[int, list[tuple[str, bool, str]]]] | None = None) -> str:
    cols = [SHORT[n] for n in POLICIES]
    out = ["# Scheduling policies on the XRBench scenarios (simulated)", "",
           f"Command: `{command}`", "", conditions, "",
           ("Columns: deadline-met % per policy (FW fixed_worker, RR round_robin, SEL shortest_expected_latency, "
            "HEFT heterogeneous_earliest_finish_time, LST least_slack_time_first), then edgert's XRBench "
            "real-time score, edgert's misses and the best Band baseline's misses."), "", "## Bars", ""]
    for name, ok, detail in bars:
        out.append(f"- **{'PASS' if ok else 'FAIL'}** {name}")
        for d in detail.splitlines():
            out.append(f"  - {d}")
    if bounds is not None:
        out += ["", "## Capacity bound for the cells that fail bar 2", "",
                ("Fluid LP ceiling from `benchmarks/capacity_bound.py` (mean latencies; preemption, migration and "
                 "fractional service allowed, so no scheduler can miss fewer): "
                 f"{sum(1 for r in bounds if r[5].startswith('infeasible ('))} of {len(bounds)} are infeasible. "
                 "The same LP in expectation, each cloud run at its odds of beating its deadline under the "
                 f"simulator's jitter (`--cloud-odds {CLOUD_NOISE:g}`): "
                 f"{sum(1 for r in bounds if r[5].startswith('infeasible'))} of {len(bounds)}. edgert's misses "
                 "are split into requests its overload plan shed on arrival, other drops (could no longer "
                 "make their deadline, or superseded by a newer frame) and late finishes."), "",
                "| cell | edgert misses | shed / other drops / late | best Band misses | half of it "
                "| LP min misses | with cloud jitter | verdict |",
                "|---|---:|---:|---:|---:|---:|---:|---|"]
        for lab, ours, best, lp, lp_odds, verdict in bounds:
            other = ours.misses - ours.shed - ours.late
            out.append(f"| {lab} | {ours.misses} | {ours.shed} / {other} / {ours.late} | {best} | {best / 2:g} "
                       f"| {lp} | {lp_odds} | {verdict} |")
    if bursts is not None:
        out += ["", "## Burst ceiling for the cells that fail bar 3", "",
                ("The same LP maximising only the requests that arrive in the burst window "
                 "(`capacity_bound.py --burst-only`): the most of them any scheduler could meet at mean "
                 "latencies, then the same in expectation when each cloud run is jittered as the simulator "
                 f"jitters it (log-normal, sigma {CLOUD_NOISE:g} on RTT + server time; `--cloud-odds`), which "
                 "counts a request served by the cloud at its odds of making its deadline when sent at its "
                 "earliest moment. Both are fluid ceilings (preemption, migration, fractional service); "
                 "a real non-preemptive scheduler with noisy local runs does worse."), "",
                "| cell | edgert % met in the burst | ceiling % | ceiling with cloud jitter % | verdict |",
                "|---|---:|---:|---:|---|"]
        for lab, ours, plain, odds, verdict in bursts:
            out.append(f"| {lab} | {ours:.1f} | {plain:.1f} | {odds:.1f} | {verdict} |")
    if other_seeds:
        out += ["", "## The bars on other seeds", "",
                ("The same grid re-run with other seeds (cascade draws and latency noise change; "
                 "`--check-seeds`), bars only; the table below is seed "
                 f"{results[0][0][6]}'s."), ""]
        for seed, sbars in other_seeds:
            for name, ok, detail in sbars:
                out.append(f"- seed {seed}: **{'PASS' if ok else 'FAIL'}** {name}")
                for d in detail.splitlines():
                    out.append(f"  - {d}")
    for prof in dict.fromkeys(c[0] for c, _ in results):
        out += ["", f"## {prof}", "",
                "| scenario | load | burst | " + " | ".join(cols) + " | edgert rt | edgert misses | best Band misses |",
                "|---|---|---|" + "---:|" * (len(cols) + 3)]
        for cell, figs in results:
            if cell[0] != prof:
                continue
            best_name = min(BAND_POLICIES, key=lambda n: figs[n].misses)
            ours = figs[DEFAULT_POLICY]
            pct = [f"{figs[n].met_pct:.1f}" for n in POLICIES]
            out.append(f"| {cell[1]} | {cell[2]:g} | {'3x 2 s' if cell[3] else '-'} | " + " | ".join(pct)
                       + f" | {ours.rt:.3f} | {ours.misses} | {figs[best_name].misses} ({SHORT[best_name]}) |")
    rt_lines = ["", "## XRBench real-time score, every policy", "",
                "| profile | scenario | load | burst | " + " | ".join(cols) + " |",
                "|---|---|---|---|" + "---:|" * len(cols)]
    for cell, figs in results:
        rt_lines.append(f"| {cell[0]} | {cell[1]} | {cell[2]:g} | {'3x 2 s' if cell[3] else '-'} | "
                        + " | ".join(f"{figs[n].rt:.3f}" for n in POLICIES) + " |")
    return "\n".join(out + rt_lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds per cell (default 10)")
    ap.add_argument("--seeds", type=int, default=1, help="seeds per cell, summed (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="first seed (default 0): seeds SEED .. SEED+SEEDS-1")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    ap.add_argument("--markdown", metavar="OUT.md", help="also write the tables and bars as markdown")
    ap.add_argument("--quick", action="store_true", help="one profile (pixel4), no markdown: a smoke run")
    ap.add_argument("--check-seeds", metavar="S,S", default="",
                    help="also run the grid with these seeds (comma-separated) and report their bars")
    ap.add_argument("--objective", choices=("deadlines", "balanced", "energy"), default=None,
                    help="edgert's objective (default: its default); unless deadlines, edgert also runs with "
                         "objective deadlines (today's default) for the energy bar")
    ap.add_argument("--bounds", action="store_true",
                    help="solve the capacity LP for every cell failing bar 2 (needs scipy; minutes)")
    args = ap.parse_args(argv)
    if args.bounds and args.seeds != 1:
        ap.error("--bounds solves one seed's workload; use it with --seeds 1 (and --seed to pick the seed)")
    grid = cells(args.duration, args.seeds, args.seed, args.objective)
    if args.quick:
        grid = [c for c in grid if c[0] == "pixel4"]
    t0 = time.perf_counter()
    figs = run_grid(grid, args.jobs)
    wall = time.perf_counter() - t0
    results = list(zip(grid, figs))
    print(text_table(results))
    totals = {n: sum(f[n].misses for _, f in results) for n in POLICIES}
    best_total = sum(min(f[n].misses for n in BAND_POLICIES) for _, f in results)
    n_req = sum(f[DEFAULT_POLICY].requests for _, f in results)
    print(f"\nmisses over all {len(results)} cells ({n_req} requests per policy): "
          + ", ".join(f"{SHORT[n]} {totals[n]}" for n in POLICIES)
          + f"; best baseline per cell {best_total}; edgert / best-per-cell = "
          + (f"{totals[DEFAULT_POLICY] / best_total:.2f}" if best_total else "n/a"))
    bars = check_bars(results)
    if args.objective != "deadlines":
        table, ebar = energy_block(results, POLICIES, SHORT, label)
        print("\n" + table)
        bars.append(ebar)
    for name, ok, detail in bars:
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
        for d in detail.splitlines():
            print(f"        {d}")
    brows = None
    if args.bounds:
        brows = bound_rows(results, args.jobs, label)
        print("\ncapacity bound (LP, mean latencies) for the cells failing bar 2:")
        for lab, ours, best, lp, lp_odds, verdict in brows:
            print(f"  {lab:<36} edgert {ours.misses:>5} (shed {ours.shed}, late {ours.late})  best {best:>5}  "
                  f"half {best / 2:>7.1f}  LP min {lp:>5}  with cloud jitter {lp_odds:>5}  {verdict}")
    bursts = None
    if args.bounds:
        bursts = burst_rows(results, args.jobs, label)
        print("\nburst ceiling (LP over the burst window) for the cells failing bar 3:")
        for lab, ours, plain, odds, verdict in bursts:
            print(f"  {lab:<36} edgert {ours:5.1f} %  ceiling {plain:5.1f} %  with cloud jitter {odds:5.1f} %  "
                  f"{verdict}")
    other: list[tuple[int, list[tuple[str, bool, str]]]] = []
    for seed in (int(x) for x in args.check_seeds.split(",") if x.strip()):
        sgrid = cells(args.duration, 1, seed, args.objective)
        if args.quick:
            sgrid = [c for c in sgrid if c[0] == "pixel4"]
        sfigs = run_grid(sgrid, args.jobs)
        sbars = check_bars(list(zip(sgrid, sfigs)))
        other.append((seed, sbars))
        print(f"\nseed {seed}:")
        for name, ok, detail in sbars:
            print(f"{'PASS' if ok else 'FAIL'}  {name}")
            for d in detail.splitlines():
                print(f"        {d}")
    print(f"({len(grid)} cells x {len(POLICIES)} policies, {args.duration:g} s simulated each, "
          f"seed(s) {args.seed}..{args.seed + args.seeds - 1}, {wall:.0f} s wall on {args.jobs} process(es))")
    if args.markdown and not args.quick:
        command = "python benchmarks/schedulers.py " + " ".join(sys.argv[1:] if argv is None else argv)
        conditions = (f"{len(grid)} cells × {len(POLICIES)} policies; {args.duration:g} s simulated per cell, "
                      f"seeds {args.seed}..{args.seed + args.seeds - 1}; burst = {BURST_FACTOR:g}× for {BURST_S:g} s from "
                      f"{burst_for(args.duration).start_s:g} s; simulator latency noise at its defaults; cloud "
                      f"available to every policy. Deadline-met % is exact for the simulated run (no "
                      f"wall-clock timing is involved), so the table does not depend on host load.")
        with open(args.markdown, "w") as fh:
            fh.write(markdown(results, bars, command.strip(), conditions, brows, bursts, other))
        print(f"wrote {args.markdown}")
    return 0 if all(ok for _, ok, _ in bars) else 1


if __name__ == "__main__":
    raise SystemExit(main())
