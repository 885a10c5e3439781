"""Unit checks of the XR pipeline pieces (anchors, NMS, ROI geometry, input checks); no models."""

from __future__ import annotations

import math

import numpy as np
import pytest

import edgert
from apps import xr_demo
from apps.xr import check_frame, roi
from apps.xr.anchors import AnchorOptions, generate_anchors
from apps.xr.decode import weighted_nms


@pytest.mark.parametrize(("opts", "n"), [
    (AnchorOptions(192, 0.1484375, 0.75, (8, 16, 16, 16)), 2016),   # palm: 24²×2 + 12²×6
    (AnchorOptions(128, 0.1484375, 0.75, (8, 16, 16, 16)), 896),    # face short range
    (AnchorOptions(224, 0.1484375, 0.75, (8, 16, 32, 32, 32)), 2254),  # pose
])
def test_anchor_counts_match_mediapipe(opts, n):
    a = generate_anchors(opts)
    assert a.shape == (n, 4)
    assert a[0, 0] == pytest.approx(0.5 / math.ceil(opts.input_size / 8))
    assert (a[:, 2:] == 1.0).all()


def test_weighted_nms_merges_overlaps_and_keeps_apart():
    boxes = np.array([[0, 0, 10, 10], [1, 0, 11, 10], [50, 50, 60, 60]], np.float32)
    kps = np.array([[[0, 0]], [[2, 0]], [[55, 55]]], np.float32)
    out = weighted_nms(boxes, kps, np.array([0.9, 0.3, 0.8], np.float32), 0.3)
    assert len(out) == 2
    assert out[0].score == pytest.approx(0.9)
    assert out[0].keypoints[0, 0] == pytest.approx((0 * 0.9 + 2 * 0.3) / 1.2)
    assert out[1].box[0] == 50


def test_crop_then_project_returns_to_the_same_frame_point():
    frame = np.zeros((100, 200, 3), np.uint8)
    frame[40, 120] = 255
    r = roi.Rect(110, 50, 40, 40, math.radians(30))
    x = roi.crop(frame, r, 64, 64)
    iy, ix = np.unravel_index(np.argmax(x[0, :, :, 0]), (64, 64))
    back = roi.project(np.array([[ix, iy]], np.float32), r, 64, 64)[0]
    assert np.hypot(back[0] - 120, back[1] - 40) < 1.5


def test_rotation_and_transform_follow_mediapipe_conventions():
    # a vector pointing up (towards -y) at target 90° needs no rotation
    assert roi.rotation(np.array([0, 10.0]), np.array([0, 0.0]), 90.0) == pytest.approx(0.0)
    r = roi.transform(roi.Rect(50, 50, 10, 20), 2.0, shift_y=-0.5)
    assert (r.cx, r.cy, r.w, r.h) == (50, 40, 40, 40)


def test_bad_frames_raise_input_error_naming_the_frame():
    with pytest.raises(edgert.InputError, match="frame: expected shape"):
        check_frame(np.zeros((10, 10), np.uint8))
    with pytest.raises(edgert.InputError, match="dtype int16"):
        check_frame(np.zeros((10, 10, 3), np.int16))
    assert check_frame(np.zeros((4, 4, 3))).dtype == np.float32


def test_the_demo_keeps_a_bounded_window_of_frame_latencies() -> None:
    st = xr_demo.StreamStats()
    for ms in range(10 * xr_demo.STREAM_WINDOW):
        st.latencies_ms.append(float(ms))
    assert len(st.latencies_ms) == xr_demo.STREAM_WINDOW
    assert st.latencies_ms.nbytes == xr_demo.STREAM_WINDOW * 8   # float64, fixed
