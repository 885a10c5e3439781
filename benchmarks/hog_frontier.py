"""Beside a CPU hog: what edgert's CPU workers buy and cost, with MediaPipe side by side (issue 15).

One busy process (``mediapipe_peer._hog``) shares the 2 cores with the app. MediaPipe runs a graph
per stream, each with its own threads; edgert runs its models on ``cpu_workers`` non-preemptive
worker threads. The OS shares the cores among runnable threads, so edgert's share of them grows
with its workers (2 workers + the hog: at most 2·2/3 = 1.33 cores) — but so does the time a short
request waits for the OS while it runs: with more runnable threads than cores, a thread that is
runnable waits its turn behind the others, whoever asked for it.

For each load (users), one MediaPipe run and edgert with each worker count, ``--reps`` times.
Per stream kind (face, hands, pose, segmentation): the lowest and the mean share of frames
finished within their period over that kind's streams; cores used; and, from the runtime's
records, the face landmark model's run time p50 / p99 (ms of wall time; its CPU time is ~0.8 ms
here, so the rest of a long run is time the OS gave the core to another thread).

    python benchmarks/hog_frontier.py [--users 2 3] [--workers 2 3 4] [--reps 2] [--seconds 10]

Writes benchmarks/results/hog_frontier.md.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import host_line, markdown_doc  # noqa: E402
from mediapipe_peer import STREAMS, _hog, run_edgert, run_mediapipe  # noqa: E402

from apps.xr import assets  # noqa: E402

KINDS = [name for name, _ in STREAMS]


def by_kind(rows: list[dict]) -> dict[str, tuple[float, float]]:
    """Stream kind -> (lowest, mean) met % over that kind's streams."""
    out = {}
    for k in KINDS:
        v = [r["met_pct"] for r in rows if r["stream"].split("#")[0] == k]
        out[k] = (min(v), sum(v) / len(v))
    return out


def face_run_ms(records: list) -> tuple[float, float]:
    """p50 / p99 wall time (ms) of the face landmark model's runs in ``records``."""
    a = np.array([r.end_ms - r.start_ms for r in records if r.model == "face_landmark" and r.status in ("ok", "late")])
    return (float(np.percentile(a, 50)), float(np.percentile(a, 99))) if a.size else (float("nan"),) * 2


def main() -> int:
    """Run the grid beside the hog and write the table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 3, 4])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "hog_frontier.md"))
    args = ap.parse_args()
    frame = assets.sample_scene()
    host = host_line()
    stop = mp.Event()
    hog = mp.Process(target=_hog, args=(stop,), daemon=True)
    hog.start()
    lines = []
    try:
        for users in args.users:
            for rep in range(args.reps):
                m, mc = run_mediapipe(frame, users, args.seconds)
                lines.append(row(users, rep, "MediaPipe", by_kind(m), mc, None))
                print(lines[-1], flush=True)
                for w in args.workers:
                    recs: dict = {}
                    e, ec = run_edgert(frame, users, args.seconds, w, recs)
                    lines.append(row(users, rep, f"edgert, {w} workers", by_kind(e), ec, face_run_ms(recs["records"])))
                    print(lines[-1], flush=True)
    finally:
        stop.set()
        hog.join()
    Path(args.out).write_text(render(lines, args.seconds, host))
    print(f"wrote {args.out}")
    return 0


def row(users: int, rep: int, who: str, kinds: dict[str, tuple[float, float]], cores: float,
        face_ms: tuple[float, float] | None) -> str:
    """One markdown row: lowest / mean met % per stream kind, the total mean, cores, face run times."""
    cells = " | ".join(f"{lo:.1f} / {mean:.1f}" for lo, mean in kinds.values())
    total = sum(mean for _, mean in kinds.values()) / len(kinds)
    fm = "" if face_ms is None else f"{face_ms[0]:.1f} / {face_ms[1]:.1f}"
    return f"| {users}× | {rep + 1} | {who} | {cells} | {total:.1f} | {cores:.2f} | {fm} |"


def render(lines: list[str], seconds: float, host: str) -> str:
    """The markdown table."""
    return markdown_doc(
        "Beside a CPU hog: edgert's worker count vs MediaPipe (benchmarks/hog_frontier.py)",
        [(f"{seconds:.0f} s per run, one busy process beside the app; {host}, at the start.\n"
         "Cells: lowest / mean % of frames finished within their period over that kind's streams "
         "(one stream per user); total = mean over kinds; face landmark run: wall ms p50 / p99 "
         "(its CPU time is ~0.8 ms).")],
        ["users", "rep", "runtime", "face", "hands", "pose", "segmentation", "total", "cores", "face landmark run ms"],
        lines, range(3, 10))


if __name__ == "__main__":
    sys.exit(main())
