"""MediaPipe 0.10.14's own legacy solutions, as the reference and the peer (optional dependency).

``pip install mediapipe==0.10.14`` (the ``reference`` extra). Nothing in the product imports this
module; tests and ``benchmarks/mediapipe_peer.py`` do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

MEDIAPIPE_VERSION = "0.10.14"


@dataclass(slots=True)
class Reference:
    """MediaPipe's answer on one frame, in the same units as :class:`apps.xr.FrameResult`."""

    hands: list[np.ndarray] = field(default_factory=list)        # float32[21, 3] per hand (x, y pixels)
    handedness: list[str] = field(default_factory=list)
    faces: list[np.ndarray] = field(default_factory=list)        # float32[478, 3]
    poses: list[np.ndarray] = field(default_factory=list)        # float32[33, 3]
    mask: np.ndarray | None = None                               # float32[H, W]


def _pixels(lms: Any, h: int, w: int) -> np.ndarray:
    return np.array([[p.x * w, p.y * h, p.z * w] for p in lms.landmark], dtype=np.float32)


class Solutions:
    """MediaPipe's face_mesh (with iris), hands (full), pose (full) and selfie segmentation.

    Args:
        static: static-image mode (every detector every frame) vs video mode (tracking).
        max_hands / max_faces / pose / segmentation: which solutions, as for ``Pipelines``.
        refine_faces: face mesh with the attention model (478 points) or the plain one (468).
    """

    def __init__(self, static: bool = True, max_hands: int = 2, max_faces: int = 1, pose: bool = True,
                 segmentation: bool = True, refine_faces: bool = True) -> None:
        import mediapipe as mp  # noqa: PLC0415 - optional reference

        s = mp.solutions
        self.hands = s.hands.Hands(static_image_mode=static, max_num_hands=max_hands,
                                   model_complexity=1) if max_hands else None
        self.face = s.face_mesh.FaceMesh(static_image_mode=static, max_num_faces=max_faces,
                                         refine_landmarks=refine_faces) if max_faces else None
        self.pose = s.pose.Pose(static_image_mode=static, model_complexity=1) if pose else None
        self.seg = s.selfie_segmentation.SelfieSegmentation(model_selection=0) if segmentation else None

    def process(self, frame: np.ndarray) -> Reference:
        """Run every enabled solution on an RGB uint8 frame."""
        h, w = frame.shape[:2]
        ref = Reference()
        if self.hands is not None:
            r = self.hands.process(frame)
            ref.hands = [_pixels(x, h, w) for x in (r.multi_hand_landmarks or [])]
            ref.handedness = [c.classification[0].label for c in (r.multi_handedness or [])]
        if self.face is not None:
            r = self.face.process(frame)
            ref.faces = [_pixels(x, h, w) for x in (r.multi_face_landmarks or [])]
        if self.pose is not None:
            r = self.pose.process(frame)
            ref.poses = [_pixels(r.pose_landmarks, h, w)] if r.pose_landmarks is not None else []
        if self.seg is not None:
            ref.mask = np.asarray(self.seg.process(frame).segmentation_mask, dtype=np.float32)
        return ref

    def close(self) -> None:
        """Release MediaPipe's graphs."""
        for s in (self.hands, self.face, self.pose, self.seg):
            if s is not None:
                s.close()


def match_error(ours: list[np.ndarray], theirs: list[np.ndarray], diagonal: float) -> list[float]:
    """Per reference instance, the mean x-y landmark distance to our nearest instance / ``diagonal``.

    Instances pair greedily by the smallest mean distance; an unmatched one scores inf.
    """
    errs = []
    left = list(range(len(ours)))
    for t in theirs:
        best, k = float("inf"), -1
        for i in left:
            n = min(len(ours[i]), len(t))
            d = float(np.linalg.norm(ours[i][:n, :2] - t[:n, :2], axis=1).mean()) / diagonal
            if d < best:
                best, k = d, i
        if k >= 0:
            left.remove(k)
        errs.append(best)
    return errs
