"""Face: short-range face detection → rotated ROI → 468-point mesh → two iris crops → 478 points.

Detector, ROI, mesh and tracking options are from
``mediapipe/modules/face_landmark/face_landmark_front_cpu.binarypb`` in the mediapipe 0.10.14
wheel (its face_detection_short_range_cpu and face_landmark_cpu subgraphs). The wheel ships no
iris graph; the iris values are those of MediaPipe v0.10.14's
``mediapipe/modules/iris_landmark/iris_landmark_landmarks_to_roi.pbtxt`` and
``iris_landmark_cpu.pbtxt`` (source tree), and where the iris points go in the 478-point list is
the same wheel graph's LandmarksRefinementCalculator (left iris → 468‥472, right → 473‥477).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import edgert
from apps.xr import roi
from apps.xr.anchors import AnchorOptions, generate_anchors
from apps.xr.decode import DecodeOptions, decode
from apps.xr.stages import Runner, outputs
from apps.xr.tracking import DetectAndTrack

DETECT_MODEL, MESH_MODEL, IRIS_MODEL = "face_detection_short_range", "face_landmark", "iris_landmark"
DETECT_SIZE = 128      # ImageToTensorCalculator: 128×128, keep_aspect_ratio, BORDER_ZERO, [-1, 1]
MESH_SIZE = 192        # ImageToTensorCalculator: 192×192, [0, 1]
IRIS_SIZE = 64         # iris_landmark_cpu: 64×64, [0, 1]
DETECT_ANCHORS = AnchorOptions(128, 0.1484375, 0.75, (8, 16, 16, 16))   # SsdAnchorsCalculator → 896
# TensorsToDetectionsCalculator: 6 keypoints, scale 128, min_score 0.5; NMS WEIGHTED 0.3.
DETECT_DECODE = DecodeOptions(num_keypoints=6, scale=128.0, min_score=0.5, min_suppression=0.3)
DETECT_ROT = (0, 1, 0.0)     # DetectionsToRectsCalculator: keypoint 0 → 1 (eyes), target 0°
ROI_SCALE = 1.5              # RectTransformationCalculator: 1.5 × 1.5, square_long
PRESENCE_MIN = 0.5           # TensorsToFloats SIGMOID → ThresholdingCalculator 0.5
TRACK_ROT = (33, 263, 0.0)   # tracking: DetectionsToRects from landmarks 33 → 263, target 0°
IRIS_SCALE = 2.3             # iris ROI: eye corners, RectTransformation 2.3, square_long
EYES = ((33, 133, False), (362, 263, True))   # (corner, corner, mirrored): left eye, right eye


@dataclass(slots=True)
class Face:
    """One face: ``landmarks`` float32[468 or 478, 3] (x, y frame pixels; z pixel-scaled),
    ``score`` the mesh model's face-presence score, ``roi`` the crop it came from."""

    landmarks: np.ndarray
    score: float
    roi: roi.Rect
    iris: list[np.ndarray | None] = field(default_factory=lambda: [None, None])


def detection_rois(dets: list, frame_h: int, frame_w: int) -> list[roi.Rect]:
    """Face ROIs (frame pixels) from detections in letterboxed-tensor coordinates."""
    box_rect = roi.letterbox_rect(frame_h, frame_w)
    out = []
    for d in dets:
        pts = roi.project(np.vstack([d.box.reshape(2, 2), d.keypoints]) * DETECT_SIZE, box_rect,
                          DETECT_SIZE, DETECT_SIZE)
        rot = roi.rotation(pts[2 + DETECT_ROT[0]], pts[2 + DETECT_ROT[1]], DETECT_ROT[2])
        out.append(roi.transform(roi.from_box(pts[:2].reshape(-1), rot), ROI_SCALE))
    return out


def tracking_roi(landmarks: np.ndarray) -> roi.Rect:
    """Next frame's ROI from this frame's mesh (LandmarksToDetection → DetectionsToRects → transform)."""
    rot = roi.rotation(landmarks[TRACK_ROT[0]], landmarks[TRACK_ROT[1]], TRACK_ROT[2])
    return roi.transform(roi.from_points(landmarks[:468], rot), ROI_SCALE)


