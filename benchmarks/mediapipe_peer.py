"""MediaPipe 0.10.14's own solutions vs edgert's XR pipelines: same frames, streams and rates.

One user = four streams, each paced by its own thread at its rate with latest-frame pacing, as an
app would run them: face mesh with iris (30 fps), hands full (30 fps), pose full (30 fps), selfie
segmentation (15 fps). 1×, 2×, 3× users, idle and beside a fixed CPU hog (one busy process).
MediaPipe runs its solutions in video mode (one graph per stream) in its own process and venv
(``apps.xr.reference``); edgert runs ``Pipelines`` with tracking on one shared runtime, every request
carrying its frame's deadline (the period).

Per stream: share of its periods that produced a frame finished within the period, p50 / p99 frame
latency; per run: cores used (CPU time of the processes / wall time). Writes benchmarks/results/mediapipe_peer.md.

    python benchmarks/mediapipe_peer.py [--seconds 10] [--loads 1 2 3]

The frame is astronaut.png (scikit-image wheel) with the zidane.jpg hand (ultralytics wheel) pasted
in its lower right corner, 512×512.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import edgert  # noqa: E402
from _common import host_line  # noqa: E402
from apps.xr import Pipelines, assets  # noqa: E402
from apps.xr import reference as mp_ref  # noqa: E402

STREAMS = (("face", 30.0), ("hands", 30.0), ("pose", 30.0), ("segmentation", 15.0))
_OFF = {"max_hands": 0, "max_faces": 0, "pose": False, "segmentation": False}
EDGERT_CONFIG = {"face": {**_OFF, "max_faces": 1}, "hands": {**_OFF, "max_hands": 2},
                 "pose": {**_OFF, "pose": True}, "segmentation": {**_OFF, "segmentation": True}}


def pace(fn: Callable[[], bool], fps: float, seconds: float, lat: list[float], start: float,
         missed: list[float] | None = None) -> None:
    """Call ``fn`` on each period boundary from ``start`` for ``seconds``; skip missed boundaries.

    A frame whose ``fn`` returns False (a stage was dropped or failed: no full answer) counts as
    not finished (latency inf). ``missed`` gets the start (``perf_counter`` s) of every frame that
    did not finish within its period."""
    period = 1.0 / fps
    k = 0
    while True:
        t = start + k * period
        if t - start >= seconds:
            return
        now = time.perf_counter()
        if t > now:
            time.sleep(t - now)
        t1 = time.perf_counter()
        complete = fn()
        lat.append((time.perf_counter() - t1) * 1e3 if complete else float("inf"))
        if missed is not None and not lat[-1] <= period * 1e3:
            missed.append(t1)
        k = max(k + 1, int((time.perf_counter() - start) / period))


def run_streams(makers: list[tuple[str, float, Callable[[], bool]]], seconds: float,
                peer: mp_ref.Peer | None = None) -> tuple[list[dict], float]:
    """Run every (name, fps, fn) in its own thread; per-stream stats (with ``missed_at``: the start,
    ``perf_counter`` s, of each frame not finished within its period; ``start_s``: the first frame's)
    and cores used (this process's and, given, MediaPipe's ``peer``'s)."""
    lats: list[list[float]] = [[] for _ in makers]
    missed: list[list[float]] = [[] for _ in makers]
    start = time.perf_counter() + 0.2
    cpu = (lambda: time.process_time() + peer.cpu_s()) if peer is not None else time.process_time
    cpu0, w0 = cpu(), time.perf_counter()
    threads = [threading.Thread(target=pace, args=(fn, fps, seconds, lats[i], start, missed[i]))
               for i, (_, fps, fn) in enumerate(makers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cores = (cpu() - cpu0) / (time.perf_counter() - w0)
    out = []
    for (name, fps, _), lat, miss in zip(makers, lats, missed):
        a = np.asarray(lat) if lat else np.array([np.inf])
        fin = a[np.isfinite(a)] if np.isfinite(a).any() else np.array([np.nan])
        period_ms = 1000.0 / fps
        out.append({"stream": name, "met_pct": 100.0 * float((a <= period_ms).sum()) / (seconds * fps),
                    "p50": float(np.percentile(fin, 50)), "p99": float(np.percentile(fin, 99)),
                    "incomplete": int((~np.isfinite(a)).sum()), "missed_at": miss, "period_s": 1.0 / fps,
                    "start_s": start})
    return out, cores


def run_mediapipe(frame: np.ndarray, users: int, seconds: float) -> tuple[list[dict], float]:
    """MediaPipe's solutions in video mode, one per stream per user, in MediaPipe's own process
    (``apps.xr.reference.Peer``, holding the frame: a call sends its index and gets the answer back over a
    Unix socket); cores count that process's CPU time and this one's."""
    with mp_ref.Peer([frame]) as peer:
        makers, sols = [], []
        for u in range(users):
            for name, fps in STREAMS:
                sol = peer.solutions(static=False, **EDGERT_CONFIG[name])
                sols.append(sol)
                sol.process(0)   # warm up (graph start)
                makers.append((f"{name}#{u}", fps, lambda p=sol.process: p(0) is not None))
        try:
            return run_streams(makers, seconds, peer=peer)
        finally:
            for sol in sols:
                sol.close()


def run_edgert(frame: np.ndarray, users: int, seconds: float, cpu_workers: int | None = None,
               records: dict | None = None) -> tuple[list[dict], float]:
    """edgert's pipelines, one per stream per user, on one runtime. With ``records`` (a dict) it gets
    the runtime's finished requests (``"records"``, times in runtime ms) and the ``perf_counter`` s of
    the runtime clock's zero (``"t0_s"``)."""
    with edgert.Runtime(cpu_workers=cpu_workers, records=True) as rt:
        makers = []
        for u in range(users):
            for name, fps in STREAMS:
                px = Pipelines(rt, tracking=True, **EDGERT_CONFIG[name])
                px.process(frame)
                makers.append((f"{name}#{u}", fps, lambda p=px, ms=1000.0 / fps: _complete(p.process(frame, deadline_ms=ms))))
        out = run_streams(makers, seconds)
        if records is not None:
            records["t0_s"] = time.perf_counter() - rt.now_ms() / 1e3
            records["records"] = rt.records()
        return out


def _complete(r: object) -> bool:
    """Every stage that ran finished with its outputs (ok or late), none dropped or failed."""
    return all(v.status in ("ok", "late", "skipped") for v in r.stages.values())  # type: ignore[attr-defined]


def _hog(stop: object) -> None:
    x = 0
    while not stop.is_set():  # type: ignore[attr-defined]
        for _ in range(100000):
            x += 1


def main() -> int:
    """Run the grid, print the ratios, write the markdown table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--loads", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--cpu-workers", type=int, default=None,
                    help="edgert's CPU workers (default: the runtime's, one per core)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "mediapipe_peer.md"))
    args = ap.parse_args()
    frame = assets.sample_scene()
    host = host_line()
    rows = []
    for hog in (False, True):
        stop = mp.Event()
        proc = mp.Process(target=_hog, args=(stop,), daemon=True) if hog else None
        if proc:
            proc.start()
        for users in args.loads:
            (m, mc), (e, ec) = (run_mediapipe(frame, users, args.seconds),
                                run_edgert(frame, users, args.seconds, args.cpu_workers))
            rows.append((hog, users, m, mc, e, ec))
            print(f"{'hog ' if hog else 'idle'} {users}x  cores mp {mc:.2f} edgert {ec:.2f}", flush=True)
            for a, b in zip(m, e):
                print(f"   {a['stream']:<15} met% mp {a['met_pct']:5.1f} edgert {b['met_pct']:5.1f}  "
                      f"p50 {a['p50']:5.1f}/{b['p50']:5.1f}  p99 {a['p99']:5.1f}/{b['p99']:5.1f}", flush=True)
        if proc:
            stop.set()
            proc.join()
    Path(args.out).write_text(render(rows, args.seconds, host, f"cpu_workers={args.cpu_workers or 'default (one per core)'}"))
    print(f"wrote {args.out}")
    return 0


def render(rows: list, seconds: float, host: str = "", workers: str = "") -> str:
    """The results as a markdown table (one row per stream and configuration)."""
    lines = ["# edgert XR pipelines vs MediaPipe 0.10.14 (benchmarks/mediapipe_peer.py)", "",
             f"{seconds:.0f} s per configuration; met % = periods that produced a frame finished within the "
             "period with every stage's outputs (a frame with a dropped stage never counts); latencies in ms "
             "of finished frames (MediaPipe / edgert).", "", f"{host}, at the start of the run; "
             f"edgert: {workers}.", "",
             "| load | host | stream | met % MediaPipe | met % edgert | ratio | p50 MP | p50 edgert | p99 MP | p99 edgert |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for hog, users, m, mc, e, ec in rows:
        host = "hog" if hog else "idle"
        for a, b in zip(m, e):
            ratio = b["met_pct"] / a["met_pct"] if a["met_pct"] else float("inf")
            lines.append(f"| {users}× | {host} | {a['stream']} | {a['met_pct']:.1f} | {b['met_pct']:.1f} | "
                         f"{ratio:.2f} | {a['p50']:.1f} | {b['p50']:.1f} | {a['p99']:.1f} | {b['p99']:.1f} |")
        tm, te = sum(x["met_pct"] for x in m) / len(m), sum(x["met_pct"] for x in e) / len(e)
        lines.append(f"| {users}× | {host} | **mean** (cores MP {mc:.2f}, edgert {ec:.2f}) | {tm:.1f} | {te:.1f} | "
                     f"{te / tm if tm else float('inf'):.2f} | | | | |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
