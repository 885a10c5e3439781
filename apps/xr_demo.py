"""The XR demo (``edgert run xr-demo``): MediaPipe cascades per frame at XR rates, with deadlines.

Four streams share the host's processors through one ``edgert.Runtime``:

=============  =====  ==========================================================
stream         fps    cascade (each stage waits for the one before it)
=============  =====  ==========================================================
hand           30     palm_detection_lite → hand_landmark_lite
face           30     face_detection_short_range → face_landmark → iris_landmark
pose           15     pose_detection → pose_landmark_full
segmentation   15     selfie_segmentation
=============  =====  ==========================================================

Every stage of a frame shares the frame's deadline: the stream's next frame
boundary (1000 / fps ms after the frame). The landmark stages look at a fixed
region of interest of the frame rather than decoding the detector's anchors:
the models, the cascade dependency and the deadlines are real, the crop is not
data-dependent. The camera is synthetic unless ``--frames DIR`` is given.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import edgert
from apps.camera import Resizer, directory_frames, synthetic_frames
from edgert import zoo

Box = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class Stage:
    """One model of a cascade and the region of the frame it looks at (y0, x0, y1, x1 fractions)."""

    model: str
    box: Box = (0.0, 0.0, 1.0, 1.0)


@dataclass(frozen=True, slots=True)
class Stream:
    """A periodic stream: a cascade of stages run on every ``1000 / fps`` ms frame."""

    name: str
    fps: float
    stages: tuple[Stage, ...]

    @property
    def period_ms(self) -> float:
        """Frame period, which is also each frame's deadline (ms)."""
        return 1000.0 / self.fps


STREAMS: tuple[Stream, ...] = (
    Stream("hand", 30.0, (Stage("palm_detection_lite"), Stage("hand_landmark_lite", (0.2, 0.3, 0.8, 0.7)))),
    Stream("face", 30.0, (Stage("face_detection_short_range"), Stage("face_landmark", (0.1, 0.3, 0.6, 0.7)),
                          Stage("iris_landmark", (0.25, 0.4, 0.35, 0.5)))),
    Stream("pose", 15.0, (Stage("pose_detection"), Stage("pose_landmark_full", (0.0, 0.2, 1.0, 0.8)))),
    Stream("segmentation", 15.0, (Stage("selfie_segmentation"),)),
)

CAMERA_FPS = 30.0


class XRSession:
    """Drives the streams on a runtime: one camera tick per 1000/CAMERA_FPS ms, cascades via callbacks."""

    def __init__(self, rt: edgert.Runtime, model_paths: dict[str, Path],
                 streams: tuple[Stream, ...] = STREAMS) -> None:
        self.rt = rt
        self.streams = streams
        self.resize = Resizer()
        self.models: dict[str, edgert.Model] = {}
        for s in streams:
            for i, st in enumerate(s.stages):
                if st.model not in self.models:
                    then = tuple(x.model for x in s.stages[i + 1:])
                    self.models[st.model] = rt.load(model_paths[st.model], name=st.model, then=then)
        self.frames_started = 0
        self.frames_met = {s.name: 0 for s in streams}
        self.frames_total = {s.name: 0 for s in streams}
        self._lock = threading.Lock()

    def _input(self, stage: Stage, frame: np.ndarray) -> np.ndarray:
        _, h, w, _ = self.models[stage.model].inputs[0].shape
        return self.resize(frame, int(h), int(w), stage.box)

    def start_frame(self, stream: Stream, frame: np.ndarray) -> None:
        """Submit the first stage of ``stream`` for ``frame`` inside a frame deadline."""
        first = stream.stages[0]
        with self.rt.frame(deadline_ms=stream.period_ms):
            fut = self.models[first.model].submit(self._input(first, frame))
        fut.add_done_callback(partial(self._next, stream, 1, frame))

    def _next(self, stream: Stream, i: int, frame: np.ndarray, fut: Future[edgert.Result]) -> None:
        res = fut.result()
        if i >= len(stream.stages) or res.outputs is None:
            with self._lock:
                self.frames_total[stream.name] += 1
                if res.status == "ok" and i >= len(stream.stages):
                    self.frames_met[stream.name] += 1
            return
        st = stream.stages[i]
        nxt = self.models[st.model].submit(self._input(st, frame), after=res)
        nxt.add_done_callback(partial(self._next, stream, i + 1, frame))

    def run(self, frames: Iterator[np.ndarray], seconds: float,
            on_tick: Callable[[float], None] | None = None) -> None:
        """Feed ``frames`` at CAMERA_FPS for ``seconds``; ``on_tick(elapsed_s)`` after each tick."""
        period = 1.0 / CAMERA_FPS
        every = {s.name: max(1, round(CAMERA_FPS / s.fps)) for s in self.streams}
        t0 = time.perf_counter()
        k = 0
        while True:
            target = t0 + k * period
            now = time.perf_counter()
            if now - t0 >= seconds:
                break
            if target > now:
                time.sleep(target - now)
            frame = next(frames)
            for s in self.streams:
                if k % every[s.name] == 0:
                    self.start_frame(s, frame)
            self.frames_started += 1
            k += 1
            if on_tick is not None:
                on_tick(time.perf_counter() - t0)


