"""The real QNN NPU path: onnxruntime-qnn's HTP backend (its emulator on x86) against the CPU.

Needs the ``[qnn]`` extra (``pip install onnxruntime-qnn``); skipped without it.
"""

from __future__ import annotations

import numpy as np
import pytest

from delegates._probe_models import onnx_probe
from delegates.base import Artifact
from delegates.ort_qnn import QnnOrtDelegate

pytest.importorskip("onnxruntime_qnn", reason="the [qnn] extra (onnxruntime-qnn) is not installed")

pytestmark = pytest.mark.slow  # the HTP emulator compiles each graph; seconds for real models

FP16 = {"enable_htp_fp16_precision": "1", "soc_model": "60"}  # fp16 needs a SoC model (60 = SM8650)


def _cpu(model: bytes, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_htp_is_an_available_npu_path_and_agrees_with_cpu_in_fp16() -> None:
    d = QnnOrtDelegate("t-qnn-htp", "npu", "htp", FP16)
    assert d.probe() is None
    assert d.info().available and d.info().processor == "npu"
    s = d.open(Artifact("onnx", data=onnx_probe()))
    assert s.placement() == {"QNNExecutionProvider": 4} and s.coverage == 1.0
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((1, 16)).astype(np.float32)
        (y,) = s.run([x])
        np.testing.assert_allclose(y, _cpu(onnx_probe(), x), rtol=1e-2, atol=1e-2)


def test_htp_partial_graph_reports_cpu_nodes() -> None:
    s = QnnOrtDelegate("t-qnn-htp-partial", "npu", "htp").open(Artifact("onnx", data=onnx_probe(extra_erf=True)))
    placed = s.placement()
    assert placed.get("CPUExecutionProvider", 0) >= 1 and placed.get("QNNExecutionProvider", 0) >= 4
    assert 0.0 < s.coverage < 1.0
    x = np.random.default_rng(7).standard_normal((1, 16)).astype(np.float32)
    np.testing.assert_allclose(s.run([x])[0], _cpu(onnx_probe(extra_erf=True), x), rtol=1e-2, atol=1e-2)


def test_gpu_backend_without_adreno_is_unavailable_with_qnn_reason() -> None:
    d = QnnOrtDelegate("t-qnn-gpu", "gpu", "gpu")
    reason = d.probe()
    if reason is None:
        pytest.skip("this host has a QNN GPU (Adreno): nothing to check here")
    assert "QNN" in reason
