"""MediaPipe's detect-or-track scheme, shared by the hand, face and pose streams.

Each frame: every region tracked from the previous frame's landmarks gets a landmark request
at once; the detector runs only while fewer regions are tracked than the stream allows (and,
with ``detect_every`` = N, on every N-th such frame); its new regions join the tracked ones
unless they overlap one by more than the association threshold
(``AssociationNormRectCalculator``, min_similarity_threshold 0.5 in the hand, face and pose
tracking graphs of the mediapipe 0.10.14 wheel). ``tracking=False`` is static-image mode:
the detector runs on every frame.

A stream subclass says what its detector sees (:meth:`DetectAndTrack._detector_input`), which
regions its detections give (:meth:`DetectAndTrack._detection_rois`) and how it submits its
landmark stage (:meth:`DetectAndTrack._submit_landmarks`); a landmark stage that finds its
subject again calls :meth:`DetectAndTrack._keep` with the next frame's region, and one whose
request never ran (the runtime dropped it: shed under overload, or hopeless for its deadline)
calls :meth:`DetectAndTrack._unseen` with the region it was for. Not looking is not losing: the
region is tracked on, unchanged, for up to ``MAX_UNSEEN`` frames in a row, instead of sending the
next frame to the detector, which would cost more work exactly when the device has too much.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import numpy as np

import edgert
from apps.xr import roi
from apps.xr.stages import Runner, outputs

ASSOCIATION_MIN = 0.5   # AssociationNormRectCalculator min_similarity_threshold
#: frames in a row a region may go unlooked-at (its landmark request dropped) and still be tracked
MAX_UNSEEN = 3

T = TypeVar("T")


class DetectAndTrack(Generic[T]):
    """One stream's tracking state and its per-frame requests (see the module doc).

    Every frame that is not shed whole counts once in ``detector_ran`` or ``detector_skipped``, and
    in ``tracked`` as well when it carried an instance over from the frame before. So
    ``detector_ran + detector_skipped + frames shed == frames`` and ``detector_skipped <= tracked``;
    how the frames split between them depends on the host's speed (a fast host has time for the
    optional search on every frame), what they mean does not.

    Attributes:
        detector_ran: frames on which the detector ran (no instance tracked, or the search for one more
            while fewer than ``max_instances`` are tracked).
        tracked: frames on which at least one instance was tracked from the frame before (its landmark
            request came from the previous frame's landmarks, not from a detection), whether or not the
            detector also ran.
        detector_skipped: frames on which the detector did not run: every allowed instance was tracked,
            ``detect_every`` said not this frame, or the optional search had no time or spare capacity.
        optional_skipped: optional detector runs skipped, by reason class (``no time``, ``no spare capacity``).
        variant_runs: requests submitted per model variant (detector and landmark stages).
    """

    #: The detector's stage name in :attr:`FrameResult.stages`.
    detector_stage = "detection"

    def __init__(self, detector: edgert.Model | Sequence[edgert.Model], max_instances: int, tracking: bool,
                 detect_every: int = 1) -> None:
        self.detectors = list(detector) if isinstance(detector, Sequence) else [detector]
        self.detector = self.detectors[0]
        self.landmarks: list[edgert.Model] = []   # the landmark stage's variants, most accurate first
        self.max_instances, self.tracking, self.detect_every = max_instances, tracking, max(1, detect_every)
        self._rois: list[roi.Rect] = []
        self._unseen_for: dict[int, int] = {}   # id(region) -> frames in a row it went unlooked-at
        self._ages: dict[int, int] = {}         # the same, as this frame started
        self._frames = 0
        self.detector_ran = 0
        self.tracked = 0
        self.detector_skipped = 0
        self.optional_skipped: Counter[str] = Counter()
        self.variant_runs: Counter[str] = Counter()

    def reset(self) -> None:
        """Forget what is tracked (the next frame runs the detector)."""
        self._rois = []
        self._unseen_for = {}

    def _begin(self) -> list[roi.Rect]:
        tracked: list[roi.Rect] = []
        for r in (self._rois if self.tracking else []):   # AssociationNormRectCalculator over the tracked
            if all(roi.similarity(r, k) <= ASSOCIATION_MIN for k in tracked):   # regions: two on one subject
                tracked.append(r)                                                # (e.g. after a drop) merge
        self._rois = []
        self._ages, self._unseen_for = self._unseen_for, {}   # only regions now in ``tracked`` are in it
        self._frames += 1
        return tracked

    def shed(self, run: Runner, reason: str) -> None:
        """Shed this frame whole: nothing is submitted; tracked regions go on unlooked-at (:meth:`_unseen`)."""
        for r in self._begin():
            self._unseen(r)
        run.shed(self.detector_stage, reason)

    def start(self, frame: np.ndarray, run: Runner, found: list[T]) -> None:
        """Submit this frame's requests; what the landmark stages find is appended to ``found``.

        In a stream frame (``run.frame``), a detector run while some regions are tracked is optional (the
        search for one more instance): it runs only when the frame has time and the workers spare
        capacity for it (after this frame's required landmark requests are counted), else it is skipped
        with the reason; and the detector's variant is the most accurate that fits the frame.
        """
        tracked = self._begin()
        self.tracked += bool(tracked)
        detect = len(tracked) < self.max_instances and (not tracked or (self._frames - 1) % self.detect_every == 0)
        for r in tracked:
            self._submit_landmarks(frame, r, run, found, None)
        if not detect:
            self.detector_skipped += 1
            run.skip(self.detector_stage)
            return
        detector = self.detector
        if run.frame is not None:
            downstream = run.frame.expected_ms(self._landmark_chain(cheapest=True))
            if tracked:
                cheapest = min(run.frame.expected_ms([m.name]) for m in self.detectors)
                why = run.frame.spare(cheapest + downstream)
                if why:
                    self.detector_skipped += 1
                    self.optional_skipped[why.split(":")[0]] += 1
                    run.skip(self.detector_stage, f"optional search skipped: {why}")
                    return
            detector = self._pick(run, self.detectors, downstream)
        self.detector_ran += 1
        self.variant_runs[detector.name] += 1
        run.submit(self.detector_stage, detector, self._detector_input(frame),
                   lambda res: self._on_detections(frame, res, tracked, run, found))

    def _pick(self, run: Runner, variants: list[edgert.Model], downstream_ms: float = 0.0) -> edgert.Model:
        """The most accurate of ``variants`` that fits the stream frame (the first outside streams).

        The last variant is the one the stage needs; a more accurate one is an upgrade, run as optional work: its
        cost plus ``downstream_ms`` must have room (``run.frame.spare``), so that it never makes another stream's
        required work late. Else the cheapest runs."""
        f = run.frame
        if len(variants) == 1 or f is None:
            return variants[0]
        for m in variants[:-1]:
            if not f.spare(f.expected_ms([m.name]) + downstream_ms):
                return m
        return min(variants, key=lambda m: f.expected_ms([m.name]))

    def _landmark(self, run: Runner, downstream_ms: float = 0.0) -> edgert.Model:
        """The landmark variant to submit now (counted in :attr:`variant_runs`)."""
        m = self._pick(run, self.landmarks, downstream_ms)
        self.variant_runs[m.name] += 1
        return m

    def _landmark_chain(self, cheapest: bool = False) -> list[str]:
        """Model names of one region's landmark chain (the cheapest landmark variant when ``cheapest``)."""
        return [(self.landmarks[-1] if cheapest else self.landmarks[0]).name] if self.landmarks else []

    def _on_detections(self, frame: np.ndarray, res: edgert.Result, tracked: list[roi.Rect], run: Runner,
                       found: list[T]) -> None:
        out = outputs(res)
        if out is None:
            return
        kept = list(tracked)
        for r in self._detection_rois(out, frame):
            if len(kept) >= self.max_instances:
                break
            if all(roi.similarity(r, k) <= ASSOCIATION_MIN for k in kept):
                kept.append(r)
                self._submit_landmarks(frame, r, run, found, res)

    def _keep(self, r: roi.Rect) -> None:
        """Track ``r`` into the next frame (a no-op in static-image mode)."""
        if self.tracking:
            self._rois.append(r)

    def _unseen(self, r: roi.Rect) -> None:
        """The landmark request for region ``r`` never ran: track ``r`` on as it is, unless it already went
        unlooked-at for ``MAX_UNSEEN`` frames in a row (then the detector looks again)."""
        age = self._ages.get(id(r), 0) + 1
        if self.tracking and age <= MAX_UNSEEN:
            self._rois.append(r)
            self._unseen_for[id(r)] = age

    # -- what a stream says ------------------------------------------------------------------
    def _detector_input(self, frame: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _detection_rois(self, out: list[Any], frame: np.ndarray) -> list[roi.Rect]:
        raise NotImplementedError

    def _submit_landmarks(self, frame: np.ndarray, r: roi.Rect, run: Runner, found: list[T],
                          after: edgert.Result | None) -> None:
        raise NotImplementedError
