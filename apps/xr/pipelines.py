"""``Pipelines``: MediaPipe's hands, face, pose and selfie-segmentation pipelines on one edgert runtime.

    from apps.xr import Pipelines
    with edgert.Runtime() as rt:
        px = Pipelines(rt, max_hands=2, max_faces=1, pose=True, segmentation=True)
        r = px.process(frame)          # frame: H×W×3 RGB, uint8 or float32 in [0, 1]
        r.hands, r.faces, r.poses, r.mask, r.stages

Each stage is one request through the runtime, inside the frame's deadline when one is given;
the streams' first stages are submitted together so the scheduler can spread them over workers,
and a landmark stage is submitted (``after=`` its detector) only for a region worth looking at.
"""

from __future__ import annotations

import contextlib
import math
import threading
import weakref
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import edgert
from apps.xr import assets, face, hands, pose, segmentation
from edgert.errors import did_you_mean
from scheduler.host import cores
from scheduler.priority import DEFAULT_PRIORITY, PRIORITIES, RANK, URGENT_LEVELS
from scheduler.priority import check as check_priority
from apps.xr.stages import Runner, StageInfo
from apps.xr.tracking import DetectAndTrack

#: The streams a Pipelines can run, as ``priority=`` dicts name them.
STREAM_NAMES = ("hands", "face", "pose", "segmentation")

_SHARED: weakref.WeakKeyDictionary[edgert.Runtime, dict[str, edgert.Model]] = weakref.WeakKeyDictionary()

#: Largest error a path may add to a MediaPipe model's answer, as a share of each output's range, checked
#: once per path at load against the fp32 CPU answer (``rt.load(tolerance=)``). Meant to let fp16 take
#: models it barely moves (face_landmark: at most 0.66 off on an H100's LiteRT GPU accelerator)
#: and keep pose_landmark_full, off by up to 793 there, on an fp32 path. Not yet checked on a GPU.
MODEL_TOLERANCE = 1e-2

#: Models each stage needs, in cascade order (``then=`` hints for the scheduler).
CASCADES: dict[str, tuple[str, ...]] = {
    "hands": (hands.PALM_MODEL, hands.LANDMARK_MODEL),
    "faces": (face.DETECT_MODEL, face.MESH_MODEL, face.IRIS_MODEL),
    "poses": (pose.DETECT_MODEL, pose.LANDMARK_MODEL),
    "segmentation": (segmentation.MODEL,),
    "hands_lite": (hands.PALM_LITE, hands.LANDMARK_LITE),
}


@dataclass(slots=True)
class FrameResult:
    """What the pipelines found on one frame (coordinates in frame pixels)."""

    hands: list[hands.Hand] = field(default_factory=list)
    faces: list[face.Face] = field(default_factory=list)
    poses: list[pose.Pose] = field(default_factory=list)
    mask: np.ndarray | None = None
    stages: dict[str, StageInfo] = field(default_factory=dict)
    t_ms: float | None = None
    #: why the frame was shed whole by its budget before anything of it ran ("" when it was not).
    shed: str = ""
    #: the frame was not its stream's turn at the stream's rate (rate ladder): nothing ran, not counted as taken
    rate_skipped: bool = False
    #: the frame's deadline as a span from its start (ms): the stream's period at its rate; None without one
    budget_ms: float | None = None
    #: processed, and its result came after its deadline
    late: bool = False
    #: predicted finish minus actual, ms from the frame's start (None: not admitted by a budget)
    predicted_ms: float | None = None
    elapsed_ms: float | None = None


def check_frame(frame: object) -> np.ndarray:
    """``frame`` as a contiguous H×W×3 uint8 / float32 array, or InputError saying what to pass."""
    if not isinstance(frame, np.ndarray):
        raise edgert.InputError(f"frame: expected a numpy array H×W×3 RGB, got {type(frame).__name__}; "
                                "pass np.asarray(image)")
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.shape[0] < 2 or frame.shape[1] < 2:
        raise edgert.InputError(f"frame: expected shape H×W×3 (RGB), got {list(frame.shape)}; "
                                "drop alpha with frame[..., :3], repeat grey with np.dstack([g, g, g])")
    if frame.dtype == np.float64:
        frame = frame.astype(np.float32)
    if frame.dtype not in (np.uint8, np.float32):
        raise edgert.InputError(f"frame: dtype {frame.dtype} is not supported; pass uint8 (0‥255) "
                                "or float32 in [0, 1], e.g. frame.astype(np.float32) / 255")
    return np.ascontiguousarray(frame)