def eye_roi(landmarks: np.ndarray, a: int, b: int) -> roi.Rect:
    """The iris model's ROI around the eye whose corners are mesh points ``a`` and ``b``."""
    rot = roi.rotation(landmarks[a], landmarks[b], 0.0)
    return roi.transform(roi.from_points(landmarks[[a, b]], rot), IRIS_SCALE)


class FaceTracker(DetectAndTrack[Face]):
    """The face stream of one camera; same tracking scheme as :class:`apps.xr.hands.HandTracker`."""

    detector_stage = "face_detection"

    def __init__(self, detector: edgert.Model, mesh: edgert.Model, iris: edgert.Model | None,
                 max_faces: int = 1, tracking: bool = True, detect_every: int = 1) -> None:
        super().__init__(detector, max_faces, tracking, detect_every)
        self.mesh, self.iris = mesh, iris
        self.landmarks = [mesh]

    def _landmark_chain(self, cheapest: bool = False) -> list[str]:
        return [self.mesh.name, *([self.iris.name] if self.iris is not None else [])]

    def _detector_input(self, frame: np.ndarray) -> np.ndarray:
        return roi.crop(frame, roi.letterbox_rect(*frame.shape[:2]), DETECT_SIZE, DETECT_SIZE, -1.0, 1.0,
                        border_zero=True)

    def _detection_rois(self, out: list[Any], frame: np.ndarray) -> list[roi.Rect]:
        return detection_rois(decode(out[0], out[1], _ANCHORS, DETECT_DECODE), *frame.shape[:2])

    def _submit_landmarks(self, frame: np.ndarray, r: roi.Rect, run: Runner, found: list[Face],
                          after: edgert.Result | None) -> None:
        self._submit_mesh(frame, r, run, found, after)

    def _submit_mesh(self, frame: np.ndarray, r: roi.Rect, run: Runner, faces: list[Face],
                     after: edgert.Result | None) -> None:
        x = roi.crop(frame, r, MESH_SIZE, MESH_SIZE, 0.0, 1.0)
        run.submit("face_landmark", self._landmark(run), x, lambda res: self._on_mesh(frame, res, r, run, faces),
                   after=after)

    def _on_mesh(self, frame: np.ndarray, res: edgert.Result, r: roi.Rect, run: Runner,
                 faces: list[Face]) -> None:
        out = outputs(res)
        if out is None:
            self._unseen(r)
            return
        score = float(1.0 / (1.0 + np.exp(-out[1].reshape(-1)[0])))
        if score < PRESENCE_MIN:
            return
        raw = out[0].reshape(468, 3)
        lm = np.empty((468, 3), np.float32)
        lm[:, :2] = roi.project(raw, r, MESH_SIZE, MESH_SIZE)
        lm[:, 2] = raw[:, 2] / MESH_SIZE * r.w
        face = Face(lm, score, r)
        faces.append(face)
        self._keep(tracking_roi(lm))
        if self.iris is None:
            return
        for k, (a, b, mirrored) in enumerate(EYES):
            er = eye_roi(lm, a, b)
            x = roi.crop(frame, er, IRIS_SIZE, IRIS_SIZE, 0.0, 1.0, flip=mirrored)
            run.submit("iris_landmark", self.iris, x,
                       lambda res2, k=k, er=er, m=mirrored: self._on_iris(res2, face, k, er, m), after=res)

    @staticmethod
    def _on_iris(res: edgert.Result, face: Face, k: int, er: roi.Rect, mirrored: bool) -> None:
        out = outputs(res)
        if out is None:
            return
        raw = out[1].reshape(5, 3)
        pts = np.empty((5, 3), np.float32)
        pts[:, :2] = roi.project(raw, er, IRIS_SIZE, IRIS_SIZE, flip=mirrored)
        pts[:, 2] = raw[:, 2] / IRIS_SIZE * er.w
        face.iris[k] = pts
        if all(i is not None for i in face.iris):
            face.landmarks = np.vstack([face.landmarks[:468], *face.iris]).astype(np.float32)


_ANCHORS = generate_anchors(DETECT_ANCHORS)
