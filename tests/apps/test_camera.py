"""Frame sources: ``--frames DIR`` reads real image files (PNG and JPEG) in name order, looping, a few frames
ahead of the camera."""

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
        assert f.shape == (24, 32, 3) and f.dtype == np.uint8
    assert got[0][..., 0].mean() > 242 and got[0][..., 2].mean() < 13         # a.png: red
    assert got[1][..., 2].mean() > 230 and got[1][..., 0].mean() < 26         # b.jpg: blue (lossy)
    np.testing.assert_array_equal(got[2], got[0])                            # looped


def test_frames_dir_without_images_says_how_to_make_some(tmp_path) -> None:
    with pytest.raises(ConfigError, match="ffmpeg"):
        next(directory_frames(tmp_path))


def test_read_ahead_decodes_a_bounded_number_of_frames_ahead() -> None:
    import time

    from apps.camera import read_ahead

    pulled = []

    def source():
        for i in range(1000):
            pulled.append(i)
            yield np.full((2, 2, 3), i, np.float32)

    frames = read_ahead(source(), depth=3)
    assert next(frames)[0, 0, 0] == 0
    time.sleep(0.3)   # the reader fills its queue, then waits
    # the frame handed out, 3 queued, and at most one more decoded and waiting to be queued
    assert len(pulled) <= 1 + 3 + 1
    assert [next(frames)[0, 0, 0] for _ in range(5)] == [1, 2, 3, 4, 5]
    frames.close()   # stops the reader
    n = len(pulled)
    time.sleep(0.3)
    assert len(pulled) == n


def test_read_ahead_raises_the_sources_error_to_the_consumer() -> None:
    from apps.camera import read_ahead

    def source():
        yield np.zeros((2, 2, 3), np.float32)
        raise ConfigError("--video 'x.mp4': OpenCV could not read a frame from it")

    frames = read_ahead(source(), depth=2)
    next(frames)
    with pytest.raises(ConfigError, match="could not read a frame"):
        next(frames)


def test_video_is_streamed_in_order_looping_and_a_bad_file_is_named(tmp_path) -> None:
    import itertools

    cv2 = pytest.importorskip("cv2", reason="--video needs OpenCV (the xr extra)")
    from apps.camera import video_frames

    path = tmp_path / "clip.mp4"
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 30, (64, 48))
    for i in range(10):
        w.write(np.full((48, 64, 3), i * 20, np.uint8))
    w.release()
    got = [int(f.mean()) for f in itertools.islice(video_frames(path), 12)]
    assert got[:10] == sorted(got[:10]) and got[10:] == got[:2]          # in order, then from the start again
    assert sum(1 for _ in video_frames(path, loop=False)) == 10
    (tmp_path / "not.mp4").write_text("not a video")
    with pytest.raises(ConfigError, match="OpenCV could not read a frame"):
        next(video_frames(tmp_path / "not.mp4"))
