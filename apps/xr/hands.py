"""Hands: palm detection → rotated ROI → 21 hand landmarks, with landmark-driven tracking.

Every option value is from ``mediapipe/modules/hand_landmark/hand_landmark_tracking_cpu.binarypb``
in the mediapipe 0.10.14 wheel (its palm_detection_cpu and hand_landmark_cpu subgraphs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import edgert
from apps.xr import roi
from apps.xr.anchors import AnchorOptions, generate_anchors
from apps.xr.decode import DecodeOptions, decode
from apps.xr.stages import Runner, outputs
from apps.xr.tracking import DetectAndTrack

PALM_MODEL, LANDMARK_MODEL = "palm_detection_full", "hand_landmark_full"
#: The lighter variants in the same wheel (same inputs, anchors and outputs; less accurate), run by
#: an elastic pipeline when the full model would make a frame miss its deadline.
PALM_LITE, LANDMARK_LITE = "palm_detection_lite", "hand_landmark_lite"
PALM_SIZE = 192            # ImageToTensorCalculator: 192×192, keep_aspect_ratio, BORDER_ZERO, [0, 1]
LANDMARK_SIZE = 224        # ImageToTensorCalculator: 224×224, [0, 1]
PALM_ANCHORS = AnchorOptions(192, 0.1484375, 0.75, (8, 16, 16, 16))   # SsdAnchorsCalculator → 2016
# TensorsToDetectionsCalculator: 7 keypoints, scale 192, min_score 0.5, clipping 100;
# NonMaxSuppressionCalculator: WEIGHTED, IoU, min_suppression_threshold 0.3.
PALM_DECODE = DecodeOptions(num_keypoints=7, scale=192.0, min_score=0.5, min_suppression=0.3)
PALM_ROT = (0, 2, 90.0)           # DetectionsToRectsCalculator: keypoint 0 → 2, target 90°
PALM_SCALE, PALM_SHIFT_Y = 2.6, -0.5   # RectTransformationCalculator, square_long
PRESENCE_MIN = 0.5                # ThresholdingCalculator threshold (min_tracking_confidence)
NORMALIZE_Z = 0.4                 # TensorsToLandmarksCalculator normalize_z
TRACK_IDS = [0, 1, 2, 3, 5, 6, 9, 10, 13, 14, 17, 18]   # HandLandmarksToRectCalculator's partial set
TRACK_SCALE, TRACK_SHIFT_Y = 2.0, -0.1  # RectTransformationCalculator after it, square_long
HANDEDNESS = ("Left", "Right")    # handedness label map; binary classification on output 2


@dataclass(frozen=True, slots=True)
class Hand:
    """One hand: ``landmarks`` float32[21, 3] (x, y frame pixels; z relative, pixels-scaled),
    ``handedness`` "Left"/"Right" as MediaPipe labels it, ``score`` the handedness confidence,
    ``presence`` the landmark model's hand-presence score, ``roi`` the crop it came from."""

    landmarks: np.ndarray
    handedness: str
    score: float
    presence: float
    roi: roi.Rect


def palm_rois(dets: list, frame_h: int, frame_w: int) -> list[roi.Rect]:
    """Hand ROIs (frame pixels) from palm detections in letterboxed-tensor coordinates."""
    box_rect = roi.letterbox_rect(frame_h, frame_w)
    out = []
    for d in dets:
        pts = roi.project(np.vstack([d.box.reshape(2, 2), d.keypoints]) * PALM_SIZE, box_rect,
                          PALM_SIZE, PALM_SIZE)
        rot = roi.rotation(pts[2 + PALM_ROT[0]], pts[2 + PALM_ROT[1]], PALM_ROT[2])
        r = roi.from_box(pts[:2].reshape(-1), rot)
        out.append(roi.transform(r, PALM_SCALE, shift_y=PALM_SHIFT_Y))
    return out


def tracking_roi(landmarks: np.ndarray) -> roi.Rect:
    """Next frame's ROI from this frame's 21 landmarks (HandLandmarksToRectCalculator + transform)."""
    p = landmarks[:, :2]
    tip = ((p[5] + p[13]) / 2 + p[9]) / 2
    rot = roi.rotation(p[0], tip, 90.0)
    return roi.transform(roi.oriented_bounds(p[TRACK_IDS], rot), TRACK_SCALE, shift_y=TRACK_SHIFT_Y)


class HandTracker(DetectAndTrack[Hand]):
    """The hand stream of one camera: detector when needed, a landmark request per ROI.

    Args:
        palm / landmark: the loaded models (``palm_detection_full``, ``hand_landmark_full``), or each a list
            of variants, most accurate first (``[…_full, …_lite]``): the stream frame picks one.
        max_hands: most hands reported.
        tracking: False = static-image mode (detector on every frame).
        detect_every: while fewer than ``max_hands`` are tracked, run the detector on every
            n-th frame only (1 = every frame, as MediaPipe does).
    """

    detector_stage = "palm_detection"

    def __init__(self, palm: edgert.Model | list[edgert.Model], landmark: edgert.Model | list[edgert.Model],
                 max_hands: int = 2, tracking: bool = True, detect_every: int = 1) -> None:
        super().__init__(palm, max_hands, tracking, detect_every)
        self.landmarks = list(landmark) if isinstance(landmark, list) else [landmark]
        self.landmark = self.landmarks[0]

    def _detector_input(self, frame: np.ndarray) -> np.ndarray:
        return roi.crop(frame, roi.letterbox_rect(*frame.shape[:2]), PALM_SIZE, PALM_SIZE, 0.0, 1.0,
                        border_zero=True)

    def _detection_rois(self, out: list[Any], frame: np.ndarray) -> list[roi.Rect]:
        return palm_rois(decode(out[0], out[1], _ANCHORS, PALM_DECODE), *frame.shape[:2])

    def _submit_landmarks(self, frame: np.ndarray, r: roi.Rect, run: Runner, hands: list[Hand],
                          after: edgert.Result | None) -> None:
        x = roi.crop(frame, r, LANDMARK_SIZE, LANDMARK_SIZE, 0.0, 1.0)
        run.submit("hand_landmark", self._landmark(run), x, lambda res: self._on_landmarks(res, r, hands), after=after)

    def _on_landmarks(self, res: edgert.Result, r: roi.Rect, hands: list[Hand]) -> None:
        out = outputs(res)
        if out is None:
            self._unseen(r)
            return
        presence = float(out[1].reshape(-1)[0])
        if presence < PRESENCE_MIN:
            return
        raw = out[0].reshape(21, 3)
        lm = np.empty((21, 3), np.float32)
        lm[:, :2] = roi.project(raw, r, LANDMARK_SIZE, LANDMARK_SIZE)
        lm[:, 2] = raw[:, 2] / LANDMARK_SIZE / NORMALIZE_Z * r.w
        s = float(out[2].reshape(-1)[0])
        label, score = (HANDEDNESS[0], s) if s > 0.5 else (HANDEDNESS[1], 1.0 - s)
        hands.append(Hand(lm, label, score, presence, r))
        self._keep(tracking_roi(lm))


_ANCHORS = generate_anchors(PALM_ANCHORS)
