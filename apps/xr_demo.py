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

Each stream is a runtime stream (``rt.stream``; the overload controller is :mod:`scheduler.streams`): every
request of a frame shares the frame's deadline (the stream's period), and the runtime takes the frame or
skips it whole (a frame predicted to finish after its deadline is not started); optional detector searches
and the hand models' full variants run only when there is room. ``--priority hands=critical,pose=low``
declares the streams' importance (default ``normal``): under sustained overload the lowest steps its rate
down first (30 → 20 → 15 → 10 fps, its deadline the longer period) and back up when there is room. While the previous frame's landmarks give the region, the
detector is skipped (tracking). The streams' periods start spread over one camera period.
``--users N`` runs every stream once per user (``hands#0`` … ``segmentation#{N-1}``), user k's
camera ``USER_LAG_FRAMES * k`` frames behind the source. The camera is a sample scene
with a face, a person and a hand, panning slowly (``apps.xr.assets.sample_frames``), unless
``--frames DIR`` (images), ``--video FILE`` or ``--synthetic`` is given; ``--show OUT.mp4`` writes the frames
with the results drawn over them and ``--snapshot OUT.png`` a mosaic of the source's first frames
processed in static-image mode.

Memory stays flat however long it runs: each stream keeps its latest :data:`STREAM_WINDOW` frame
latencies, and the runtime keeps the latest :data:`SUMMARY_RECORDS` requests (the summary's
failure reasons and cloud line are over those), or the latest ``RECORDS_DEFAULT`` with ``--timeline`` /
``--plot`` (``edgert.Runtime(records=)``).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import edgert
from apps.camera import directory_frames, synthetic_frames, video_frames
from apps.xr import FrameResult, Pipelines, urgent_workers_for
from apps.xr.stages import describe
from apps.xr_demo_media import ShowWriter, write_snapshot
from apps.xr_demo_report import cloud_report, failure_reasons, reason_examples, report_text, summarize
from edgert.extras import require
from edgert.stats import LatencyRing
from edgert.tables import width

CAMERA_FPS = 30.0


@dataclass(frozen=True, slots=True)
class Stream:
    """A periodic stream: one :class:`Pipelines` configuration run every ``1000 / fps`` ms on ``user``'s camera."""

    name: str
    fps: float
    config: dict[str, Any]
    user: int = 0

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
#: Frames by which each further user's camera lags the source: user k sees frame i - USER_LAG_FRAMES * k
#: while user 0 sees frame i (on the 150-frame sample scene no two users see the same frame at once).
USER_LAG_FRAMES = 40
#: Frame latencies each stream keeps for its p50/p99 (the latest; over 2 minutes at 30 fps).
STREAM_WINDOW = 4096
#: Requests the runtime keeps for the summary's failure reasons and cloud line (about a minute at one user).
SUMMARY_RECORDS = 20_000


def user_streams(users: int = 1, streams: tuple[Stream, ...] = STREAMS) -> tuple[Stream, ...]:
    """Every stream for each of ``users`` users: named as in ``streams`` for one user, ``hands#k`` … for
    user k (from 0) with more.

    Raises:
        edgert.ConfigError: ``users`` is not a whole number >= 1.
    """
    if isinstance(users, bool) or not isinstance(users, int) or users < 1:
        raise edgert.ConfigError(f"users must be a whole number >= 1, got {users!r}")
    if users == 1:
        return streams
    return tuple(Stream(f"{s.name}#{k}", s.fps, s.config, k) for k in range(users) for s in streams)


class UserCameras:
    """Each user's camera over one source: user k sees the frame ``USER_LAG_FRAMES * k`` frames behind
    user 0's (the source is read that far ahead at the start, so every user has a frame at once)."""

    def __init__(self, frames: Iterator[np.ndarray], users: int, lag: int = USER_LAG_FRAMES) -> None:
        self._frames, self.users, self.lag = frames, users, lag
        self._history: deque[np.ndarray] = deque(maxlen=lag * (users - 1) + 1)
        while len(self._history) < lag * (users - 1) + 1:
            self._history.append(next(frames))

    def latest(self) -> list[np.ndarray]:
        """The frame each user sees now, by user."""
        return [self._history[-1 - self.lag * k] for k in range(self.users)]

    def advance(self) -> list[np.ndarray]:
        """Move every camera one frame on; the frames each user sees now."""
        self._history.append(next(self._frames))
        return self.latest()


@dataclass(slots=True)
class StreamStats:
    """Per-stream frame outcomes: frames taken (not those its rate ladder left out: ``rate_skipped``), finished
    within their deadline with every stage ok, skipped whole by their budget before anything ran (``shed``),
    processed but finished after their deadline (``late``), processed with a stage the runtime dropped
    (``dropped``), instances found (hands, faces, poses; 1 per mask), the latest
    :data:`STREAM_WINDOW` frame latencies (ms), and
    ``failed``: frames on which code of ours raised (a decoder, a tracker), ``first_failure`` the
    first such exception (``"stage: Type: message"``)."""

    frames: int = 0
    on_time: int = 0
    shed: int = 0
    late: int = 0
    dropped: int = 0
    rate_skipped: int = 0
    found: int = 0
    latencies_ms: LatencyRing = field(default_factory=lambda: LatencyRing(STREAM_WINDOW))
    last: FrameResult | None = None
    failed: int = 0
    first_failure: str = ""

    def note_failure(self, reason: str) -> None:
        """Count a frame that failed because ``reason`` raised (keep the first reason)."""
        self.failed += 1
        self.first_failure = self.first_failure or reason


class XRSession:
    """Drives the streams on a runtime: a camera thread publishes frames, one thread per stream.

    Args:
        rt: the runtime every stream's requests go through.
        streams: the streams (default: :data:`STREAMS` for each of ``users``, see :func:`user_streams`).
        tracking / models_dir / elastic: as for :class:`apps.xr.Pipelines`.
        priority: each stream's level, as ``Pipelines(priority=)``: one level for every stream or a dict by
            stream (``hands``, ``face``, ``pose``, ``segmentation``; with several users the level applies
            to that stream of every user).
        users: XR users, each with every stream of ``STREAMS``; user k's camera shows the source
            ``USER_LAG_FRAMES * k`` frames behind user 0's (ignored when ``streams`` is given).
    """

    def __init__(self, rt: edgert.Runtime, streams: tuple[Stream, ...] | None = None, tracking: bool = True,
                 models_dir: Path | None = None, users: int = 1, elastic: bool = True,
                 priority: str | dict[str, str] = "normal") -> None:
        self.rt = rt
        self.streams = user_streams(users) if streams is None else streams
        self.users = 1 + max(s.user for s in self.streams)
        self.pipes = {s.name: Pipelines(rt, tracking=tracking, models_dir=models_dir, elastic=elastic,
                                        priority=priority, stream=s.name, **s.config)
                      for s in self.streams}
        self.stats = {s.name: StreamStats() for s in self.streams}
        self.frames_started = 0
        self._latest: list[np.ndarray] | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def _stream_loop(self, s: Stream) -> None:
        period = s.period_ms / 1000.0
        t0 = time.perf_counter() + self.phase_s(s)
        self._stop.wait(max(0.0, t0 - time.perf_counter()))
        k = 0
        while not self._stop.is_set():
            latest = self._latest
            frame = latest[s.user] if latest is not None else None
            if frame is not None:
                self._one_frame(s, frame)
            k = max(k + 1, int((time.perf_counter() - t0) / period) + 1)   # latest-frame pacing
            self._stop.wait(max(0.0, t0 + k * period - time.perf_counter()))

    def _one_frame(self, s: Stream, frame: np.ndarray) -> None:
        """Process ``frame`` on stream ``s`` and count it; code that raises fails this frame, never the thread."""
        t = time.perf_counter()
        try:
            res: FrameResult | None = self.pipes[s.name].process(frame, deadline_ms=s.period_ms)
            why = next((f"{stage}: {info.error}" for stage, info in res.stages.items() if info.error), "")
        except Exception as exc:  # noqa: BLE001 - a bug fails the frame (counted, reason kept); the stream goes on
            res, why = None, f"process: {describe(exc)}"
        ms = (time.perf_counter() - t) * 1e3
        with self._lock:
            st = self.stats[s.name]
            if res is not None and res.rate_skipped:
                st.rate_skipped += 1   # not its turn at its rate: not a frame taken
                return
            outcome = frame_outcome(res, ms, s.period_ms)
            st.frames += 1
            st.on_time += outcome == "on_time"
            st.late += outcome == "late"
            st.dropped += outcome == "dropped"
            st.latencies_ms.append(ms)
            if res is not None:
                st.shed += bool(res.shed)
                st.found += len(res.hands) + len(res.faces) + len(res.poses) + (res.mask is not None)
                st.last = res
            if why:
                st.note_failure(why)

    def ladder_steps(self) -> list[dict[str, Any]]:
        """The streams' latest rate steps over the run, in order (ms on the runtime clock)."""
        return sorted((st for p in self.pipes.values() for st in p.steps()), key=lambda st: st["t_ms"])

    def failures(self) -> dict[str, tuple[int, str]]:
        """Stream -> (frames on which code of ours raised, the first reason) for streams with any."""
        with self._lock:
            return {n: (st.failed, st.first_failure) for n, st in self.stats.items() if st.failed}

    def phase_s(self, s: Stream) -> float:
        """When stream ``s`` starts its first frame (s after the others' start): the streams' frames are
        spread evenly over one camera period, so their requests do not all arrive at once."""
        return self.streams.index(s) / len(self.streams) / CAMERA_FPS

    def run(self, frames: Iterator[np.ndarray], seconds: float,
            on_tick: Callable[[float, np.ndarray], None] | None = None) -> None:
        """Publish ``frames`` at CAMERA_FPS for ``seconds`` while the streams process the newest one (each
        user's: user k's is ``USER_LAG_FRAMES * k`` frames older than user 0's)."""
        cams = UserCameras(frames, self.users)
        self._latest = cams.latest()
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
                self._latest = cams.advance()
            self.frames_started += 1
            k += 1
            if on_tick is not None:
                on_tick(time.perf_counter() - t0, self._latest[0])
        self._stop.set()
        for t in threads:
            t.join(timeout=10.0)

    def last_results(self) -> list[FrameResult]:
        """Each of user 0's streams' newest result (the frames drawn by ``--show`` are user 0's)."""
        with self._lock:
            return [st.last for s in self.streams if s.user == 0 and (st := self.stats[s.name]).last is not None]


def frame_outcome(res: FrameResult | None, ms: float, period_ms: float) -> str:
    """One taken frame's outcome: ``on_time`` (processed within its deadline, every stage ok), ``shed`` (skipped
    whole by its budget), ``late`` (processed, its result after its deadline: the stream's period at its
    rate), ``dropped`` (processed in time but a stage was dropped by the runtime or failed), or ``failed``
    (code raised: no result). ``ms``: the frame's wall time; ``period_ms``: the nominal period, the deadline
    when the result carries none."""
    if res is None:
        return "failed"
    if res.shed:
        return "shed"
    if ms > (res.budget_ms or period_ms):
        return "late"
    if all(v.status in ("ok", "skipped") for v in res.stages.values()):
        return "on_time"
    return "dropped"


def frame_source(args: argparse.Namespace) -> tuple[Iterator[np.ndarray], str]:
    """The camera: ``--video FILE``, ``--frames DIR``, ``--synthetic``, or by default the sample scene
    (a face, a person and a hand, panning slowly: :func:`apps.xr.assets.sample_frames`)."""
    video = args.video
    if video:
        return video_frames(video), str(video)
    if args.frames:
        return directory_frames(args.frames), str(args.frames)
    if getattr(args, "synthetic", False):
        return synthetic_frames(), "synthetic camera"
    from apps.xr import assets  # noqa: PLC0415

    return assets.sample_frames(), "sample scene (astronaut + a hand, panning)"


def demo_delegates(spec: str | None) -> str | list[str]:
    """``--delegates``: ``auto``, ``cpu``, ``gpu`` (the GPU paths plus the CPU paths, which take the
    models or ops a GPU path refuses), or comma-separated names.

    Raises:
        edgert.DelegateUnavailable: no GPU path here (``gpu``), or a named path cannot run here.
        edgert.ConfigError: an unknown name ("did you mean").
    """
    from delegates.registry import resolve  # noqa: PLC0415 - the registry's names, resolved once

    spec = (spec or "auto").strip()
    if spec in ("auto", "cpu"):
        return spec
    if spec == "gpu":
        return [d.name for d in resolve("gpu")] + [d.name for d in resolve("cpu")]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    resolve(names)
    return names


def demo_priority(spec: str | None) -> dict[str, str]:
    """``--priority hands=critical,face=high,…``: each named stream's level (the others ``normal``); with
    ``--users N`` a level applies to that stream of every user.

    Raises:
        edgert.ConfigError: an unknown stream or level ("did you mean …"), an item without ``=``.
    """
    from scheduler.priority import parse_levels  # noqa: PLC0415

    return parse_levels(spec, [s.name for s in STREAMS]) if spec else {}


def _models_dir(args: argparse.Namespace) -> Path | None:
    return Path(args.models_dir) if args.models_dir else None


def main_from_args(args: argparse.Namespace) -> int:
    """``edgert run xr-demo``: run the pipelines live, print the tables and the summary.

    On a terminal (and with ``rich``) the tables redraw live; piped or ``--quiet``, only the
    summary is printed, after a blank line. Every table fits the terminal (``$COLUMNS``, 80 piped).
    """
    if args.plot:
        require("matplotlib", "--plot")   # before the run, not after it
    total = width(sys.stdout)
    priority = demo_priority(getattr(args, "priority", None))   # a bad level is named before anything loads
    offload = None if args.offload in (None, "off") else args.offload
    frames, source = frame_source(args)
    with edgert.Runtime(delegates=demo_delegates(getattr(args, "delegates", "auto")), scheduler=args.scheduler,
                        offload=offload, trace=args.trace,
                        cpu_workers=args.cpu_workers, urgent_workers=urgent_workers_for(priority, args.cpu_workers),
                        records=True if args.timeline or args.plot else SUMMARY_RECORDS) as rt:
        session = XRSession(rt, models_dir=_models_dir(args), users=getattr(args, "users", 1),
                            priority=priority)
        rss_start = rt.memory().get("rss_mb")   # the models loaded, the streams not yet started
        writer = ShowWriter(args.show, session.last_results, CAMERA_FPS) if args.show else None
        lanes = set(rt.urgent_processors)
        procs = ", ".join(f"{p} (a software adapter: the CPU cores)" if p.endswith("-sw")
                          else f"{p} (critical and high work only, on the same cores)" if p in lanes else p
                          for p in rt.processors)
        title = f"edgert xr-demo: scheduler {rt.scheduler} on {procs}, {source}"
        live = _live_display(args, total)
        session_run(session, frames, args.seconds, writer, live,
                    lambda elapsed: report_text(summarize(rt.stats(), elapsed, session), rt.processors,
                                                f"{title}, {elapsed:4.1f}/{args.seconds:.0f} s (p50/p99 in ms)", total))
        if writer is not None:
            writer.close()
            print(f"show: {args.show}")
        if args.snapshot:
            write_snapshot(Pipelines(rt, tracking=False, models_dir=_models_dir(args)), frame_source(args)[0],
                           args.snapshot)
            print(f"snapshot: {args.snapshot}")
        memory = rt.memory()   # before close: it counts the sessions open
        rt.close()
        summary = final_summary(rt, session, args.seconds, source)
        summary["memory"] = {**memory, "rss_start_mb": rss_start, "rss_end_mb": memory.get("rss_mb")}
        print()
        print(report_text(summary, rt.processors, f"{title}, summary over {args.seconds:.0f} s (p50/p99 in ms)",
                          total))
        if priority:
            print(f"thread priorities: {rt.thread_priority}")
        _outputs(args, rt, summary)
    failed = session.failures()
    for name, (n, first) in failed.items():
        print(f"error: stream {name}: {n} frame(s) failed because code raised; first: {first}", file=sys.stderr)
    return 1 if failed else 0


def final_summary(rt: edgert.Runtime, session: XRSession, seconds: float, source: str) -> dict[str, Any]:
    """The run's summary: tables' figures, ``reasons`` ({model: {reason: n}}) and the ``cloud`` report."""
    records = rt.records()
    summary = summarize(rt.stats(), seconds, session)
    summary.update(scheduler=rt.scheduler, processors=rt.processors, source=source, ladder=session.ladder_steps(),
                   reasons=failure_reasons(records), reason_examples=reason_examples(records),
                   cloud=cloud_report(records, rt.processors, rt.estimator), thread_priority=rt.thread_priority)
    return summary


def _live_display(args: argparse.Namespace, total: int) -> Any:
    """A rich Live redrawing the tables, or None: ``--quiet``, not a terminal, or no ``rich``."""
    if args.quiet or not sys.stdout.isatty():
        return None
    try:
        from rich.console import Console  # noqa: PLC0415
        from rich.live import Live  # noqa: PLC0415
    except ImportError:
        return None
    return Live(console=Console(width=total), refresh_per_second=2, transient=True)


def session_run(session: XRSession, frames: Iterator[np.ndarray], seconds: float, writer: ShowWriter | None,
                live: Any, text: Callable[[float], str]) -> None:
    """Run ``session``; each camera frame goes to ``writer``, and every 0.5 s ``text(elapsed)`` to ``live``."""
    last = [0.0]

    def tick(elapsed: float, frame: np.ndarray) -> None:
        if writer is not None:
            writer(frame)
        if live is not None and elapsed - last[0] >= 0.5:
            from rich.text import Text  # noqa: PLC0415

            last[0] = elapsed
            live.update(Text(text(elapsed), no_wrap=True, overflow="crop"))
    if live is None:
        session.run(frames, seconds, on_tick=tick if writer is not None else None)
        return
    with live:
        session.run(frames, seconds, on_tick=tick)


def _outputs(args: argparse.Namespace, rt: edgert.Runtime, summary: dict[str, Any]) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    if args.timeline:
        rt.write_timeline(args.timeline)
        print(f"timeline: {args.timeline} (open in ui.perfetto.dev)")
    if args.plot:
        from edgert.bench.plot import plot_records  # noqa: PLC0415

        plot_records(rt.records(), args.plot, title=f"edgert xr-demo — scheduler: {rt.scheduler}")
        print(f"plot: {args.plot}")
