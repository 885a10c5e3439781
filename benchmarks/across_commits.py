"""One benchmark at two commits, side by side: did a change move the speed?

    python benchmarks/across_commits.py core [--before 1f23e18] [--rounds 3]     # the regression guard
    python benchmarks/across_commits.py dispatch decision_cost sim_speed [--before 1f23e18] [--rounds 3]
    python benchmarks/across_commits.py dispatch_tiny --before HEAD --rounds 5    # a sync-path change, uncommitted

``core`` is the guard to run before a change to the core (the request path, the policies' hot
paths, the simulator's driver) lands: the simulator's speed, the added cost per request, CPU
concurrency, the recursion benchmark and LoadGen, HEAD's working tree against ``--before``.

Checks the ``--before`` commit out into a temporary checkout and runs each
benchmark's own script in both trees, alternating before / after in every round so
both sides see the same machine state (the host is noisy). Each run is a fresh
process whose imports come from its own tree (``PYTHONPATH`` = that tree). The
figure read from each run is named per benchmark below; the table shows the median
over the rounds and the after / before ratio of the cost (< 1 is faster).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Bench:
    """A benchmark's command (after ``python``), and how to read one cost figure (lower is better) from its output."""

    argv: tuple[str, ...]
    figure: str        # what the number is, with its unit
    pattern: str       # regex; group 1 is the number; every match is summed


#: The simulator end to end (workload, run, outcome) on one hour of AR Assistant under fixed_worker, without
#: the heat model (a commit before #19 has none): the fastest of 3 runs in one process. Inline, so that both
#: commits run the same measurement (sim_speed.py's own options differ between commits).
_SIM_HOUR = """
import dataclasses, gc, time
from scheduler.sim import SimConfig, run_simulation
kw = {"thermal": False} if "thermal" in {f.name for f in dataclasses.fields(SimConfig)} else {}
cfg = dict(scenario="ar_assistant", profile="galaxy-s23", scheduler="fixed_worker", seed=0, **kw)
run_simulation(SimConfig(duration_s=300, **cfg))
best = []
for _ in range(3):
    gc.disable()   # as `edgert simulate` runs it (run_simulation left the collector to its caller after 9d9fd02)
    t = time.perf_counter()
    run_simulation(SimConfig(duration_s=3600, **cfg))
    best.append(time.perf_counter() - t)
    gc.enable()
print(f"sim hour {min(best):.4f} s")
"""

#: ``edgert simulate``'s hour as a user runs it: the default scheduler, the heat model on (the CLI's defaults), the
#: whole command in one process from its imports to its last line, output discarded.
_SIM_CLI_HOUR = """
import contextlib, io, time
t = time.perf_counter()
from edgert.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    main(["simulate", "--scenario", "ar_assistant", "--device", "galaxy-s23", "--duration", "3600"])
print(f"cli hour {time.perf_counter() - t:.4f} s")
"""

#: The Python work of a sync call (tiny on ORT, every worker idle), counted: the bytecodes and Python frames it runs,
#: traced with ``sys.settrace`` opcode events over 300 calls on the caller's thread (where a sync call runs). Counts do
#: not move with the host, so one round tells a change's cost in pure Python where wall-clock rounds disagree by 5 %.
_SYNC_OPCODES = """
import sys, tempfile
import edgert
from edgert.testing import genmodels
calls, counts = 300, {"opcode": 0, "call": 0}
def trace(frame, event, arg):
    if event in counts:
        counts[event] += 1
    if event == "call":
        frame.f_trace_opcodes = True
    return trace
with tempfile.TemporaryDirectory() as d:
    paths = genmodels.save("tiny", d)
    feeds = genmodels.example_inputs("tiny")
    with edgert.Runtime(delegates=["ort-cpu"]) as rt:
        m = rt.load(paths["onnx"], name="tiny")
        for _ in range(500):
            m(feeds)
        sys.settrace(trace)
        for _ in range(calls):
            m(feeds)
        sys.settrace(None)
print(f"sync call: {counts['opcode'] / calls:.1f} bytecodes, {counts['call'] / calls:.1f} python frames")
"""

