"""Instructions per request and per tree level, counted by callgrind: numbers that do not move with a host.

Wall-clock figures on a shared or slow host move with its clock and its neighbours; instruction
counts do not, so they compare across hosts (an Orin's A78AE runs about the same instructions as this
x86, only slower). This script re-runs itself under ``valgrind --tool=callgrind`` and counts, per
phase and per thread:

* ``direct``: ``InferenceSession.run`` of the ``tiny`` model (FC 64->64), the bare backend;
* ``sync``: the same model as a synchronous edgert call, ``model(feeds)``;
* ``futures``: ``model.submit(feeds)`` with a done-callback that sets an Event the caller waits on
  (what the MLPerf LoadGen SUT does), one request at a time on an idle worker;
* ``tree``: ``ChildSumTreeLSTM.encode`` of a batch of random n-ary trees (H=150, D=300), per tree
  level and per cell call.

Each path runs in its own process under ``--separate-threads=yes --dump-before=os_getppid``: the
caller calls ``os.getppid()`` at each mark and so does the worker (in the done-callback of a request
queued behind a ~2 ms one), so each of the two threads gets one callgrind part per phase: set-up,
one mark's own cost (taken off), the measured requests. Threads that never reach the mark (the
runtime's resolver thread, ONNX Runtime's and OpenBLAS's) are reported whole. Inside a part, the self
counts by shared object (ONNX Runtime, CPython, numpy, libc) and the inclusive counts of CPython's
GIL, lock and sleep functions say where the instructions go.

    python benchmarks/instructions.py [--requests 2000] [--trees 30] [--out benchmarks/results/instructions.md]

Which thread runs a done-callback (the caller, the worker, the resolver thread) is a race, and a mark
only splits the thread that reaches it; ``--whole`` counts instead every thread of the process that
runs Python (not the backends' spinning thread pools), with no marks, at ``--requests`` and at a fifth
of them, and divides the difference by the requests between:

    python benchmarks/instructions.py --whole [--requests 1000]

Needs valgrind (``apt-get install valgrind``); takes a few minutes (callgrind runs ~50x slower).
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # the repo, when edgert is not installed

#: callgrind starts a new part on entering this function; the child calls it between phases.
MARKER = "os_getppid"
PATHS = ("direct", "sync", "futures", "tree")
#: the futures path again with marks around ``submit`` and in the callback (more parts: fewer requests)
STAGED = "stages"
#: the parts of each marked thread: until the first mark, a boundary's own cost, the measured requests
PHASES = ("setup", "boundary", "measured")
#: CPython functions whose inclusive counts show the thread hand-off (name: what it covers).
HANDOFF = {
    "take_gil": "taking the GIL (incl. waiting for it)",
    "drop_gil": "dropping the GIL (signals a waiter)",
    "PyThread_acquire_lock_timed": "lock acquire (incl. waiting)",
    "PyThread_release_lock": "lock release (wakes a waiter)",
    "time_sleep": "time.sleep (naps, incl. the GIL around them)",
}
#: Where a self count lands, by the shared object it ran in (first match of the path).
OBJECTS = (("onnxruntime", "ONNX Runtime (incl. its Python binding)"), ("numpy", "numpy"),
           ("libpython", "CPython (interpreter, objects)"), ("python3", "CPython (interpreter, objects)"),
           ("lib-dynload", "CPython C modules"), ("libc.so", "libc (locks, memory)"),
           ("libstdc++", "libstdc++"), ("libm.so", "libm"))


def _child(path: str, requests: int, trees: int) -> None:
    """The measured program for one path: set up, warm, mark, mark, ``requests`` requests (or one encode), mark."""
    import edgert
    from edgert.testing import genmodels
    from recursion.models import ChildSumTreeLSTM
    from recursion.synth import random_tree

    import onnxruntime as ort

    feeds = genmodels.example_inputs("tiny")
    model_bytes = genmodels.build("tiny", "onnx")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(45)
    vocab = [f"w{i}" for i in range(2000)]
    batch = [random_tree(int(rng.integers(10, 160)), 6, rng, vocab) for _ in range(trees)]
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
        m = rt.load(model_bytes, name="tiny", format="onnx")
        blocker = rt.load(genmodels.build("cnn", "onnx"), name="cnn", format="onnx")
        cnn_feeds = genmodels.example_inputs("cnn")
        tree_model = ChildSumTreeLSTM.random(vocab, seed=0, runtime=rt)
        done = threading.Event()

        def finished(_fut: object) -> None:
            done.set()

        def futures_once() -> None:
            done.clear()
            m.submit(feeds).add_done_callback(finished)
            done.wait()

        def boundary() -> None:
            """The marker on this thread, then on the worker's: a request queued behind a ~2 ms one, so that
            its callback is attached before it runs and runs on the worker that ends it."""
            os.getppid()
            marked = threading.Event()
            blocker.submit(cnn_feeds)
            m.submit(feeds).add_done_callback(lambda _f: (os.getppid(), marked.set()))
            marked.wait()

        on_caller: list[str] = []   # per request, where its callback ran: c(aller), w(orker), r(esolver or other)
        caller = threading.get_ident()

        def finished_marked(_fut: object) -> None:
            os.getppid()
            name = threading.current_thread().name
            on_caller.append("c" if threading.get_ident() == caller else "w" if name.startswith("edgert-cpu") else "r")
            done.set()

        def staged_once() -> None:
            """A futures request with marks: before submit, after submit returns, in the callback."""
            done.clear()
            os.getppid()
            fut = m.submit(feeds)
            os.getppid()
            fut.add_done_callback(finished_marked)
            done.wait()

        paths = {"direct": lambda: sess.run(None, feeds), "sync": lambda: m(feeds), "futures": futures_once,
                 "tree": lambda: tree_model.encode(batch), "stages": staged_once}
        once = paths[path]
        for _ in range(50 if path != "tree" else 1):   # warm the path before counting
            (futures_once if path == "stages" else once)()
        boundary()
        boundary()   # the part between these two marks is a boundary's own cost, taken off the next part
        for _ in range(requests if path != "tree" else 1):
            once()
        boundary()
    if path == "stages":
        print("STAGES " + "".join(on_caller), flush=True)
    if path == "tree":
        st = tree_model.executor.last_stats
        print(f"TREE {st.trees} {st.nodes} {st.invocations} {st.calls} {st.waves}", flush=True)


def _self_by_object(path: str) -> dict[str, int]:
    """Self Ir of a raw callgrind file, summed by the group of the shared object that ran it (OBJECTS)."""
    names: dict[str, str] = {}
    out: dict[str, int] = {}
    group = "other"
    skip = False
    with open(path) as f:
        for line in f:
            if skip:   # the line after calls= is the call's inclusive cost, not self cost
                skip = False
                continue
            if line.startswith(("ob=", "cob=")):   # a name is given once, by whichever mentions it first
                m = re.match(r"c?ob=\((\d+)\)\s*(.*)", line.strip())
                if m and m.group(2):
                    names[m.group(1)] = m.group(2)
                if m and line.startswith("ob="):
                    obj = names.get(m.group(1), "")
                    group = next((g for key, g in OBJECTS if key in obj), "other")
            elif line.startswith("calls="):
                skip = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                if len(parts) >= 2:
                    out[group] = out.get(group, 0) + int(parts[1])
    return out


def _inclusive(path: str) -> dict[str, int]:
    """Inclusive Ir of each HANDOFF function (callgrind_annotate --inclusive)."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                          capture_output=True, text=True, check=True).stdout
    incl: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([\d,]+) \([ \d.]+%\)\s+\S*?:([A-Za-z_][\w]*)(?:'\d+)?(?: \[|$)", line)
        if m and m.group(2) in HANDOFF:
            incl[m.group(2)] = max(incl.get(m.group(2), 0), int(m.group(1).replace(",", "")))
    return incl


def measure(requests: int, trees: int, keep: str | None = None, stages: int = 200) -> dict:
    """Run each path in its own child under callgrind; per path and thread: the measured Ir, by object.

    ``keep``: a folder to leave the callgrind files in (for ``callgrind_annotate`` or ``--from``).
    """
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    with tempfile.TemporaryDirectory() as tmp:
        d = keep or tmp
        for path in (*PATHS, STAGED) if stages else PATHS:
            sub = os.path.join(d, path)
            os.makedirs(sub, exist_ok=True)
            cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--dump-before={MARKER}",
                   f"--callgrind-out-file={sub}/cg.out", sys.executable, __file__, "--child", path,
                   "--requests", str(stages if path == STAGED else requests), "--trees", str(trees)]
            proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            Path(sub, "child.out").write_text(proc.stdout + "\nDONE\n")
            if proc.returncode != 0:
                raise SystemExit(f"callgrind run of {path} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        return read_parts(d, requests)


def measure_whole(requests: int) -> dict[str, float]:
    """Per path, the Ir of every thread that runs Python (no marks) per request: each path runs twice, with
    ``requests`` and with a fifth of them, and the difference is divided by the requests between. Which thread
    runs a done-callback is a race, so the marked split can shift between threads; this sum cannot."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    few = requests // 5
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in PATHS[:3]:
            total = {}
            for n in (few, requests):
                cg = os.path.join(tmp, f"{path}-{n}.out")
                cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={cg}",
                       sys.executable, __file__, "--child", path, "--requests", str(n), "--trees", "1"]
                proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
                if proc.returncode != 0:
                    raise SystemExit(f"callgrind run of {path} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
                total[n] = sum(_python_threads(glob.glob(f"{cg}-*")))
            out[path] = (total[requests] - total[few]) / (requests - few)
    return out


def _python_threads(files: list[str]) -> list[int]:
    """The Ir of each thread (one callgrind file each) that runs Python: at least a quarter of its instructions
    in CPython. The caller, the runtime's workers and resolver; not ONNX Runtime's or OpenBLAS's thread pools,
    whose spin-waits count by the wall clock, not by the requests."""
    out = []
    for f in files:
        objs = _self_by_object(f)
        total = sum(objs.values())
        if total and objs.get("CPython (interpreter, objects)", 0) >= 0.25 * total:
            out.append(total)
    return out


def report_whole(per: dict[str, float], requests: int) -> str:
    """Markdown: the whole process's Ir per request by path, and each against the direct call."""
    lines = [f"Every thread that runs Python (`--whole`; ONNX Runtime's and OpenBLAS's pools, which spin by the "
             f"clock, left out): Ir of a run with {requests} requests less one with {requests // 5}, per request "
             "between.", "", "| path | Ir / request | × direct | added by edgert |",
             "|---|---:|---:|---:|"]
    for path, v in per.items():
        lines.append(f"| {path} | {v:,.0f} | {v / per['direct']:.2f} | {v - per['direct']:,.0f} |")
    return "\n".join(lines)


def _thread_parts(sub: str) -> dict[int, list[str]]:
    """Per thread id, its callgrind files in part order."""
    by_thread: dict[int, list[tuple[int, str]]] = {}
    for path in glob.glob(f"{sub}/cg.out*"):
        head = Path(path).read_text(errors="replace")[:2000]
        part = re.search(r"^part: (\d+)", head, re.M)
        thread = re.search(r"^thread: (\d+)", head, re.M)
        if part and thread:
            by_thread.setdefault(int(thread.group(1)), []).append((int(part.group(1)), path))
    return {t: [p for _, p in sorted(v)] for t, v in by_thread.items()}


def read_parts(d: str, requests: int) -> dict:
    """The counts of a finished run kept in folder ``d``: per path, per thread, the measured part less a
    boundary's own cost (self Ir by object, hand-off functions); threads that never hit the marker (the
    runtime's resolver, ONNX Runtime's and OpenBLAS's threads) are given whole, set-up and warm-up included."""
    out: dict = {"requests": requests, "paths": {}, "tree": None}
    for path in PATHS:
        sub = os.path.join(d, path)
        text = Path(sub, "child.out").read_text()
        found = re.search(r"^TREE (.*)$", text, re.M)
        if found:
            out["tree"] = [int(x) for x in found.group(1).split()]
        threads: dict[int, tuple[int, dict[str, int], dict[str, int]]] = {}
        whole: dict[int, int] = {}
        for tid, files in _thread_parts(sub).items():
            if len(files) < len(PHASES):
                whole[tid] = sum(sum(_self_by_object(f).values()) for f in files)
                continue
            base, meas = _self_by_object(files[1]), _self_by_object(files[2])
            objs = {g: meas.get(g, 0) - base.get(g, 0) for g in set(meas) | set(base)}
            ib, im = _inclusive(files[1]), _inclusive(files[2])
            threads[tid] = (sum(objs.values()), objs, {f: im.get(f, 0) - ib.get(f, 0) for f in HANDOFF})
        out["paths"][path] = (threads, whole)
    if os.path.exists(os.path.join(d, STAGED, "child.out")):
        out["stages"] = _read_stages(os.path.join(d, STAGED))
    return out


def _read_stages(sub: str) -> dict[str, float]:
    """Mean Ir per request of the marked futures path: the caller's submit, the caller's wait (attaching the
    callback, waiting, and the callback when it ran there), the worker's cycle (wake, run, end, resolve when it
    does) and its ONNX Runtime part, and the other thread that resolved (the runtime's resolver thread)."""
    seq = re.search(r"^STAGES (\w*)$", Path(sub, "child.out").read_text(), re.M)
    if not seq:
        raise SystemExit(f"{sub}: the marked futures run did not finish")
    marks = seq.group(1)
    n = len(marks)
    parts = {t: [_self_by_object(f) for f in fs] for t, fs in _thread_parts(sub).items()}
    caller = [sum(p.values()) for p in parts[1]]
    submit = wait = 0
    i = 3   # set-up, a boundary's cost, the rest of that boundary; then per request its parts
    for ran_on in marks:
        submit += caller[i]
        wait += caller[i + 1] + (caller[i + 2] if ran_on == "c" else 0)
        i += 3 if ran_on == "c" else 2
    ort = OBJECTS[0][1]
    # the worker: the thread with the most ONNX Runtime instructions; its parts: set-up, a boundary's cost,
    # one per callback it ran, the closing boundary, the exit
    worker = max((t for t in parts if t != 1), key=lambda t: sum(p.get(ort, 0) for p in parts[t]))
    wp = parts[worker]
    cycle: float
    run: float
    if len(wp) >= 3:
        cycle = sum(sum(p.values()) for p in wp[2:-1]) - sum(wp[1].values())
        run = sum(p.get(ort, 0) for p in wp[2:-1]) - wp[1].get(ort, 0)
    else:   # no callback, not even a boundary's, ran on it (which thread runs one is a race): nothing to split by
        cycle = run = math.nan
    out = {"requests": n, "submit": submit / n, "wait": wait / n, "worker": cycle / n, "worker_ort": run / n,
           "on_caller": marks.count("c"), "on_worker": marks.count("w"), "on_other": marks.count("r")}
    if marks.count("r") >= 2:   # the resolver: its parts between its first and last mark span these requests
        rp = max((t for t in parts if t not in (1, worker)), key=lambda t: len(parts[t]))
        span = marks.rindex("r") - marks.index("r")
        out["resolver"] = sum(sum(p.values()) for p in parts[rp][1:-1]) / span
    return out


def report(res: dict) -> str:
    """Markdown: instructions per request by path and thread and where they ran; per tree level and cell call."""
    n = res["requests"]
    groups = list(dict.fromkeys(g for _, g in OBJECTS)) + ["other"]
    lines = [f"Per request: the `tiny` model (FC 64->64), {n} requests a path, one at a time, `edgert.Runtime("
             "delegates=['ort-cpu'], cpu_workers=1)`; Ir = instructions executed (callgrind), mean per request, "
             "by thread (thread 1 = the caller; the thread whose callback marks the phases = the worker) and by "
             "where they ran (self counts by shared object); the last columns are inclusive counts of CPython's "
             "hand-off functions.", "",
             "| path | thread | Ir / request | " + " | ".join(groups) + " | " + " | ".join(f"`{f}`" for f in HANDOFF) + " |",
             "|---|---|---:|" + "---:|" * (len(groups) + len(HANDOFF))]
    per = {}
    unmarked = []
    for name in ("direct", "sync", "futures"):
        threads, whole = res["paths"][name]
        per[name] = 0.0
        for tid, (tot, objs, inc) in sorted(threads.items()):
            if abs(tot) < 50 * n:
                continue
            per[name] += tot / n
            who = "caller" if tid == 1 else f"worker (thread {tid})"
            lines.append(f"| {name} | {who} | {tot / n:,.0f} | "
                         + " | ".join(f"{objs.get(g, 0) / n:,.0f}" for g in groups)
                         + " | " + " | ".join(f"{inc.get(f, 0) / n:,.0f}" for f in HANDOFF) + " |")
        lines.append(f"| **{name}** | **marked threads** | **{per[name]:,.0f}** |" + " |" * (len(groups) + len(HANDOFF)))
        big = {t: v for t, v in whole.items() if v > 1_000_000}
        if big:
            unmarked.append(f"{name}: " + ", ".join(f"thread {t} {v:,} Ir ({v / n:,.0f} per request if all "
                                                    "were these requests)" for t, v in sorted(big.items())))
    lines += ["", f"Added by edgert per request: sync {per['sync'] - per['direct']:,.0f} Ir "
              f"({per['sync'] / per['direct']:.2f}x the direct call), futures {per['futures'] - per['direct']:,.0f} Ir "
              f"({per['futures'] / per['direct']:.2f}x)."]
    if unmarked:
        lines += ["", "Threads that never hit the mark (whole process: set-up, warm-up, the measured requests): "
                  + "; ".join(unmarked) + "."]
    st = res.get("stages")
    if st:
        lines += ["", f"The futures path by stage ({st['requests']} requests with marks around `submit` and in the "
                  f"callback; the callback ran on the caller for {st['on_caller']} of them (the request had ended "
                  f"before it was attached), on the worker for {st['on_worker']}, on the resolver thread for "
                  f"{st['on_other']}), mean Ir per request:", "",
                  "| stage | thread | Ir / request |", "|---|---|---:|",
                  f"| `submit` (admit, decide, wake the worker, nap until it starts) | caller | {st['submit']:,.0f} |",
                  f"| attach the callback, wait on the Event (and the callback when it ran here) | caller | {st['wait']:,.0f} |",
                  f"| the worker's cycle: wake, run, end, resolve, callback, back to waiting | worker | {st['worker']:,.0f} |",
                  f"| of which ONNX Runtime (the run) | worker | {st['worker_ort']:,.0f} |"]
        if "resolver" in st:
            lines.append(f"| the resolver thread (resolving requests the worker handed it, decisions) | resolver | "
                         f"{st['resolver']:,.0f} |")
    if res["tree"]:
        t_trees, t_nodes, t_inv, t_calls, t_waves = res["tree"]
        threads, whole = res["paths"]["tree"]
        tot = sum(v[0] for v in threads.values())
        ort = sum(v[1].get(OBJECTS[0][1], 0) for v in threads.values())
        lines += ["", f"Recursion: `ChildSumTreeLSTM.encode` (H=150, D=300) of {t_trees} random n-ary trees ({t_nodes} "
                  f"nodes, {t_inv} invocations, {t_calls} cell calls, {t_waves} levels), same runtime, marked threads:",
                  "", "| | Ir | per level | per cell call | per node |", "|---|---:|---:|---:|---:|"]
        for label, v in (("everything", tot), ("ONNX Runtime (the cells)", ort),
                         ("the rest (Python, numpy, locks)", tot - ort)):
            lines.append(f"| {label} | {v:,} | {v / t_waves:,.0f} | {v / t_calls:,.0f} | {v / t_nodes:,.0f} |")
        for tid, (t_tot, objs, _) in sorted(threads.items()):
            lines.append(f"\n{'caller' if tid == 1 else f'thread {tid}'}: {t_tot:,} Ir; by object: "
                         + ", ".join(f"{g} {objs.get(g, 0):,}" for g in groups if objs.get(g)) + ".")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000, help="requests per path")
    ap.add_argument("--trees", type=int, default=30, help="trees in the recursion batch")
    ap.add_argument("--out", default=None, help="also write the markdown table here")
    ap.add_argument("--keep", default=None, help="leave the callgrind files in this folder")
    ap.add_argument("--from", dest="from_dir", default=None, help="report a kept folder again (no new run)")
    ap.add_argument("--child", choices=(*PATHS, STAGED), default=None, help=argparse.SUPPRESS)
    ap.add_argument("--stages", type=int, default=200, help="requests of the marked futures path (0: skip it)")
    ap.add_argument("--whole", action="store_true",
                    help="only the Ir per request by path of every thread that runs Python, summed (no marks)")
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.requests, args.trees)
        return 0
    if args.whole:
        text = report_whole(measure_whole(args.requests), args.requests)
        print(text)
        if args.out:
            Path(args.out).write_text(text + "\n")
        return 0
    res = (read_parts(args.from_dir, args.requests) if args.from_dir
           else measure(args.requests, args.trees, args.keep, args.stages))
    text = report(res)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
