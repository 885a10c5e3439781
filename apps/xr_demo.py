"""The XR demo (``edgert run xr-demo``): MediaPipe's perception pipelines per frame, with deadlines.

Four streams share the host's processors through one ``edgert.Runtime``, each an
:class:`apps.xr.Pipelines` driven by its own thread at its own rate (latest-frame pacing: a
stream that overruns skips to the newest camera frame):

=============  =====  ==========================================================================
stream         fps    cascade (data-dependent: a landmark stage runs per detected/tracked ROI)
=============  =====  ==========================================================================
hands          30     palm_detection_full → hand_landmark_full (per hand, ≤ 2)
face           30     face_detection_short_range → face_landmark → iris_landmark ×2
pose           30     pose_detection → pose_landmark_full
segmentation   15     selfie_segmentation
=============  =====  ==========================================================================

Every request of a frame shares the frame's deadline (the stream's period). While the previous
frame's landmarks give the region, the detector is skipped (tracking). The camera is synthetic
unless ``--frames DIR`` (images) or ``--video FILE`` is given; ``--show OUT.mp4`` writes the frames
with the results drawn over them and ``--snapshot OUT.png`` a mosaic of the source's first frames
processed in static-image mode.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import edgert
from apps.camera import directory_frames, synthetic_frames, video_frames
from apps.xr import FrameResult, Pipelines

CAMERA_FPS = 30.0


@dataclass(frozen=True, slots=True)
class Stream:
    """A periodic stream: one :class:`Pipelines` configuration run every ``1000 / fps`` ms."""

    name: str
    fps: float
    config: dict[str, Any]

    @property
    def period_ms(self) -> float:
        """Frame period, which is also each frame's deadline (ms)."""
        return 1000.0 / self.fps


_OFF = {"max_hands": 0, "max_faces": 0, "pose": False, "segmentation": False}
STREAMS: tuple[Stream, ...] = (
    Stream("hands", 30.0, {**_OFF, "max_hands": 2}),
    Stream("face", 30.0, {**_OFF, "max_faces": 1}),
    Stream("pose", 30.0, {**_OFF, "pose": True}),
    Stream("segmentation", 15.0, {**_OFF, "segmentation": True}),
)


@dataclass(slots=True)
class StreamStats:
    """Per-stream frame outcomes: processed, finished within the period with every stage ok."""

    frames: int = 0
    on_time: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    last: FrameResult | None = None


class XRSession:
    """Drives the streams on a runtime: a camera thread publishes frames, one thread per stream."""

    def __init__(self, rt: edgert.Runtime, streams: tuple[Stream, ...] = STREAMS, tracking: bool = True,
                 models_dir: Path | None = None) -> None:
        self.rt = rt
        self.streams = streams
        self.pipes = {s.name: Pipelines(rt, tracking=tracking, models_dir=models_dir, **s.config) for s in streams}
        self.stats = {s.name: StreamStats() for s in streams}
        self.frames_started = 0
        self._latest: np.ndarray | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def _stream_loop(self, s: Stream) -> None:
        period = s.period_ms / 1000.0
        t0 = time.perf_counter()
        k = 0
        while not self._stop.is_set():
            frame = self._latest
            if frame is not None:
                t = time.perf_counter()
                res = self.pipes[s.name].process(frame, deadline_ms=s.period_ms)
                ms = (time.perf_counter() - t) * 1e3
                ok = ms <= s.period_ms and all(v.status in ("ok", "skipped") for v in res.stages.values())
                with self._lock:
                    st = self.stats[s.name]
                    st.frames += 1
                    st.on_time += ok
                    st.latencies_ms.append(ms)
                    st.last = res
            k = max(k + 1, int((time.perf_counter() - t0) / period) + 1)   # latest-frame pacing
            self._stop.wait(max(0.0, t0 + k * period - time.perf_counter()))

    def run(self, frames: Iterator[np.ndarray], seconds: float,
            on_tick: Callable[[float, np.ndarray], None] | None = None) -> None:
        """Publish ``frames`` at CAMERA_FPS for ``seconds`` while the streams process the newest one."""
        self._latest = next(frames)
        self._stop.clear()
        threads = [threading.Thread(target=self._stream_loop, args=(s,), daemon=True, name=f"xr-{s.name}")
                   for s in self.streams]
        for t in threads:
            t.start()
        t0 = time.perf_counter()
        k = 0
        while (now := time.perf_counter()) - t0 < seconds:
            target = t0 + k * (1.0 / CAMERA_FPS)
            if target > now:
                time.sleep(target - now)
            if k:
                self._latest = next(frames)
            self.frames_started += 1
            k += 1
            if on_tick is not None:
                on_tick(time.perf_counter() - t0, self._latest)
        self._stop.set()
        for t in threads:
            t.join(timeout=10.0)

    def last_results(self) -> list[FrameResult]:
        """Each stream's newest result."""
        with self._lock:
            return [s.last for s in self.stats.values() if s.last is not None]


