"""How much of a delegate path's run holds Python's GIL: a spinning thread's progress beside it.

A CPU worker's run releases the GIL while the backend computes, so the other workers' Python (decisions, ends,
the app's own code) goes on meanwhile. A path whose run holds it stops every other thread of the process for that
long: on a many-core host its workers then run one at a time. For each path this host has, on the generated CNN:
a thread counts loop iterations for ``--seconds`` while the main thread calls the path's session back to back,
then (twice, the larger count kept) while it sleeps 50 ms at a time; ``held`` is the share of the idle count the
spinner lost. A spinning *process* beside the same runs tells the cores' share apart from the GIL's (a path that
computes on every core, as lavapipe does, slows a spinning process too).

    python benchmarks/gil_hold.py [--paths litert-xnnpack,litert-compiled-cpu,litert-compiled-gpu,ort-cpu]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import host_line  # noqa: E402

from delegates.base import Artifact  # noqa: E402
from delegates.registry import get  # noqa: E402
from edgert.testing import genmodels  # noqa: E402


def spin(stop: Any, report: Callable[[int], object]) -> None:
    """Count loop iterations until ``stop`` is set, then ``report`` the count. In a thread it progresses only while it
    holds the GIL; in a process of its own (``stop`` a ``multiprocessing.Event``) it shares no GIL with the caller."""
    n = 0
    while not stop.is_set():
        n += 1
    report(n)


def counted(work: Callable[[], None], seconds: float, in_process: bool) -> tuple[int, int]:
    """(Spinner iterations, calls of ``work``) while ``work`` runs back to back for ``seconds``."""
    if in_process:
        stop, box = mp.Event(), mp.Queue()
        proc = mp.Process(target=spin, args=(stop, box.put))
        proc.start()
        time.sleep(0.3)   # started and spinning before the window opens
    else:
        stop, out = threading.Event(), []
        thread = threading.Thread(target=spin, args=(stop, out.append))
        thread.start()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        work()
        calls += 1
    stop.set()
    if in_process:
        n = box.get()
        proc.join()
        return n, calls
    thread.join()
    return out[0], calls


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", default="litert-xnnpack,litert-compiled-cpu,litert-compiled-gpu,ort-cpu")
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    print(host_line())
    print(f"{'path':22s} {'ms a call':>9s} {'held (thread)':>13s} {'cores (process)':>15s}")
    with tempfile.TemporaryDirectory() as d:
        files = genmodels.save("cnn", d)
        feeds = list(genmodels.example_inputs("cnn").values())
        for name in args.paths.split(","):
            delegate = get(name)
            if (why := delegate.probe()) is not None:
                print(f"{name:22s} not here: {why[:80]}")
                continue
            fmt = "onnx" if name.startswith("ort") else "tflite"
            session = delegate.open(Artifact(fmt, path=Path(files[fmt])))
            for _ in range(3):
                session.run(feeds)
            row = []
            for in_process in (False, True):
                busy, calls = counted(lambda: session.run(feeds), args.seconds, in_process)
                idle = max(counted(lambda: time.sleep(0.05), args.seconds, in_process)[0] for _ in range(2))
                row.append((1.0 - busy / idle, calls))
            ms = 1e3 * args.seconds / max(1, row[1][1])
            print(f"{name:22s} {ms:9.2f} {row[0][0]:13.0%} {row[1][0]:15.0%}")
            session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
