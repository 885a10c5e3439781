"""Compile the simulator's and the request path's hot modules with mypyc, in place; Python stays the fallback.

    python tools/compile.py            # build: a .so beside each module below (mypy and a C compiler needed)
    python tools/compile.py --clean    # remove them: the pure-Python modules run again

The simulator's loop (``scheduler/sim/driver.py``) is written as named steps, a call each; compiled,
those calls are C calls and an hour of ``edgert simulate`` runs as fast as the hand-inlined loop it
replaced (benchmarks/results/core.md). The request's life (``edgert/_core/_run.py``) is named steps too:
compiled, a sync call costs less than the hand-inlined path it replaced (96a7d8d), and a burst's bookkeeping holds
the GIL for less of each run (BENCHMARKS.md). Python imports a compiled module before its source, so a build
goes stale when a source changes: ``tests/test_layering.py`` fails on a compiled module older than its
source (rebuild, or clean).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The modules compiled (typed, and free of what mypyc refuses: no monkeypatching of their classes).
HOT = ("scheduler/contract.py", "scheduler/sim/driver.py", "scheduler/sim/processor.py", "edgert/_core/_run.py")


def built() -> list[Path]:
    """The compiled files of a build in this tree: one per module of :data:`HOT`, and mypyc's shared runtime."""
    mods = [p for src in HOT for p in (ROOT / src).parent.glob(Path(src).stem + ".*.so")]
    return mods + sorted(ROOT.glob("*__mypyc.*.so"))


def clean() -> None:
    """Remove a build's compiled files (mypyc's intermediate files stay in ``build/``, which git ignores)."""
    for p in built():
        p.unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clean", action="store_true", help="remove the compiled modules")
    args = ap.parse_args()
    clean()
    if args.clean:
        print("removed the compiled modules: the pure-Python ones run")
        return 0
    if shutil.which("mypyc") is None:
        print("mypyc is not installed (pip install mypy)", file=sys.stderr)
        return 1
    env = dict(os.environ, MYPYC_OPT_LEVEL="3")
    r = subprocess.run(["mypyc", *HOT], cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout[-4000:], r.stderr[-4000:], file=sys.stderr)
        return r.returncode
    for p in built():   # (an unchanged module's build is copied with its old time: stamped now, as its sources are)
        os.utime(p)
    print("compiled:", ", ".join(str(p.relative_to(ROOT)) for p in built()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
