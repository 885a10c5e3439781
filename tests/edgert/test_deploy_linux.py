"""``edgert deploy linux`` without a board: host parsing, the dry-run plan, the one-line errors, emulation.

The dry-run tests put the ssh/scp test doubles on PATH only to prove that no call reaches them. The
error tests drive the deployer through ``ScriptedRunner``, a test double of the command runner that
answers the board's commands with canned results. The real board is in test_deploy_board.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import pytest

from edgert._board import board_facts, cpu_family, emulation_of
from edgert.cli import _deploy as cmd_deploy
from edgert.deploy.linux import BoardFacts, LinuxDeployer, LinuxOptions, board_measurements, parse_facts
from edgert.deploy.remote import split_host
from edgert.deploy.runner import CommandResult, DeployError, Runner
from edgert.errors import ConfigError
from tests.edgert.doubles import install_doubles
from tests.edgert.doubles.install import read_calls

X86_CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\nflags\t\t: fpu sse sse2\n"
ARM_CPUINFO = "processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n"


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="edgert")
    cmd_deploy.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.func(args))


@pytest.mark.parametrize(("host", "dest", "port"), [
    ("root@127.0.0.1:2222", "root@127.0.0.1", 2222),
    ("pi@raspberrypi.local", "pi@raspberrypi.local", None),
    ("rock5b", "rock5b", None),
    ("me@[::1]:22", "me@::1", 22),
    ("me@fe80::1", "me@fe80::1", None),
])
def test_split_host(host: str, dest: str, port: int | None) -> None:
    assert split_host(host) == (dest, port)


@pytest.mark.parametrize("host", ["", "-oProxyCommand=x", "pi@board:ssh", "pi@board:70000"])
def test_split_host_refuses(host: str) -> None:
    with pytest.raises(ConfigError):
        split_host(host)


def test_dry_run_makes_no_ssh_or_scp_call_and_writes_no_profile(
        mediapipe_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    log = install_doubles(tmp_path / "bin", {"jetson": {"reachable": True}}, monkeypatch)
    out = tmp_path / "p.json"
    models = [str(mediapipe_dir / "hand_landmark_lite.tflite"), str(mediapipe_dir / "palm_detection_lite.tflite")]
    assert cli(["deploy", "linux", "--host", "root@127.0.0.1:2222", "--models", *models, "-o", str(out),
                "--ssh-config", "/etc/board_ssh_config", "--runs", "3", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert read_calls(log) == [] and not out.exists()
    lines = [ln for ln in printed.splitlines() if ln.startswith("+ ")]
    ssh = [ln for ln in lines if ln.startswith("+ ssh ")]
    scp = [ln for ln in lines if ln.startswith("+ scp ")]
    assert ssh and scp and any("pip wheel --no-deps" in ln for ln in lines)
    assert all("-F /etc/board_ssh_config -o BatchMode=yes" in ln and " -p 2222 root@127.0.0.1 " in ln for ln in ssh)
    assert all("-P 2222" in ln for ln in scp)
    assert any("hand_landmark_lite.tflite" in ln and "root@127.0.0.1:edgert/models/" in ln for ln in scp)
    assert any("edgert/venv/bin/edgert devices --json; exit $?" in ln for ln in ssh)
    assert any("edgert/venv/bin/edgert profile" in ln and "--runs 3" in ln for ln in ssh)
    assert any(ln.startswith("+ scp ") and "root@127.0.0.1:edgert/profile.json" in ln for ln in lines)
    assert "none run, nothing written" in printed


def test_jetson_with_edgert_adds_edgert_profile_to_the_plan(
        model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["deploy", "jetson", "--host", "nvidia@orin", "--models", str(model_dir / "mlp.onnx"),
            "-o", str(tmp_path / "p.json"), "--dry-run"]
    assert cli(base) == 0
    plain = capsys.readouterr().out
    assert cli([*base, "--with-edgert"]) == 0
    both = capsys.readouterr().out
    assert "trtexec" in plain and "edgert profile" not in plain and "edgert devices" not in plain
    assert "trtexec" in both and "edgert/venv/bin/edgert profile edgert/models/mlp.onnx" in both
    assert "--system-site-packages" in both


class ScriptedRunner(Runner):
    """Test double of the command runner: answers each ssh command with the first scripted reply that
    matches it (the others: exit 0, no output); runs nothing."""

    def __init__(self, replies: Sequence[tuple[str, int, str]]) -> None:
        super().__init__(dry_run=False, out=open("/dev/null", "w"))  # noqa: SIM115
        self.replies = list(replies)

    def run(self, argv: Sequence[str], *, timeout_s: float | None = None) -> CommandResult | None:
        argv = tuple(map(str, argv))
        self.commands.append(argv)
        for needle, rc, text in self.replies:
            if needle in " ".join(argv):
                return CommandResult(argv, rc, text, "")
        return CommandResult(argv, 0, "", "")


FACTS_311 = "aarch64\n6.1.0\nPython 3.11.2\n"


def deployer(mediapipe_dir: Path, replies: Sequence[tuple[str, int, str]], **opts: object) -> LinuxDeployer:
    models = [mediapipe_dir / "hand_landmark_lite.tflite"]
    return LinuxDeployer("root@board:2222", models, ScriptedRunner(replies), LinuxOptions(**opts))  # type: ignore[arg-type]


@pytest.mark.parametrize(("facts", "says"), [
    ("armv7l\n5.10.0\nPython 3.7.3\nRaspberry Pi 3 Model B Rev 1.2\x00", "has Python 3.7.3 and edgert needs 3.11+"),
    ("aarch64\n5.10.0\nsh: 1: python3: not found\n", "has no python3"),
])
def test_old_or_missing_python_gets_one_line_with_the_fix(mediapipe_dir: Path, facts: str, says: str) -> None:
    d = deployer(mediapipe_dir, [("uname -m", 0, facts)])
    with pytest.raises(DeployError, match=says) as err:
        d.read_facts()
    assert "\n" not in str(err.value) and "--python" in str(err.value)


def test_facts_read_the_device_tree_model() -> None:
    facts = parse_facts("aarch64\n6.1.0-rpi7\nPython 3.11.2\nRaspberry Pi 5 Model B Rev 1.0\x00")
    assert facts == BoardFacts("aarch64", "6.1.0-rpi7", "Raspberry Pi 5 Model B Rev 1.0", "3.11.2")
    assert parse_facts("aarch64\n6.1.0\nPython 3.11.2\n").model == ""


def test_login_failure_names_the_fix(mediapipe_dir: Path) -> None:
    d = deployer(mediapipe_dir, [("uname -m", 255, "root@board: Permission denied (publickey).")])
    with pytest.raises(DeployError, match="cannot log in to root@board:2222 over ssh"):
        d.read_facts()


def test_no_network_for_pip_says_wheelhouse(mediapipe_dir: Path, tmp_path: Path) -> None:
    wheel = tmp_path / "edgert-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"test double of a wheel\n")
    no_net = "ERROR: No matching distribution found for numpy>=1.24"
    d = deployer(mediapipe_dir, [("uname -m", 0, FACTS_311), ("pip install", 1, no_net)], wheel=wheel)
    with pytest.raises(DeployError) as err:
        d.measure(tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and "--wheelhouse DIR" in msg
    assert "--platform manylinux_2_28_aarch64 --python-version 3.11" in msg


def test_wheelhouse_installs_from_it_only(mediapipe_dir: Path, tmp_path: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    (house / "numpy-2.0.0-cp311-cp311-manylinux2014_aarch64.whl").write_bytes(b"test double\n")
    wheel = tmp_path / "edgert-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"test double of a wheel\n")
    d = deployer(mediapipe_dir, [("uname -m", 0, FACTS_311)], wheel=wheel, wheelhouse=house)
    d.install(d.copy_bundle(tmp_path), d.read_facts())
    joined = [" ".join(c) for c in d.r.commands]
    assert any(c.startswith("scp") and "numpy-2.0.0" in c for c in joined)
    pips = [c for c in joined if "pip install" in c]
    assert pips and all("--no-index --find-links edgert/wheels" in c for c in pips)


def test_an_empty_wheelhouse_is_refused(mediapipe_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="holds no .whl files"):
        deployer(mediapipe_dir, [], wheelhouse=tmp_path)


def test_emulation_is_told_by_the_cpu_not_the_arch() -> None:
    assert cpu_family(X86_CPUINFO) == "x86" and cpu_family(ARM_CPUINFO) == "arm"
    assert "qemu-user" in emulation_of("aarch64", X86_CPUINFO)
    assert emulation_of("aarch64", ARM_CPUINFO) == ""
    assert emulation_of("x86_64", X86_CPUINFO) == ""
    assert "arm CPU" in emulation_of("x86_64", ARM_CPUINFO)


def test_emulation_is_told_by_the_kernel_arch() -> None:
    """qemu-user 10 shows an ARM /proc/cpuinfo; the kernel's own arch still tells."""
    assert "/proc/sys/kernel/arch" in emulation_of("aarch64", ARM_CPUINFO, "x86_64")
    assert emulation_of("aarch64", ARM_CPUINFO, "aarch64") == ""
    assert emulation_of("armv7l", ARM_CPUINFO, "aarch64") == ""   # 32-bit userland, 64-bit kernel: native


