"""Where a sync request's time goes around a native run (issue 28's bound for ~1 ms models).

Per call, interleaved so both sides see the same machine state, medians of ``--calls``:

* the session's C++ run timed inside (the same ``OrtSession`` object) when called directly and when
  called through ``Model.__call__``: the run itself is unchanged, or not;
* the whole call both ways: the Python around the run, direct vs through the runtime;
* ``Model.feeds`` (the input check) timed right after a run vs in a warm loop of its own: what the
  same Python costs once a native run has evicted the interpreter's working set.

    python benchmarks/cold_python.py [--onnx PATH:1x3x48x192] [--calls 300]

Without ``--onnx``: the 1.3 ms CNN of ``benchmarks/serving.py``. PP-OCR's cls (the issue's ~1 ms model)
comes in the ``rapidocr_onnxruntime`` wheel on PyPI (see ``benchmarks/serving.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import timeit
from pathlib import Path
from time import perf_counter

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import host_line  # noqa: E402

import edgert  # noqa: E402
from edgert.testing.sized import cnn_at  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnx", metavar="PATH:SHAPE", help="a model and its input shape, e.g. cls.onnx:1x3x48x192")
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    if args.onnx:
        path, shape = args.onnx.rsplit(":", 1)
        data, dims = Path(path).read_bytes(), tuple(int(d) for d in shape.split("x"))
    else:
        data, dims = cnn_at(64), (1, 64, 64, 3)
    x = np.random.default_rng(0).standard_normal(dims).astype(np.float32)
    print(host_line())
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
        m = rt.load(data, name="m")
        session = rt._dispatcher.workers[0].sessions["m"][1]
        inner = session._run
        runs: list[float] = []

        def timed_run(*a):   # the C++ run, timed where it is called
            t = perf_counter()
            try:
                return inner(*a)
            finally:
                runs.append(perf_counter() - t)
        session._run = timed_run
        for _ in range(20):
            m(x)
        direct, through, feeds_cold = [], [], []
        for _ in range(args.calls):
            t = perf_counter()
            session.run([x])
            direct.append(perf_counter() - t)
            t = perf_counter()
            m._loaded.feeds(x)   # right after a run
            feeds_cold.append(perf_counter() - t)
            t = perf_counter()
            m(x)
            through.append(perf_counter() - t)
        run_direct, run_through = runs[-2 * args.calls::2], runs[-2 * args.calls + 1::2]
        feeds_warm = min(timeit.repeat(lambda: m._loaded.feeds(x), number=2000, repeat=5)) / 2000

    def us(v: list[float]) -> float:
        return statistics.median(v) * 1e6

    print(f"model input {list(dims)}, {args.calls} interleaved calls, medians (µs):")
    print(f"  C++ run: called directly {us(run_direct):.1f}, inside a sync call {us(run_through):.1f}")
    print(f"  whole call: direct {us(direct):.1f} (Python around the run {us(direct) - us(run_direct):.1f}), "
          f"through edgert {us(through):.1f} (Python around the run {us(through) - us(run_through):.1f})")
    print(f"  Model.feeds: warm loop {feeds_warm * 1e6:.2f}, right after a run {us(feeds_cold):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
