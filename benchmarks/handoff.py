"""Hand-off: how long a request submitted to an idle worker waits to start while the app's thread keeps working.

The XR pattern: each frame, the app's thread submits a frame's requests
(``Model.submit``) and goes on with its own Python work (the next frame's
pre-processing, pose smoothing, UI) before it collects the results. A worker
thread woken by a submit needs the GIL, which the app's thread holds until it
blocks or CPython's switch interval (5 ms) forces a switch; until then an
idle processor sits idle with work queued for it.

Both sides run the same ORT session of the ~2 ms ``cnn`` model on two threads
and the same feeder: every ``--period-ms``, submit ``--per-frame`` requests,
then ``--work-ms`` of pure-Python work, then wait for the results. The peer is
the standard library's ``concurrent.futures.ThreadPoolExecutor`` (what an app
would use without edgert); edgert's wait is its ``Result.queued_ms``, the
peer's the time from ``submit`` to the call starting. Rounds alternate;
percentiles are over all requests of a side.

    python benchmarks/handoff.py [--frames 200] [--rounds 3] [--per-frame 2] [--work-ms 3] [--period-ms 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import host_line  # noqa: E402
from dispatch import direct_ort  # noqa: E402

import edgert  # noqa: E402
from edgert.testing import genmodels  # noqa: E402


def _python_work(ms: float) -> None:
    """Busy pure-Python work for ``ms`` (holds the GIL, as app logic does)."""
    end = time.perf_counter() + ms / 1000.0
    x = 0
    while time.perf_counter() < end:
        x += 1


def _pace(t0: float, i: int, period_ms: float) -> None:
    delay = t0 + i * period_ms / 1000.0 - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def edgert_waits(m: edgert.Model, feeds: dict, frames: int, per_frame: int, work_ms: float,
                 period_ms: float) -> list[float]:
    """Per request: ms from submit to start, through edgert."""
    waits: list[float] = []
    t0 = time.perf_counter()
    for i in range(frames):
        _pace(t0, i, period_ms)
        futs = [m.submit(feeds) for _ in range(per_frame)]
        _python_work(work_ms)
        waits += [f.result().queued_ms for f in futs]
    return waits


def pool_waits(pool: ThreadPoolExecutor, run, frames: int, per_frame: int, work_ms: float,
               period_ms: float) -> list[float]:
    """Per request: ms from submit to start, through a ThreadPoolExecutor."""
    def job(t_submit: float) -> float:
        start = time.perf_counter()
        run()
        return (start - t_submit) * 1000.0

    waits: list[float] = []
    t0 = time.perf_counter()
    for i in range(frames):
        _pace(t0, i, period_ms)
        futs = [pool.submit(job, time.perf_counter()) for _ in range(per_frame)]
        _python_work(work_ms)
        waits += [f.result() for f in futs]
    return waits


def _pct(xs: list[float]) -> tuple[float, float, float]:
    a = np.asarray(xs)
    return float(np.percentile(a, 50)), float(np.percentile(a, 90)), float(np.percentile(a, 99))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=200, help="frames per round (default 200)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--per-frame", type=int, default=2, help="requests submitted per frame (default 2)")
    ap.add_argument("--work-ms", type=float, default=3.0, help="app Python work after each frame's submits")
    ap.add_argument("--period-ms", type=float, default=10.0, help="frame period (default 10 ms)")
    args = ap.parse_args(argv)
    print(host_line())
    ours: list[float] = []
    peer: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        paths = genmodels.save("cnn", d)
        feeds = genmodels.example_inputs("cnn")
        run = direct_ort(paths["onnx"], feeds)   # one ORT session, one intra-op thread (as edgert's workers)
        run()
        with edgert.Runtime() as rt, ThreadPoolExecutor(max_workers=len(rt.processors)) as pool:
            m = rt.load(paths["onnx"], name="cnn")
            m(feeds)
            for _ in range(args.rounds):
                ours += edgert_waits(m, feeds, args.frames, args.per_frame, args.work_ms, args.period_ms)
                peer += pool_waits(pool, run, args.frames, args.per_frame, args.work_ms, args.period_ms)
            workers = len(rt.processors)
    o, p = _pct(ours), _pct(peer)
    print(f"{args.per_frame} requests per {args.period_ms:g} ms frame, {args.work_ms:g} ms of app work after the "
          f"submits, {workers} workers, {len(ours)} requests per side")
    print(f"{'wait to start (ms)':<28}{'p50':>8}{'p90':>8}{'p99':>8}")
    print(f"{'edgert submit':<28}" + "".join(f"{v:8.3f}" for v in o))
    print(f"{'ThreadPoolExecutor':<28}" + "".join(f"{v:8.3f}" for v in p))
    print("edgert / peer: " + ", ".join(f"{name} {a / b:.2f}x" for name, a, b in zip(("p50", "p90", "p99"), o, p)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
