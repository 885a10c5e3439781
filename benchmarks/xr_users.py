"""XR users per host on a MOVING camera: edgert's pipelines vs MediaPipe 0.10.14's own solutions.

The frames are the demo's moving sample scene (``apps.xr.assets.sample_frames``: 150 frames of
480×480, a slow pan and zoom over a face, a person and a hand), or ``--frames DIR`` (images in name
order). A 30 fps camera clock gives frame ``i`` at ``i / 30`` s; user k sees frame ``i - 40 k``
(as ``edgert run xr-demo --users N``: no two users see the same frame at once).

Per user, four streams, each on its own thread with latest-frame pacing (a frame that overruns
skips to the newest camera frame; the streams' periods start spread evenly over one camera period,
for both systems, as ``edgert run xr-demo`` spreads them): hands (max 2, full models), face mesh with iris, pose (full),
at 30 fps, selfie segmentation at 15 fps. MediaPipe runs each stream as its solution in video
mode (``mediapipe.solutions``: hands model_complexity 1, face_mesh refine_landmarks, pose
model_complexity 1, selfie_segmentation 0) in its own process and venv (``apps.xr.reference``); edgert runs ``apps.xr.Pipelines`` with tracking on one
runtime, each frame's requests sharing the period as their deadline (elastic, as the demo runs).

Per stream and cell:

* ``on time %``: periods of the run that produced a frame finished within its period with its
  whole answer (edgert: no stage dropped, the frame not shed), out of ``seconds * fps``;
* ``found``: instances found per answered frame (hands, faces, poses; 1 per mask); a frame edgert
  sheds whole, or one with a request the runtime dropped (it never ran), gave no answer and is not
  counted (as a period a latest-frame loop skips: MediaPipe's frames are always answered), so the
  column measures the answers' quality and ``on time`` their speed;
* ``err %``: mean landmark error against MediaPipe's static-image answer for the same source frame,
  as a share of the frame's diagonal, over processed frames whose source index is a multiple of
  ``--sample-every`` (an instance the reference has and the answer misses is not in the mean; the
  ``found`` column counts it).

Cells: each of ``--loads`` users, idle and beside one busy process (``--hog``), MediaPipe then edgert
back to back. Writes ``benchmarks/results/xr_users.md`` (or ``--out``).

    flock -x /tmp/edgert-cpu.lock python benchmarks/xr_users.py --loads 1 2 --hog off
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
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
from apps.xr import Pipelines, assets  # noqa: E402
from apps.xr import reference as mp_ref  # noqa: E402

CAMERA_FPS = 30.0
USER_LAG = 40
STREAMS = (("hands", 30.0), ("face", 30.0), ("pose", 30.0), ("segmentation", 15.0))
_OFF = {"max_hands": 0, "max_faces": 0, "pose": False, "segmentation": False}
EDGERT_CONFIG = {"face": {**_OFF, "max_faces": 1}, "hands": {**_OFF, "max_hands": 2},
                 "pose": {**_OFF, "pose": True}, "segmentation": {**_OFF, "segmentation": True}}
KIND = {"hands": "hands", "face": "faces", "pose": "poses"}


@dataclass(slots=True)
class Tally:
    """One stream's outcomes over a cell."""

    frames: int = 0
    on_time: int = 0
    shed: int = 0        # frames shed whole
    unanswered: int = 0  # frames shed whole or with a request that never ran (dropped / failed)
    found: int = 0
    samples: list[tuple[int, list[np.ndarray]]] = field(default_factory=list)   # (source index, instances)


#: (complete, instances found, landmark arrays, shed whole, answered: nothing of it dropped or failed)
Answer = tuple[bool, int, list[np.ndarray], bool, bool]


def load_frames(directory: str | None) -> list[np.ndarray]:
    """The source frames, uint8 RGB: ``directory``'s images in name order, or the moving sample scene."""
    if directory:
        from apps.camera import directory_frames  # noqa: PLC0415

        it = directory_frames(directory)
        first = next(it)
        out = [first]
        for f in it:
            if f.shape == first.shape and np.array_equal(f, first):
                break
            out.append(f)
        return [np.ascontiguousarray(np.clip(f * 255.0 + 0.5, 0, 255).astype(np.uint8)) for f in out]
    src = assets.sample_frames()
    return [next(src) for _ in range(150)]


def source_index(t_s: float, user: int, n: int) -> int:
    """The frame user ``user`` sees at ``t_s`` seconds into the run."""
    return (int(t_s * CAMERA_FPS) - USER_LAG * user) % n


