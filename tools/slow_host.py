"""Run tests on a slow host: one CPU core, shared with a busy process.

The suite asserts only what holds whatever the host's speed (how many frames make their deadline,
how often a detector runs, are benchmark figures). This checks the slow end: the tests and a
process that spins forever are pinned to the same core, so the tests get about half of it.

    python tools/slow_host.py                       # tests/apps on core 0 beside a busy process
    python tools/slow_host.py tests/apps tests/edgert -x --core 1
    python tools/slow_host.py --no-hog tests/apps   # one core, no busy process

Arguments after the options go to pytest (default: ``tests/apps -q``). Exits with pytest's status.
The busy process is stopped by its pid when pytest ends, however it ends (SIGTERM included). Linux only
(``os.sched_setaffinity``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A process that keeps one core busy until it is stopped.
HOG = "while True:\n    pass\n"


def _pinned(core: int) -> Callable[[], None]:
    """A ``preexec_fn`` that pins the child to ``core`` before it starts."""
    def pin() -> None:
        os.sched_setaffinity(0, {core})
    return pin


def main(argv: list[str] | None = None) -> int:
    """Run pytest pinned to one core, beside a busy process pinned to the same core; pytest's exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--core", type=int, default=0, help="the CPU core to pin both processes to (default 0)")
    ap.add_argument("--no-hog", action="store_true", help="one core only, no busy process beside the tests")
    args, rest = ap.parse_known_args(argv)
    if args.core not in os.sched_getaffinity(0):
        ap.error(f"--core {args.core}: not one of this process's cores {sorted(os.sched_getaffinity(0))}")
    pytest_args = rest or ["tests/apps", "-q"]
    # stopped by a signal (timeout, kill): unwind, so pytest and the busy process are stopped too
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    hog = None if args.no_hog else subprocess.Popen([sys.executable, "-c", HOG], preexec_fn=_pinned(args.core))
    try:
        print(f"slow host: pytest {' '.join(pytest_args)} on core {args.core}"
              + ("" if hog is None else f", beside a busy process (pid {hog.pid})"), file=sys.stderr, flush=True)
        return subprocess.run([sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT,
                              preexec_fn=_pinned(args.core)).returncode
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()


if __name__ == "__main__":
    sys.exit(main())
