"""A processor whose paths all run on a software adapter is ``gpu-sw`` and takes one core's CPU worker;
``"auto"`` never includes such a path (no lavapipe needed: test doubles stand for the adapter)."""

from __future__ import annotations

import numpy as np

import edgert
from delegates import registry
from delegates.onnxrt import OrtDelegate
from edgert._core._loader import cpu_slots
from scheduler.host import cores
from edgert.testing import genmodels


class SoftwareGpuDouble(OrtDelegate):
    """Test double: ort-cpu presented as a gpu path on a software adapter."""

    software = True
    adapter = "llvmpipe (test double)"

    def __init__(self, name: str = "sw-double") -> None:
        super().__init__(name, "gpu", "CPUExecutionProvider")


class HardwareGpuDouble(OrtDelegate):
    """Test double: ort-cpu presented as a hardware gpu path."""

    def __init__(self) -> None:
        super().__init__("hw-double", "gpu", "CPUExecutionProvider")


def test_a_software_processor_takes_one_cores_cpu_worker_by_default() -> None:
    cpu = registry.get("ort-cpu")
    assert cpu_slots([cpu, SoftwareGpuDouble()], None) == max(1, cores() - 1)
    assert cpu_slots([cpu, SoftwareGpuDouble()], 3) == 3            # as given
    assert cpu_slots([cpu, HardwareGpuDouble()], None) is None      # a GPU of its own: one worker per core
    assert cpu_slots([cpu, HardwareGpuDouble(), SoftwareGpuDouble()], None) is None   # hardware preferred


def test_its_worker_is_gpu_sw_and_runs_what_it_is_given(tmp_path) -> None:
    paths = genmodels.save("mlp", tmp_path)
    with edgert.Runtime(delegates=["ort-cpu", SoftwareGpuDouble()]) as rt:
        assert rt.processors == [*(f"cpu{i}" for i in range(max(1, cores() - 1))), "gpu-sw"]
        m = rt.load(paths["onnx"], name="m")
        x = genmodels.example_inputs("mlp")
        assert np.isfinite(next(iter(m(x).values()))).all()
    with edgert.Runtime(delegates=["ort-cpu", HardwareGpuDouble()], cpu_workers=1) as rt:
        assert rt.processors == ["cpu0", "gpu"]


def test_auto_leaves_out_a_software_path_without_probing_it(monkeypatch) -> None:
    """Test double for the registry's paths: the software one fails the test if probed."""
    sw = SoftwareGpuDouble()
    monkeypatch.setattr(sw, "_probe", lambda: (_ for _ in ()).throw(AssertionError("probed")))
    known = {"ort-cpu": registry.get("ort-cpu"), sw.name: sw}
    monkeypatch.setattr(registry, "all_delegates", lambda: known)
    assert [d.name for d in registry.resolve("auto")] == ["ort-cpu"]
