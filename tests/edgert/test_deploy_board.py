"""``edgert deploy linux`` against a real arm64 system over real ssh (marker ``board``).

The board is :mod:`edgert.testing.board`: a Debian 12 minbase arm64 root under qemu-user, cached in
``$EDGERT_BOARD_CACHE`` (default ``~/.cache/edgert/board-arm64``), its own sshd on a free loopback port,
a throwaway key named in the board's ssh config (``--ssh-config``; the user's ``~/.ssh/config`` is not
touched). Nothing here is a double: real ssh, scp, pip, LiteRT's aarch64 wheel and XNNPACK's ARM kernels.

Run it with ``python -m pytest -m board tests/edgert/test_deploy_board.py`` (docs/deploy.md says how
long it takes cold and cached). It skips, with the reason, where binfmt_misc or qemu cannot be had.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from edgert import models as zoo
from edgert.cli import _deploy as cmd_deploy
from edgert.testing import board as boards
from edgert.testing.outputs import run_models
from scheduler.profile import DeviceProfile

pytestmark = [pytest.mark.board, pytest.mark.slow, pytest.mark.timeout(1800)]
TWO = ("hand_landmark_lite.tflite", "palm_detection_lite.tflite")
#: fp32 tolerance between x86's and ARM's XNNPACK kernels: this share of each output's range, or twice what
#: two fp32 engines on x86 itself (XNNPACK, TFLite's built-in kernels) disagree by, whichever is larger.
#: pose_landmark_full's segmentation logits (range ~1,600) need the second: x86 alone disagrees by 2.7e-4
#: of their range there, ARM against x86 by 1.4e-4 (measured); every other output agrees within 1e-5.
RTOL_OF_RANGE = 1e-4


@pytest.fixture(scope="module")
def arm64_board(request: pytest.FixtureRequest) -> Iterator[boards.Board]:
    """The emulated arm64 board, started for this module and stopped (processes, mounts) after it."""
    if "board" not in (request.config.getoption("markexpr", "") or ""):
        pytest.skip("the emulated arm64 board runs under -m board (minutes when not cached; docs/deploy.md)")
    why = boards.unavailable()
    if why:
        pytest.skip(f"no emulated arm64 board: {why}")
    board = boards.start()
    try:
        yield board
    finally:
        board.stop()
    assert board.processes() == [] and boards.mounts_under(board.root) == []


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="edgert")
    cmd_deploy.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_board_is_the_bar_board(arm64_board: boards.Board) -> None:
    res = arm64_board.ssh("uname -m; python3 -V; command -v rsync || echo no-rsync; "
                          "test -e /proc/device-tree || echo no-device-tree")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["aarch64", "Python", res.stdout.split()[2], "no-rsync", "no-device-tree"]


def test_deploy_linux_profiles_on_the_board(arm64_board: boards.Board, mediapipe_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    argv = ["deploy", "linux", "--host", arm64_board.host, "--models", *(str(mediapipe_dir / m) for m in TWO),
            "-o", str(out), "--ssh-config", str(arm64_board.ssh_config), "--runs", "3", "--warmup", "1"]
    assert cli(argv) == 0
    prof = DeviceProfile.load(out)
    cpus = {p.name for p in prof.processors if p.kind == "cpu"}
    for model in (Path(m).stem for m in TWO):
        assert any(prof.latency_ms[model].get(c, 0) > 0 for c in cpus), prof.latency_ms
    assert prof.sources["arch"] == "aarch64" and "aarch64" in prof.description
    assert prof.sources["emulation"].startswith("measured under emulation")
    assert "UNDER EMULATION" in prof.description
    assert "no device tree" in prof.sources["board"] and "aarch64" in prof.sources["deploy/board"]
    assert "litert-xnnpack (cpu)" in prof.sources["deploy/paths"]
    assert "ai-edge-litert" in prof.sources["versions"] and "onnxruntime" in prof.sources["versions"]


def test_output_contract_on_the_board(arm64_board: boards.Board, mediapipe_dir: Path, tmp_path: Path) -> None:
    """Every MediaPipe model LiteRT runs alone, on litert-xnnpack on the board, against the x86 answers."""
    models = sorted(p for p in mediapipe_dir.glob("*.tflite") if p.name not in zoo.CUSTOM_OP_MODELS)
    x86 = run_models(models, "litert-xnnpack")
    np.savez(tmp_path / "x86.npz", **x86)
    venv = arm64_board.ssh("test -x edgert/venv/bin/python && echo ok")
    if venv.stdout.strip() != "ok":
        pytest.skip("the board has no edgert venv: test_deploy_linux_profiles_on_the_board failed before it")
    scp = ["scp", "-q", "-F", str(arm64_board.ssh_config), "-P", str(arm64_board.port)]
    subprocess.run([*scp, str(tmp_path / "x86.npz"), *map(str, models), "root@127.0.0.1:edgert/models/"], check=True)
    cmd = ["edgert/venv/bin/python", "-m", "edgert.testing.outputs", "--inputs", "edgert/models/x86.npz",
           "-o", "edgert/arm.npz", *(f"edgert/models/{m.name}" for m in models)]
    res = arm64_board.ssh(shlex.join(cmd), timeout_s=1200)
    assert res.returncode == 0, res.stderr[-2000:]
    subprocess.run([*scp, "root@127.0.0.1:edgert/arm.npz", str(tmp_path / "arm.npz")], check=True)
    arm = dict(np.load(tmp_path / "arm.npz"))
    assert sorted(arm) == sorted(x86)
    builtin = x86_builtin_kernels(models, x86)
    for key in (k for k in x86 if k.startswith("out/")):
        ref, got = x86[key].astype(np.float64), arm[key].astype(np.float64)
        span = max(float(np.ptp(ref)), float(np.abs(ref).max()), 1e-6)
        bound = max(RTOL_OF_RANGE * span, 2 * float(np.abs(builtin[key] - ref).max()))
        worst = float(np.abs(got - ref).max())
        assert worst <= bound, f"{key}: ARM differs from x86 by {worst:.3g} (range {span:.3g}, bound {bound:.3g})"


def x86_builtin_kernels(models: list[Path], x86: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The same inputs through TFLite's built-in kernels (no XNNPACK) on x86: a second fp32 engine."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    out: dict[str, np.ndarray] = {}
    for m in models:
        it = Interpreter(model_path=str(m), num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        try:
            it.allocate_tensors()
        except RuntimeError:   # a MediaPipe op only XNNPACK implements (Convolution2DTransposeBias): no second engine
            out.update({k: v.astype(np.float64) for k, v in x86.items() if k.startswith(f"out/{m.stem}/")})
            continue
        for i, d in enumerate(it.get_input_details()):
            it.set_tensor(d["index"], x86[f"in/{m.stem}/{i}"])
        it.invoke()
        for i, d in enumerate(it.get_output_details()):
            out[f"out/{m.stem}/{i}"] = it.get_tensor(d["index"]).astype(np.float64)
    return out
