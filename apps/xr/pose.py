"""Pose: pose detection → alignment-keypoint ROI → 33 pose landmarks, tracked by auxiliary points.

Every option value is from ``mediapipe/modules/pose_landmark/pose_landmark_cpu.binarypb`` in the
mediapipe 0.10.14 wheel (its pose_detection_cpu and pose_landmark_by_roi_cpu subgraphs). The
video-mode One-Euro smoothing is not applied.
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

DETECT_MODEL, LANDMARK_MODEL = "pose_detection", "pose_landmark_full"
DETECT_SIZE = 224     # ImageToTensorCalculator: 224×224, keep_aspect_ratio, BORDER_ZERO, [-1, 1]
LANDMARK_SIZE = 256   # ImageToTensorCalculator: 256×256, keep_aspect_ratio, [0, 1]
DETECT_ANCHORS = AnchorOptions(224, 0.1484375, 0.75, (8, 16, 32, 32, 32))   # SsdAnchorsCalculator → 2254
# TensorsToDetectionsCalculator: 4 keypoints, scale 224, min_score 0.5; NMS WEIGHTED 0.3.
DETECT_DECODE = DecodeOptions(num_keypoints=4, scale=224.0, min_score=0.5, min_suppression=0.3)
ALIGN = (0, 1, 90.0)   # AlignmentPointsRectsCalculator: keypoint 0 (centre) → 1 (scale), target 90°
ROI_SCALE = 1.25       # RectTransformationCalculator: 1.25 × 1.25, square_long
PRESENCE_MIN = 0.5     # ThresholdingCalculator on the pose flag
NUM_POINTS, AUX = 39, (33, 34)   # TensorsToLandmarks 39 points; 33‥34 give the next ROI
HEATMAP_KERNEL, HEATMAP_MIN = 7, 0.5   # RefineLandmarksFromHeatmapCalculator kernel_size, min confidence


@dataclass(frozen=True, slots=True)
class Pose:
    """One pose: ``landmarks`` float32[33, 3] (x, y frame pixels; z pixel-scaled), ``visibility``
    float32[33] in [0, 1], ``score`` the pose-presence flag, ``roi`` the crop it came from."""

    landmarks: np.ndarray
    visibility: np.ndarray
    score: float
    roi: roi.Rect


def detection_roi(det: object, frame_h: int, frame_w: int) -> roi.Rect:
    """The pose ROI (frame pixels) from the first detection, in letterboxed-tensor coordinates."""
    pts = roi.project(det.keypoints * DETECT_SIZE, roi.letterbox_rect(frame_h, frame_w),  # type: ignore[attr-defined]
                      DETECT_SIZE, DETECT_SIZE)
    return roi.transform(roi.from_alignment(pts[ALIGN[0]], pts[ALIGN[1]], ALIGN[2]), ROI_SCALE)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def refine_from_heatmap(xy: np.ndarray, heatmap: np.ndarray) -> np.ndarray:
    """RefineLandmarksFromHeatmapCalculator: each point (crop pixels of the 256 input) moves to the
    confidence-weighted mean of its 7×7 heatmap window when that window's peak reaches 0.5."""
    hm = _sigmoid(heatmap.reshape(heatmap.shape[-3:]))
    hh, hw, _ = hm.shape
    out = xy.copy()
    half = (HEATMAP_KERNEL - 1) // 2
    for i in range(min(len(xy), hm.shape[2])):
        col, row = int(xy[i, 0] / LANDMARK_SIZE * hw), int(xy[i, 1] / LANDMARK_SIZE * hh)
        if not (0 <= col < hw and 0 <= row < hh):
            continue
        r0, r1, c0, c1 = max(0, row - half), min(hh, row + half + 1), max(0, col - half), min(hw, col + half + 1)
        win = hm[r0:r1, c0:c1, i]
        total = float(win.sum())
        if win.max() >= HEATMAP_MIN and total > 0:
            rows, cols = np.mgrid[r0:r1, c0:c1]
            out[i, 0] = float((cols * win).sum()) / total / hw * LANDMARK_SIZE
            out[i, 1] = float((rows * win).sum()) / total / hh * LANDMARK_SIZE
    return out


class PoseTracker(DetectAndTrack[Pose]):
    """The pose stream of one camera: one person; the detector runs only while none is tracked."""

    detector_stage = "pose_detection"

    def __init__(self, detector: edgert.Model, landmark: edgert.Model, tracking: bool = True) -> None:
        super().__init__(detector, 1, tracking)
        self.landmark = landmark
        self.landmarks = [landmark]

    def _detector_input(self, frame: np.ndarray) -> np.ndarray:
        return roi.crop(frame, roi.letterbox_rect(*frame.shape[:2]), DETECT_SIZE, DETECT_SIZE, -1.0, 1.0,
                        border_zero=True)

    def _detection_rois(self, out: list[Any], frame: np.ndarray) -> list[roi.Rect]:
        dets = decode(out[0], out[1], _ANCHORS, DETECT_DECODE)
        return [detection_roi(dets[0], *frame.shape[:2])] if dets else []   # the first person only

    def _submit_landmarks(self, frame: np.ndarray, r: roi.Rect, run: Runner, poses: list[Pose],
                          after: edgert.Result | None) -> None:
        x = roi.crop(frame, r, LANDMARK_SIZE, LANDMARK_SIZE, 0.0, 1.0)
        run.submit("pose_landmark", self._landmark(run), x, lambda res: self._on_landmarks(res, r, poses), after=after)

    def _on_landmarks(self, res: edgert.Result, r: roi.Rect, poses: list[Pose]) -> None:
        out = outputs(res)
        if out is None:
            self._unseen(r)
            return
        flag = float(out[1].reshape(-1)[0])
        if flag < PRESENCE_MIN:
            return
        raw = out[0].reshape(NUM_POINTS, 5)
        pts = np.empty((NUM_POINTS, 3), np.float32)
        pts[:, :2] = roi.project(refine_from_heatmap(raw[:, :2], out[3]), r, LANDMARK_SIZE, LANDMARK_SIZE)
        pts[:, 2] = raw[:, 2] / LANDMARK_SIZE * r.w
        vis = _sigmoid(raw[:33, 3]).astype(np.float32)
        poses.append(Pose(pts[:33].copy(), vis, flag, r))
        self._keep(roi.transform(roi.from_alignment(pts[AUX[0]], pts[AUX[1]], ALIGN[2]), ROI_SCALE))


_ANCHORS = generate_anchors(DETECT_ANCHORS)