def shared_models(rt: edgert.Runtime, names: list[str], models_dir: Path | None = None) -> dict[str, edgert.Model]:
    """The runtime's loaded MediaPipe models by name, loading those missing (shared by every Pipelines)."""
    have = _SHARED.setdefault(rt, {})
    missing = [n for n in names if n not in have]
    if missing:
        paths = assets.model_paths(models_dir)
        for cascade in CASCADES.values():
            for i, n in enumerate(cascade):
                if n in missing:
                    have[n] = rt.load(paths[n], name=n, then=cascade[i + 1:], tolerance=MODEL_TOLERANCE)
    return {n: have[n] for n in names}


class Pipelines:
    """MediaPipe-style XR perception on an edgert runtime.

    Args:
        rt: the runtime every request goes through.
        max_hands / max_faces: most instances reported (0 turns the stream off).
        pose / segmentation: run the pose (one person) / selfie-segmentation streams.
        tracking: True (video): the next frame's ROIs come from this frame's landmarks and a
            detector runs only when fewer instances than the maximum are tracked; False
            (static images): every detector runs on every frame.
        iris: refine faces to 478 points with the iris model (else 468).
        detect_every: while fewer than the maximum hands / faces are tracked, look for new ones on
            every n-th frame only (1 = every frame, MediaPipe's behaviour).
        models_dir: where the MediaPipe models are (default: edgert's cache, fetched if missing).
        elastic: with a deadline, each stream it runs (hands, face, pose, segmentation) is a runtime stream
            (``rt.stream``, :mod:`scheduler.streams`): the runtime takes or skips its frames as one job (never
            half a frame, never served late by choice), steps its rate down a ladder under sustained overload
            (lowest priority first) and back up when there is room, and says whether optional work has room:
            a detector's search for one more instance while some are tracked runs only then, and the hand
            models run their full variant when it fits and the lite one rather than miss the deadline.
            Frames without a deadline run every stage as MediaPipe does, full variants only.
        priority: the importance of the streams it runs: one level (``"critical"``, ``"high"``,
            ``"normal"``, the default, ``"low"``) or a dict by stream (``hands``, ``face``, ``pose``,
            ``segmentation``; a stream not named is ``normal``, a stream it does not run is ignored). Each
            stream gives way (skips frames, steps down its rate) by its own level.
        stream: its streams' name on the runtime (``rt.streams``) and in the reports: with one stream, the name
            itself; with several, ``NAME/hands`` … (default: the stream names; ``@2``, ``@3`` … for a second,
            third Pipelines of the same streams on the runtime).

    Raises:
        edgert.ConfigError: an unknown priority level or stream name ("did you mean …").
    """

    def __init__(self, rt: edgert.Runtime, max_hands: int = 2, max_faces: int = 1, pose: bool = True,
                 segmentation: bool = True, tracking: bool = True, iris: bool = True, detect_every: int = 1,
                 models_dir: Path | None = None, elastic: bool = True,
                 priority: str | dict[str, str] = "normal", stream: str | None = None) -> None:
        self.rt = rt
        self.elastic = elastic
        self.runs = [n for n, on in zip(STREAM_NAMES, (max_hands > 0, max_faces > 0, pose, segmentation)) if on]
        #: each stream's level
        self.levels = stream_levels(priority, self.runs)
        #: the most important of its streams' levels
        self.priority = min(self.levels.values(), key=RANK.__getitem__, default=DEFAULT_PRIORITY)
        self.stream = stream or "+".join(self.runs) or "none"
        self._base = stream
        self._streams: dict[str, edgert.Stream] = {}   # by the part it runs, opened at the first timed frame
        self._open_lock = threading.Lock()
        self._closer = weakref.finalize(self, _close_streams, self._streams)
        self.all_errors_ms: list[float] = []
        self.frames_shed = 0
        self.frames_rescued = 0
        lite = elastic and max_hands > 0
        want = [*(CASCADES["hands"] if max_hands > 0 else ()), *(CASCADES["hands_lite"] if lite else ()),
                *(CASCADES["faces"][: 3 if iris else 2] if max_faces > 0 else ()),
                *(CASCADES["poses"] if pose else ()), *(CASCADES["segmentation"] if segmentation else ())]
        m = shared_models(rt, want, models_dir)
        self.hands = None
        if max_hands > 0:
            palm = [m[hands.PALM_MODEL], *([m[hands.PALM_LITE]] if lite else [])]
            landmark = [m[hands.LANDMARK_MODEL], *([m[hands.LANDMARK_LITE]] if lite else [])]
            self.hands = hands.HandTracker(palm, landmark, max_hands, tracking, detect_every)
        self.faces = (face.FaceTracker(m[face.DETECT_MODEL], m[face.MESH_MODEL], m.get(face.IRIS_MODEL),
                                       max_faces, tracking, detect_every) if max_faces > 0 else None)
        self.pose = pose_mod_tracker(m, tracking) if pose else None
        self.segmenter = segmentation_mod(m) if segmentation else None

    def process(self, frame: np.ndarray, t_ms: float | None = None,
                deadline_ms: float | None = None) -> FrameResult:
        """Run every enabled stream on one frame and wait for all of them.

        Args:
            frame: H×W×3 RGB, uint8 or float32 in [0, 1].
            t_ms: the frame's capture time (ms), carried into the result.
            deadline_ms: the streams' nominal period (ms): with ``elastic``, each stream's frame is offered to the
                runtime (its deadline the period at the stream's rung); without, every request of this frame
                shares a deadline this many ms from now (None: the models' own SLOs, if any).

        Raises:
            edgert.InputError: ``frame`` is not H×W×3 uint8 / float32.
        """
        frame = check_frame(frame)
        out = FrameResult(t_ms=t_ms)
        if not self.elastic or deadline_ms is None or not self.runs:
            return self._run_plain(frame, out, deadline_ms)
        streams = self._open(1000.0 / deadline_ms)
        start = self.rt.now_ms()
        run = Runner()
        masks: list[np.ndarray] = []
        offered: list[edgert.StreamFrame] = []
        with contextlib.ExitStack() as frames:   # each stream's frame stays open until its cascades are done
            for part, s in streams.items():
                f = frames.enter_context(s.frame(at_ms=start))
                offered.append(f)
                run.frame = f if f.taken else None
                if f.taken:
                    self._start(part, frame, run, out, masks)
                elif f.reason != "rate":
                    self._shed(part, run, f"frame skipped whole: {f.detail}")
            out.stages = run.run()
        out.mask = masks[0] if masks else None
        taken = [f for f in offered if f.taken]
        shed = [f for f in offered if not f.taken and f.reason != "rate"]
        if not taken and not shed:
            out.rate_skipped = True   # not its turn at its rate: nothing ran, not a frame taken
            return out
        if shed:
            self.frames_shed += 1
            out.shed = "; ".join(f"frame skipped whole: {f.detail}" for f in shed)
        out.budget_ms = max(f.decision.period_ms for f in taken or shed)
        if taken:
            self.frames_rescued += any(f.lean for f in taken)
            out.elapsed_ms = self.rt.now_ms() - start
            out.late = out.elapsed_ms > out.budget_ms
            predicted = [f.decision.predicted_ms for f in taken if not math.isnan(f.decision.predicted_ms)]
            if predicted:
                out.predicted_ms = max(predicted) - start
                self.all_errors_ms.append(out.elapsed_ms - out.predicted_ms)
        return out

    def _open(self, fps: float) -> dict[str, edgert.Stream]:
        """Its streams on the runtime, opened at ``fps`` on the first timed frame (the names made unique there)."""
        with self._open_lock:
            if not self._streams:
                for part in self.runs:
                    base = (self._base if len(self.runs) == 1 else f"{self._base}/{part}") if self._base else part
                    self._streams[part] = _open_unique(self.rt, base, fps, self.levels[part])
                if len(self.runs) == 1:
                    self.stream = next(iter(self._streams.values())).name
            return self._streams

    def close(self) -> None:
        """Close its streams on the runtime (also done when it is garbage-collected)."""
        self._closer()

    def __enter__(self) -> Pipelines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _part(self, name: str) -> Any:
        return {"hands": self.hands, "face": self.faces, "pose": self.pose, "segmentation": self.segmenter}[name]

    def _start(self, part: str, frame: np.ndarray, run: Runner, out: FrameResult, masks: list[np.ndarray]) -> None:
        """Submit stream ``part``'s stages on ``frame``."""
        if part == "segmentation":
            self.segmenter.start(frame, run, masks)   # type: ignore[union-attr]  # (it runs segmentation)
        else:
            found = {"hands": out.hands, "face": out.faces, "pose": out.poses}[part]
            self._part(part).start(frame, run, found)

    def _shed(self, part: str, run: Runner, why: str) -> None:
        """Stream ``part``'s frame was not taken: nothing of it is submitted; tracked regions go on unlooked-at."""
        if part == "segmentation":
            run.shed("segmentation", why)
        else:
            self._part(part).shed(run, why)

    def _run_plain(self, frame: np.ndarray, out: FrameResult, deadline_ms: float | None) -> FrameResult:
        """Every enabled stream's stages on ``frame``, inside one runtime frame of ``deadline_ms`` (None: none), and
        wait (no stream controller: every stage runs)."""
        masks: list[np.ndarray] = []
        ctx = (self.rt.frame(deadline_ms, priority=self.priority) if deadline_ms is not None
               else contextlib.nullcontext())
        with ctx:
            run = Runner()
            for part in self.runs:
                self._start(part, frame, run, out, masks)
            out.stages = run.run()
        out.mask = masks[0] if masks else None
        return out

    def _trackers(self) -> list[DetectAndTrack[Any]]:
        return [t for t in (self.hands, self.faces, self.pose) if t is not None]

    def streams(self) -> dict[str, edgert.Stream]:
        """Its runtime streams by the part they run (empty before its first timed frame)."""
        with self._open_lock:
            return dict(self._streams)

    def rung_fps(self) -> float | None:
        """The rate its (first) stream runs at now (fps), None before its first timed frame."""
        s = next(iter(self.streams().values()), None)
        return s.rung_fps if s is not None else None

    def steps(self) -> list[dict[str, Any]]:
        """Its streams' latest rate steps: ``t_ms``, ``stream``, ``from_fps``, ``to_fps``, ``reason``."""
        out = []
        for s in self.streams().values():
            out += [{"t_ms": st["at_ms"], "stream": s.name, "from_fps": st["from_fps"], "to_fps": st["to_fps"],
                     "reason": st["why"]} for st in s.stats()["steps"]]
        return sorted(out, key=lambda st: st["t_ms"])

    def reset(self) -> None:
        """Forget everything tracked (e.g. on a scene cut)."""
        for t in (self.hands, self.faces, self.pose):
            if t is not None:
                t.reset()

    def counts(self) -> dict[str, dict[str, int]]:
        """Per tracked stream, in frames: ``detector_ran``, ``tracked`` (an instance carried over from the
        frame before) and ``detector_skipped`` (see :class:`~apps.xr.tracking.DetectAndTrack`)."""
        return {name: {"detector_ran": t.detector_ran, "tracked": t.tracked, "detector_skipped": t.detector_skipped}
                for name, t in (("hands", self.hands), ("faces", self.faces), ("pose", self.pose))
                if t is not None}

    def elastic_counts(self) -> dict[str, Any]:
        """What its streams' frames came to: ``frames_shed`` (whole frames not taken, the ladder's rate aside),
        ``frames_shed_by`` (by reason code, ``scheduler.streams.REASONS``), ``frames_rescued`` (taken lean after a
        run of skips), ``optional_skipped`` (optional detector runs skipped, by reason), ``variants`` (requests per
        model variant), ``priority`` and ``finish_error_ms`` (the controller's finish-time prediction error)."""
        skipped: Counter[str] = Counter()
        variants: Counter[str] = Counter()
        for t in self._trackers():
            skipped.update(t.optional_skipped)
            variants.update(t.variant_runs)
        shed_by: Counter[str] = Counter()
        for s in self.streams().values():
            shed_by.update({k: n for k, n in s.stats()["frames_shed_by"].items() if k != "rate"})
        return {"frames_shed": self.frames_shed, "frames_rescued": self.frames_rescued,
                "frames_shed_by": dict(shed_by), "optional_skipped": dict(skipped),
                "variants": dict(variants), "priority": self.priority,
                "finish_error_ms": error_summary(self.all_errors_ms)}


