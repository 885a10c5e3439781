"""Where the last frames go at 1× and 2× on a quiet host: the runtimes' own misses, or the host's stalls?

At 1× and 2× users (``mediapipe_peer.py``'s streams) both MediaPipe and edgert finish 98.7-100 % of
every stream's frames, and which of them is ahead on a stream changes from run to run. This script
runs the two side by side, ``--reps`` times, and sorts every frame that did not finish within its
period:

* **shared**: at least half of the run's other streams also had a frame over its period overlapping
  this one. Streams of one user do not wait for each other (each is paced by its own thread), so
  frames of every stream late together mean the whole process stalled at once.
* for edgert, **slow runs**: the model runs overlapping the late frame took at least 1.5× their
  model's median run time in that run (median over the overlapping runs), i.e. the host ran the
  same work slower, with nothing queued in front of it. The runtime's records give these.

A late frame that is neither is the runtime's own: its scheduling or its Python. Writes
benchmarks/results/host_stalls.md.

    python benchmarks/host_stalls.py [--users 1 2] [--reps 3] [--seconds 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import host_line, markdown_doc  # noqa: E402
from mediapipe_peer import run_edgert, run_mediapipe  # noqa: E402

from apps.xr import assets  # noqa: E402

#: runs this much slower than their model's median count as the host's (×)
SLOW = 1.5


def shared_misses(streams: list[dict]) -> list[tuple[str, float, bool]]:
    """Every late frame as (stream, start s, shared): shared when at least half of the other streams
    had a late frame overlapping it."""
    spans = [[(t, t + s["period_s"]) for t in s["missed_at"]] for s in streams]
    need = max(1, (len(streams) - 1 + 1) // 2)
    out = []
    for i, s in enumerate(streams):
        for a, b in spans[i]:
            others = sum(any(c < b and a < d for c, d in spans[j]) for j in range(len(streams)) if j != i)
            out.append((s["stream"], a, others >= need))
    return out


def slowdown(records: list, t0_s: float, a_s: float, b_s: float, medians: dict[str, float]) -> float:
    """Median over the model runs overlapping [a_s, b_s] of run time / its model's median (nan if none)."""
    lo, hi = (a_s - t0_s) * 1e3, (b_s - t0_s) * 1e3
    ratios = [(r.end_ms - r.start_ms) / medians[r.model] for r in records
              if r.status in ("ok", "late") and r.start_ms < hi and lo < r.end_ms and medians.get(r.model)]
    return statistics.median(ratios) if ratios else float("nan")


def run_medians(records: list) -> dict[str, float]:
    """Each model's median run time (ms) over the run."""
    runs: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.status in ("ok", "late"):
            runs[r.model].append(r.end_ms - r.start_ms)
    return {m: statistics.median(v) for m, v in runs.items()}


def main() -> int:
    """Run both runtimes ``--reps`` times per load and write the table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "host_stalls.md"))
    args = ap.parse_args()
    frame = assets.sample_scene()
    host = host_line()
    lines = []
    for users in args.users:
        for rep in range(args.reps):
            m, _ = run_mediapipe(frame, users, args.seconds)
            rec: dict = {}
            e, _ = run_edgert(frame, users, args.seconds, None, rec)
            med = run_medians(rec["records"])
            for who, streams in (("MediaPipe", m), ("edgert", e)):
                late = shared_misses(streams)
                slow = [s for s in late if who == "edgert" and slowdown(
                    rec["records"], rec["t0_s"], s[1], s[1] + _period(streams, s[0]), med) >= SLOW]
                own = [s for s in late if not s[2] and s not in slow]
                t0 = streams[0]["start_s"]
                total = sum(round(x["met_pct"] * x["period_s"] ** -1 * args.seconds / 100) for x in streams)
                lines.append(f"| {users}× | {rep + 1} | {who} | {total} | {len(late)} | "
                             f"{sum(s[2] for s in late)} | {len(slow) if who == 'edgert' else '–'} | {len(own)} | "
                             f"{', '.join(f'{n} {t - t0:.2f}' for n, t, _ in own)} |")
                print(lines[-1], flush=True)
    Path(args.out).write_text(render(lines, args.seconds, host))
    print(f"wrote {args.out}")
    return 0


def _period(streams: list[dict], name: str) -> float:
    return next(s["period_s"] for s in streams if s["stream"] == name)


def render(lines: list[str], seconds: float, host: str) -> str:
    """The markdown table."""
    return markdown_doc(
        "Late frames on a quiet host: the runtime's or the host's? (benchmarks/host_stalls.py)",
        [(f"{seconds:.0f} s per run; {host}, at the start.\n"
         "met: frames finished within their period, all streams; late: frames over their period; "
         "shared: of those, frames during which at least half of the other streams also ran late; "
         f"slow runs (edgert): of those, frames whose overlapping model runs took ≥ {SLOW}× their "
         "model's median; own: late frames that are neither (stream, and s from the run's first frame).")],
        ["users", "rep", "runtime", "met", "late", "shared", "slow runs", "own", "own late frames"],
        lines, range(3, 8))


if __name__ == "__main__":
    sys.exit(main())
