"""The XR demo's pictures: ``--snapshot F.png`` (a mosaic of the source's first frames, each processed in
static-image mode) and ``--show F.mp4`` (every camera frame with each stream's newest result drawn)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from apps.xr import FrameResult, Pipelines


def write_snapshot(px: Pipelines, frames: Iterable[np.ndarray], path: str, count: int = 6) -> None:
    """A mosaic of the first ``count`` distinct ``frames``, each processed by ``px`` (static-image mode)."""
    import cv2  # noqa: PLC0415

    from apps.xr.draw import draw, mosaic  # noqa: PLC0415

    tiles = []
    first = None
    for f in frames:
        if first is not None and f.shape == first.shape and np.array_equal(f, first):
            break   # looped back to the start
        first = f if first is None else first
        tiles.append(draw(f, [px.process(f)]))
        if len(tiles) >= count:
            break
    cv2.imwrite(path, mosaic(tiles)[..., ::-1])


class ShowWriter:
    """``--show OUT.mp4``: every camera frame with the newest results (``latest()``) drawn over it, at ``fps``."""

    def __init__(self, path: str, latest: Callable[[], list[FrameResult]], fps: float) -> None:
        self.path, self._latest, self._fps = path, latest, fps
        self._w: Any = None
        self._size = (0, 0)

    def __call__(self, frame: np.ndarray) -> None:
        """Draw the newest results over ``frame`` and append it."""
        import cv2  # noqa: PLC0415

        from apps.xr.draw import draw  # noqa: PLC0415

        img = draw(frame, self._latest())
        if self._w is None:
            self._size = (img.shape[1], img.shape[0])
            fourcc = cv2.VideoWriter_fourcc(*"mp4v")  # type: ignore[attr-defined]
            self._w = cv2.VideoWriter(self.path, fourcc, self._fps, self._size)
        if (img.shape[1], img.shape[0]) != self._size:
            img = cv2.resize(img, self._size)
        self._w.write(np.ascontiguousarray(img[..., ::-1]))

    def close(self) -> None:
        """Finish the file."""
        if self._w is not None:
            self._w.release()
