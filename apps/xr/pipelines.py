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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import edgert
from apps.xr import assets, face, hands, pose, segmentation
from apps.xr.budget import FrameBudget, Ledger
from apps.xr.stages import Runner, StageInfo
from apps.xr.tracking import DetectAndTrack

#: Frames in a row a stream may shed whole; the next one runs whatever its price, so that its tracking
#: goes on (``tracking.MAX_UNSEEN``) and its models' estimates stay measured.
MAX_SHED_STREAK = 3
#: A rescued frame's deadline, in frame deadlines (see :meth:`Pipelines._admission`).
RESCUE_DEADLINE_FACTOR = 2.0

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
            every stage as MediaPipe does, full variants only.
    """

    def __init__(self, rt: edgert.Runtime, max_hands: int = 2, max_faces: int = 1, pose: bool = True,
                 segmentation: bool = True, tracking: bool = True, iris: bool = True, detect_every: int = 1,
                 models_dir: Path | None = None, elastic: bool = True) -> None:
        self.rt = rt
        self.elastic = elastic
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

    def process(self, frame: np.ndarray, t_ms: float | None = None,
                deadline_ms: float | None = None) -> FrameResult:
        """Run every enabled stream on one frame and wait for all of them.

        Args:
            frame: H×W×3 RGB, uint8 or float32 in [0, 1].
            t_ms: the frame's capture time (ms), carried into the result.
            deadline_ms: every request of this frame shares a deadline this many ms from now
                (None: the models' own SLOs, if any).

        Raises:
            edgert.InputError: ``frame`` is not H×W×3 uint8 / float32.
        """
        frame = check_frame(frame)
        out = FrameResult(t_ms=t_ms)
        masks: list[np.ndarray] = []
        ledger = Ledger.of(self.rt) if self.elastic and deadline_ms is not None else None
        rescue = False
        if ledger is not None and deadline_ms is not None:
            probe = FrameBudget(ledger, self.rt.now_ms() + deadline_ms)
            why, rescue = self._admission(probe)
            if why:
                run = Runner(probe)
                self._shed(run, why)
                out.shed, out.stages = why, run.stages
                return out
            if rescue:
                deadline_ms *= RESCUE_DEADLINE_FACTOR
        ctx = self.rt.frame(deadline_ms) if deadline_ms is not None else contextlib.nullcontext()
        with ctx as f:
            budget = FrameBudget(ledger, f.deadline_ms, lean=rescue) if ledger is not None and f is not None else None
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

    def _admission(self, budget: FrameBudget) -> tuple[str, bool]:
        """This frame's cascades priced as one job at their cheapest variants: (why it is shed whole, "" when
        admitted; whether it is admitted as a rescue).

        Shed: its work would take the work admitted over the last frame span past the workers' capacity
        while they are busy (``budget.over_capacity``), or the backlog makes its chain (the longest cascade
        plus the rest of its work spread over the workers) miss the deadline. Rescued instead: the frame
        after ``MAX_SHED_STREAK`` shed in a row, or one whose chain alone is longer than the frame (shedding
        could never help it): it runs lean (cheapest variants, no optional stage) with
        ``RESCUE_DEADLINE_FACTOR`` times the deadline, so the stream keeps tracking and its models keep
        being measured instead of the runtime dropping every request of it (it is not on time)."""
        parts = [t.required_ms(budget) for t in self._trackers()]
        if self.segmenter is not None:
            c = budget.cost_ms([segmentation.MODEL])
            parts.append((c, c))
        if not parts:
            return "", False
        work, path = sum(w for w, _ in parts), max(p for _, p in parts)
        chain = path + (work - path) / budget.ledger.workers
        hopeless = chain > budget.deadline_ms - budget.start_ms
        why = budget.over_capacity(work)
        budget.ledger.offer(work)
        if not why and not hopeless and not budget.fits(chain, slack=1.0):
            why = f"its chain needs {chain:.1f} ms, {max(0.0, budget.left_ms(slack=1.0)):.1f} ms left"
        if why and self._shed_streak < MAX_SHED_STREAK:
            self._shed_streak += 1
            return f"frame shed whole: {why}", False
        rescue = hopeless or bool(why)
        self._shed_streak = 0
        self.frames_rescued += rescue
        budget.ledger.admit(work)
        return "", rescue

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
                "optional_skipped": dict(skipped), "variants": dict(variants)}


def pose_mod_tracker(m: dict[str, edgert.Model], tracking: bool) -> pose.PoseTracker:
    """The pose tracker on the shared models."""
    return pose.PoseTracker(m[pose.DETECT_MODEL], m[pose.LANDMARK_MODEL], tracking)


def segmentation_mod(m: dict[str, edgert.Model]) -> segmentation.Segmenter:
    """The segmenter on the shared model."""
    return segmentation.Segmenter(m[segmentation.MODEL])
