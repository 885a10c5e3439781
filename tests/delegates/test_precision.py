"""Precision, declared and controllable: every path says its arithmetic, force_fp32 sets the backend's
own option, a model's tolerance excludes paths beyond it, and a shadowed GPU build is named."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import edgert
from delegates import _install
from delegates.base import PRECISIONS, TOLERANCE, Artifact, Session
from delegates.litert_compiled import CompiledModelDelegate, _model_options
from delegates.onnxrt import OrtDelegate
from delegates.precision import ort_force_fp32, ort_precision
from delegates.registry import describe, get
from edgert.errors import ConfigError
from edgert.testing import genmodels


def test_every_path_declares_a_precision_and_its_tolerance() -> None:
    infos = describe()
    for i in infos:
        assert i.precision in PRECISIONS, i
        assert i.as_dict()["precision"] == i.precision and i.as_dict()["tolerance"] == TOLERANCE[i.precision]
    by = {i.name: i.precision for i in infos}
    assert by["litert-xnnpack"] == by["litert-compiled-cpu"] == by["ort-cpu"] == "fp32"
    assert by["litert-compiled-gpu"] == "fp16"      # LiteRT's GPU accelerator, unless enforce_f32
    assert by["ort-cuda"] == "tf32"                 # the CUDA EP's default use_tf32=1


def test_devices_json_and_table_show_precision() -> None:
    proc = subprocess.run([sys.executable, "-m", "edgert.cli", "devices", "--json"], capture_output=True,
                          text=True, timeout=120)
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["ort-cuda"]["precision"] == "tf32" and rows["ort-cuda"]["force_fp32"] == "use_tf32=0"
    assert rows["litert-compiled-gpu"]["force_fp32"] == "GpuOptions(enforce_f32=True)"
    table = subprocess.run([sys.executable, "-m", "edgert.cli", "devices"], capture_output=True, text=True,
                           timeout=120, env={**__import__("os").environ, "COLUMNS": "120"}).stdout
    assert " prec " in table and "litert-compiled-cpu" in table


@pytest.mark.parametrize("provider, options, want, forced", [
    ("CUDAExecutionProvider", {}, "tf32", {"use_tf32": 0}),
    ("TensorrtExecutionProvider", {"trt_fp16_enable": True}, "mixed", {"trt_fp16_enable": 0, "trt_int8_enable": 0}),
    ("OpenVINOExecutionProvider", {"device_type": "GPU"}, "fp16", {"precision": "FP32"}),
    ("CPUExecutionProvider", {}, "fp32", {}),
])
def test_force_fp32_sets_the_eps_own_options(provider: str, options: dict, want: str, forced: dict) -> None:
    assert ort_precision(provider, options) == want
    assert ort_force_fp32("x", provider, options) == forced
    d = OrtDelegate("test-ep", "gpu", provider, options)   # a fresh delegate, not the registry's
    d.configure({"force_fp32": True})
    # TensorRT has no switch for its default TF32 here: forced, it stays tf32 (declared as such)
    assert d.precision == ("tf32" if provider == "TensorrtExecutionProvider" else "fp32") and all(d.provider_options[k] == v for k, v in forced.items())


def test_force_fp32_is_refused_where_the_backend_has_no_fp32() -> None:
    dla = OrtDelegate("ort-tensorrt-dla-test", "npu", "TensorrtExecutionProvider",
                      {"trt_dla_enable": True, "trt_fp16_enable": True})
    with pytest.raises(ConfigError, match="DLA"):
        dla.configure({"force_fp32": True})
    with pytest.raises(ConfigError, match="NPU vendor"):
        CompiledModelDelegate("t-npu", "npu", "NPU").configure({"force_fp32": True})
    with pytest.raises(ConfigError, match="True or False"):
        CompiledModelDelegate("t-gpu", "gpu", "GPU").configure({"force_fp32": "yes please"})


def test_litert_gpu_force_fp32_builds_gpu_options_enforce_f32() -> None:
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator

    d = CompiledModelDelegate("t-gpu", "gpu", "GPU")
    assert d.precision == "fp16"
    d.configure({"force_fp32": True})
    assert d.precision == "fp32"
    kw = _model_options(HardwareAccelerator.GPU, "GPU", d.force_fp32)
    opts = kw["options"]
    assert opts.gpu_options.enforce_f32 is True and opts._as_flat_kwargs()["gpu_enforce_f32"] is True
    assert _model_options(HardwareAccelerator.CPU, "CPU", False)["options"]._as_flat_kwargs()["cpu_num_threads"] == 1


class Fp16OutputsDouble(OrtDelegate):
    """Test double: ort-cpu whose outputs are rounded through float16, as an fp16 accelerator's are."""

    def __init__(self) -> None:
        super().__init__("fp16-double", "gpu", "CPUExecutionProvider")

    @property
    def precision(self) -> str:
        return "fp16"

    def open(self, artifact: Artifact, threads: int = 1) -> Session:
        s = super().open(artifact, threads)
        run = s.run
        s.run = lambda feeds: [o.astype(np.float16).astype(o.dtype) for o in run(feeds)]  # type: ignore[method-assign]
        s.precision = "fp16"
        return s


