"""Cross-user batching (issue 30): does one batched run of k requests beat k runs, on one CPU thread?

Per MediaPipe model of the XR demo, on LiteRT + XNNPACK with ``num_threads=1`` (as edgert's CPU
workers run): k requests of distinct inputs run as k separate ``Session.run`` calls (``singles``)
and as one ``Session.run_batch`` (``batch``), k = 2 and 3, in alternating rounds on the same session
(so each batch pays the resize from batch 1 to k, and the next singles the resize back, as they would
when a worker interleaves them). Medians over the rounds; ms per request and the ratio
batch / singles (< 1: the batch is cheaper per request on one core).

The other way to spend two cores on two ready requests is one each, side by side: ``2 cores`` is the
wall time per request of k=2 singles on two threads at once (one interpreter each), which is what
edgert's two CPU workers do today without batching.

``invoke k=2`` is the ceiling of any batching code: the interpreter's own ``invoke`` on a batch of 2
against two ``invoke`` at batch 1 (inputs set once, nothing copied in or out; two interpreters), as a ratio.

Also per model: ``resize ms``, a resize of the session's interpreter between batch 1 and 2 (and back)
after the first one, against an interpreter per batch size (``+MB`` resident for the second one):
the cost of the two ways to keep both sizes. Models that cannot batch are listed with the reason.

``--hog`` runs it all beside one busy process (a pure-Python spin loop, as ``benchmarks/xr_users.py``'s).

Run alone (it times): ``flock -x /tmp/edgert-cpu.lock python benchmarks/batching.py``
    [--rounds 21] [--hog] [--models NAME ...] [--markdown benchmarks/results/batching.md]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import host_line, markdown_doc, median  # noqa: E402

from delegates.base import Artifact, Session  # noqa: E402
from delegates.litert import LiteRTDelegate  # noqa: E402
from edgert import models as zoo  # noqa: E402
from edgert.testing.direct import XR_MODELS  # noqa: E402

COLS = ["model", "k=1 ms", "k=2 batch ms/req", "ratio k=2", "k=3 batch ms/req", "ratio k=3",
        "invoke k=2 ratio", "2 cores ms/req", "resize ms", "2nd interp +MB"]
MODELS = XR_MODELS + ("hand_landmark_lite", "palm_detection_lite", "selfie_segmentation_landscape")


def _requests(s: Session, k: int, seed: int) -> list[list[np.ndarray]]:
    out = []
    for r in range(k):
        rng = np.random.default_rng(seed + r)
        out.append([rng.random(spec.concrete_shape(1), dtype=np.float32).astype(spec.dtype) for spec in s.inputs])
    return out


def _ms(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def singles_vs_batch(s: Session, k: int, rounds: int) -> tuple[float, float]:
    """Median ms per request of k singles and of one batch of k, alternating which goes first."""
    reqs = _requests(s, k, seed=k)
    s.run_batch(reqs)
    for r in reqs:
        s.run(r)
    one, batch = [], []
    for i in range(rounds):
        def singles() -> None:
            for r in reqs:
                s.run(r)
        for which in ((0, 1) if i % 2 == 0 else (1, 0)):
            if which == 0:
                one.append(_ms(singles) / k)
            else:
                batch.append(_ms(lambda: s.run_batch(reqs)) / k)
    return median(one), median(batch)


def two_cores(path: Path, rounds: int) -> float:
    """Median wall ms per request of two requests run at once on two threads, one interpreter each."""
    sessions = [LiteRTDelegate().open(Artifact("tflite", path=path), threads=1) for _ in range(2)]
    reqs = _requests(sessions[0], 2, seed=7)
    walls = []
    for _ in range(rounds + 1):
        start = threading.Barrier(3)

        def work(j: int) -> None:
            start.wait()
            sessions[j].run(reqs[j])
        ts = [threading.Thread(target=work, args=(j,)) for j in range(2)]
        for t in ts:
            t.start()
        t0 = time.perf_counter()
        start.wait()
        for t in ts:
            t.join()
        walls.append((time.perf_counter() - t0) * 1e3 / 2)
    for x in sessions:
        x.close()
    return median(walls[1:])


def invoke_ratio(path: Path, rounds: int) -> float:
    """Median over rounds of (one invoke at batch 2) / (two invokes at batch 1), interpreters only."""
    one = LiteRTDelegate().open(Artifact("tflite", path=path), threads=1)
    two = LiteRTDelegate().open(Artifact("tflite", path=path), threads=1)
    reqs = _requests(one, 2, seed=5)
    two.run_batch(reqs)
    one.run(reqs[0])
    a, b = one._interp, two._interp   # noqa: SLF001 - the benchmark times the bare invoke
    ratios = []
    for _ in range(rounds):
        t1 = _ms(lambda: (a.invoke(), a.invoke()))
        t2 = _ms(b.invoke)
        ratios.append(t2 / t1)
    one.close()
    two.close()
    return median(ratios)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def resize_vs_second(s: Session, path: Path) -> tuple[float, float]:
    """(median ms of one resize + allocate between batch 1 and 2 after the first, MB resident that a second
    interpreter kept at batch 2 adds)."""
    interp = s._interp   # noqa: SLF001 - the benchmark looks inside the session it measures
    idx = interp.get_input_details()[0]["index"]
    shape = list(s.inputs[0].concrete_shape(1))
    times = []
    for k in (2, 1) * 6:
        times.append(_ms(lambda: (interp.resize_tensor_input(idx, [k] + shape[1:], strict=False),
                                  interp.allocate_tensors())))
    s.run(_requests(s, 1, 0)[0])   # the session back at its own shape
    before = _rss_mb()
    second = LiteRTDelegate().open(Artifact("tflite", path=path), threads=1)
    if second.batch_refusal == "":
        second.run_batch(_requests(second, 2, 0))
    grown = _rss_mb() - before
    second.close()
    return median(times[2:]), grown


def _spin(stop: object) -> None:
    x = 0
    while not stop.is_set():  # type: ignore[attr-defined]
        for _ in range(100_000):
            x += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--hog", action="store_true", help="beside one busy process")
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    mp_dir = next(iter(zoo.fetch("mediapipe").values())).parent
    print(host_line())
    stop = mp.Event()
    hog = mp.Process(target=_spin, args=(stop,), daemon=True) if args.hog else None
    if hog is not None:
        hog.start()
    try:
        rows, refused = _measure(args, mp_dir)
    finally:
        if hog is not None:
            stop.set()
            hog.join(5)
    notes = [host_line() + ("; beside one busy process" if args.hog else "; no other load"),
             f"rounds: {args.rounds}; LiteRT + XNNPACK, num_threads=1; ratio = batch ms per request / "
             "singles ms per request (< 1: batching is cheaper on one core)", "Models that do not batch:",
             "\n".join(refused) or "(none)"]
    doc = markdown_doc("Cross-user batching (issue 30)", notes, COLS, rows, range(1, len(COLS)))
    print("\n".join(refused))
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(doc)
    return 0


def _measure(args: argparse.Namespace, mp_dir: Path) -> tuple[list[str], list[str]]:
    rows, refused = [], []
    for name in args.models:
        path = mp_dir / f"{name}.tflite"
        s = LiteRTDelegate().open(Artifact("tflite", path=path), threads=1)
        if s.max_batch == 1:
            refused.append(f"- `{name}`: {s.batch_refusal}")
            print(f"{name}: does not batch: {s.batch_refusal}")
            s.close()
            continue
        cells: list[float] = []
        single = []
        for k in (2, 3):
            one, batch = singles_vs_batch(s, k, args.rounds)
            single.append(one)
            cells += [batch, batch / one]
        resize, grown = resize_vs_second(s, path)
        s.close()
        cores = two_cores(path, args.rounds)
        raw = invoke_ratio(path, args.rounds)
        row = (f"| {name} | {median(single):.2f} | {cells[0]:.2f} | {cells[1]:.2f} | {cells[2]:.2f} | "
               f"{cells[3]:.2f} | {raw:.2f} | {cores:.2f} | {resize:.2f} | {grown:.1f} |")
        rows.append(row)
        print(row, flush=True)
    return rows, refused


if __name__ == "__main__":
    raise SystemExit(main())
