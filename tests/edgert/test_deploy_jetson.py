"""``edgert deploy jetson`` against test doubles of ssh, scp and trtexec on PATH.

The doubles (tests/edgert/doubles) answer in the real tools' formats; the
deployer, the trtexec parser and the profile writer under test are real. The
models are real generated .onnx files (edgert.testing.genmodels).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from edgert.testing import genmodels
from edgert.cli import _deploy as cmd_deploy
from edgert.deploy.jetson import service_unit
from edgert.errors import ConfigError
from scheduler.profile import DeviceProfile
from tests.edgert.doubles import install_doubles
from tests.edgert.doubles.install import read_calls

HOST = "nvidia@orin.local"
RELEASE = "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, DATE: Tue Aug  1 19:57:35 UTC 2023"
LAT_MS = {"mlp": {"gpu": 0.212, "dla0": 0.655, "dla1": 0.671}, "cnn": {"gpu": 1.873, "dla0": 3.904, "dla1": 3.95}}


@pytest.fixture()
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    models = [genmodels.save(n, tmp_path / "models", formats=["onnx"])["onnx"] for n in ("mlp", "cnn")]
    wheel = tmp_path / "dist" / "edgert-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"test double of a wheel\n")
    root = tmp_path / "jetson"
    root.mkdir()
    cfg: dict[str, Any] = {"jetson": {"reachable": True, "root": str(root), "home": "/home/nvidia",
                                      "release": RELEASE, "model": "NVIDIA Jetson AGX Orin Developer Kit",
                                      "trtexec": "/usr/src/tensorrt/bin/trtexec", "dla_cores": 2,
                                      "latency_ms": LAT_MS, "sudo": True, "version": "v8502"}}

    def install(**jetson: Any) -> Path:
        cfg["jetson"].update(jetson)
        return install_doubles(tmp_path / "bin", cfg, monkeypatch)

    return {"models": models, "wheel": wheel, "root": root, "install": install, "out": tmp_path / "profile.json"}


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="edgert")
    sub = parser.add_subparsers(dest="command")
    cmd_deploy.register(sub)
    args = parser.parse_args(argv)
    return args.func(args)


def jetson_argv(s: dict[str, Any], *extra: str) -> list[str]:
    return ["deploy", "jetson", "--host", HOST, "--models", *map(str, s["models"]), "-o", str(s["out"]),
            "--wheel", str(s["wheel"]), *extra]


def test_profiles_gpu_and_both_dla_cores(setup: dict[str, Any]) -> None:
    setup["install"]()
    assert cli(jetson_argv(setup)) == 0
    prof = DeviceProfile.load(setup["out"])
    assert [(p.name, p.kind) for p in prof.processors] == [("gpu", "gpu"), ("dla0", "npu"), ("dla1", "npu")]
    for model, row in LAT_MS.items():
        for proc, ms in row.items():
            assert prof.latency_ms[model][proc] == pytest.approx(ms)
            assert prof.latency_p90_ms[model][proc] == pytest.approx(ms * 1.05)
    assert prof.name == "nvidia-jetson-agx-orin-developer-kit"
    assert "L4T R35.4.1" in prof.sources["device"] and prof.sources["l4t"].startswith("# R35 (release)")
    assert "TensorRT v8502" in prof.sources["tool"]
    assert "--useDLACore=1" in prof.sources["latency_ms/cnn/dla1"]
    home = setup["root"] / "home/nvidia/edgert"
    assert {p.name for p in (home / "models").iterdir()} == {"mlp.onnx", "cnn.onnx"}
    assert (home / "config.json").is_file() and (home / setup["wheel"].name).is_file()
    assert (home / "engines" / "cnn.dla0.engine").is_file()
    assert DeviceProfile.load(home / "profile.json").latency_ms == prof.latency_ms


def test_no_dla_profiles_gpu_and_says_why(setup: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    log = setup["install"](dla_cores=0, model="NVIDIA Jetson Orin Nano Developer Kit")
    assert cli(jetson_argv(setup)) == 0
    prof = DeviceProfile.load(setup["out"])
    assert [p.name for p in prof.processors] == ["gpu"]
    assert prof.latency_ms["cnn"]["gpu"] == pytest.approx(1.873)
    assert "Cannot create DLA engine, 0 not available" in prof.sources["unmeasured/mlp/dla0"]
    assert "Cannot create DLA engine, 1 not available" in prof.sources["unmeasured/cnn/dla1"]
    runs = [c for c in read_calls(log) if c["tool"] == "trtexec"]
    assert len(runs) == 2 + 2  # gpu for both models; each DLA core tried once, then skipped
    assert "dla0/mlp: TensorRT DLA core 0, fp16: trtexec exited 1" in capsys.readouterr().out


def test_dry_run_prints_every_command_and_touches_nothing(setup: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    log = setup["install"]()
    assert cli(jetson_argv(setup, "--dry-run", "--service", "edgert run xr-demo")) == 0
    out = capsys.readouterr().out
    assert read_calls(log) == [] and list(setup["root"].iterdir()) == [] and not setup["out"].exists()
    assert "cat /etc/nv_tegra_release" in out and "+ scp -q -o BatchMode=yes" in out
    assert out.count("--useDLACore=0") == 2 and out.count("--useDLACore=1") == 2
    assert "python3 -m venv --system-site-packages edgert/venv" in out
    assert "systemctl enable --now edgert-app.service" in out


def test_unreachable_host_is_one_clear_line(setup: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    setup["install"](reachable=False)
    assert cli(jetson_argv(setup)) == 2
    err = capsys.readouterr().err
    assert f"cannot log in to {HOST} over ssh" in err and "Connection refused" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_missing_trtexec_is_clear(setup: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    setup["install"](trtexec=None)
    assert cli(jetson_argv(setup)) == 2
    err = capsys.readouterr().err
    assert "trtexec not found at /usr/src/tensorrt/bin/trtexec" in err and "--trtexec PATH" in err


def test_venv_and_service(setup: dict[str, Any]) -> None:
    setup["install"]()
    assert cli(jetson_argv(setup, "--service", "edgert run xr-demo --seconds 0")) == 0
    unit = (setup["root"] / "etc/systemd/system/edgert-app.service").read_text()
    assert "ExecStart=/home/nvidia/edgert/venv/bin/edgert run xr-demo --seconds 0" in unit
    assert "User=nvidia" in unit and (setup["root"] / "home/nvidia/edgert/venv/bin/python").is_file()
    # a configuration error (exit status 2: an unverifiable broker certificate, refused credentials) is
    # not restarted forever; any other failure is
    assert "Restart=on-failure" in unit and "RestartPreventExitStatus=2" in unit.splitlines()


def test_service_without_sudo_still_writes_the_profile(setup: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    setup["install"](sudo=False)
    assert cli(jetson_argv(setup, "--service", "edgert run xr-demo")) == 0
    assert DeviceProfile.load(setup["out"]).latency_ms["mlp"]["gpu"] == pytest.approx(0.212)
    assert "sudo: a password is required" in capsys.readouterr().out


def test_local_errors() -> None:
    with pytest.raises(ConfigError, match="needs a command"):
        service_unit("   ", "/home/u", "u")
    parser = argparse.ArgumentParser(prog="edgert")
    cmd_deploy.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["deploy", "jetson", "--host", HOST, "--models", "nope.onnx", "-o", "p.json"])
    assert args.func(args) == 2


def test_with_edgert_joins_edgerts_numbers(setup: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """--with-edgert: the board-side steps are replaced by a test double returning the profile `edgert profile`
    writes; trtexec's numbers stay and edgert's join them (a column trtexec fills gets an edgert- prefix)."""
    from edgert.deploy import linux

    board_profile = {"processors": [{"name": "cpu0", "kind": "cpu"}, {"name": "gpu", "kind": "gpu"}],
                     "latency_ms": {"mlp": {"cpu0": 1.5, "gpu": 0.3}},
                     "sources": {"latency_ms/mlp/gpu": "measured with ort-tensorrt", "arch": "aarch64"}}
    seen: list[linux.LinuxOptions] = []

    def measure_double(self: linux.LinuxDeployer, workdir: Path) -> dict[str, object]:
        seen.append(self.o)
        return board_profile

    monkeypatch.setattr(linux.LinuxDeployer, "measure", measure_double)
    setup["install"]()
    assert cli(jetson_argv(setup, "--with-edgert", "--runs", "5")) == 0
    prof = DeviceProfile.load(setup["out"])
    assert prof.latency_ms["mlp"]["gpu"] == pytest.approx(LAT_MS["mlp"]["gpu"])
    assert prof.latency_ms["mlp"]["edgert-gpu"] == 0.3 and prof.latency_ms["mlp"]["cpu0"] == 1.5
    assert prof.sources["latency_ms/mlp/edgert-gpu"] == "measured with ort-tensorrt"
    assert prof.sources["edgert/arch"] == "aarch64"
    assert seen[0].system_site_packages and seen[0].runs == 5 and Path(seen[0].wheel or "") == setup["wheel"]
