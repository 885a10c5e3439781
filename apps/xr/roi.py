"""Rotated regions of interest: MediaPipe's rect calculators and the crop/projection they drive.

Everything here is in frame pixels (x right, y down); a rotation is in radians, and a point
``(u, v)`` of a crop (fractions of its side, centred on 0) maps to the frame as
``centre + R(rotation) · (u·w, v·h)`` — MediaPipe's ``LandmarkProjectionCalculator`` convention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import cv2
import numpy as np


@dataclass(frozen=True, slots=True)
class Rect:
    """A rotated rectangle: centre (cx, cy), size (w, h) in frame pixels, rotation in radians."""

    cx: float
    cy: float
    w: float
    h: float
    rotation: float = 0.0

    def bounds(self) -> tuple[float, float, float, float]:
        """Axis-aligned xmin, ymin, xmax, ymax of the unrotated rect (pixels), as MediaPipe compares them."""
        return (self.cx - self.w / 2, self.cy - self.h / 2, self.cx + self.w / 2, self.cy + self.h / 2)


def normalize_radians(a: float) -> float:
    """``a`` wrapped into [-π, π)."""
    return a - 2 * math.pi * math.floor((a + math.pi) / (2 * math.pi))


def rotation(p0: np.ndarray, p1: np.ndarray, target_deg: float) -> float:
    """Rotation that turns the vector p0→p1 (pixels) to ``target_deg`` (MediaPipe's ComputeRotation)."""
    return normalize_radians(math.radians(target_deg) - math.atan2(-(p1[1] - p0[1]), p1[0] - p0[0]))


def transform(r: Rect, scale: float, shift_x: float = 0.0, shift_y: float = 0.0,
              square_long: bool = True) -> Rect:
    """MediaPipe's RectTransformationCalculator: shift (fractions of w / h, along the rotated axes),
    make square on the long side, then scale."""
    c, s = math.cos(r.rotation), math.sin(r.rotation)
    dx = r.w * shift_x * c - r.h * shift_y * s
    dy = r.w * shift_x * s + r.h * shift_y * c
    w, h = (max(r.w, r.h),) * 2 if square_long else (r.w, r.h)
    return Rect(r.cx + dx, r.cy + dy, w * scale, h * scale, r.rotation)


def from_box(box: np.ndarray, rot: float) -> Rect:
    """The rect of an xyxy box (pixels) with a given rotation (DetectionsToRectsCalculator)."""
    return Rect((box[0] + box[2]) / 2, (box[1] + box[3]) / 2, box[2] - box[0], box[3] - box[1], rot)


def from_points(points: np.ndarray, rot: float) -> Rect:
    """The rect of the bounding box of ``points`` [N, ≥2] (pixels) with a given rotation."""
    lo, hi = points[:, :2].min(0), points[:, :2].max(0)
    return from_box(np.array([lo[0], lo[1], hi[0], hi[1]]), rot)


def from_alignment(center: np.ndarray, scale_pt: np.ndarray, target_deg: float) -> Rect:
    """AlignmentPointsRectsCalculator: a square centred on ``center``, side twice the distance to
    ``scale_pt``, rotated so that centre→scale_pt points to ``target_deg``."""
    side = 2.0 * float(np.hypot(*(scale_pt[:2] - center[:2])))
    return Rect(float(center[0]), float(center[1]), side, side, rotation(center, scale_pt, target_deg))


def oriented_bounds(points: np.ndarray, rot: float) -> Rect:
    """The tightest rect with rotation ``rot`` around ``points`` (HandLandmarksToRectCalculator)."""
    pts = points[:, :2].astype(np.float64)
    c0 = (pts.min(0) + pts.max(0)) / 2
    c, s = math.cos(-rot), math.sin(-rot)
    d = pts - c0
    proj = np.stack([d[:, 0] * c - d[:, 1] * s, d[:, 0] * s + d[:, 1] * c], axis=1)
    lo, hi = proj.min(0), proj.max(0)
    mid = (lo + hi) / 2
    c, s = math.cos(rot), math.sin(rot)
    centre = c0 + np.array([mid[0] * c - mid[1] * s, mid[0] * s + mid[1] * c])
    return Rect(float(centre[0]), float(centre[1]), float(hi[0] - lo[0]), float(hi[1] - lo[1]), rot)


def letterbox_rect(height: int, width: int) -> Rect:
    """The square around the whole frame that a keep-aspect (letterboxed) detector input covers."""
    side = float(max(height, width))
    return Rect(width / 2, height / 2, side, side, 0.0)


def crop_matrix(r: Rect, out_w: int, out_h: int) -> np.ndarray:
    """The 2×3 affine from crop pixels (0..out_w, 0..out_h) to frame pixels."""
    c, s = math.cos(r.rotation), math.sin(r.rotation)
    a = np.array([[c * r.w / out_w, -s * r.h / out_h], [s * r.w / out_w, c * r.h / out_h]])
    t = np.array([r.cx, r.cy]) - a @ np.array([out_w / 2, out_h / 2])
    return np.hstack([a, t[:, None]])


def crop(frame: np.ndarray, r: Rect, out_w: int, out_h: int, lo: float = 0.0, hi: float = 1.0,
         border_zero: bool = False, flip: bool = False) -> np.ndarray:
    """The rotated crop ``r`` of an RGB ``frame`` (uint8, or float32 in [0, 1]) as a model input.

    Bilinear, like MediaPipe's ImageToTensorCalculator; returns float32[1, out_h, out_w, 3] in
    [lo, hi]. ``border_zero`` fills outside the frame with black, else the edge repeats.
    ``flip`` mirrors the crop horizontally (MediaPipe feeds right eyes to the iris model mirrored).
    """
    m = crop_matrix(replace(r, w=-r.w) if flip else r, out_w, out_h)
    border = cv2.BORDER_CONSTANT if border_zero else cv2.BORDER_REPLICATE
    out = cv2.warpAffine(frame, m, (out_w, out_h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                         borderMode=border, borderValue=0)
    scale = (hi - lo) / (255.0 if frame.dtype == np.uint8 else 1.0)
    return (out.astype(np.float32) * np.float32(scale) + np.float32(lo))[None]


def project(points: np.ndarray, r: Rect, out_w: int, out_h: int, flip: bool = False) -> np.ndarray:
    """Map points [N, ≥2] from crop pixels back to frame pixels (LandmarkProjectionCalculator)."""
    m = crop_matrix(replace(r, w=-r.w) if flip else r, out_w, out_h)
    xy = points[:, :2].astype(np.float64) @ m[:, :2].T + m[:, 2]
    return xy.astype(np.float32)


def similarity(a: Rect, b: Rect) -> float:
    """IoU of the two rects' unrotated bounds (AssociationNormRectCalculator's overlap measure)."""
    ax0, ay0, ax1, ay1 = a.bounds()
    bx0, by0, bx1, by1 = b.bounds()
    iw = max(0.0, min(ax1, bx1) - max(ax0, bx0))
    ih = max(0.0, min(ay1, by1) - max(ay0, by0))
    inter = iw * ih
    union = a.w * a.h + b.w * b.h - inter
    return inter / union if union > 0 else 0.0
