"""Concurrency: 120 independent requests of a ~2 ms CNN through edgert on all cores vs one after another directly.

Bar (issue 2): >= 1.7x faster on 2 cores. Rounds alternate the two; medians reported.

    python benchmarks/concurrency.py [--requests 120] [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import host_line, median  # noqa: E402
from dispatch import direct_litert, direct_ort  # noqa: E402

import edgert  # noqa: E402
from edgert.testing import genmodels  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print(host_line())
    worst = float("inf")
    with tempfile.TemporaryDirectory() as d:
        paths = genmodels.save("cnn", d)
        feeds = genmodels.example_inputs("cnn")
        for fmt, direct in (("onnx", direct_ort), ("tflite", direct_litert)):
            run = direct(paths[fmt], feeds)
            run()
            with edgert.Runtime() as rt:
                m = rt.load(paths[fmt], name="cnn")
                seq, par = [], []
                for _ in range(args.rounds):
                    t = time.perf_counter()
                    for _ in range(args.requests):
                        run()
                    seq.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    futs = [m.submit(feeds) for _ in range(args.requests)]
                    res = [f.result() for f in futs]
                    par.append(time.perf_counter() - t)
                    assert all(r.outputs is not None for r in res)
                workers = len(rt.processors)
            s, p = median(seq) * 1e3, median(par) * 1e3
            worst = min(worst, s / p)
            print(f"cnn/{fmt:<6} direct sequential {s:7.1f} ms | edgert on {workers} workers {p:7.1f} ms "
                  f"| speed-up {s / p:.2f}x")
    print(f"bar: >= 1.7x -> worst {worst:.2f}x: {'PASS' if worst >= 1.7 else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
