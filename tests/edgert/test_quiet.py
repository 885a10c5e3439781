"""Quiet by default: native LiteRT / ONNX Runtime log lines go through logging, shown with -v."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from delegates._native_log import NativeLogRouter, native_level


def edgert(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "edgert.cli", *args], capture_output=True, text=True, timeout=120)


def test_devices_prints_no_native_line_by_default_and_shows_them_with_v() -> None:
    """Probing LiteRT's compiled-model paths makes it log DestroyAccelerator INFO lines from C++."""
    quiet = edgert("devices", "--json")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    loud = edgert("-v", "devices", "--json")
    assert loud.returncode == 0 and "edgert.native: INFO:" in loud.stderr, loud.stderr


@pytest.mark.parametrize("line, level", [
    ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.", logging.INFO),
    ("INFO: [accelerator_registry.cc:43] DestroyAccelerator: ptr=0x1, name=CpuAccelerator", logging.INFO),
    ("WARNING: [compiled_model.cc:1393] Failed to apply compiler plugins", logging.WARNING),
    ("I0000 00:00:1712345678.123456   42 gl_context.cc:357] GL version: 3.2", logging.INFO),
    ("2026-01-01 10:00:00.000 python[1:2] [W:onnxruntime:, graph.cc:1] Removing initializer", logging.WARNING),
    ("Traceback (most recent call last):", None),
    ("edgert: fetching the MediaPipe models", None),
])
def test_native_lines_are_recognised(line: str, level: int | None) -> None:
    assert native_level(line) == level


def test_router_logs_native_lines_and_copies_the_rest(capfd, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="edgert.native")
    with NativeLogRouter():
        os.write(2, b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n")
        os.write(2, b"a line of our own\n")
        os.write(2, b"WARNING: [x.cc:1] something native\n")
        os.write(2, b"partial progress 42%")
    err = capfd.readouterr().err
    assert "a line of our own\n" in err and "partial progress 42%" in err
    assert "Created TensorFlow Lite" not in err and "something native" not in err
    assert [r.getMessage() for r in caplog.records] == ["WARNING: [x.cc:1] something native"]


_API_SCRIPT = """
import sys
import numpy as np
import edgert
from edgert.testing import genmodels
paths = genmodels.save("mlp", sys.argv[1])
with edgert.Runtime(delegates=["litert-xnnpack", "litert-compiled-cpu", "ort-cpu"]) as rt:
    t = rt.load(paths["tflite"], name="t", tolerance=1e-4)
    o = rt.load(paths["onnx"], name="o")
    c = rt.load(sys.argv[2], name="hand", delegates=["litert-compiled-cpu"])
    x = genmodels.example_inputs("mlp")
    t(x); o(x); c(np.zeros((1, 224, 224, 3), np.float32))
print("ran")
"""


def test_loading_and_running_tflite_and_onnx_through_the_python_api_routes_what_it_can(tmp_path, mediapipe_dir) -> None:
    """LiteRT logs "Created TensorFlow Lite XNNPACK delegate" and "Creating LiteRT environment" from C++,
    ORT its plugin-EP warning: routed to logging, none of it reaches the user. LiteRT's process-wide
    environment is a C++ static destroyed after Python has finished, whose "DestroyAccelerator" lines
    no Python code can route (and this LiteRT exports no logging API to set a minimum severity):
    they are left alone, and the host application's stderr is never rewired."""
    proc = subprocess.run([sys.executable, "-c", _API_SCRIPT, str(tmp_path),
                           str(mediapipe_dir / "hand_landmark_full.tflite")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ran\n", proc.stdout
    unrouted = [ln for ln in proc.stderr.splitlines() if "DestroyAccelerator" not in ln]
    assert unrouted == [], proc.stderr


def test_native_lines_of_a_load_go_to_logging(caplog) -> None:
    from delegates._native_capture import native_quiet

    caplog.set_level(logging.INFO, logger="edgert.native")
    with native_quiet():
        os.write(2, b"INFO: [accelerator_registry.cc:43] DestroyAccelerator: ptr=0x1, name=CpuAccelerator\n")
    assert any("DestroyAccelerator" in r.getMessage() for r in caplog.records)
