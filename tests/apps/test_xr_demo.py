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
    assert {"palm_detection_lite", "hand_landmark_lite", "face_landmark", "iris_landmark",
            "pose_landmark_full", "selfie_segmentation"} <= set(models)
    for name, m in models.items():
        assert m["requests"] == m["ok"] + m["late"] + m["dropped"] + m["failed"], name
        assert m["failed"] == 0, name
    assert models["palm_detection_lite"]["requests"] >= 60  # 30 fps for 3 s, give or take a frame
    # cascades: a landmark request per detection that finished
    assert models["hand_landmark_lite"]["requests"] <= models["palm_detection_lite"]["requests"]
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert any(x.get("after", "").endswith("/palm_detection_lite") for x in lines)
    assert "traceEvents" in json.loads(tl.read_text())
    assert "frames whose whole cascade met its deadline" in proc.stdout


def test_unknown_app_says_did_you_mean():
    proc = subprocess.run([sys.executable, "-m", "edgert.cli", "run", "xr-dem"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "did you mean 'xr-demo'" in proc.stderr
