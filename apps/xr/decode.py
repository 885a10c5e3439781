"""Decoding SSD detector tensors into detections, and MediaPipe's weighted non-max suppression."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class DecodeOptions:
    """The ``TensorsToDetectionsCalculatorOptions`` fields the MediaPipe detectors use.

    Attributes:
        num_keypoints: keypoints per box (7 palm, 6 face, 4 pose).
        scale: raw box / keypoint units per input-tensor side (the detector's input size, pixels).
        min_score: score threshold after the sigmoid.
        score_clipping: raw scores are clipped to ±this before the sigmoid.
        min_suppression: IoU above which weighted NMS merges two detections.
    """

    num_keypoints: int
    scale: float
    min_score: float = 0.5
    score_clipping: float = 100.0
    min_suppression: float = 0.3


@dataclass(frozen=True, slots=True)
class Detection:
    """One detection in input-tensor-normalised coordinates.

    Attributes:
        box: float32[4] xmin, ymin, xmax, ymax (fractions of the tensor side).
        keypoints: float32[K, 2] x, y (fractions of the tensor side).
        score: confidence in [0, 1].
    """

    box: np.ndarray
    keypoints: np.ndarray
    score: float


def decode(raw_boxes: np.ndarray, raw_scores: np.ndarray, anchors: np.ndarray,
           opts: DecodeOptions) -> list[Detection]:
    """Boxes above ``opts.min_score`` from raw tensors [1, N, C] and [1, N, 1], then weighted NMS.

    Coordinates are x-first (``reverse_output_order``), centre-size boxes relative to each anchor.
    """
    boxes = raw_boxes.reshape(len(anchors), -1)
    clipped = np.clip(raw_scores.reshape(-1).astype(np.float64), -opts.score_clipping, opts.score_clipping)
    scores = 1.0 / (1.0 + np.exp(-clipped))
    keep = np.nonzero(scores >= opts.min_score)[0]
    if keep.size == 0:
        return []
    b, a, s = boxes[keep], anchors[keep], scores[keep]
    cx = b[:, 0] / opts.scale * a[:, 2] + a[:, 0]
    cy = b[:, 1] / opts.scale * a[:, 3] + a[:, 1]
    w = b[:, 2] / opts.scale * a[:, 2]
    h = b[:, 3] / opts.scale * a[:, 3]
    k = opts.num_keypoints
    kp = b[:, 4:4 + 2 * k].reshape(-1, k, 2) / opts.scale * a[:, None, 2:4] + a[:, None, 0:2]
    box = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
    return weighted_nms(box.astype(np.float32), kp.astype(np.float32), s.astype(np.float32),
                        opts.min_suppression)


def iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Intersection over union of one xyxy box with each of ``boxes`` [N, 4]."""
    ix = np.clip(np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0]), 0, None)
    iy = np.clip(np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1]), 0, None)
    inter = ix * iy
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def weighted_nms(boxes: np.ndarray, keypoints: np.ndarray, scores: np.ndarray,
                 threshold: float) -> list[Detection]:
    """MediaPipe's WEIGHTED suppression: the best box absorbs every box overlapping it by IoU > threshold.

    The merged box and keypoints are the score-weighted mean of the absorbed ones; the score is the
    best one's. Detections come out best first.
    """
    order = list(np.argsort(-scores, kind="stable"))
    out: list[Detection] = []
    while order:
        idx = np.asarray(order)
        overlap = iou(boxes[idx[0]], boxes[idx])
        group = idx[overlap > threshold]
        group = group if group.size else idx[:1]
        w = scores[group][:, None]
        box = (boxes[group] * w).sum(0) / w.sum()
        kp = (keypoints[group] * w[:, :, None]).sum(0) / w.sum()
        out.append(Detection(box.astype(np.float32), kp.astype(np.float32), float(scores[idx[0]])))
        taken = set(group.tolist()) | {int(idx[0])}
        order = [i for i in order if int(i) not in taken]
    return out
