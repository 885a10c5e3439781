"""``edgert deploy android`` against test doubles of adb and benchmark_model on PATH.

The doubles (tests/edgert/doubles) answer in the real tools' formats; the
deployer, the parsers and the profile writer under test are the real ones.
The models are real generated .tflite files (edgert.testing.genmodels).
"""

from __future__ import annotations

import argparse
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from edgert.testing import genmodels
from edgert.cli import _deploy as cmd_deploy
from scheduler.profile import DeviceProfile
from tests.edgert.doubles import install_doubles
from tests.edgert.doubles.install import read_calls

SERIAL = "R5CT21ABCDE"
PROPS = {
    "ro.product.manufacturer": "samsung", "ro.product.model": "SM-S911B", "ro.soc.manufacturer": "Qualcomm",
    "ro.soc.model": "SM8550", "ro.board.platform": "kalama", "ro.product.cpu.abi": "arm64-v8a",
    "ro.product.cpu.abilist": "arm64-v8a,armeabi-v7a,armeabi", "ro.build.version.sdk": "34",
    "ro.build.version.release": "14", "ro.build.fingerprint": "samsung/dm1qxxx/dm1q:14/UP1A.231005.007/S911BXXU3BWK5:user/release-keys",
}
LAT_US = {"mlp": {"cpu": 812.5, "gpu": 640.25, "nnapi": 420.0, "hexagon": 380.5, "qnn_htp": 150.75},
          "cnn": {"cpu": 18234.6, "gpu": 2950.0, "nnapi": 2100.5, "hexagon": 1999.0, "qnn_htp": 910.0}}


def elf_header(machine: int) -> bytes:
    """A 64-byte ELF64 header with ``e_machine`` — the test double of a benchmark_model binary (not runnable)."""
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    return ident + struct.pack("<HHI", 2, machine, 1) + bytes(64 - 24)


@pytest.fixture()
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    models = tmp_path / "models"
    paths = [genmodels.save(n, models, formats=["tflite"])["tflite"] for n in ("mlp", "cnn")]
    tools = tmp_path / "tools"
    tools.mkdir()
    binary = tools / "benchmark_model"
    binary.write_bytes(elf_header(0xB7))  # aarch64
    (tools / "libhexagon_interface.so").write_bytes(b"test double library\n")
    (tools / "libQnnTFLiteDelegate.so").write_bytes(b"test double library\n")
    device_root = tmp_path / "device"
    device_root.mkdir()
    cfg: dict[str, Any] = {"android": {"serial": SERIAL, "state": "device", "root": str(device_root),
                                       "props": PROPS, "lacks": [], "latency_us": LAT_US}}

    def install(**android: Any) -> Path:
        cfg["android"].update(android)
        return install_doubles(tmp_path / "bin", cfg, monkeypatch)

    return {"models": paths, "binary": binary, "tools": tools, "root": device_root, "install": install,
            "out": tmp_path / "out" / "profile.json"}


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="edgert")
    sub = parser.add_subparsers(dest="command")
    cmd_deploy.register(sub)
    args = parser.parse_args(argv)
    return args.func(args)


def android_argv(s: dict[str, Any], *extra: str) -> list[str]:
    return ["deploy", "android", "--serial", SERIAL, "--benchmark-binary", str(s["binary"]),
            "--models", *map(str, s["models"]), "-o", str(s["out"]), *extra]


