"""XR streams under overload: edgert with declared priorities, edgert without, and MediaPipe 0.10.14 side by side.

The cells are hosts that cannot serve every stream: one user beside a busy process (``hog``), two
and three users, one user pinned to one core (``pin``). In each, the same frames (the demo's moving
sample scene, or ``--frames DIR``) and the same pacing as ``benchmarks/xr_users.py``: per user four
streams on their own threads with latest-frame pacing (hands, face, pose at 30 fps, segmentation at
15), user k's camera 40·k frames behind. MediaPipe runs each stream as its solution in video mode;
edgert runs ``apps.xr.Pipelines`` on a fresh runtime per run (so no run inherits another's estimates
or rate ladder), each frame with the stream's period as its deadline, once without priorities and
once with ``--priority`` (default ``hands=critical,face=high,pose=normal,segmentation=low``; with
several users a level applies to that stream of every user).

Per stream and run:

* ``on time %``: frames finished within their deadline with their whole answer, out of
  ``seconds × fps`` expected (the nominal rate: a stream its ladder stepped down to 15 fps can reach
  50 %); a frame's deadline is its stream's period at the rate it ran (MediaPipe: the nominal one);
* ``late %``: frames processed whose result came after their deadline, out of the frames taken;
* ``fps``: on-time results per second;
* ``score``: XRBench's real-time score, 1/(1+e^(15·(finish−deadline))) with times in ms, summed over
  the frames answered and divided by the frames expected (a frame not answered scores 0, as a frame
  XRBench counts dropped);
* ``err``: edgert's finish-time prediction error for the frames it admitted (actual − predicted
  finish, ms from the frame's start): mean of its absolute value and its 90th percentile.

Then, per cell, the mean over streams (the median of the runs) and the issue's bar, line by line.

    flock /tmp/edgert-bench.lock python benchmarks/xr_overload.py --cells hog1 users2 --runs 2 [--systems … edgert+prio+room]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import edgert  # noqa: E402
from _common import host_line  # noqa: E402
from apps.xr import Pipelines, urgent_workers_for  # noqa: E402
import xr_users  # noqa: E402
from xr_users import CAMERA_FPS, EDGERT_CONFIG, STREAMS, _hog, _name, load_frames, source_index  # noqa: E402

#: cell name -> (users, a busy process beside, pinned to one core)
CELLS: dict[str, tuple[int, bool, bool]] = {"hog1": (1, True, False), "users2": (2, False, False),
                                            "users3": (3, False, False), "pin1": (1, False, True)}
DEFAULT_PRIORITY = "hands=critical,face=high,pose=normal,segmentation=low"
SYSTEMS = ("mediapipe", "edgert", "edgert+prio")
#: the last edgert run's Pipelines by stream (what their budgets decided goes in the log)
PIPES: dict[str, Pipelines] = {}
#: ablation, on request: with priorities, and the policy keeps room for the next critical frame (keep_room)
ABLATION = "edgert+prio+room"


@dataclass(slots=True)
class Outcome:
    """One frame of a stream: whether it was taken, its answer, and (edgert) its deadline and prediction error."""

    complete: bool = True
    shed: bool = False
    rate_skipped: bool = False
    deadline_ms: float | None = None
    error_ms: float | None = None


@dataclass(slots=True)
class Tally:
    """One stream's outcomes over a run."""

    frames: int = 0
    on_time: int = 0
    late: int = 0
    shed: int = 0
    dropped: int = 0
    rate_skipped: int = 0
    score: float = 0.0
    errors_ms: list[float] = field(default_factory=list)


def realtime_score(finish_ms: float, deadline_ms: float) -> float:
    """XRBench's real-time score of one frame: 1/(1+e^(15·(finish−deadline))), times in ms."""
    x = 15.0 * (finish_ms - deadline_ms)
    return 0.0 if x > 700 else 1.0 / (1.0 + math.exp(x))


def pace(answer: Callable[[int], Outcome], fps: float, user: int, frames: int, seconds: float, start: float,
         tally: Tally, phase_s: float) -> None:
    """Latest-frame pacing (as ``xr_users.pace``), tallying each frame by its own deadline."""
    period = 1.0 / fps
    k = 0
    while k < round(seconds * fps):
        t = start + phase_s + k * period
        now = time.perf_counter()
        if t > now:
            time.sleep(t - now)
        t1 = time.perf_counter()
        o = answer(source_index(t1 - start, user, frames))
        ms = (time.perf_counter() - t1) * 1e3
        if o.rate_skipped:
            tally.rate_skipped += 1
        else:
            tally.frames += 1
            deadline = o.deadline_ms or period * 1e3
            if o.shed:
                tally.shed += 1
            elif ms > deadline:
                tally.late += 1
            elif o.complete:
                tally.on_time += 1
            else:
                tally.dropped += 1
            if not o.shed and o.complete:
                tally.score += realtime_score(ms, deadline)
            if o.error_ms is not None:
                tally.errors_ms.append(o.error_ms)
        k = max(k + 1, int((time.perf_counter() - start - phase_s) / period) + 1)