BENCHES: dict[str, Bench] = {
    # the sum of the four "added µs" cells (tiny/mlp × ORT/LiteRT): dispatch overhead per call
    "dispatch": Bench(("benchmarks/dispatch.py", "--calls", "3000", "--rounds", "5"),
                      "added µs per sync call, summed over 4 model×backend pairs",
                      r"^(?:tiny|mlp)\s+\w+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s"),
    # issue 29's cell alone: the tiny model on ORT, one sync caller (the four-cell sum above moves by ±20 %
    # between runs with the mlp cells; this one by less, for a change to the sync path)
    "dispatch_tiny": Bench(("benchmarks/dispatch.py", "--models", "tiny", "--calls", "5000", "--rounds", "7"),
                           "added µs per sync call, tiny on ORT", r"^tiny\s+ort\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s"),
    # the same run's whole sync call through the runtime (direct + added), tiny on ORT: the time per request
    "sync_tiny": Bench(("benchmarks/dispatch.py", "--models", "tiny", "--calls", "5000", "--rounds", "7"),
                       "µs per sync call through the runtime, tiny on ORT", r"^tiny\s+ort\s+[\d.]+\s+([\d.]+)\s"),
    # the edgert policy's median decision time, 10 pending × 5 processors
    "sync_opcodes": Bench(("-c", _SYNC_OPCODES),
                          "bytecodes a sync call runs in Python, tiny on ORT (counted: one round suffices)",
                          r"^sync call: ([\d.]+) bytecodes"),
    "decision_cost": Bench(("benchmarks/decision_cost.py", "--number", "10000", "--repeat", "5"),
                           "µs per edgert decision (median round)", r"^edgert\s+[\d.]+\s+([\d.]+)"),
    # the simulator's wall time for 20 simulated minutes of ar_assistant (ours only)
    "sim_speed": Bench(("benchmarks/sim_speed.py", "--duration", "1200"),
                       "s of wall time for 20 simulated minutes", r"^\s+ours\s+([\d.]+) s"),
    # the guard's figures (see ``core``)
    "sim_hour": Bench(("-c", _SIM_HOUR), "s of wall time for 1 simulated hour, end to end (best of 3)",
                      r"^sim hour ([\d.]+) s"),
    "sim_cli_hour": Bench(("-c", _SIM_CLI_HOUR), "s of wall time for `edgert simulate`'s hour (default scheduler, "
                          "heat on), end to end in one process", r"^cli hour ([\d.]+) s"),
    "concurrency": Bench(("benchmarks/concurrency.py", "--requests", "120", "--rounds", "3"),
                         "ms for 120 cnn requests on every core, ORT + LiteRT summed",
                         r"edgert on \d+ workers\s+([\d.]+) ms"),
    "recursion": Bench(("benchmarks/recursion.py", "--trees", "300", "--repeat", "3", "--pernode-trees", "20"),
                       "ms to encode 300 SST trees, ours 1w + ours 2w", r"^\s+ours [12]w\s+([\d.]+) ms"),
    "loadgen": Bench(("-m", "edgert.cli", "bench", "loadgen", "--scenario", "SingleStream", "--model", "cnn",
                      "--repeat", "1", "--duration-s", "3"),
                     "LoadGen SingleStream p90 ms (cnn)",   # the one-line summary of older commits, or the runs table
                     r"(?:SingleStream: VALID; latency ms p50 [\d.]+ p90 |^\d+ edgert\s+VALID\s+[\d.]+\s+)([\d.]+)"),
}

#: The regression guard: one name for the benchmarks a core change must not slow.
GROUPS: dict[str, tuple[str, ...]] = {"core": ("sim_hour", "sim_cli_hour", "dispatch", "concurrency", "recursion", "loadgen")}


def measure(bench: Bench, tree: Path) -> float:
    """Run ``bench`` from ``tree`` once and return its figure."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, *bench.argv], cwd=tree, env=env,
                         capture_output=True, text=True, timeout=1800)
    found = [float(m) for m in re.findall(bench.pattern, out.stdout + out.stderr, flags=re.M)]
    if not found:   # a benchmark whose own bar fails exits 1 but still prints its figure
        raise SystemExit(f"{' '.join(bench.argv[:3])} in {tree} failed (exit {out.returncode}):\n"
                         f"{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return sum(found)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("benches", nargs="+", choices=sorted([*BENCHES, *GROUPS]),
                    help="benchmarks, or a group: core = " + " ".join(GROUPS["core"]))
    ap.add_argument("--before", default="1f23e18", help="the commit to compare with (default: before #18)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating before/after pairs (default 3)")
    args = ap.parse_args()
    names = list(dict.fromkeys(n for b in args.benches for n in GROUPS.get(b, (b,))))
    with tempfile.TemporaryDirectory(prefix="edgert-before-") as tmp:
        before = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(before), args.before], cwd=ROOT, check=True)
        sst = ROOT / "recursion" / "data" / "sst"   # older commits read SST from a shared folder beside the tree
        if sst.is_dir():   # (a link to the repo's copy in the temporary folder, for the older tree)
            beside = Path(tmp).joinpath("shared", "data")
            beside.mkdir(parents=True)
            (beside / "sst").symlink_to(sst)
        try:
            rows = []
            for name in names:
                b = BENCHES[name]
                old, new = [], []
                for i in range(args.rounds):
                    first, second = ((before, old), (ROOT, new)) if i % 2 == 0 else ((ROOT, new), (before, old))
                    for tree, sink in (first, second):
                        sink.append(measure(b, tree))
                    print(f"{name} round {i + 1}: before {old[-1]:.3f}  after {new[-1]:.3f}", flush=True)
                rows.append((name, b.figure, statistics.median(old), statistics.median(new)))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, check=False)
    print(f"\nbefore = {args.before}, after = the working tree; medians over {args.rounds} alternating rounds")
    print(f"| benchmark | before | after | after/before | figure |\n|---|---:|---:|---:|---|")
    for name, figure, old_m, new_m in rows:
        print(f"| {name} | {old_m:.3f} | {new_m:.3f} | {new_m / old_m:.3f} | {figure} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
