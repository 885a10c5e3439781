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
import weakref
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import edgert
from apps.xr import assets, face, hands, pose, segmentation
from apps.xr.budget import FrameBudget, Ledger, skip_reason
from apps.xr.ladder import RateLadder
from edgert.errors import did_you_mean
from scheduler.priority import DEFAULT_PRIORITY, PRIORITIES, RANK, URGENT_LEVELS
from scheduler.priority import check as check_priority
from apps.xr.stages import Runner, StageInfo
from apps.xr.tracking import DetectAndTrack

#: Frames in a row a stream may skip as predicted late (or its chain too long); the next one runs lean
#: (a probe), so that its models' estimates and its prediction errors stay measured: a skipped frame
#: measures nothing, and estimates taken on a busy spell would otherwise shut the stream out for good.
#: At most one frame in MAX_SHED_STREAK + 1 may then come late.
MAX_SHED_STREAK = 20
#: Finish-time prediction errors kept per stream (the admission's margin is a high quantile of them).
ERRORS_KEPT = 64
#: A prediction error older than this (ms) no longer counts in the margin (a busy spell passes).
ERROR_TTL_MS = 2000.0
#: By level, the quantile of the recent prediction errors (actual finish - predicted, ms) added to a frame's
#: predicted finish before it is compared with its deadline. A critical frame takes a lower quantile: skipping
#: it is a sure miss of the stream that matters most, so it runs on worse odds; 0.5 there and 0.75 for ``high``
#: served 6-10 % of those streams' frames late at two users (``benchmarks/results/xr_overload.md``).
ERROR_QUANTILE = {"critical": 0.75, "high": 0.9, "normal": 0.9, "low": 0.9}
#: The share of a stream's admitted frames it aims to serve late. The margin's quantile starts at the level's
#: ERROR_QUANTILE and follows the stream's outcomes (a stochastic-approximation quantile tracker): up by
#: QUANTILE_STEP after a late frame, down by QUANTILE_STEP * LATE_TARGET / (1 - LATE_TARGET) after one on time, so
#: that it settles where LATE_TARGET of the frames run late. A fixed high quantile skipped far more frames than
#: came late (pose beside a busy process: 66-80 skipped as predicted late to keep 7 late of 190).
LATE_TARGET = 0.02
QUANTILE_STEP = 0.05
#: The quantile's bounds: never below the median error; at most the largest recent error (1.0).
QUANTILE_RANGE = (0.5, 1.0)
#: The streams a Pipelines can run, as ``priority=`` dicts name them.
STREAM_NAMES = ("hands", "face", "pose", "segmentation")
_LADDERS: weakref.WeakKeyDictionary[edgert.Runtime, RateLadder] = weakref.WeakKeyDictionary()

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
        elastic: price every frame that has a deadline by it (:mod:`apps.xr.budget`): the frame's
            cascades are admitted or shed as one job (never half a frame); a detector's search for
            one more instance while some are tracked is optional and runs only when the frame has
            time and the workers spare capacity; the hand models run their full variant when it
            fits and the lite one rather than miss the deadline. Frames without a deadline run
            every stage as MediaPipe does, full variants only. With a deadline, the frame is
            skipped (never run late by choice) when its predicted finish, behind the work running
            and queued beside it plus a high quantile of this stream's recent prediction errors,
            is after the deadline; and the stream is on the runtime's rate ladder
            (:mod:`apps.xr.ladder`): under sustained overload it steps its rate down (the deadline
            then being the longer period), lowest priority first, and back up when there is room.
        priority: the importance of the streams it runs: one level (``"critical"``, ``"high"``,
            ``"normal"``, the default, ``"low"``) or a dict by stream (``hands``, ``face``, ``pose``,
            ``segmentation``; a stream not named is ``normal``, a stream it does not run is ignored).
            Its requests carry the highest level among its streams; it gives way (skips frames,
            steps down its rate) by it.
        stream: its name on the rate ladder and in the reports (default: the streams it runs, joined by ``+``,
            with ``@2``, ``@3`` … for a second, third Pipelines of the same streams on the runtime).

    Raises:
        edgert.ConfigError: an unknown priority level or stream name ("did you mean …").
    """

    def __init__(self, rt: edgert.Runtime, max_hands: int = 2, max_faces: int = 1, pose: bool = True,
                 segmentation: bool = True, tracking: bool = True, iris: bool = True, detect_every: int = 1,
                 models_dir: Path | None = None, elastic: bool = True,
                 priority: str | dict[str, str] = "normal", stream: str | None = None) -> None:
        self.rt = rt
        self.elastic = elastic
        runs = [n for n, on in zip(STREAM_NAMES, (max_hands > 0, max_faces > 0, pose, segmentation)) if on]
        self.priority = stream_priority(priority, runs)
        self.stream = stream or self.ladder.name("+".join(runs) or "none")
        self.frames_shed_by: Counter[str] = Counter()
        self.errors_ms: deque[tuple[float, float]] = deque(maxlen=ERRORS_KEPT)   # (runtime ms, error ms)
        self.all_errors_ms: list[float] = []
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
        self.frames_shed = 0
        self.frames_rescued = 0
        self._shed_streak = 0
        #: the quantile of recent prediction errors this stream's admission adds (see LATE_TARGET)
        self.margin_quantile = ERROR_QUANTILE[self.priority]

    def process(self, frame: np.ndarray, t_ms: float | None = None,
                deadline_ms: float | None = None) -> FrameResult:
        """Run every enabled stream on one frame and wait for all of them.

        Args:
            frame: H×W×3 RGB, uint8 or float32 in [0, 1].
            t_ms: the frame's capture time (ms), carried into the result.
            deadline_ms: the stream's nominal period (ms): every request of this frame shares a deadline
                this many ms from now, times the stream's rate divisor when the rate ladder stepped it
                down (None: the models' own SLOs, if any, and no ladder).

        Raises:
            edgert.InputError: ``frame`` is not H×W×3 uint8 / float32.
        """
        frame = check_frame(frame)
        out = FrameResult(t_ms=t_ms)
        ledger = Ledger.of(self.rt) if self.elastic and deadline_ms is not None else None
        if ledger is None or deadline_ms is None:
            return self._run(frame, out, deadline_ms, None, False)
        ladder = self.ladder
        ladder.add(self.stream, self.priority, 1000.0 / deadline_ms)
        start = self.rt.now_ms()
        if not ladder.take(self.stream, start):
            out.rate_skipped = True
            return out
        budget_ms = ladder.streams[self.stream].period_ms
        probe = FrameBudget(ledger, start + budget_ms, priority=self.priority)
        cloud_ms, offloaded = self._cloud_ms(), ladder.offloaded(self.stream)
        why, predicted, chain, lean = self._cloud_admission(probe, cloud_ms) if offloaded else self._admission(probe)
        out.budget_ms = budget_ms
        if why:
            run = Runner(probe)
            self._shed(run, why)
            out.shed, out.stages = why, run.stages
            ladder.note(self.stream, start, True, chain, ledger.busy_share(), cloud_ms)
            return out
        self._run(frame, out, budget_ms, ledger, lean, ("cloud",) if offloaded else None)
        end = self.rt.now_ms()
        out.elapsed_ms, out.predicted_ms = end - start, predicted - start
        out.late = out.elapsed_ms > budget_ms
        self.all_errors_ms.append(out.elapsed_ms - out.predicted_ms)
        missed = out.late or any(v.status not in ("ok", "skipped") for v in out.stages.values())
        if not ladder.warming(start):   # the first second's errors (every stream starting at once) would keep
            self.errors_ms.append((end, out.elapsed_ms - out.predicted_ms))   # the margin high for ERROR_TTL_MS
            self._follow_lateness(out.late)
        ladder.note(self.stream, end, missed, chain, ledger.busy_share(), cloud_ms)
        return out

    @property
    def ladder(self) -> RateLadder:
        """The runtime's rate ladder (shared by every Pipelines on it)."""
        lad = _LADDERS.get(self.rt)
        if lad is None:
            lad = _LADDERS.setdefault(self.rt, RateLadder())
        return lad

    def _run(self, frame: np.ndarray, out: FrameResult, deadline_ms: float | None, ledger: Ledger | None,
             lean: bool, where: tuple[str, ...] | None = None) -> FrameResult:
        """Submit the enabled streams' stages on ``frame`` inside one runtime frame of ``deadline_ms`` (None:
        none), on the processors ``where`` (None: any), priced by ``ledger``'s budget when given, and wait."""
        masks: list[np.ndarray] = []
        ctx = (self.rt.frame(deadline_ms, priority=self.priority, processors=where) if deadline_ms is not None
               else contextlib.nullcontext())
        with ctx as f:
            budget = (FrameBudget(ledger, f.deadline_ms, lean=lean, priority=self.priority,
                                  strained=self.ladder.strained(self.rt.now_ms()))
                      if ledger is not None and f is not None else None)
            run = Runner(budget)
            if self.segmenter is not None:
                self.segmenter.start(frame, run, masks)
            if self.hands is not None:
                self.hands.start(frame, run, out.hands)
            if self.faces is not None:
                self.faces.start(frame, run, out.faces)
            if self.pose is not None:
                self.pose.start(frame, run, out.poses)
            out.stages = run.run()
        out.mask = masks[0] if masks else None
        return out

    def _trackers(self) -> list[DetectAndTrack[Any]]:
        return [t for t in (self.hands, self.faces, self.pose) if t is not None]

    def _admission(self, budget: FrameBudget) -> tuple[str, float, float, bool]:
        """This frame's cascades priced as one job at their cheapest variants: (why it is skipped whole, "" when
        admitted; its predicted finish, runtime ms; its chain's expected ms; whether it runs lean).

        The predicted finish (:meth:`FrameBudget.finish_ms`: after the work running and queued beside it that
        runs first, spread over the workers, then the chain: the longest cascade plus the rest of its work
        spread over the workers) plus a high quantile of this stream's recent prediction errors must be within
        the deadline; a result served late is wasted work and a stale overlay, so a frame expected late is
        not started. A stream below critical is also skipped when its work would take the work admitted over
        the last frame span past the workers' capacity less the room its critical peers' frames need
        (``budget.over_capacity``), the costliest frames first. After ``MAX_SHED_STREAK`` skips in a row a
        stream skipped as predicted late runs one frame lean (a probe), so that its models' estimates and its
        prediction errors stay measured."""
        parts = [t.required_ms(budget) for t in self._trackers()]
        if self.segmenter is not None:
            c = budget.cost_ms([segmentation.MODEL])
            parts.append((c, c))
        if not parts:
            return "", budget.start_ms, 0.0, False
        work, path = sum(w for w, _ in parts), max(p for _, p in parts)
        chain = path + (work - path) / budget.ledger.workers
        span = budget.deadline_ms - budget.start_ms
        margin = self._error_margin_ms(budget.start_ms)
        predicted = budget.ledger.finish_ms(chain, budget.deadline_ms, self.priority)
        reserved = 0.0 if self.priority == "critical" else self._critical_reserve(span)
        kind, why = skip_reason(span, chain, predicted - budget.start_ms, margin, budget.over_capacity(work, reserved))
        budget.ledger.offer(work)
        if why and (self._shed_streak < MAX_SHED_STREAK or kind == "over capacity"):
            self._shed_streak += 1
            self.frames_shed_by[kind] += 1
            return f"frame skipped whole: {why}", predicted, chain, False
        self._shed_streak = 0
        self.frames_rescued += bool(why)
        budget.ledger.admit(work)
        return "", predicted, chain, bool(why)

    def _cloud_ms(self) -> float | None:
        """The expected ms of this frame's longest cascade on the cloud worker (full models), or None: no cloud
        worker, or a model it has not measured."""
        if "cloud" not in self.rt.processors:
            return None
        runs = [("hands", self.hands), ("faces", self.faces), ("poses", self.pose), ("segmentation", self.segmenter)]
        exp = self.rt.estimator.expected_ms
        chains: list[float] = []
        for name, part in runs:
            ms = [exp(m, "cloud") for m in CASCADES[name][:2]] if part is not None else []
            if any(v is None for v in ms):
                return None
            chains.append(sum(v for v in ms if v is not None))
        return max(chains, default=None)

    def _cloud_admission(self, budget: FrameBudget, cloud_ms: float | None) -> tuple[str, float, float | None, bool]:
        """A frame of a stream its ladder sent to the cloud: skipped when its cascade's expected ms there, plus its
        recent prediction error, is after its deadline; (why, predicted finish, None: no local chain, lean)."""
        span = budget.deadline_ms - budget.start_ms
        chain = cloud_ms if cloud_ms is not None else float("inf")
        _, why = skip_reason(span, chain, chain, self._error_margin_ms(budget.start_ms))
        return (f"frame skipped whole (on the cloud): {why}" if why else ""), budget.start_ms + chain, None, False

    def _follow_lateness(self, late: bool) -> None:
        """Move the margin's quantile after an admitted frame: up when it came late, a little down when not."""
        step = QUANTILE_STEP if late else -QUANTILE_STEP * LATE_TARGET / (1.0 - LATE_TARGET)
        self.margin_quantile = min(QUANTILE_RANGE[1], max(QUANTILE_RANGE[0], self.margin_quantile + step))

    def _error_margin_ms(self, now_ms: float) -> float:
        """A quantile (:attr:`margin_quantile`, from :data:`ERROR_QUANTILE` by level) of this stream's finish-time prediction errors of the last
        :data:`ERROR_TTL_MS` (ms, at least 0; 0 with fewer than 4 of them)."""
        q = self.errors_ms
        while q and q[0][0] < now_ms - ERROR_TTL_MS:
            q.popleft()
        if len(q) < 4:
            return 0.0
        return max(0.0, float(np.quantile([e for _, e in q], self.margin_quantile)))

    def _critical_reserve(self, span_ms: float) -> float:
        """Expected work (ms) the critical streams on this runtime's ladder need over ``span_ms``: the room
        kept for them (``SCHED_DEADLINE``'s reservation: their chain per period)."""
        return sum(s.chain_ms * span_ms / s.period_ms for s in self.ladder.streams.values()
                   if s.priority == "critical" and s.name != self.stream)

    def _shed(self, run: Runner, why: str) -> None:
        for t in self._trackers():
            t.shed(run, why)
        if self.segmenter is not None:
            run.shed("segmentation", why)
        self.frames_shed += 1

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
        """What the frames' budgets decided: ``frames_shed`` (whole frames), ``frames_rescued`` (run lean with a
        longer deadline, see :meth:`_admission`), ``optional_skipped`` (optional
        detector runs skipped, by reason) and ``variants`` (requests per model variant)."""
        skipped: Counter[str] = Counter()
        variants: Counter[str] = Counter()
        for t in self._trackers():
            skipped.update(t.optional_skipped)
            variants.update(t.variant_runs)
        return {"frames_shed": self.frames_shed, "frames_rescued": self.frames_rescued,
                "frames_shed_by": dict(self.frames_shed_by), "optional_skipped": dict(skipped),
                "variants": dict(variants), "priority": self.priority,
                "finish_error_ms": error_summary(self.all_errors_ms)}


def error_summary(errors_ms: list[float]) -> dict[str, float | int]:
    """Finish-time prediction errors (actual - predicted, ms): how many, mean, mean absolute, p50, p90."""
    if not errors_ms:
        return {"n": 0}
    e = np.asarray(errors_ms)
    return {"n": int(e.size), "mean": round(float(e.mean()), 2), "mean_abs": round(float(np.abs(e).mean()), 2),
            "p50": round(float(np.percentile(e, 50)), 2), "p90": round(float(np.percentile(e, 90)), 2)}


def stream_priority(priority: str | dict[str, str], streams: list[str]) -> str:
    """The level a Pipelines running ``streams`` takes from ``priority=``: the level, or the highest of the
    dict's levels for those streams (``normal`` for a stream it does not name).

    Raises:
        edgert.ConfigError: an unknown level, or a dict key that is not a stream name ("did you mean …").
    """
    if isinstance(priority, str):
        return check_priority(priority)
    if not isinstance(priority, dict):
        raise edgert.ConfigError(f"priority must be a level ({', '.join(PRIORITIES)}) or a dict by stream "
                                 f"such as {{'hands': 'critical'}}, got {type(priority).__name__}")
    for name, level in priority.items():
        if name not in STREAM_NAMES:
            raise did_you_mean("stream", str(name), STREAM_NAMES)
        check_priority(level, f"priority of stream {name!r}")
    levels = [priority.get(s, DEFAULT_PRIORITY) for s in streams] or [DEFAULT_PRIORITY]
    return min(levels, key=RANK.__getitem__)


def urgent_workers_for(priority: str | dict[str, str] | None) -> int:
    """Urgent lanes for a runtime whose streams declare ``priority`` (``edgert.Runtime(urgent_workers=)``): one
    when a stream is ``critical`` or ``high``, else none.

    A run is never preempted by the runtime, so with one worker per core a critical frame that arrives while
    both cores run 20 ms pose requests waits for one to end. The lane starts it at once, and the OS, with the
    lane at the critical level's niceness (``Runtime(thread_priority=)``), gives it a core ahead of the normal
    run (``benchmarks/xr_overload.py``).
    """
    if not priority:
        return 0
    levels = [priority] if isinstance(priority, str) else list(priority.values())
    return int(any(check_priority(v) in URGENT_LEVELS for v in levels))


def pose_mod_tracker(m: dict[str, edgert.Model], tracking: bool) -> pose.PoseTracker:
    """The pose tracker on the shared models."""
    return pose.PoseTracker(m[pose.DETECT_MODEL], m[pose.LANDMARK_MODEL], tracking)


def segmentation_mod(m: dict[str, edgert.Model]) -> segmentation.Segmenter:
    """The segmenter on the shared model."""
    return segmentation.Segmenter(m[segmentation.MODEL])
