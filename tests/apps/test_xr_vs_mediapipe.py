"""The XR pipelines against MediaPipe 0.10.14 itself, run live in its own venv and process
(``apps.xr.reference``: made on first use; the tests skip, saying why, where it cannot be made).

Bars (issue #15): per photo, the same number of faces, hands and poses as MediaPipe's solutions in
static-image mode; landmarks within 1.5 % of the image diagonal on average over all instances and
3 % at worst per instance; the segmentation mask agrees on ≥ 97 % of pixels. Tracking: on a video
of a moving hand, the palm detector runs on ≤ 20 % of frames while the landmarks stay in the bar.

Face counts are compared with MediaPipe's face mesh without ``refine_landmarks`` — the same
``face_landmark.tflite`` whose presence score we threshold — because the refined (attention) model,
which edgert cannot load (custom ops), rejects the face in ``camera.png`` that both detectors find.
Face landmark positions (478 points) are compared with the refined mesh.
"""

from __future__ import annotations

import numpy as np
import pytest

from apps.xr import Pipelines, assets
from apps.xr import reference as mp_ref

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def peer():
    """MediaPipe's process (its venv made once, cached); the module skips with the reason where it cannot be."""
    try:
        p = mp_ref.Peer()
    except mp_ref.ReferenceUnavailable as exc:
        pytest.skip(f"MediaPipe {mp_ref.MEDIAPIPE_VERSION} cannot run here: {exc}")
    with p:
        yield p


@pytest.fixture(scope="module")
def references(photos, peer):
    ref = peer.solutions(static=True)
    plain = peer.solutions(static=True, max_hands=0, pose=False, segmentation=False, refine_faces=False)
    try:
        yield {n: (ref.process(img), plain.process(img)) for n, img in photos.items()}
    finally:
        ref.close()
        plain.close()


def test_same_answers_as_mediapipe_on_every_photo(rt, photos, references):
    px = Pipelines(rt, max_hands=2, max_faces=1, pose=True, segmentation=True, tracking=False)
    errors: list[float] = []
    for name, img in photos.items():
        ours = px.process(img)
        theirs, plain = references[name]
        diag = float(np.hypot(*img.shape[:2]))
        assert len(ours.hands) == len(theirs.hands), name
        assert len(ours.faces) == len(plain.faces), name
        assert len(ours.poses) == len(theirs.poses), name
        for kind, a, b in (("hands", [h.landmarks for h in ours.hands], theirs.hands),
                           ("faces", [f.landmarks for f in ours.faces], theirs.faces),
                           ("poses", [p.landmarks for p in ours.poses], theirs.poses)):
            errs = mp_ref.match_error(a, b, diag)
            assert all(e <= 0.03 for e in errs), (name, kind, errs)
            errors += errs
        assert sorted(h.handedness for h in ours.hands) == sorted(theirs.handedness), name
        agree = float(((ours.mask > 0.5) == (theirs.mask > 0.5)).mean())
        assert agree >= 0.97, (name, agree)
        assert all(f.landmarks.shape == (478, 3) for f in ours.faces), name
    assert errors and float(np.mean(errors)) <= 0.015, errors


def test_tracking_skips_the_palm_detector_on_a_moving_hand(rt, peer):
    frames = assets.moving_crop(assets.hand_photo(), 60)
    px = Pipelines(rt, max_hands=1, max_faces=0, pose=False, segmentation=False, tracking=True)
    ref = peer.solutions(static=True, max_faces=0, pose=False, segmentation=False)
    try:
        errs = []
        for f in frames:
            ours = px.process(f)
            theirs = ref.process(f)
            assert len(ours.hands) == len(theirs.hands) == 1
            errs += mp_ref.match_error([h.landmarks for h in ours.hands], theirs.hands, float(np.hypot(*f.shape[:2])))
    finally:
        ref.close()
    c = px.counts()["hands"]
    assert c["detector_ran"] + c["detector_skipped"] == len(frames) and c["tracked"] == c["detector_skipped"]
    assert c["detector_ran"] <= 0.2 * len(frames), c
    assert max(errs) <= 0.03 and float(np.mean(errs)) <= 0.015, (max(errs), float(np.mean(errs)))