def test_this_host_is_native() -> None:
    facts = board_facts()
    assert facts.emulation == "" and "emulation" not in facts.sources()
    assert facts.sources()["arch"] == facts.arch != ""


def test_board_measurements_rename_what_trtexec_fills() -> None:
    obj: dict[str, object] = {
        "processors": [{"name": "cpu0", "kind": "cpu"}, {"name": "gpu", "kind": "gpu"}],
        "latency_ms": {"mlp": {"cpu0": 2.0, "gpu": 0.5}}, "latency_p90_ms": {"mlp": {"cpu0": 2.5}},
        "sources": {"latency_ms/mlp/gpu": "measured with ort-cuda", "versions": "onnxruntime-gpu 1.19"}}
    found, sources = board_measurements(obj, {"gpu", "dla0"})
    assert {(m.processor, m.kind, m.latency_ms, m.p90_ms) for m in found} == {
        ("cpu0", "cpu", 2.0, 2.5), ("edgert-gpu", "gpu", 0.5, None)}
    assert sources == {"edgert/versions": "onnxruntime-gpu 1.19"}



def test_a_crash_on_the_board_is_named_with_the_fix(mediapipe_dir: Path) -> None:
    d = deployer(mediapipe_dir, [("devices --json", 139, "")])
    with pytest.raises(DeployError, match=r"crashed \(SIGSEGV\).*use qemu-user 10"):
        d.devices()


