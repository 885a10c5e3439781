"""Tracking through dropped landmark requests: a region nobody looked at is not a region lost.

Under overload the runtime sheds requests; a landmark request that never ran says nothing about
whether the subject is still there, so the tracker keeps the region (for up to ``MAX_UNSEEN``
frames in a row) instead of sending the next frame to the detector, which costs more. A deadline
no run can meet (0.01 ms) makes the runtime drop the landmark request on a real runtime. The
pipelines here are not elastic: an elastic one would shed such a frame whole before submitting it
(tests/apps/test_xr_elastic.py), and these tests are about what the runtime's drops do.
"""

from __future__ import annotations

from apps.xr import Pipelines, assets
from apps.xr.tracking import MAX_UNSEEN

HOPELESS_MS = 0.01


def test_a_dropped_landmark_request_keeps_the_region_and_skips_the_detector(rt):
    frame = assets.sample_scene()
    px = Pipelines(rt, max_hands=0, max_faces=0, pose=True, segmentation=False, tracking=True, elastic=False)
    first = px.process(frame)
    assert first.stages["pose_detection"].ran and len(first.poses) == 1
    dropped = px.process(frame, deadline_ms=HOPELESS_MS)
    assert dropped.stages["pose_landmark"].status == "dropped" and not dropped.poses
    assert not dropped.stages["pose_detection"].ran
    again = px.process(frame)
    assert not again.stages["pose_detection"].ran, "the unlooked-at region was forgotten"
    assert len(again.poses) == 1
    assert px.counts()["pose"] == {"detector_ran": 1, "tracked": 2, "detector_skipped": 2}


def test_a_region_unlooked_at_for_more_than_max_unseen_frames_goes_back_to_the_detector(rt):
    frame = assets.sample_scene()
    px = Pipelines(rt, max_hands=0, max_faces=0, pose=True, segmentation=False, tracking=True, elastic=False)
    assert len(px.process(frame).poses) == 1
    for _ in range(MAX_UNSEEN + 1):       # the last of these forgets the region
        r = px.process(frame, deadline_ms=HOPELESS_MS)
        assert not r.stages["pose_detection"].ran and r.stages["pose_landmark"].status == "dropped"
    back = px.process(frame)
    assert back.stages["pose_detection"].ran and len(back.poses) == 1
    assert px.counts()["pose"] == {"detector_ran": 2, "tracked": MAX_UNSEEN + 1, "detector_skipped": MAX_UNSEEN + 1}


def test_static_image_mode_keeps_nothing_after_a_drop(rt):
    frame = assets.sample_scene()
    px = Pipelines(rt, max_hands=0, max_faces=0, pose=True, segmentation=False, tracking=False, elastic=False)
    px.process(frame, deadline_ms=HOPELESS_MS)
    r = px.process(frame)
    assert r.stages["pose_detection"].ran and len(r.poses) == 1
