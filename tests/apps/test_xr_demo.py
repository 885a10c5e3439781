"""The main job, end to end on the real MediaPipe models (short run)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_xr_demo_runs_and_reports(tmp_path, mediapipe_dir):
    out = tmp_path / "summary.json"
    tl = tmp_path / "tl.json"
    trace = tmp_path / "trace.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "edgert.cli", "run", "xr-demo", "--seconds", "3", "--quiet",
         "--models-dir", str(mediapipe_dir), "--json", str(out), "--timeline", str(tl), "--trace", str(trace)],
        capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(out.read_text())
    models = summary["per_model"]
    assert {"palm_detection_full", "face_detection_short_range", "pose_detection",
            "selfie_segmentation"} <= set(models)
    for name, m in models.items():
        assert m["requests"] == m["ok"] + m["late"] + m["dropped"] + m["failed"], name
        assert m["failed"] == 0, name
    assert models["palm_detection_full"]["requests"] >= 30  # 30 fps for 3 s on a busy 2-core host
    # the synthetic camera shows no hand: the landmark stage is never submitted
    assert models.get("hand_landmark_full", {"requests": 0})["requests"] == 0
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert {x["model"] for x in lines} >= {"palm_detection_full", "selfie_segmentation"}
    assert summary["per_stream"]["hands"]["detector_runs"] == summary["per_stream"]["hands"]["frames"]
    assert "traceEvents" in json.loads(tl.read_text())
    assert "frames whose whole cascade met its deadline" in proc.stdout


def test_unknown_app_says_did_you_mean():
    proc = subprocess.run([sys.executable, "-m", "edgert.cli", "run", "xr-dem"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "did you mean 'xr-demo'" in proc.stderr


@pytest.mark.slow
def test_xr_demo_tracks_a_video_and_draws_it(tmp_path, mediapipe_dir):
    """--video of a moving hand: tracking holds, hands are found, --show and --snapshot are written."""
    import argparse

    import cv2

    from apps import xr_demo
    from apps.xr import assets

    video = tmp_path / "hand.mp4"
    frames = assets.moving_crop(assets.hand_photo(), 30)
    w = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 30.0, frames[0].shape[1::-1])
    for f in frames:
        w.write(f[..., ::-1])
    w.release()
    out, show, snap = tmp_path / "s.json", tmp_path / "show.mp4", tmp_path / "snap.png"
    ns = argparse.Namespace(offload="off", scheduler=None, frames=None, video=str(video), models_dir=str(mediapipe_dir),
                            cpu_workers=None, trace=None, seconds=3.0, quiet=True, json=str(out), timeline=None,
                            plot=None, show=str(show), snapshot=str(snap))
    assert xr_demo.main_from_args(ns) == 0
    hands = json.loads(out.read_text())["per_stream"]["hands"]
    assert hands["frames_tracked"] > 0 and hands["detector_runs"] < hands["frames"]
    assert cv2.imread(str(snap)) is not None
    cap = cv2.VideoCapture(str(show))
    assert cap.read()[0]
