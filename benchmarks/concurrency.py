"""Concurrency: 120 independent requests of a ~2 ms CNN through edgert on all cores vs one after another directly.

Bar (issue 2): >= 1.7x faster on 2 cores. The ceiling beside it: the same requests on the backend's own session
from as many raw threads as the runtime has CPU workers, one per core (two on a 2-core host; ONNX Runtime's
session runs concurrently from several threads; LiteRT's interpreter does not, so each raw thread has its own).
``share`` is edgert's speed-up over that ceiling's, the measure of how much of the cores the runtime leaves unused
(its aim: >= 0.92). Where the runtime also has a GPU worker it may place requests there too, so the share can
pass 1. Rounds alternate the three; medians reported.

    python benchmarks/concurrency.py [--requests 120] [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
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
                seq, par, raw = [], [], []
                threads = sum(1 for p in rt.processors if p.startswith("cpu") and p not in rt.urgent_processors)
                # one per raw thread: ORT's session is shared, each LiteRT thread has its own interpreter
                runs = [run if fmt == "onnx" or i == 0 else direct(paths[fmt], feeds) for i in range(threads)]
                for _ in range(args.rounds):
                    t = time.perf_counter()
                    for _ in range(args.requests):
                        run()
                    seq.append(time.perf_counter() - t)
                    raw.append(raw_threads(runs, args.requests))
                    t = time.perf_counter()
                    futs = [m.submit(feeds) for _ in range(args.requests)]
                    res = [f.result() for f in futs]
                    par.append(time.perf_counter() - t)
                    assert all(r.outputs is not None for r in res)
                workers = len(rt.processors)
            s, p, r = median(seq) * 1e3, median(par) * 1e3, median(raw) * 1e3
            worst = min(worst, s / p)
            print(f"cnn/{fmt:<6} direct sequential {s:7.1f} ms | edgert on {workers} workers {p:7.1f} ms "
                  f"| speed-up {s / p:.2f}x | raw {threads} threads {r:7.1f} ms, {s / r:.2f}x | share {r / p:.3f}")
    print(f"bar: >= 1.7x -> worst {worst:.2f}x: {'PASS' if worst >= 1.7 else 'FAIL'}")
    return 0


def raw_threads(runs: list, requests: int) -> float:
    """Seconds for ``requests`` calls split over ``len(runs)`` raw threads, ``runs[i]`` on thread i (no runtime)."""
    n = len(runs)
    start = threading.Barrier(n + 1)

    def work(run, n: int) -> None:
        start.wait()
        for _ in range(n):
            run()

    threads = [threading.Thread(target=work, args=(runs[i], requests // n + (i < requests % n))) for i in range(n)]
    for th in threads:
        th.start()
    start.wait()
    t = time.perf_counter()
    for th in threads:
        th.join()
    return time.perf_counter() - t


if __name__ == "__main__":
    sys.exit(main())