def run_cell(answers: list[tuple[str, float, int, Callable[[int], Outcome]]], frames: int,
             seconds: float) -> dict[str, Tally]:
    """Every (name, fps, user, answer) on its own thread for ``seconds``, periods spread over one camera period."""
    tallies = {name: Tally() for name, *_ in answers}
    start = time.perf_counter() + 0.2
    n = len(answers)
    threads = [threading.Thread(target=pace, args=(fn, fps, user, frames, seconds, start, tallies[name],
                                                   j / n / CAMERA_FPS))
               for j, (name, fps, user, fn) in enumerate(answers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tallies


def mediapipe_answers(frames: list[np.ndarray], users: int) -> tuple[list, Callable[[], None]]:
    """``xr_users``' MediaPipe solutions (one per stream per user, video mode), each answer as an :class:`Outcome`."""
    answers, close = xr_users.mediapipe_answers(frames, users)

    def outcome(answer: Callable[[int], tuple]) -> Callable[[int], Outcome]:
        return lambda i: Outcome(complete=answer(i)[0])

    return [(name, fps, user, outcome(answer)) for name, fps, user, answer in answers], close


def edgert_answers(rt: edgert.Runtime, frames: list[np.ndarray], users: int,
                   priority: dict[str, str]) -> list:
    """One ``Pipelines`` per stream per user on ``rt`` (named as the demo names them), each frame with the
    stream's period as its deadline."""
    out = []
    for u in range(users):
        for name, fps in STREAMS:
            px = Pipelines(rt, tracking=True, priority=priority, stream=_name(name, u, users), **EDGERT_CONFIG[name])
            px.process(frames[0])

            PIPES[_name(name, u, users)] = px

            def answer(i: int, px: Pipelines = px, ms: float = 1000.0 / fps) -> Outcome:
                r = px.process(frames[i], deadline_ms=ms)
                complete = not r.shed and all(v.status in ("ok", "skipped") for v in r.stages.values())
                err = None if r.predicted_ms is None or r.elapsed_ms is None else r.elapsed_ms - r.predicted_ms
                return Outcome(complete, bool(r.shed), r.rate_skipped, r.budget_ms, err)
            out.append((_name(name, u, users), fps, u, answer))
    return out


def _ladder_steps(rt: edgert.Runtime) -> list[str]:
    """The runtime's streams' latest rate steps, for the run's record."""
    steps = sorted((st["at_ms"], name, st) for name, s in rt.streams.items() for st in s.stats()["steps"])
    if not steps:
        return []
    t0 = steps[0][0]
    return [f"+{(t - t0) / 1e3:.1f}s {name} {st['from_fps']:g}->{st['to_fps']:g}" for t, name, st in steps]


def _shed_reasons(rt: edgert.Runtime) -> list[str]:
    """Each stream's frames not taken, by the controller's reason, for the run's record."""
    out = []
    for name, s in sorted(rt.streams.items()):
        by = s.stats()["frames_shed_by"]
        if by:
            out.append(f"{name} shed " + ", ".join(f"{why} {n}" for why, n in sorted(by.items())))
    return out


def one_run(system: str, frames: list[np.ndarray], users: int, seconds: float,
            priority: dict[str, str]) -> tuple[dict[str, Tally], list[str]]:
    """One system on one cell's load for ``seconds``: its tallies and (edgert) its ladder steps."""
    if system == "mediapipe":
        answers, close = mediapipe_answers(frames, users)
        try:
            return run_cell(answers, len(frames), seconds), []
        finally:
            close()
    from scheduler.policies.edgert import EdgertPolicy  # noqa: PLC0415

    levels = priority if system != "edgert" else {}
    with edgert.Runtime(scheduler=EdgertPolicy(keep_room=system == ABLATION), urgent_workers=urgent_workers_for(levels)) as rt:
        answers = edgert_answers(rt, frames, users, levels)
        tallies = run_cell(answers, len(frames), seconds)
        return tallies, [f"thread priorities {rt.thread_priority}", *_ladder_steps(rt), *_shed_reasons(rt)]


def rows_of(cell: str, run: int, system: str, tallies: dict[str, Tally], seconds: float,
            priority: dict[str, str]) -> list[dict]:
    """One row per stream of a run."""
    fps = dict(STREAMS)
    out = []
    for name, t in tallies.items():
        kind = name.split("#")[0]
        expected = seconds * fps[kind]
        e = np.abs(t.errors_ms) if t.errors_ms else None
        out.append({"cell": cell, "run": run, "system": system, "stream": name,
                    "priority": priority.get(kind, "normal") if system.startswith("edgert+prio") else "-",
                    "on_time_pct": 100.0 * t.on_time / expected, "late_pct": 100.0 * t.late / t.frames if t.frames else 0.0,
                    "fps": t.on_time / seconds, "score": t.score / expected, "frames": t.frames, "late": t.late,
                    "shed": t.shed, "dropped": t.dropped,
                    "err_abs_ms": float(e.mean()) if e is not None else float("nan"),
                    "err_p90_ms": float(np.percentile(t.errors_ms, 90)) if t.errors_ms else float("nan")})
    return out


def cell_means(rows: list[dict], cell: str, system: str) -> list[float]:
    """The mean over streams of ``on time %``, one per run."""
    runs = sorted({r["run"] for r in rows if r["cell"] == cell and r["system"] == system})
    return [float(np.mean([r["on_time_pct"] for r in rows if r["cell"] == cell and r["system"] == system
                           and r["run"] == k])) for k in runs]


#: the issue's floor for every stream's on-time share (each stream's median over the runs), per cell
FLOOR_PCT = {"users3": 20.0}
FLOOR_DEFAULT_PCT = 25.0


def bar_lines(rows: list[dict], cells: list[str]) -> list[str]:
    """The issue's bar for the runs with priorities, per cell: each line met or not, with its numbers.

    Hands (critical) on time >= 95 % in every run; no stream below the floor (25 %, 20 % at 3 users),
    each stream's median of the runs; late <= 5 % of the frames taken in every stream and run; the mean
    >= MediaPipe's + 10 and >= the same cell without priorities − 5 (medians of the runs)."""
    out = []
    for cell in cells:
        of = [r for r in rows if r["cell"] == cell]
        if not {"mediapipe", "edgert", "edgert+prio"} <= {r["system"] for r in of}:
            continue
        mp_mean = statistics.median(cell_means(rows, cell, "mediapipe"))
        pr = [r for r in of if r["system"] == "edgert+prio"]
        hands = [r["on_time_pct"] for r in pr if r["priority"] == "critical"]
        per_stream = {name: statistics.median(r["on_time_pct"] for r in pr if r["stream"] == name)
                      for name in {r["stream"] for r in pr}}
        lowest = min(per_stream, key=per_stream.__getitem__)
        floor = FLOOR_PCT.get(cell, FLOOR_DEFAULT_PCT)
        pr_mean = statistics.median(cell_means(rows, cell, "edgert+prio"))
        plain_mean = statistics.median(cell_means(rows, cell, "edgert"))
        late = max(pr, key=lambda r: r["late_pct"])

        def verdict(ok: bool) -> str:
            return "met" if ok else "NOT met"
        out += [f"- {cell}: critical streams on time >= 95 % in every run: {verdict(min(hands) >= 95)} "
                f"(lowest {min(hands):.1f} %)",
                f"- {cell}: every stream on time >= {floor:.0f} % (its median of the runs): "
                f"{verdict(per_stream[lowest] >= floor)} (lowest {lowest} {per_stream[lowest]:.1f} %)",
                f"- {cell}: late <= 5 % of frames taken in every stream and run: {verdict(late['late_pct'] <= 5)} "
                f"(highest {late['stream']} {late['late_pct']:.1f} %)",
                f"- {cell}: mean >= MediaPipe's + 10: {verdict(pr_mean >= mp_mean + 10)} "
                f"({pr_mean:.1f} vs {mp_mean:.1f} %)",
                f"- {cell}: mean >= the same cell without priorities − 5: {verdict(pr_mean >= plain_mean - 5)} "
                f"({pr_mean:.1f} vs {plain_mean:.1f} %)"]
    return out


def render(rows: list[dict], cells: list[str], seconds: float, host: str, command: str,
           steps: dict[tuple[str, int, str], list[str]]) -> str:
    """The tables: per cell and stream, each system's runs side by side; the means; the bar; the ladder steps."""
    lines = ["# XR streams under overload: edgert with priorities, without, and MediaPipe 0.10.14 "
             "(benchmarks/xr_overload.py)", "", f"`{command}`", "", f"{host}; {seconds:.0f} s per run.", "",
             "Per stream: on time % of expected frames / late % of frames taken / on-time fps / XRBench-style "
             "score; err = edgert's finish-time prediction error (mean |actual - predicted| / p90 of "
             "actual - predicted, ms).", ""]
    for cell in cells:
        users, hog, pin = CELLS[cell]
        lines += [f"## {cell}: {users} user(s){', beside a busy process' if hog else ''}"
                  f"{', pinned to one core' if pin else ''}", "",
                  "| run | stream | prio | MediaPipe | edgert | edgert+prio | err edgert | err edgert+prio |",
                  "|---|---|---|---|---|---|---|---|"]
        by = {(r["system"], r["run"], r["stream"]): r for r in rows if r["cell"] == cell}
        for run, stream in dict.fromkeys((run, stream) for _, run, stream in by):   # (whichever systems ran)
            m, e, p = (by.get((system, run, stream)) for system in SYSTEMS)

            def fig(r: dict | None) -> str:
                return "-" if r is None else (f"{r['on_time_pct']:.1f} / {r['late_pct']:.1f} / {r['fps']:.1f} / "
                                              f"{r['score']:.2f}")

            def err(r: dict | None) -> str:
                return "-" if r is None or math.isnan(r["err_abs_ms"]) else f"{r['err_abs_ms']:.1f} / {r['err_p90_ms']:.1f}"
            lines.append(f"| {run} | {stream} | {p['priority'] if p else '-'} | {fig(m)} | {fig(e)} | {fig(p)} | "
                         f"{err(e)} | {err(p)} |")
        means = {s: cell_means(rows, cell, s) for s in (*SYSTEMS, ABLATION)}
        lines += ["", "mean over streams, per run: " + "; ".join(
            f"{s} {' / '.join(f'{v:.1f}' for v in means[s])} (median {statistics.median(means[s]):.1f})"
            for s in (*SYSTEMS, ABLATION) if means[s]), ""]
        for (c, run, system), st in sorted(steps.items()):
            if c == cell and st:
                lines.append(f"controller, run {run}, {system}: " + ", ".join(st))
        lines.append("")
    lines += ["## Bar", "", *bar_lines(rows, cells), ""]
    return "\n".join(lines)


def main() -> int:
    """Run the cells, print each run's streams, write the markdown."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--cells", nargs="+", default=["hog1", "users2"], choices=tuple(CELLS))
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=(*SYSTEMS, ABLATION))
    ap.add_argument("--priority", default=DEFAULT_PRIORITY, help="stream=level,… for the edgert+prio runs")
    ap.add_argument("--frames", default=None, help="a directory of images (default: the moving sample scene)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "xr_overload.md"))
    ap.add_argument("--unprivileged", action="store_true",
                    help="run as a process without CAP_SYS_NICE (capsh --drop=cap_sys_nice), as an app its user "
                         "runs: the runtime then reports thread priorities off")
    args = ap.parse_args()
    if args.unprivileged and os.geteuid() == 0:
        argv = [a for a in sys.argv[1:] if a != "--unprivileged"]
        if "--out" not in argv:   # (relative where it can be: the results file records its command)
            out = Path(args.out).with_name(Path(args.out).stem + "_unprivileged.md")
            argv += ["--out", os.path.relpath(out) if out.is_relative_to(Path.cwd()) else str(out)]
        cmd = " ".join([sys.executable, str(Path(__file__).resolve()), *argv])
        return subprocess.call(["capsh", "--drop=cap_sys_nice", "--", "-c", cmd])
    from scheduler.priority import parse_levels  # noqa: PLC0415

    priority = parse_levels(args.priority, [n for n, _ in STREAMS])
    frames = load_frames(args.frames)
    host = host_line()
    rows: list[dict] = []
    steps: dict[tuple[str, int, str], list[str]] = {}
    cores = os.sched_getaffinity(0)
    for cell in args.cells:
        users, hog, pin = CELLS[cell]
        os.sched_setaffinity(0, {min(cores)} if pin else cores)
        stop = mp.Event()
        proc = mp.Process(target=_hog, args=(stop,), daemon=True) if hog else None
        if proc:
            proc.start()
        try:
            for run in range(1, args.runs + 1):
                for system in args.systems:
                    tallies, st = one_run(system, frames, users, args.seconds, priority)
                    steps[(cell, run, system)] = st
                    new = rows_of(cell, run, system, tallies, args.seconds, priority)
                    rows += new
                    for r in new:
                        px = PIPES.get(r["stream"]) if system != "mediapipe" else None
                        why = px.elastic_counts()["frames_shed_by"] if px is not None else {}
                        print(f"{cell} run {run} {system:<12} {r['stream']:<15} on time {r['on_time_pct']:5.1f}%  "
                              f"late {r['late_pct']:4.1f}%  fps {r['fps']:4.1f}  score {r['score']:.2f}  "
                              f"err {r['err_abs_ms']:.1f}/{r['err_p90_ms']:.1f} ms  frames {r['frames']} "
                              f"shed {r['shed']} {why} dropped {r['dropped']}", flush=True)
        finally:
            if proc:
                stop.set()
                proc.join()
            os.sched_setaffinity(0, cores)
    command = "python benchmarks/xr_overload.py " + " ".join(sys.argv[1:])
    text = render(rows, args.cells, args.seconds, host, command, steps)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text[text.index("## Bar"):])
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
