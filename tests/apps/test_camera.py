"""Frame sources: ``--frames DIR`` reads real image files (PNG and JPEG) in name order, looping."""

from __future__ import annotations

import numpy as np
import pytest

from apps.camera import directory_frames
from edgert.errors import ConfigError

plt = pytest.importorskip("matplotlib.pyplot", reason="--frames DIR needs the [plot] extra")


def test_frames_dir_reads_png_and_jpeg_in_name_order_and_loops(tmp_path) -> None:
    red = np.zeros((24, 32, 3), np.uint8)
    red[..., 0] = 255
    blue = np.zeros((24, 32, 3), np.uint8)
    blue[..., 2] = 255
    plt.imsave(tmp_path / "a.png", red)
    plt.imsave(tmp_path / "b.jpg", blue)
    (tmp_path / "notes.txt").write_text("not an image")
    frames = directory_frames(tmp_path)
    got = [next(frames) for _ in range(3)]
    for f in got:
        assert f.shape == (24, 32, 3) and f.dtype == np.float32 and 0.0 <= f.min() and f.max() <= 1.0
    assert got[0][..., 0].mean() > 0.95 and got[0][..., 2].mean() < 0.05      # a.png: red
    assert got[1][..., 2].mean() > 0.9 and got[1][..., 0].mean() < 0.1        # b.jpg: blue (lossy)
    np.testing.assert_array_equal(got[2], got[0])                            # looped


def test_frames_dir_without_images_says_how_to_make_some(tmp_path) -> None:
    with pytest.raises(ConfigError, match="ffmpeg"):
        next(directory_frames(tmp_path))
