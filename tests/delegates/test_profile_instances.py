"""``edgert profile`` measures instances per GPU and records the chosen count in the device profile.

This host has no GPU: the recording is checked with measured CPU figures, through a test double that
presents ORT's CPU EP as a path serving instances (named as a double, never reported as a GPU by edgert);
the real command on this host says why it measured none.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from delegates.base import Artifact
from delegates.onnxrt import CPU_EP, OrtDelegate
from delegates.registry import get
from edgert._profiling import instances_of, measure_instances, record_instances
from edgert.cli import _profile as cmd_profile
from tests.delegates._profile_cli import profile_cli
from edgert.testing import genmodels
from scheduler.profile import DeviceProfile, ProcessorSpec

pytest.importorskip("onnxruntime")


_cli = profile_cli


@pytest.fixture()
def cnn(tmp_path: Path) -> Path:
    return Path(genmodels.save("cnn", tmp_path / "m")["onnx"])


class InstancesOnCpuDouble(OrtDelegate):
    """Test double: ORT's CPU EP standing in for a GPU path that serves instances, so the GPU code path of
    ``edgert profile`` runs (and measures real sessions) on a host without a GPU."""

    def __init__(self) -> None:
        super().__init__("gpu-instances-double", "gpu", CPU_EP)

    @property
    def serves_instances(self) -> bool:
        return True


def test_measure_instances_runs_that_many_sessions_at_once(cnn: Path) -> None:
    tp = measure_instances(get("ort-cpu"), Artifact("onnx", path=cnn), counts=(1, 2), runs=10, warmup=1)
    assert set(tp) == {1, 2} and all(v > 0 for v in tp.values())


def test_measure_instances_checks_its_arguments(cnn: Path) -> None:
    with pytest.raises(ValueError, match="counts >= 1"):
        measure_instances(get("ort-cpu"), Artifact("onnx", path=cnn), counts=(0, 2))


def test_record_instances_keeps_the_fewest_within_five_percent() -> None:
    prof = DeviceProfile("t", [ProcessorSpec("gpu", "gpu")], {"det": {"gpu": 3.0}})
    table: dict[str, dict[str, int]] = {}
    assert record_instances(prof, table, "det", "gpu", "ort-cuda", {1: 100.0, 2: 190.0, 4: 195.0}) == 2
    assert table == {"det": {"gpu": 2}}
    assert "1: 100.0, 2: 190.0, 4: 195.0" in prof.sources["instances/det/gpu"]
    assert "ort-cuda" in prof.sources["instances/det/gpu"]


def test_profile_records_the_chosen_instances_of_a_gpu_path(cnn: Path, tmp_path: Path, monkeypatch,
                                                              capsys) -> None:
    double = InstancesOnCpuDouble()
    monkeypatch.setattr(cmd_profile, "resolve", lambda spec: [double])
    out = tmp_path / "profile.json"
    assert _cli(str(cnn), "--instances", "1,2", "--runs", "8", "--warmup", "1", "-o", str(out)) == 0
    assert "instances 1: " in capsys.readouterr().out
    prof = DeviceProfile.load(out)   # still a valid profile
    assert [p.kind for p in prof.processors] == ["gpu"]
    chosen = instances_of(out)
    assert set(chosen) == {"cnn"} and chosen["cnn"]["gpu"] in (1, 2)
    text = prof.sources["instances/cnn/gpu"]
    assert text.startswith(f"{chosen['cnn']['gpu']}: measured") and "gpu-instances-double" in text
    assert json.loads(out.read_text())["instances"] == chosen


def test_profile_here_says_why_no_instances_were_measured(cnn: Path, tmp_path: Path, capsys) -> None:
    if get("ort-cuda").probe() is None:
        pytest.skip("this host has CUDA: the instances are measured")
    out = tmp_path / "profile.json"
    assert _cli(str(cnn), "--delegates", "ort-cpu", "--runs", "3", "--warmup", "1", "-o", str(out)) == 0
    assert "instances per GPU: not measured" in capsys.readouterr().out
    prof = DeviceProfile.load(out)
    assert prof.sources["instances"].startswith("not measured") and "ort-cuda:" in prof.sources["instances"]
    assert instances_of(out) == {}


def test_profile_rejects_bad_instance_counts(cnn: Path, tmp_path: Path, capsys) -> None:
    assert _cli(str(cnn), "--instances", "0,2", "-o", str(tmp_path / "x.json")) == 2
    assert "--instances takes counts >= 1" in capsys.readouterr().err
