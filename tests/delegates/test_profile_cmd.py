"""``edgert profile`` writes a valid device profile; ``seed_from_profile`` maps names as documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from delegates._probe_models import onnx_probe, tflite_probe
from tests.delegates._profile_cli import profile_cli
from edgert._profile_seed import seed_from_profile
from scheduler.estimator import LatencyEstimator
from scheduler.profile import CloudSpec, DeviceProfile, ProcessorSpec


_cli = profile_cli


@pytest.fixture()
def models(tmp_path: Path) -> dict[str, Path]:
    paths = {"hand": tmp_path / "hand.tflite", "gaze": tmp_path / "gaze.onnx", "split": tmp_path / "split.tflite"}
    paths["hand"].write_bytes(tflite_probe())
    paths["gaze"].write_bytes(onnx_probe())
    paths["split"].write_bytes(tflite_probe(unsupported_op=True))
    return paths


def test_profile_writes_a_valid_device_profile(models: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "p" / "profile.json"
    rc = _cli(*map(str, models.values()), "--delegates", "litert-xnnpack,ort-cpu", "--runs", "5",
              "--warmup", "1", "-o", str(out))
    assert rc == 0
    prof = DeviceProfile.load(out)
    assert [(p.name, p.kind) for p in prof.processors] == [("cpu0", "cpu")]
    assert set(prof.latency_ms) == {"hand", "gaze", "split"}
    for model in prof.latency_ms:
        assert 0 < prof.latency_ms[model]["cpu0"] <= prof.latency_p90_ms[model]["cpu0"]
    assert prof.sources["delegate/hand/cpu0"] == "litert-xnnpack"
    assert prof.sources["delegate/gaze/cpu0"] == "ort-cpu"
    assert "PARTIAL" in prof.sources["latency_ms/split/cpu0"]
    assert "onnxruntime" in prof.sources["versions"] and "ai-edge-litert" in prof.sources["versions"]
    assert prof.sources["host"]


@pytest.mark.parametrize("argv, message", [
    (["--delegates", "ort-cdua"], "did you mean 'ort-cuda'"),
    (["--delegates", "ort-cuda"], "unavailable on this host"),
    (["--runs", "0"], "--runs must be >= 1"),
])
def test_profile_errors_are_one_line_exit_2(models: dict[str, Path], tmp_path: Path, capsys, argv, message) -> None:
    if "ort-cuda" in argv:
        from delegates.registry import get
        if get("ort-cuda").probe() is None:
            pytest.skip("this host has CUDA")
    rc = _cli(str(models["gaze"]), *argv, "-o", str(tmp_path / "x.json"))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and message in err[0] and err[0].startswith("edgert profile: error:")
    assert not (tmp_path / "x.json").exists()


def test_profile_missing_model_and_bad_suffix(tmp_path: Path, capsys) -> None:
    assert _cli(str(tmp_path / "nope.onnx"), "-o", str(tmp_path / "x.json")) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "m.pb").write_bytes(b"x")
    assert _cli(str(tmp_path / "m.pb"), "-o", str(tmp_path / "x.json")) == 2
    assert "unknown model format" in capsys.readouterr().err


def test_seed_from_profile_maps_names_by_name_then_kind(tmp_path: Path) -> None:
    prof = DeviceProfile(
        name="t", processors=[ProcessorSpec("cpu0", "cpu"), ProcessorSpec("gpu", "gpu"), ProcessorSpec("npu", "npu")],
        latency_ms={"hand": {"cpu0": 9.0, "gpu": 3.0}, "gaze": {"cpu0": 2.0, "npu": 1.0}},
        cloud=CloudSpec(rtt_ms=20.0, uplink_mbps=8.0, downlink_mbps=8.0, latency_ms={"hand": 1.0},
                        input_bytes={"hand": 1000}))
    est = LatencyEstimator()
    n = seed_from_profile(est, prof, ["cpu0", "cpu1", "gpu", "dsp", "cloud"])
    assert est.expected_ms("hand", "cpu1") == 9.0 and est.expected_ms("gaze", "cpu0") == 2.0
    assert est.expected_ms("hand", "gpu") == 3.0 and est.expected_ms("gaze", "gpu") is None
    assert est.expected_ms("gaze", "dsp") is None and est.expected_ms("gaze", "npu") is None
    assert est.expected_ms("hand", "cloud") == pytest.approx(20.0 + 1.0 + 1000 * 8 / 8e3)
    assert n == 2 + 2 + 1 + 1
    path = tmp_path / "p.json"
    prof.save(path)
    est2 = LatencyEstimator()
    assert seed_from_profile(est2, path, {"big": "cpu", "npu": "npu"}) == 3
    assert est2.expected_ms("hand", "big") == 9.0 and est2.expected_ms("gaze", "npu") == 1.0