def test_profiles_every_processor_path_with_the_right_ms(setup: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    setup["install"]()
    assert cli(android_argv(setup)) == 0
    prof = DeviceProfile.load(setup["out"])
    assert [(p.name, p.kind) for p in prof.processors] == [
        ("cpu", "cpu"), ("gpu", "gpu"), ("nnapi", "npu"), ("hexagon", "dsp"), ("qnn_htp", "npu")]
    for model, row in LAT_US.items():
        for proc, us in row.items():
            assert prof.latency_ms[model][proc] == pytest.approx(us / 1000, rel=1e-5), (model, proc)
    assert prof.name == "sm-s911b"
    assert "SM-S911B" in prof.sources["device"] and "SDK 34" in prof.sources["device"]
    assert "Qualcomm SM8550" in prof.sources["device"] and "arm64-v8a" in prof.sources["device"]
    assert "benchmark_model" in prof.sources["tool"] and "sha256" in prof.sources["tool"]
    assert "--use_gpu=true" in prof.sources["latency_ms/cnn/gpu"]
    assert "completely" in prof.sources["latency_ms/cnn/gpu"]
    assert not any(k.startswith("unmeasured/") for k in prof.sources)
    device_dir = setup["root"] / "data/local/tmp/edgert"
    assert {"benchmark_model", "mlp.tflite", "cnn.tflite", "libhexagon_interface.so"} <= {
        p.name for p in device_dir.iterdir()}
    assert "wrote" in capsys.readouterr().out


def test_dry_run_prints_every_command_and_touches_nothing(setup: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    log = setup["install"]()
    assert cli(android_argv(setup, "--dry-run")) == 0
    out = capsys.readouterr().out
    assert read_calls(log) == []
    assert list(setup["root"].iterdir()) == [] and not setup["out"].exists()
    assert f"+ adb -s {SERIAL} get-state" in out and f"+ adb -s {SERIAL} push" in out
    for flag in ("--use_xnnpack=true", "--use_gpu=true", "--use_nnapi=true", "--use_hexagon=true",
                 "--external_delegate_path=/data/local/tmp/edgert/libQnnTFLiteDelegate.so"):
        assert out.count(flag) == 2, flag  # once per model
    assert "none run, nothing written" in out


def test_missing_delegates_fail_alone(setup: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    (setup["tools"] / "libhexagon_interface.so").unlink()
    log = setup["install"](lacks=["gpu"])
    assert cli(android_argv(setup)) == 0
    prof = DeviceProfile.load(setup["out"])
    assert [p.name for p in prof.processors] == ["cpu", "nnapi", "qnn_htp"]
    assert prof.latency_ms["cnn"]["nnapi"] == pytest.approx(2.1005)
    assert "GPU acceleration is unsupported on this platform" in prof.sources["unmeasured/mlp/gpu"]
    assert "fell back to the CPU" in prof.sources["unmeasured/mlp/gpu"]
    assert "libhexagon_interface.so" in prof.sources["unmeasured/*/hexagon"]
    out = capsys.readouterr().out
    assert "gpu/mlp: GPU delegate unavailable" in out and "hexagon/*:" in out
    # the GPU failure is platform-level: the second model is not benchmarked on the GPU again
    gpu_runs = [c for c in read_calls(log) if c["tool"] == "adb" and "--use_gpu=true" in " ".join(c["argv"])]
    assert len(gpu_runs) == 1


def test_partial_delegation_is_recorded_and_the_bundle_pushed(setup: dict[str, Any], tmp_path: Path) -> None:
    setup["install"](partial={"cnn": {"nnapi": 3}})
    bundle = tmp_path / "app"
    bundle.mkdir()
    (bundle / "config.json").write_text('{"models": ["mlp", "cnn"]}')
    assert cli(android_argv(setup, "--bundle", str(bundle))) == 0
    prof = DeviceProfile.load(setup["out"])
    assert "partially (3 delegate kernels)" in prof.sources["latency_ms/cnn/nnapi"]
    assert (setup["root"] / "data/local/tmp/edgert/bundle/app/config.json").is_file()


@pytest.mark.parametrize(("state", "message"), [
    ("absent", f"no Android device with serial '{SERIAL}' (adb sees no devices)"),
    ("unauthorized", f"device {SERIAL} is unauthorized: unlock it, accept the 'Allow USB debugging?' prompt"),
    ("offline", f"device {SERIAL} is offline"),
])
def test_unusable_device_is_one_clear_line(setup: dict[str, Any], capsys: pytest.CaptureFixture,
                                           state: str, message: str) -> None:
    setup["install"](state=state)
    assert cli(android_argv(setup)) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not setup["out"].exists()


def test_missing_binary_and_wrong_abi(setup: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    log = setup["install"]()
    setup["binary"].unlink()
    assert cli(android_argv(setup)) == 2
    assert "benchmark binary" in capsys.readouterr().err and read_calls(log) == []
    setup["binary"].write_bytes(elf_header(0x3E))  # x86_64 build on an arm64 phone
    assert cli(android_argv(setup)) == 2
    err = capsys.readouterr().err
    assert "is built for x86_64 but device" in err and "android_aarch64_benchmark_model" in err


def test_a_model_that_crashes_one_delegate_leaves_the_rest(setup: dict[str, Any]) -> None:
    lat = json.loads(json.dumps(LAT_US))
    del lat["cnn"]["qnn_htp"]  # the double answers like a delegate that cannot take this model
    setup["install"](latency_us=lat)
    assert cli(android_argv(setup)) == 0
    prof = DeviceProfile.load(setup["out"])
    assert "qnn_htp" not in prof.latency_ms["cnn"] and prof.latency_ms["mlp"]["qnn_htp"] == pytest.approx(0.15075)
    assert "unmeasured/cnn/qnn_htp" in prof.sources


def test_device_lost_mid_run_stops_with_one_line(setup: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    setup["install"](lose_after_pushes=1)  # the double drops off the bus after the first push
    assert cli(android_argv(setup)) == 2
    err = capsys.readouterr().err
    assert f"lost device {SERIAL} during `adb push`" in err and len(err.strip().splitlines()) == 1