def pace(answer: Callable[[int], Answer], fps: float, user: int, frames: int, seconds: float, start: float,
         tally: Tally, sample_every: int, phase_s: float = 0.0) -> None:
    """Latest-frame pacing: on each period boundary (``phase_s`` after the run's) process the user's newest
    frame; skip missed boundaries."""
    period = 1.0 / fps
    k = 0
    while True:
        t = start + phase_s + k * period
        if k >= round(seconds * fps):
            return
        now = time.perf_counter()
        if t > now:
            time.sleep(t - now)
        t1 = time.perf_counter()
        idx = source_index(t1 - start, user, frames)
        complete, n, lms, shed, answered = answer(idx)
        ms = (time.perf_counter() - t1) * 1e3
        tally.frames += 1
        tally.shed += shed
        tally.unanswered += not answered
        tally.found += n if answered else 0
        tally.on_time += complete and ms <= period * 1e3
        if idx % sample_every == 0 and answered:
            tally.samples.append((idx, lms))
        k = max(k + 1, int((time.perf_counter() - start - phase_s) / period) + 1)


def run_cell(answers: list[tuple[str, float, int, Callable[[int], Answer]]], frames: int, seconds: float,
             sample_every: int, cpu_s: Callable[[], float] = time.process_time) -> tuple[dict[str, Tally], float]:
    """Every (name, fps, user, answer) on its own thread for ``seconds``; tallies and cores used (by ``cpu_s``'s
    clock: this process's CPU seconds, or with MediaPipe's process's added)."""
    tallies = {name: Tally() for name, *_ in answers}
    start = time.perf_counter() + 0.2
    cpu0, w0 = cpu_s(), time.perf_counter()
    n = len(answers)   # the streams' periods start spread over one camera period, as in edgert run xr-demo
    threads = [threading.Thread(target=pace, args=(fn, fps, user, frames, seconds, start, tallies[name], sample_every,
                                                   j / n / CAMERA_FPS))
               for j, (name, fps, user, fn) in enumerate(answers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tallies, (cpu_s() - cpu0) / (time.perf_counter() - w0)


def _mp_answer(kind: str, r: mp_ref.Reference) -> Answer:
    if kind == "segmentation":
        ok = r.mask is not None
        return ok, int(ok), [], False, True
    found = {"hands": r.hands, "face": r.faces, "pose": r.poses}[kind]
    return True, len(found), found, False, True


def mediapipe_answers(frames: list[np.ndarray], users: int) -> tuple[list, Callable[[], None]]:
    """One MediaPipe solution per stream per user, in video mode, in MediaPipe's own process
    (``apps.xr.reference.Peer``, holding ``frames``: each answer is a frame index out and the answer back
    over a Unix socket), its solutions on that process's threads as the streams' here."""
    peer = mp_ref.Peer(frames)
    out, sols = [], []
    try:
        for u in range(users):
            for name, fps in STREAMS:
                sol = peer.solutions(static=False, **EDGERT_CONFIG[name])
                sols.append(sol)
                sol.process(0)
                out.append((_name(name, u, users), fps, u, lambda i, p=sol.process, k=name: _mp_answer(k, p(i))))
    except BaseException:
        peer.close()
        raise

    return out, _PeerClose(sols, peer)


@dataclass(slots=True)
class _PeerClose:
    """Closes MediaPipe's solutions and process (called); ``cpu_s``: this process's CPU seconds plus that one's."""

    sols: list[mp_ref.Solutions]
    peer: mp_ref.Peer

    def __call__(self) -> None:
        for x in self.sols:
            x.close()
        self.peer.close()

    def cpu_s(self) -> float:
        return time.process_time() + self.peer.cpu_s()


def _name(stream: str, user: int, users: int) -> str:
    return stream if users == 1 else f"{stream}#{user}"


def edgert_answers(rt: edgert.Runtime, frames: list[np.ndarray], users: int) -> list:
    """One ``Pipelines`` per stream per user on ``rt``, each frame with the period as its deadline."""
    out = []
    for u in range(users):
        for name, fps in STREAMS:
            px = Pipelines(rt, tracking=True, **EDGERT_CONFIG[name])
            px.process(frames[0])

            def answer(i: int, px: Pipelines = px, kind: str = name, ms: float = 1000.0 / fps) -> Answer:
                r = px.process(frames[i], deadline_ms=ms)
                complete = not r.shed and all(v.status in ("ok", "skipped") for v in r.stages.values())
                answered = not r.shed and all(v.status in ("ok", "late", "skipped") for v in r.stages.values())
                if kind == "segmentation":
                    return complete, int(r.mask is not None), [], bool(r.shed), answered
                inst = getattr(r, KIND[kind])
                return complete, len(inst), [x.landmarks for x in inst], bool(r.shed), answered
            out.append((_name(name, u, users), fps, u, answer))
    return out


def static_reference(frames: list[np.ndarray], sample_every: int) -> dict[int, dict[str, list[np.ndarray]]]:
    """MediaPipe's static-image answer on every sampled source frame: {index: {stream: instances}}."""
    sol = mp_ref.Solutions(static=True, segmentation=False)
    try:
        out = {}
        for i in range(0, len(frames), sample_every):
            r = sol.process(frames[i])
            out[i] = {"hands": r.hands, "face": r.faces, "pose": r.poses}
        return out
    finally:
        sol.close()


def landmark_error(t: Tally, kind: str, ref: dict[int, dict[str, list[np.ndarray]]], diag: float) -> float:
    """Mean matched landmark error (share of the diagonal) over the sampled frames; nan when none matched."""
    if kind not in KIND:
        return float("nan")
    errs = [e for idx, lms in t.samples for e in mp_ref.match_error(lms, ref[idx][kind], diag) if np.isfinite(e)]
    return float(np.mean(errs)) if errs else float("nan")


def _hog(stop: object) -> None:
    x = 0
    while not stop.is_set():  # type: ignore[attr-defined]
        for _ in range(100000):
            x += 1


def rows_of(system: str, users: int, hog: bool, tallies: dict[str, Tally], cores: float, seconds: float,
            ref: dict, diag: float) -> list[dict]:
    """One row per stream of a cell."""
    fps = dict(STREAMS)
    out = []
    for name, t in tallies.items():
        kind = name.split("#")[0]
        out.append({"system": system, "users": users, "hog": hog, "stream": name, "cores": cores,
                    "on_time_pct": 100.0 * t.on_time / (seconds * fps[kind]),
                    "found": t.found / (t.frames - t.unanswered) if t.frames > t.unanswered else 0.0,
                    "frames": t.frames, "shed": t.shed, "unanswered": t.unanswered,
                    "err_pct": 100.0 * landmark_error(t, kind, ref, diag)})
    return out


def render(rows: list[dict], seconds: float, host: str, command: str) -> str:
    """The table: one line per (users, host, stream), MediaPipe and edgert side by side."""
    lines = ["# XR users per host on the moving sample scene: edgert vs MediaPipe 0.10.14 "
             "(benchmarks/xr_users.py)", "", f"`{command}`", "", f"{host}; {seconds:.0f} s per cell.", "",
             "| users | host | stream | on time % MP | on time % edgert | found MP | found edgert | "
             "err % MP | err % edgert | cores MP / edgert |", "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    by = {(r["system"], r["users"], r["hog"], r["stream"]): r for r in rows}
    for (system, users, hog, stream), m in by.items():
        if system != "mediapipe":
            continue
        e = by.get(("edgert", users, hog, stream))
        if e is None:
            continue
        lines.append(f"| {users} | {'hog' if hog else 'idle'} | {stream} | {m['on_time_pct']:.1f} | "
                     f"{e['on_time_pct']:.1f} | {m['found']:.2f} | {e['found']:.2f} | {m['err_pct']:.2f} | "
                     f"{e['err_pct']:.2f} | {m['cores']:.2f} / {e['cores']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    """Run the cells, print each stream side by side, write the markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--loads", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--hog", choices=("off", "on", "both"), default="both")
    ap.add_argument("--frames", default=None, help="a directory of images (default: the moving sample scene)")
    ap.add_argument("--sample-every", type=int, default=10, help="landmark error on source frames i %% N == 0")
    ap.add_argument("--systems", nargs="+", default=["mediapipe", "edgert"], choices=("mediapipe", "edgert"))
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "xr_users.md"))
    args = ap.parse_args()
    frames = load_frames(args.frames)
    diag = float(np.hypot(*frames[0].shape[:2]))
    ref = static_reference(frames, args.sample_every)
    host = host_line()
    rows: list[dict] = []
    hogs = {"off": [False], "on": [True], "both": [False, True]}[args.hog]
    with edgert.Runtime() as rt:
        for hog in hogs:
            stop = mp.Event()
            proc = mp.Process(target=_hog, args=(stop,), daemon=True) if hog else None
            if proc:
                proc.start()
            for users in args.loads:
                for system in args.systems:
                    if system == "mediapipe":
                        answers, close = mediapipe_answers(frames, users)
                    else:
                        answers, close = edgert_answers(rt, frames, users), (lambda: None)
                    tallies, cores = run_cell(answers, len(frames), args.seconds, args.sample_every,
                                              getattr(close, "cpu_s", time.process_time))
                    close()
                    rows += rows_of(system, users, hog, tallies, cores, args.seconds, ref, diag)
                for r in rows[-len(args.systems) * 4 * users:]:
                    print(f"{'hog ' if hog else 'idle'} {users}x {r['system']:<9} {r['stream']:<15} "
                          f"on time {r['on_time_pct']:5.1f}%  found {r['found']:.2f}  err {r['err_pct']:.2f}%  "
                          f"shed {r['shed']:3d} no answer {r['unanswered']:3d}/{r['frames']:3d}  "
                          f"cores {r['cores']:.2f}", flush=True)
            if proc:
                stop.set()
                proc.join()
    command = "python benchmarks/xr_users.py " + " ".join(sys.argv[1:])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(render(rows, args.seconds, host, command))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
