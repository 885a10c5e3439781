"""Failure containment in the XR apps: code of ours that raises on a stream's thread (a decoder, a
tracker update, a stage's continuation, a whole frame) fails that frame with the exception's type
and message, the thread goes on, the summary names it and ``edgert run xr-demo`` exits 1.

The exceptions are injected by monkeypatching real functions to raise (named ``_raise_*``); the
models, the runtime and the threads are the real ones.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import edgert
from apps import xr_demo
from apps.xr import Pipelines, assets, pose
from apps.xr.stages import Runner
from edgert.testing import genmodels


def _raise_value_error(*_a: object, **_k: object) -> None:
    raise ValueError("injected: heatmap window out of range")


def test_a_raising_continuation_fails_its_stage_and_the_others_run(tmp_path: Path) -> None:
    paths = genmodels.save("tiny", tmp_path)
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
        m = rt.load(paths["onnx"], name="tiny")
        x = genmodels.example_inputs("tiny")["x"]
        run = Runner()
        seen: list[str] = []
        run.submit("bad", m, x, lambda res: _raise_value_error())
        run.submit("good", m, x, lambda res: seen.append(res.status))
        run.submit("chained", m, x, lambda res: (seen.append("first"), _raise_value_error()))
        stages = run.run()
    assert sorted(seen) == ["first", "ok"]
    assert stages["bad"].status == "failed" and stages["bad"].error.startswith("ValueError: injected")
    assert stages["good"].status == "ok" and stages["good"].error == ""
    assert run.errors() == {"bad": stages["bad"].error, "chained": stages["chained"].error}


def test_refine_from_heatmap_raising_fails_the_pose_landmark_stage(monkeypatch: pytest.MonkeyPatch,
                                                                    mediapipe_dir: Path) -> None:
    """The GPU-host failure: refine_from_heatmap raised (on flat outputs) and killed the pose thread.
    Without a deadline nothing is dropped, so the landmark stage surely runs and its decoder raises."""
    monkeypatch.setattr(pose, "refine_from_heatmap", _raise_value_error)
    with edgert.Runtime(delegates="cpu") as rt:
        px = Pipelines(rt, max_hands=0, max_faces=0, pose=True, segmentation=False, tracking=False,
                       models_dir=mediapipe_dir)
        r = px.process(next(assets.sample_frames()))
    st = r.stages["pose_landmark"]
    assert st.ran and st.status == "failed" and st.error == "ValueError: injected: heatmap window out of range"
    assert r.stages["pose_detection"].status == "ok" and r.poses == []


def test_pose_decoder_raising_fails_pose_frames_and_the_streams_go_on(monkeypatch: pytest.MonkeyPatch,
                                                                       mediapipe_dir: Path) -> None:
    """A pose decoder that raises on every frame: every pose frame fails with the reason, the pose
    thread keeps its pace (the GPU host's pose ran at 0.1 fps once its thread had died, exit 0)."""
    monkeypatch.setattr(pose, "decode", _raise_value_error)
    # round_robin never drops a request, so the detector surely runs and its decoder surely raises
    # (edgert's policy may drop every pose request on a loaded host once one ran slowly)
    with edgert.Runtime(delegates="cpu", scheduler="round_robin") as rt:
        session = xr_demo.XRSession(rt, models_dir=mediapipe_dir)
        session.run(assets.sample_frames(), seconds=3.0)
        threads = {t.name for t in threading.enumerate()}
    hands, pose_s = session.stats["hands"], session.stats["pose"]
    assert "xr-pose" not in threads                   # ended when the run stopped, not before
    assert pose_s.frames >= hands.frames / 2 > 0, (pose_s.frames, hands.frames)
    assert pose_s.failed > 0 and pose_s.first_failure.startswith("pose_detection: ValueError: injected")
    assert session.stats["face"].failed == 0 and hands.failed == 0
    assert session.failures() == {"pose": (pose_s.failed, pose_s.first_failure)}


def test_a_frame_whose_processing_raises_is_counted_failed(monkeypatch: pytest.MonkeyPatch,
                                                           mediapipe_dir: Path) -> None:
    """A bug before any stage runs (in the frame's set-up) fails the frame, not the thread."""
    with edgert.Runtime(delegates="cpu") as rt:
        session = xr_demo.XRSession(rt, streams=(xr_demo.STREAMS[3],), models_dir=mediapipe_dir)
        monkeypatch.setattr(session.pipes["segmentation"], "process", _raise_value_error)
        session.run(assets.sample_frames(), seconds=1.0)
    st = session.stats["segmentation"]
    assert st.frames >= 5 and st.failed == st.frames and st.on_time == 0
    assert st.first_failure == "process: ValueError: injected: heatmap window out of range"


@pytest.mark.slow
def test_xr_demo_with_a_raising_pose_decoder_exits_1_names_it_and_prints_no_traceback(
        tmp_path: Path, mediapipe_dir: Path) -> None:
    """The bar: an exception injected into the pose decoder during `edgert run xr-demo`."""
    out = tmp_path / "summary.json"
    script = (
        "import sys\n"
        "from apps.xr import pose\n"
        "def _raise_value_error(*a, **k):\n"
        "    raise ValueError('injected: heatmap window out of range')\n"
        "pose.decode = _raise_value_error\n"
        "from edgert.cli import main\n"
        f"sys.exit(main(['run', 'xr-demo', '--seconds', '4', '--quiet', '--delegates', 'cpu', '--scheduler', "
        "'round_robin', "
        f"'--models-dir', {str(mediapipe_dir)!r}, '--json', {str(out)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert "stream pose:" in proc.stderr and "ValueError: injected" in proc.stderr
    summary = json.loads(out.read_text())
    streams = summary["per_stream"]
    assert streams["pose"]["frames"] >= streams["hands"]["frames"] / 2 > 0, streams
    assert "ValueError: injected" in streams["pose"]["first_failure"] and streams["pose"]["failed"] > 0
    assert "pose: " in proc.stdout and "frame(s) failed" in proc.stdout


def test_demo_delegates_option_resolves_kinds_and_names() -> None:
    assert xr_demo.demo_delegates("auto") == "auto" and xr_demo.demo_delegates(None) == "auto"
    assert xr_demo.demo_delegates("cpu") == "cpu"
    assert xr_demo.demo_delegates("ort-cpu, litert-xnnpack") == ["ort-cpu", "litert-xnnpack"]
    with pytest.raises(edgert.ConfigError, match="did you mean"):
        xr_demo.demo_delegates("ort-cpuu")
    from delegates.registry import resolve

    if not [d for d in resolve("auto") if d.processor == "gpu"]:
        with pytest.raises(edgert.DelegateUnavailable, match="no gpu path"):
            xr_demo.demo_delegates("gpu")
    else:
        names = xr_demo.demo_delegates("gpu")
        assert isinstance(names, list) and any(n.startswith(("ort-cuda", "litert")) for n in names)


def test_frame_failures_need_no_stage_to_have_run() -> None:
    st = xr_demo.StreamStats()
    st.note_failure("a: ValueError: x")
    st.note_failure("b: KeyError: y")
    assert (st.failed, st.first_failure) == (2, "a: ValueError: x")
    assert np.isfinite(st.frames)
