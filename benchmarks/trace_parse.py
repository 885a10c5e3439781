"""Trace parsing scales linearly and streams: lines/s and peak memory at 10k, 100k and 1M lines.

Each trace is one ``after`` chain (every line's ``after`` names the previous line: the
worst case of issue #16, which was quadratic), with ids, SLOs and a few models, ~100 bytes
a line. Each size is parsed in a fresh process, so ``peak MB`` (``resource.getrusage``
ru_maxrss) is that parse's own peak, the interpreter and numpy included.

    python benchmarks/trace_parse.py [--sizes 10000,100000,1000000]

Bars (issue #16): the per-line cost may not grow by more than 1.5x from 10k to 1M lines,
and the 1M-line parse stays under 200 MB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import host_line  # noqa: E402

_CHILD = """
import resource, sys, time
from scheduler.sim.trace import read_trace
t = time.perf_counter()
wl = read_trace(sys.argv[1])
dt = time.perf_counter() - t
assert len(wl) == int(sys.argv[2]) and int((wl.parent >= 0).sum()) == len(wl) - 1
print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""
MODELS = ("hand_tracking", "eye_segmentation", "depth_estimation", "keyword_detection")


def write_chain(path: Path, n: int) -> int:
    """A trace of ``n`` lines, each ``after`` the previous one; returns its size in bytes."""
    with path.open("w") as f:
        prev = None
        for i in range(n):
            line = {"t_ms": round(i * 0.25, 3), "model": MODELS[i % 4], "slo_ms": 33.3, "id": f"r{i}"}
            if prev is not None:
                line["after"] = prev
            f.write(json.dumps(line) + "\n")
            prev = line["id"]
    return path.stat().st_size


def parse_in_child(path: Path, n: int) -> tuple[float, float]:
    """(seconds, peak MB) of ``read_trace(path)`` in a fresh interpreter."""
    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(n)], cwd=root, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


def main() -> int:
    """Print the table; exit 1 when a bar is missed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    sizes = [int(s) for s in ap.parse_args().sizes.split(",")]
    print(host_line())
    print(f"{'lines':>9} {'file MB':>8} {'seconds':>8} {'lines/s':>10} {'us/line':>8} {'peak MB':>8}")
    per_line = []
    peak = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"chain{n}.jsonl"
            size = write_chain(path, n)
            secs, peak = parse_in_child(path, n)
            per_line.append(secs / n)
            print(f"{n:>9,} {size / 1e6:>8.1f} {secs:>8.2f} {n / secs:>10,.0f} {secs / n * 1e6:>8.2f} {peak:>8.0f}")
            path.unlink()
    growth = per_line[-1] / per_line[0]
    print(f"per-line cost {sizes[-1]:,} vs {sizes[0]:,} lines: {growth:.2f}x (bar: <= 1.5x); "
          f"peak at {sizes[-1]:,}: {peak:.0f} MB (bar: < 200 MB)")
    return 0 if growth <= 1.5 and peak < 200 else 1


if __name__ == "__main__":
    sys.exit(main())
