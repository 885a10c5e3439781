"""One benchmark at two commits, side by side: did a change move the speed?

    python benchmarks/across_commits.py dispatch decision_cost sim_speed [--before 1f23e18] [--rounds 3]

Checks the ``--before`` commit out into a temporary git worktree and runs each
benchmark's own script in both trees, alternating before / after in every round so
both sides see the same machine state (the host is noisy). Each run is a fresh
process whose imports come from its own tree (``PYTHONPATH`` = that tree). The
figure read from each run is named per benchmark below; the table shows the median
over the rounds and the after / before ratio of the per-call cost (< 1 is faster).
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
    """A benchmark script, its arguments, and how to read one cost figure (lower is better) from its output."""

    script: str
    args: tuple[str, ...]
    figure: str        # what the number is, with its unit
    pattern: str       # regex; group 1 is the number; every match is summed


BENCHES: dict[str, Bench] = {
    # the sum of the four "added µs" cells (tiny/mlp × ORT/LiteRT): dispatch overhead per call
    "dispatch": Bench("benchmarks/dispatch.py", ("--calls", "3000", "--rounds", "5"),
                      "added µs per sync call, summed over 4 model×backend pairs",
                      r"^(?:tiny|mlp)\s+\w+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s"),
    # the edgert policy's median decision time, 10 pending × 5 processors
    "decision_cost": Bench("benchmarks/decision_cost.py", ("--number", "10000", "--repeat", "5"),
                           "µs per edgert decision (median round)", r"^edgert\s+[\d.]+\s+([\d.]+)"),
    # the simulator's wall time for 20 simulated minutes of ar_assistant (ours only)
    "sim_speed": Bench("benchmarks/sim_speed.py", ("--duration", "1200"),
                       "s of wall time for 20 simulated minutes", r"^\s+ours\s+([\d.]+) s"),
}


def measure(bench: Bench, tree: Path) -> float:
    """Run ``bench`` from ``tree`` once and return its figure."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, bench.script, *bench.args], cwd=tree, env=env,
                         capture_output=True, text=True, timeout=1800)
    found = [float(m) for m in re.findall(bench.pattern, out.stdout, flags=re.M)]
    if not found:   # a benchmark whose own bar fails exits 1 but still prints its figure
        raise SystemExit(f"{bench.script} in {tree} failed (exit {out.returncode}):\n{out.stdout[-2000:]}"
                         f"\n{out.stderr[-2000:]}")
    return sum(found)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("benches", nargs="+", choices=sorted(BENCHES))
    ap.add_argument("--before", default="1f23e18", help="the commit to compare with (default: before #18)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating before/after pairs (default 3)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="edgert-before-") as tmp:
        before = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(before), args.before], cwd=ROOT, check=True)
        try:
            rows = []
            for name in args.benches:
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
    print(f"{'benchmark':<14} {'before':>9} {'after':>9} {'after/before':>13}  figure")
    for name, figure, old_m, new_m in rows:
        print(f"{name:<14} {old_m:>9.3f} {new_m:>9.3f} {new_m / old_m:>13.3f}  {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
