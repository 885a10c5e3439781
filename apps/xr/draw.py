"""Drawing the pipelines' results over a frame (OpenCV): mask tint, ROI boxes, landmarks."""

from __future__ import annotations

import cv2
import numpy as np

from apps.xr import roi
from apps.xr.pipelines import FrameResult

#: Bones drawn between hand landmarks (MediaPipe's 21-point hand topology).
HAND_BONES = ((0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (5, 6), (6, 7), (7, 8), (5, 9), (9, 10), (10, 11),
              (11, 12), (9, 13), (13, 14), (14, 15), (15, 16), (13, 17), (0, 17), (17, 18), (18, 19), (19, 20))
#: Bones drawn between pose landmarks (shoulders, arms, torso, legs of the 33-point pose topology).
POSE_BONES = ((11, 12), (11, 13), (13, 15), (12, 14), (14, 16), (11, 23), (12, 24), (23, 24), (23, 25),
              (25, 27), (24, 26), (26, 28), (0, 11), (0, 12))


def to_uint8(frame: np.ndarray) -> np.ndarray:
    """An RGB frame (uint8, or float in [0, 1]) as uint8."""
    return frame if frame.dtype == np.uint8 else (np.clip(frame, 0, 1) * 255).astype(np.uint8)


def _box(img: np.ndarray, r: roi.Rect, colour: tuple[int, int, int]) -> None:
    pts = cv2.boxPoints(((r.cx, r.cy), (r.w, r.h), np.degrees(r.rotation)))
    cv2.polylines(img, [pts.astype(np.int32)], True, colour, 1, cv2.LINE_AA)


def _points(img: np.ndarray, lm: np.ndarray, colour: tuple[int, int, int], radius: int,
            bones: tuple[tuple[int, int], ...] = ()) -> None:
    for a, b in bones:
        cv2.line(img, (int(lm[a, 0]), int(lm[a, 1])), (int(lm[b, 0]), int(lm[b, 1])), colour, 2, cv2.LINE_AA)
    for x, y in lm[:, :2]:
        cv2.circle(img, (int(x), int(y)), radius, colour, -1, cv2.LINE_AA)


def draw(frame: np.ndarray, results: list[FrameResult]) -> np.ndarray:
    """A uint8 RGB copy of ``frame`` with every result's mask (blue tint), ROIs and landmarks."""
    img = to_uint8(frame).copy()
    scale = max(1, round(max(img.shape[:2]) / 500))
    for r in results:
        if r.mask is not None and r.mask.shape == img.shape[:2]:
            tint = np.array([40, 90, 255], np.float32)
            a = (0.35 * r.mask)[..., None]
            img = (img * (1 - a) + tint * a).astype(np.uint8)
    for r in results:
        for p in r.poses:
            _box(img, p.roi, (255, 255, 0))
            _points(img, p.landmarks[p.visibility > 0.5], (255, 200, 0), 2 * scale)
            for a, b in POSE_BONES:
                if p.visibility[a] > 0.5 and p.visibility[b] > 0.5:
                    cv2.line(img, tuple(int(v) for v in p.landmarks[a, :2]),
                             tuple(int(v) for v in p.landmarks[b, :2]), (255, 200, 0), 2, cv2.LINE_AA)
        for f in r.faces:
            _box(img, f.roi, (0, 255, 0))
            _points(img, f.landmarks[:468], (0, 230, 0), max(1, scale // 2))
            _points(img, f.landmarks[468:], (255, 0, 255), scale)
        for h in r.hands:
            _box(img, h.roi, (255, 0, 0))
            _points(img, h.landmarks, (255, 60, 60), 2 * scale, HAND_BONES)
            x, y = h.landmarks[0, :2]
            cv2.putText(img, h.handedness, (int(x), int(y) + 20), cv2.FONT_HERSHEY_SIMPLEX, 0.6 * scale,
                        (255, 60, 60), scale, cv2.LINE_AA)
    return img


def mosaic(images: list[np.ndarray], height: int = 360) -> np.ndarray:
    """Images side by side in rows of three, each scaled to ``height`` pixels tall (uint8 RGB)."""
    tiles = [cv2.resize(i, (max(1, int(i.shape[1] * height / i.shape[0])), height)) for i in images]
    rows = [tiles[k:k + 3] for k in range(0, len(tiles), 3)]
    width = max(sum(t.shape[1] for t in row) for row in rows)
    out = np.zeros((height * len(rows), width, 3), np.uint8)
    for ri, row in enumerate(rows):
        x = 0
        for t in row:
            out[ri * height:(ri + 1) * height, x:x + t.shape[1]] = t
            x += t.shape[1]
    return out
