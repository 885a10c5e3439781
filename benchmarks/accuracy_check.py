"""What the default accuracy check adds to ``rt.load``: load time with the check on and off, alternating.

For each model, ``Runtime(delegates=PATHS, cpu_workers=0)`` loads it with the default check
(``rt.load(path)``) and with ``check_accuracy=False``, alternating per round so host noise falls
on both alike; prints the median load ms of each and the check's own ms (``rt.stats()[m]["accuracy"]``).
A model whose every candidate computes in fp32 costs nothing (no reference is opened): the CPU rows
show it.

    python benchmarks/accuracy_check.py [--paths litert-compiled-gpu] [--rounds 2] [--models a,b]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import host_line  # noqa: E402

import edgert  # noqa: E402
from edgert import models as zoo  # noqa: E402

MODELS = ("hand_landmark_full", "face_detection_short_range", "face_landmark", "iris_landmark")


def load_ms(paths: list[str], model: str, check: bool) -> tuple[float, float | None]:
    """(ms to load ``model`` on a fresh runtime of ``paths``, the check's own ms or None)."""
    with edgert.Runtime(delegates=paths, cpu_workers=0 if "litert-xnnpack" not in paths else 1,
                        warmup_runs=0) as rt:
        t = time.perf_counter()
        rt.load(zoo.path(model), name=model, check_accuracy=check)
        ms = (time.perf_counter() - t) * 1e3
        acc = rt.stats()[model].get("accuracy")
    return ms, (acc or {}).get("check_ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--paths", default="litert-compiled-gpu", help="comma-separated delegate paths")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args(argv)
    paths = args.paths.split(",")
    print(host_line())
    print(f"paths: {', '.join(paths)}; rounds {args.rounds}; load ms (median), check on vs off")
    print("| model | load ms, check on | load ms, check off | check ms | added |\n|---|---:|---:|---:|---:|")
    for m in args.models.split(","):
        on, off, check = [], [], []
        for r in range(args.rounds):
            for flag in ((True, False) if r % 2 == 0 else (False, True)):
                ms, c = load_ms(paths, m, flag)
                (on if flag else off).append(ms)
                if flag and c is not None:
                    check.append(c)
        a, b = statistics.median(on), statistics.median(off)
        c = f"{statistics.median(check):.0f}" if check else "-"
        print(f"| {m} | {a:.0f} | {b:.0f} | {c} | {100 * (a - b) / b:+.0f} % |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