def summarize(stats: dict[str, dict[str, Any]], seconds: float, session: XRSession) -> dict[str, Any]:
    """Per model (fps, deadline-met %, p50/p99 ms, placement) and per stream (frames on time, detector runs)."""
    per_model = {}
    for name, s in stats.items():
        done = s["ok"] + s["late"]
        per_model[name] = {**s, "fps": done / seconds if seconds else 0.0,
                           "deadline_met_pct": 100.0 * (s["slo_met_rate"] or 0.0)}
    per_stream = {}
    for name, st in session.stats.items():
        counts = next(iter(session.pipes[name].counts().values()), {})
        lat = np.asarray(st.latencies_ms) if st.latencies_ms else np.zeros(1)
        per_stream[name] = {"frames": st.frames, "on_time": st.on_time,
                            "on_time_pct": 100.0 * st.on_time / st.frames if st.frames else 0.0,
                            "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
                            **counts}
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


def render_streams(summary: dict[str, Any]) -> Any:
    """A rich table: per stream, frames on time and how often the detector ran or tracking held."""
    from rich.table import Table  # noqa: PLC0415

    t = Table(title="streams")
    for col in ("stream", "frames", "on time %", "p50 ms", "p99 ms", "detector ran", "tracking held"):
        t.add_column(col, justify="left" if col == "stream" else "right")
    for name, s in summary["per_stream"].items():
        t.add_row(name, str(s["frames"]), f"{s['on_time_pct']:.1f}", f"{s['p50_ms']:.1f}", f"{s['p99_ms']:.1f}",
                  str(s.get("detector_runs", "-")), str(s.get("frames_tracked", "-")))
    return t


def frame_source(args: argparse.Namespace) -> tuple[Iterator[np.ndarray], str]:
    """The camera: ``--video FILE``, ``--frames DIR`` or the synthetic scene, and its description."""
    video = args.video
    if video:
        return video_frames(video), str(video)
    if args.frames:
        return directory_frames(args.frames), str(args.frames)
    return synthetic_frames(), "synthetic camera"


def write_snapshot(rt: edgert.Runtime, args: argparse.Namespace, path: str, count: int = 6) -> None:
    """A mosaic of the source's first ``count`` distinct frames, each processed in static-image mode."""
    import cv2  # noqa: PLC0415

    from apps.xr.draw import draw, mosaic  # noqa: PLC0415

    frames, _ = frame_source(args)
    px = Pipelines(rt, tracking=False, models_dir=_models_dir(args))
    tiles = []
    first = None
    for f in frames:
        if first is not None and f.shape == first.shape and np.array_equal(f, first):
            break   # looped back to the start
        first = f if first is None else first
        tiles.append(draw(f, [px.process(f)]))
        if len(tiles) >= count:
            break
    cv2.imwrite(path, mosaic(tiles)[..., ::-1])


