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

    Attributes:
        detector_runs: frames on which the detector ran.
        frames_tracked: frames on which tracking held (the detector was skipped).
    """

    #: The detector's stage name in :attr:`FrameResult.stages`.
    detector_stage = "detection"

    def __init__(self, detector: edgert.Model, max_instances: int, tracking: bool, detect_every: int = 1) -> None:
        self.detector = detector
        self.max_instances, self.tracking, self.detect_every = max_instances, tracking, max(1, detect_every)
        self._rois: list[roi.Rect] = []
        self._unseen_for: dict[int, int] = {}   # id(region) -> frames in a row it went unlooked-at
        self._ages: dict[int, int] = {}         # the same, as this frame started
        self._frames = 0
        self.detector_runs = 0
        self.frames_tracked = 0

    def reset(self) -> None:
        """Forget what is tracked (the next frame runs the detector)."""
        self._rois = []
        self._unseen_for = {}

    def start(self, frame: np.ndarray, run: Runner, found: list[T]) -> None:
        """Submit this frame's requests; what the landmark stages find is appended to ``found``."""
        tracked = list(self._rois) if self.tracking else []
        self._rois = []
        self._ages, self._unseen_for = self._unseen_for, {}   # only regions now in ``tracked`` are in it
        detect = len(tracked) < self.max_instances and (not tracked or self._frames % self.detect_every == 0)
        self._frames += 1
        for r in tracked:
            self._submit_landmarks(frame, r, run, found, None)
        if not detect:
            self.frames_tracked += 1
            run.skip(self.detector_stage)
            return
        self.detector_runs += 1
        run.submit(self.detector_stage, self.detector, self._detector_input(frame),
                   lambda res: self._on_detections(frame, res, tracked, run, found))

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