def _open_unique(rt: edgert.Runtime, base: str, fps: float, priority: str) -> edgert.Stream:
    """``rt.stream`` named ``base``, else ``base@2``, ``base@3`` … (the first not open)."""
    k = 1
    while True:
        name = base if k == 1 else f"{base}@{k}"
        if name not in rt.streams:
            try:
                return rt.stream(name, fps, priority=priority)
            except edgert.ConfigError:
                if name not in rt.streams:   # not a name taken meanwhile by another thread: a real error
                    raise
        k += 1


def _close_streams(streams: dict[str, edgert.Stream]) -> None:
    for s in streams.values():
        s.close()


def error_summary(errors_ms: list[float]) -> dict[str, float | int]:
    """Finish-time prediction errors (actual - predicted, ms): how many, mean, mean absolute, p50, p90."""
    if not errors_ms:
        return {"n": 0}
    e = np.asarray(errors_ms)
    return {"n": int(e.size), "mean": round(float(e.mean()), 2), "mean_abs": round(float(np.abs(e).mean()), 2),
            "p50": round(float(np.percentile(e, 50)), 2), "p90": round(float(np.percentile(e, 90)), 2)}


def stream_levels(priority: str | dict[str, str], streams: list[str]) -> dict[str, str]:
    """Each of ``streams``' level from ``priority=``: the one level for all, or the dict's (``normal`` for a stream
    it does not name).

    Raises:
        edgert.ConfigError: an unknown level, or a dict key that is not a stream name ("did you mean …").
    """
    if isinstance(priority, str):
        level = check_priority(priority)
        return {s: level for s in streams}
    if not isinstance(priority, dict):
        raise edgert.ConfigError(f"priority must be a level ({', '.join(PRIORITIES)}) or a dict by stream "
                                 f"such as {{'hands': 'critical'}}, got {type(priority).__name__}")
    for name, level in priority.items():
        if name not in STREAM_NAMES:
            raise did_you_mean("stream", str(name), STREAM_NAMES)
        check_priority(level, f"priority of stream {name!r}")
    return {s: priority.get(s, DEFAULT_PRIORITY) for s in streams}