def test_constraint_is_shipped_and_used(mediapipe_dir: Path, tmp_path: Path) -> None:
    pins = tmp_path / "pins.txt"
    pins.write_text("ai-edge-litert<2\n")
    wheel = tmp_path / "edgert-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"test double of a wheel\n")
    d = deployer(mediapipe_dir, [("uname -m", 0, FACTS_311)], wheel=wheel, constraint=pins)
    d.install(d.copy_bundle(tmp_path), d.read_facts())
    joined = [" ".join(c) for c in d.r.commands]
    assert any(c.startswith("scp") and str(pins) in c for c in joined)
    assert all("-c edgert/wheels/pins.txt" in c for c in joined if "pip install" in c)


def test_without_ssh_config_ssh_reads_the_users_own(mediapipe_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """No -F unless --ssh-config is given: the system ssh/scp then read ~/.ssh/config (aliases, keys, ports)."""
    assert cli(["deploy", "linux", "--host", "my-pi", "--models", str(mediapipe_dir / "hand_landmark_lite.tflite"),
                "-o", str(tmp_path / "p.json"), "--dry-run"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("+ ssh ", "+ scp "))]
    assert lines and not any(" -F " in ln for ln in lines)
    assert all(" my-pi " in ln or " my-pi:" in ln for ln in lines)
