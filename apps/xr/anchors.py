"""SSD anchors for MediaPipe's detectors, generated from the model's anchor options.

The options come from the ``SsdAnchorsCalculator`` nodes of the MediaPipe 0.10.14 wheel's
graphs (each stream module cites its graph file). Anchors are returned as centres and
sizes normalised to the detector's input tensor (fractions of its width / height).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class AnchorOptions:
    """The ``SsdAnchorsCalculatorOptions`` fields MediaPipe's face, palm and pose detectors use.

    Attributes:
        input_size: detector input side (pixels; the tensors are square).
        min_scale / max_scale: anchor scale of the first / last layer (fraction of the input).
        strides: feature-map stride per layer (pixels).
        anchor_offset: anchor centre offset inside its cell (fraction of a cell).
        interpolated_scale_aspect_ratio: extra anchor per cell at the interpolated scale (0 = none).
        fixed_anchor_size: every anchor is 1 × 1 (the decoder scales raw box sizes itself).
    """

    input_size: int
    min_scale: float
    max_scale: float
    strides: tuple[int, ...]
    anchor_offset: float = 0.5
    interpolated_scale_aspect_ratio: float = 1.0
    fixed_anchor_size: bool = True


def _scale(opts: AnchorOptions, layer: int) -> float:
    n = len(opts.strides)
    if n == 1:
        return (opts.min_scale + opts.max_scale) / 2
    return opts.min_scale + (opts.max_scale - opts.min_scale) * layer / (n - 1)


def generate_anchors(opts: AnchorOptions) -> np.ndarray:
    """Anchors as float32[N, 4] (x_center, y_center, w, h), in MediaPipe's order.

    Consecutive layers with the same stride share one feature map: each of its cells gets,
    per layer, one anchor of aspect ratio 1 and (when ``interpolated_scale_aspect_ratio`` > 0)
    one at the geometric mean of this and the next layer's scale.
    """
    out: list[tuple[float, float, float, float]] = []
    layer = 0
    n = len(opts.strides)
    while layer < n:
        sizes: list[tuple[float, float]] = []
        last = layer
        while last < n and opts.strides[last] == opts.strides[layer]:
            s = _scale(opts, last)
            sizes.append((s, s))
            if opts.interpolated_scale_aspect_ratio > 0:
                nxt = 1.0 if last == n - 1 else _scale(opts, last + 1)
                side = float(np.sqrt(s * nxt))
                r = float(np.sqrt(opts.interpolated_scale_aspect_ratio))
                sizes.append((side * r, side / r))
            last += 1
        cells = int(np.ceil(opts.input_size / opts.strides[layer]))
        for y in range(cells):
            for x in range(cells):
                cx = (x + opts.anchor_offset) / cells
                cy = (y + opts.anchor_offset) / cells
                for w, h in sizes:
                    out.append((cx, cy, 1.0, 1.0) if opts.fixed_anchor_size else (cx, cy, w, h))
        layer = last
    return np.asarray(out, dtype=np.float32)
