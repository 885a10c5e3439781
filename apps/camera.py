"""Frame sources for the XR demo: a synthetic camera, a directory of image files, or a video file.

Files and videos are streamed: a background thread decodes a few frames ahead of the camera
(:func:`read_ahead`), so a long source costs a few frames of memory, not its decoded whole.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from edgert.extras import require
from edgert.errors import ConfigError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")


def synthetic_frames(height: int = 480, width: int = 640, seed: int = 0) -> Iterator[np.ndarray]:
    """An endless synthetic scene (float32 HxWx3 in [0, 1]): a lit gradient with two moving blobs.

    Deterministic for a seed; cheap enough to make at camera rate (~0.5 ms a frame).
    """
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack([xx / width, yy / height, 0.5 * (xx + yy) / (width + height)], axis=-1)
    base += rng.normal(0, 0.02, base.shape).astype(np.float32)
    t = 0
    while True:
        frame = base.copy()
        for k, (r, speed) in enumerate(((60, 0.05), (40, 0.08))):
            cy = height / 2 + height / 3 * np.sin(speed * t + k)
            cx = width / 2 + width / 3 * np.cos(speed * 0.7 * t + 2 * k)
            y0, y1 = int(max(0, cy - r)), int(min(height, cy + r))
            x0, x1 = int(max(0, cx - r)), int(min(width, cx + r))
            frame[y0:y1, x0:x1, k] = 0.9
        t += 1
        yield frame


#: Frames a file or video source decodes ahead of the one in use (``read_ahead``'s default depth).
READ_AHEAD = 4


def read_ahead(frames: Iterator[np.ndarray], depth: int = READ_AHEAD, name: str = "frames") -> Iterator[np.ndarray]:
    """``frames``, decoded by a background thread at most ``depth`` frames ahead of the consumer.

    The source is never held whole: at most ``depth`` decoded frames wait in the queue, plus the one
    the consumer holds. The thread runs nicer than the others (READER_NICENESS), so on a busy host
    the consumer waits for a frame rather than the models for a core. An exception of the source is raised to the consumer at the frame it replaces
    (nothing is lost in the thread); closing the returned generator stops the thread.
    """
    if depth < 1:
        raise ConfigError(f"read-ahead depth must be >= 1 frame, got {depth}")
    q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        _lower_priority()
        try:
            for f in frames:
                if not put(("frame", f)):
                    return
            put(("end", None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            put(("error", exc))

    t = threading.Thread(target=produce, name=f"edgert-{name}-reader", daemon=True)

    def consume() -> Iterator[np.ndarray]:
        t.start()
        try:
            while True:
                kind, item = q.get()
                if kind == "frame":
                    yield item
                elif kind == "error":
                    raise item
                else:
                    return
        finally:
            stop.set()
            t.join(timeout=5.0)

    return consume()


#: How much nicer (Linux niceness) the reader thread is than the rest: decoding a file source is ~10 ms a
#: frame of CPU, and on a small host it must not take a core from the models; the camera waits instead.
READER_NICENESS = 5


def _lower_priority() -> None:
    """Make the calling thread READER_NICENESS nicer (Linux: a thread is a task; elsewhere nothing)."""
    if not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + READER_NICENESS)
    except OSError:
        return


def image_files(directory: str | Path) -> list[Path]:
    """The image files of ``directory`` in name order.

    Raises:
        ConfigError: the directory is missing or holds no image.
    """
    d = Path(directory)
    files = sorted(p for p in d.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES) if d.is_dir() else []
    if not files:
        raise ConfigError(f"--frames {str(d)!r}: no {'/'.join(IMAGE_SUFFIXES)} images there "
                          "(split a video first, e.g. ffmpeg -i in.mp4 frames/%05d.png)")
    return files


def read_image(path: Path) -> np.ndarray:
    """One image file as uint8 RGB H×W×3 (grey repeated, alpha dropped): with OpenCV when it is installed
    (the ``xr`` extra; a third of matplotlib's time, no float copy), else with matplotlib.

    Raises:
        ConfigError: the file cannot be read as an image.
        MissingExtra: neither OpenCV nor matplotlib is installed (``pip install 'edgert[plot]'``).
    """
    try:
        import cv2  # noqa: PLC0415
    except ImportError:
        cv2 = None
    if cv2 is not None:
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if bgr is None:
            raise ConfigError(f"--frames: {path} is not an image OpenCV can read; remove it or convert it to PNG")
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    mpimg = require("matplotlib.image", "--frames DIR")   # only this source needs an image reader
    img = np.asarray(mpimg.imread(path))
    if img.dtype != np.uint8:
        img = np.clip(np.asarray(img, np.float32) * (255.0 if img.max() <= 1.0 else 1.0), 0, 255).astype(np.uint8)
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    return np.ascontiguousarray(img[..., :3])


def directory_frames(directory: str | Path, depth: int = READ_AHEAD) -> Iterator[np.ndarray]:
    """The images of ``directory`` in name order, looping (uint8 RGB H×W×3, as a video's frames).

    Streamed: each image is decoded when it is about to be used, at most ``depth`` ahead
    (:func:`read_ahead`), so memory holds a few frames however many files there are.
    Images are read with OpenCV (the ``xr`` extra) or else matplotlib (the ``plot`` extra).

    Raises:
        ConfigError: the directory is missing or holds no image.
        MissingExtra: matplotlib is not installed (``pip install 'edgert[plot]'``).
    """
    try:   # a missing reader is named before the directory is looked at
        import cv2  # noqa: F401, PLC0415 - the reader read_image prefers
    except ImportError:
        require("matplotlib.image", "--frames DIR")
    files = image_files(directory)

    def decode() -> Iterator[np.ndarray]:
        while True:
            for p in files:
                yield read_image(p)

    return read_ahead(decode(), depth, "frames")


class Resizer:
    """Nearest-neighbour resize/crop to a model's input size with precomputed index arrays."""

    def __init__(self) -> None:
        self._idx: dict[tuple[int, int, int, int, int, int, int, int], tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, frame: np.ndarray, out_h: int, out_w: int,
                 box: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)) -> np.ndarray:
        """Crop ``box`` (y0, x0, y1, x1 as fractions) of ``frame`` and resize to [1, out_h, out_w, 3]."""
        h, w = frame.shape[:2]
        y0, x0, y1, x1 = (int(box[0] * h), int(box[1] * w), max(int(box[2] * h), 1), max(int(box[3] * w), 1))
        key = (h, w, out_h, out_w, y0, x0, y1, x1)
        idx = self._idx.get(key)
        if idx is None:
            ys = np.linspace(y0, y1 - 1, out_h).astype(np.intp)
            xs = np.linspace(x0, x1 - 1, out_w).astype(np.intp)
            idx = self._idx[key] = (ys[:, None], xs[None, :])
        return frame[idx[0], idx[1]][None]


def video_frames(path: str | Path, loop: bool = True, depth: int = READ_AHEAD) -> Iterator[np.ndarray]:
    """The frames of a video file (OpenCV), uint8 RGB H×W×3, looping unless ``loop`` is False; decoded
    by a background thread at most ``depth`` frames ahead (:func:`read_ahead`).

    Raises:
        ConfigError: OpenCV cannot open the file or it holds no frame (at the first frame).
    """
    return read_ahead(_decode_video(path, loop), depth, "video")


def _decode_video(path: str | Path, loop: bool) -> Iterator[np.ndarray]:
    import cv2  # noqa: PLC0415 - only this source needs a video decoder

    p = str(path)
    while True:
        cap = cv2.VideoCapture(p)
        n = 0
        while True:
            ok, bgr = cap.read()
            if not ok:
                break
            n += 1
            yield np.ascontiguousarray(bgr[..., ::-1])
        cap.release()
        if n == 0:
            raise ConfigError(f"--video {p!r}: OpenCV could not read a frame from it "
                              "(is it a video file? try ffmpeg -i it out.mp4)")
        if not loop:
            return