def test_a_models_tolerance_excludes_paths_beyond_it_and_says_why(tmp_path: Path) -> None:
    paths = genmodels.save("cnn", tmp_path)
    x = genmodels.example_inputs("cnn")
    with edgert.Runtime(delegates=["ort-cpu", Fp16OutputsDouble()], cpu_workers=1) as rt:
        strict = rt.load(paths["onnx"], name="strict", tolerance=1e-6, sample=x)
        loose = rt.load(paths["onnx"], name="loose", tolerance=5e-2)
        stats = rt.stats()
        assert set(stats["strict"]["excluded"]) == {"fp16-double"}
        why = stats["strict"]["excluded"]["fp16-double"]
        assert "> tolerance 1e-06" in why and "fp16" in why
        assert "excluded" not in stats["loose"]
        res = [strict.submit(x).result() for _ in range(6)]
        assert {r.delegate for r in res} == {"ort-cpu"} and {r.precision for r in res} == {"fp32"}
        assert all(r.status == "ok" and r.processor for r in (loose.submit(x).result() for _ in range(3)))
    with pytest.raises(ConfigError, match="tolerance must be a number > 0"):
        with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
            rt.load(paths["onnx"], tolerance=-1)
    with pytest.raises(ConfigError, match="check_accuracy=False turns the accuracy check off"):
        with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
            rt.load(paths["onnx"], sample=x, check_accuracy=False)


def test_a_model_no_path_meets_fails_to_load_naming_the_tolerance(tmp_path: Path) -> None:
    paths = genmodels.save("cnn", tmp_path)
    with edgert.Runtime(delegates=[Fp16OutputsDouble()], cpu_workers=0) as rt:
        with pytest.raises(edgert.ModelLoadError, match="excluded by the model's tolerance"):
            rt.load(paths["onnx"], tolerance=1e-7)


def test_results_and_trace_carry_the_precision(tmp_path: Path) -> None:
    paths = genmodels.save("mlp", tmp_path)
    trace = tmp_path / "t.jsonl"
    with edgert.Runtime(delegates=["litert-compiled-cpu", "ort-cpu"], trace=trace, cpu_workers=1) as rt:
        a = rt.load(paths["tflite"], name="a", tolerance=1e-4)
        b = rt.load(paths["onnx"], name="b")
        ra = a.submit(genmodels.example_inputs("mlp")).result()
        rb = b.submit(genmodels.example_inputs("mlp")).result()
    assert (ra.delegate, ra.precision) == ("litert-compiled-cpu", "fp32")
    assert (rb.delegate, rb.precision) == ("ort-cpu", "fp32")
    lines = [ln for s in trace.read_text().splitlines() if "type" not in (ln := json.loads(s))]   # requests
    assert {ln["precision"] for ln in lines} == {"fp32"}


def test_a_shadowed_gpu_build_is_named_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Test double for the installed distributions: onnxruntime-gpu's metadata beside the CPU wheel's."""
    versions = {"onnxruntime": "1.32.0", "onnxruntime-gpu": "1.32.0"}
    monkeypatch.setattr(_install, "installed", lambda d: versions.get(d))
    (sh,) = _install.shadowed(["CPUExecutionProvider"])
    assert sh.dist == "onnxruntime-gpu" and sh.provider == "CUDAExecutionProvider"
    assert "pip uninstall -y onnxruntime && pip install --force-reinstall --no-deps onnxruntime-gpu==1.32.0" in sh.line()
    assert _install.shadowed(["CUDAExecutionProvider", "CPUExecutionProvider"]) == []   # the GPU build won
    versions.pop("onnxruntime-gpu")
    assert _install.shadowed(["CPUExecutionProvider"]) == []


def test_this_hosts_onnxruntime_builds_are_read_from_metadata() -> None:
    builds = _install.ort_builds()
    assert "onnxruntime" in builds or any(b in builds for b in _install.ORT_BUILDS)
    assert all(isinstance(v, str) and v[0].isdigit() for v in builds.values())
    import onnxruntime

    for sh in _install.shadowed():
        assert sh.provider not in onnxruntime.get_available_providers()


def test_tolerance_table_is_ordered_by_precision() -> None:
    assert TOLERANCE["fp32"] < TOLERANCE["tf32"] < TOLERANCE["fp16"] <= TOLERANCE["int8"]
    assert math.isclose(TOLERANCE["fp32"], 1e-4)
    assert get("litert-compiled-cpu").tolerance == 1e-4
