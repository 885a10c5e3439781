"""Selfie segmentation: the person mask at frame size.

Options from ``mediapipe/modules/selfie_segmentation/selfie_segmentation_cpu.binarypb`` in the
mediapipe 0.10.14 wheel: ImageToTensorCalculator 256×256, keep_aspect_ratio false, [0, 1];
TensorsToSegmentationCalculator activation NONE (the model ends in a sigmoid), resized to the
input size.
"""

from __future__ import annotations

import cv2
import numpy as np

import edgert
from apps.xr import roi
from apps.xr.stages import Runner, outputs

MODEL = "selfie_segmentation"
SIZE = 256


class Segmenter:
    """The segmentation stream of one camera: one request per frame, no tracking."""

    def __init__(self, model: edgert.Model) -> None:
        self.model = model

    def start(self, frame: np.ndarray, run: Runner, sink: list[np.ndarray]) -> None:
        """Submit the frame; its float32[H, W] mask in [0, 1] is appended to ``sink``."""
        h, w = frame.shape[:2]
        x = roi.crop(frame, roi.Rect(w / 2, h / 2, w, h), SIZE, SIZE, 0.0, 1.0, border_zero=True)
        run.submit("segmentation", self.model, x, lambda res: self._on_mask(res, h, w, sink))

    @staticmethod
    def _on_mask(res: edgert.Result, h: int, w: int, sink: list[np.ndarray]) -> None:
        out = outputs(res)
        if out is None:
            return
        m = out[0].reshape(SIZE, SIZE).astype(np.float32)
        sink.append(np.clip(cv2.resize(m, (w, h), interpolation=cv2.INTER_LINEAR), 0.0, 1.0))