class ShowWriter:
    """``--show OUT.mp4``: every camera frame with each stream's newest result drawn over it."""

    def __init__(self, path: str, session: XRSession) -> None:
        self.path, self.session, self._w = path, session, None

    def __call__(self, frame: np.ndarray) -> None:
        """Draw the newest results over ``frame`` and append it."""
        import cv2  # noqa: PLC0415

        from apps.xr.draw import draw  # noqa: PLC0415

        img = draw(frame, self.session.last_results())
        if self._w is None:
            self._size = (img.shape[1], img.shape[0])
            self._w = cv2.VideoWriter(self.path, cv2.VideoWriter_fourcc(*"mp4v"), CAMERA_FPS, self._size)
        if (img.shape[1], img.shape[0]) != self._size:
            img = cv2.resize(img, self._size)
        self._w.write(np.ascontiguousarray(img[..., ::-1]))

    def close(self) -> None:
        """Finish the file."""
        if self._w is not None:
            self._w.release()


def _models_dir(args: argparse.Namespace) -> Path | None:
    return Path(args.models_dir) if args.models_dir else None


def main_from_args(args: argparse.Namespace) -> int:
    """``edgert run xr-demo``: run the pipelines live, print the tables and the summary."""
    from rich.console import Console  # noqa: PLC0415
    from rich.live import Live  # noqa: PLC0415

    console = Console() if Console().is_terminal else Console(width=160)
    offload = None if args.offload in (None, "off") else args.offload
    frames, source = frame_source(args)
    show = args.show
    with edgert.Runtime(scheduler=args.scheduler, offload=offload, trace=args.trace,
                        cpu_workers=args.cpu_workers) as rt:
        session = XRSession(rt, models_dir=_models_dir(args))
        writer = ShowWriter(show, session) if show else None
        title = f"edgert xr-demo — scheduler {rt.scheduler}, processors {', '.join(rt.processors)}, {source}"
        last = [0.0]
        live = None if args.quiet else Live(console=console, refresh_per_second=2)

        def tick(elapsed: float, frame: np.ndarray) -> None:
            if writer is not None:
                writer(frame)
            if live is not None and elapsed - last[0] >= 0.5:
                last[0] = elapsed
                s = summarize(rt.stats(), elapsed, session)
                from rich.console import Group  # noqa: PLC0415

                live.update(Group(render(s, rt.processors, f"{title} — {elapsed:4.1f}/{args.seconds:.0f} s"),
                                  render_streams(s)))
        if live is not None:
            with live:
                session.run(frames, args.seconds, on_tick=tick)
        else:
            session.run(frames, args.seconds, on_tick=tick if writer is not None else None)
        if writer is not None:
            writer.close()
            console.print(f"show: {show}")
        if args.snapshot:
            write_snapshot(rt, args, args.snapshot)
            console.print(f"snapshot: {args.snapshot}")
        rt.close()
        summary = summarize(rt.stats(), args.seconds, session)
        summary.update(scheduler=rt.scheduler, processors=rt.processors, source=source)
        console.print(render(summary, rt.processors, f"{title} — summary over {args.seconds:.0f} s"))
        console.print(render_streams(summary))
        for name, s in summary["per_stream"].items():
            console.print(f"  {name:<13} frames whose whole cascade met its deadline: "
                          f"{s['on_time']}/{s['frames']} ({s['on_time_pct']:.1f}%)")
        _outputs(args, rt, summary, console)
    return 0


def _outputs(args: argparse.Namespace, rt: edgert.Runtime, summary: dict[str, Any], console: Any) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    if args.timeline:
        rt.write_timeline(args.timeline)
        console.print(f"timeline: {args.timeline} (open in ui.perfetto.dev)")
    if args.plot:
        from edgert.bench.plot import plot_records  # noqa: PLC0415

        plot_records(rt.records(), args.plot, title=f"edgert xr-demo ({rt.scheduler})")
        console.print(f"plot: {args.plot}")