def summarize(stats: dict[str, dict[str, Any]], seconds: float, session: XRSession) -> dict[str, Any]:
    """Per model (fps achieved, deadline-met %, p50/p99 ms, placement) and per stream (frames on time)."""
    per_model = {}
    for name, s in stats.items():
        done = s["ok"] + s["late"]
        per_model[name] = {**s, "fps": done / seconds if seconds else 0.0,
                           "deadline_met_pct": 100.0 * (s["slo_met_rate"] or 0.0)}
    per_stream = {
        name: {"frames": session.frames_total[name], "on_time": session.frames_met[name],
               "on_time_pct": 100.0 * session.frames_met[name] / session.frames_total[name]
               if session.frames_total[name] else 0.0}
        for name in session.frames_total
    }
    return {"seconds": seconds, "per_model": per_model, "per_stream": per_stream}


def render(summary: dict[str, Any], processors: list[str], title: str) -> Any:
    """A rich table of the summary: one row per model."""
    from rich.table import Table  # noqa: PLC0415

    t = Table(title=title)
    for col in ("model", "fps", "requests", "met %", "late", "dropped", "failed", "p50 ms", "p99 ms",
                *processors):
        t.add_column(col, justify="left" if col == "model" else "right")
    for name, m in summary["per_model"].items():
        p50 = f"{m['p50_ms']:.1f}" if m["p50_ms"] is not None else "-"
        p99 = f"{m['p99_ms']:.1f}" if m["p99_ms"] is not None else "-"
        met = m["deadline_met_pct"]
        colour = "green" if met >= 95 else "yellow" if met >= 80 else "red"
        t.add_row(name, f"{m['fps']:.1f}", str(m["requests"]), f"[{colour}]{met:.1f}[/]", str(m["late"]),
                  str(m["dropped"]), str(m["failed"]), p50, p99,
                  *(str(m["by_processor"].get(p, 0)) for p in processors))
    return t


def main_from_args(args: argparse.Namespace) -> int:
    """``edgert run xr-demo``: fetch models if needed, run, print the live table and the summary."""
    from rich.console import Console  # noqa: PLC0415
    from rich.live import Live  # noqa: PLC0415

    console = Console() if Console().is_terminal else Console(width=160)
    paths = zoo.mediapipe_paths(Path(args.models_dir) if args.models_dir else None)
    offload = None if args.offload in (None, "off") else args.offload
    frames = directory_frames(args.frames) if args.frames else synthetic_frames()
    with edgert.Runtime(scheduler=args.scheduler, offload=offload, trace=args.trace,
                        cpu_workers=args.cpu_workers) as rt:
        session = XRSession(rt, paths)
        title = (f"edgert xr-demo — scheduler {rt.scheduler}, processors {', '.join(rt.processors)}, "
                 f"{'synthetic camera' if not args.frames else args.frames}")
        if args.quiet:
            session.run(frames, args.seconds)
        else:
            last = [0.0]
            with Live(console=console, refresh_per_second=2) as live:
                def tick(elapsed: float) -> None:
                    if elapsed - last[0] >= 0.5:
                        last[0] = elapsed
                        live.update(render(summarize(rt.stats(), elapsed, session), rt.processors,
                                           f"{title} — {elapsed:4.1f}/{args.seconds:.0f} s"))
                session.run(frames, args.seconds, on_tick=tick)
        rt.close()
        summary = summarize(rt.stats(), args.seconds, session)
        summary.update(scheduler=rt.scheduler, processors=rt.processors)
        console.print(render(summary, rt.processors, f"{title} — summary over {args.seconds:.0f} s"))
        for name, s in summary["per_stream"].items():
            console.print(f"  {name:<13} frames whose whole cascade met its deadline: "
                          f"{s['on_time']}/{s['frames']} ({s['on_time_pct']:.1f}%)")
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=2))
        if args.timeline:
            rt.write_timeline(args.timeline)
            console.print(f"timeline: {args.timeline} (open in ui.perfetto.dev)")
        if args.plot:
            from edgert.bench.plot import plot_records  # noqa: PLC0415

            plot_records(rt.records(), args.plot, title=f"edgert xr-demo ({rt.scheduler})")
            console.print(f"plot: {args.plot}")
    return 0