def urgent_workers_for(priority: str | dict[str, str] | None, cpu_workers: int | None = None) -> int:
    """Urgent lanes for a runtime whose streams declare ``priority`` (``edgert.Runtime(urgent_workers=)``) and
    that runs ``cpu_workers`` CPU workers (None: one per core, the runtime's default): one when a stream is
    ``critical`` or ``high`` and the workers leave a core free, else none.

    A run is never preempted by the runtime, so a critical frame that arrives while every worker runs a 20 ms
    pose request waits for one to end; a lane starts it at once, on the free core. Beside one worker per core,
    a lane is a thread more than the cores: every run it overlaps shares a core, the lower streams' chains
    grow and more of their frames are skipped. Measured on the demo's streams, 2 cores, priorities declared,
    lane and no lane alternating (``benchmarks/xr_overload.py``): mean on time 88.0–89.7 % with the lane vs
    92.4–94.8 % without at 2 users, 77.0–77.7 % vs 79.7–81.5 % at 3 users, hands at 3 users 93.3–95.3 % vs
    94.7–96.7 %; beside a busy process hands 98.3–99.0 % vs 96.0–98.0 %.
    """
    if not priority:
        return 0
    levels = [priority] if isinstance(priority, str) else list(priority.values())
    urgent = any(check_priority(v) in URGENT_LEVELS for v in levels)
    return int(urgent and cpu_workers is not None and cpu_workers < cores())


def pose_mod_tracker(m: dict[str, edgert.Model], tracking: bool) -> pose.PoseTracker:
    """The pose tracker on the shared models."""
    return pose.PoseTracker(m[pose.DETECT_MODEL], m[pose.LANDMARK_MODEL], tracking)


def segmentation_mod(m: dict[str, edgert.Model]) -> segmentation.Segmenter:
    """The segmenter on the shared model."""
    return segmentation.Segmenter(m[segmentation.MODEL])
