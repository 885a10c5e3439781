"""The probe models ship as bytes (delegates/_probe_bytes.py), so probing needs no ``onnx`` on a core install."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from delegates import _probe_models as pm

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_bytes_are_what_the_generator_builds(tmp_path: Path) -> None:
    """Regenerate with `python -m delegates._probe_models` after changing a builder; this catches a stale file."""
    pytest.importorskip("onnx", reason="the generator builds the ONNX probes with onnx")
    built = pm.build_all()
    assert {k: pm._shipped(k) for k in built} == built
    assert pm.write_shipped(tmp_path / "p.py").read_text() == pm.SHIPPED.read_text()


def test_probes_load_and_run_without_onnx_installed() -> None:
    """A core install (numpy, onnxruntime, ai-edge-litert): `import onnx` fails, the probes still run."""
    code = textwrap.dedent("""
        import importlib.abc, sys
        class _NoOnnx(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "onnx":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        sys.meta_path.insert(0, _NoOnnx())
        import numpy as np, onnxruntime as ort
        from ai_edge_litert.interpreter import Interpreter
        from delegates._probe_models import onnx_probe, tflite_probe
        x = np.ones((1, 16), np.float32)
        for erf in (False, True):
            s = ort.InferenceSession(onnx_probe(erf), providers=["CPUExecutionProvider"])
            print(s.run(None, {"x": x})[0].shape)
        for cumsum in (False, True):
            it = Interpreter(model_content=tflite_probe(cumsum))
            it.allocate_tensors()
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
            print(it.get_tensor(it.get_output_details()[0]["index"]).shape)
        print("onnx" in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["(1,", "8)"] * 4 + ["False"], proc.stdout
