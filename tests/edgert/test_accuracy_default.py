"""Accuracy-checked placement is on by default: each path below fp32 is checked at load against the
fp32 CPU answer; the measure survives flat outputs; ``sample=`` is used; ``check_accuracy=False`` turns it off."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgert
from delegates.base import Artifact, Session, TensorSpec
from delegates.onnxrt import OrtDelegate
from edgert._core._accuracy import DEFAULT_TOLERANCE, FLAT, output_errors
from edgert.errors import ConfigError
from edgert.testing import genmodels


class OffByDouble(OrtDelegate):
    """Test double: ort-cpu on the gpu whose answers are moved by ``share`` of each output's range, as
    an fp16 path's would be; with ``only_bright``, only on inputs whose mean is above 0.9."""

    def __init__(self, share: float, only_bright: bool = False) -> None:
        super().__init__("off-double", "gpu", "CPUExecutionProvider")
        self.share = share
        self.only_bright = only_bright

    @property
    def precision(self) -> str:
        return "fp16"

    def open(self, artifact: Artifact, threads: int = 1) -> Session:
        s = super().open(artifact, threads)
        run = s.run

        def moved(feeds: list[np.ndarray]) -> list[np.ndarray]:
            out = run(feeds)
            if self.only_bright and float(np.mean(feeds[0])) <= 0.9:
                return out
            return [o + self.share * float(o.max() - o.min()) for o in out]

        s.run = moved  # type: ignore[method-assign]
        s.precision = "fp16"
        return s


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return genmodels.save("cnn", tmp_path_factory.mktemp("acc"))


def test_a_path_below_fp32_beyond_the_default_is_excluded_without_asking(cnn) -> None:
    x = genmodels.example_inputs("cnn")
    with edgert.Runtime(delegates=["ort-cpu", OffByDouble(3 * DEFAULT_TOLERANCE)], cpu_workers=1) as rt:
        m = rt.load(cnn["onnx"], name="m")
        st = rt.stats()["m"]
        assert set(st["excluded"]) == {"off-double"} and "> tolerance 0.01" in st["excluded"]["off-double"]
        assert st["accuracy"]["tolerance"] == DEFAULT_TOLERANCE
        assert st["accuracy"]["errors"]["off-double"] == pytest.approx(0.03, rel=1e-3)
        assert st["accuracy"]["check_ms"] > 0
        assert {m.submit(x).result().delegate for _ in range(4)} == {"ort-cpu"}


def test_a_path_within_the_default_is_kept_and_fp32_paths_cost_no_check(cnn) -> None:
    with edgert.Runtime(delegates=["ort-cpu", OffByDouble(DEFAULT_TOLERANCE / 4)], cpu_workers=1) as rt:
        rt.load(cnn["onnx"], name="m")
        st = rt.stats()["m"]
        assert "excluded" not in st and set(st["accuracy"]["errors"]) == {"off-double"}
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
        rt.load(cnn["onnx"], name="m")
        assert "accuracy" not in rt.stats()["m"]   # every candidate is fp32: nothing compared


def test_the_callers_sample_is_the_one_checked(cnn) -> None:
    bright = {k: np.ones_like(v) for k, v in genmodels.example_inputs("cnn").items()}
    with edgert.Runtime(delegates=["ort-cpu", OffByDouble(0.2, only_bright=True)], cpu_workers=1) as rt:
        rt.load(cnn["onnx"], name="default")       # the default sample is not bright: the path passes
        rt.load(cnn["onnx"], name="mine", sample=bright)
        st = rt.stats()
    assert "excluded" not in st["default"]
    assert "off-double" in st["mine"]["excluded"]


def test_the_switch_turns_the_check_off_and_tolerance_still_sets_the_bound(cnn) -> None:
    with edgert.Runtime(delegates=["ort-cpu", OffByDouble(3 * DEFAULT_TOLERANCE)], cpu_workers=1) as rt:
        rt.load(cnn["onnx"], name="off", check_accuracy=False)
        rt.load(cnn["onnx"], name="loose", tolerance=0.1)
        st = rt.stats()
        assert "excluded" not in st["off"] and "accuracy" not in st["off"]
        assert "excluded" not in st["loose"] and st["loose"]["accuracy"]["tolerance"] == 0.1
        with pytest.raises(ConfigError, match="check_accuracy must be True or False"):
            rt.load(cnn["onnx"], name="bad", check_accuracy="no")


def test_no_path_left_fails_the_load_with_the_reason(cnn) -> None:
    with edgert.Runtime(delegates=[OffByDouble(0.5)], cpu_workers=0) as rt:
        with pytest.raises(edgert.ModelLoadError, match="gpu: excluded by the model's tolerance: error 0.5"):
            rt.load(cnn["onnx"], name="m")


SPEC = (TensorSpec("mask", (1, 8), np.dtype(np.float32)), TensorSpec("points", (1, 8), np.dtype(np.float32)))


def test_an_output_flat_on_the_sample_is_not_measured_against_its_range() -> None:
    """A mask of ~0 on noise: its range is 1e-8, an fp16 path's error there is of the same size; divided by
    the range it would read as 100 % of it. It is held to max(1, |ref|) instead and marked unmeasured."""
    mask = np.linspace(0, 1e-8, 8, dtype=np.float32)[None]
    pts = np.linspace(0, 200, 8, dtype=np.float32)[None]
    errs, broke = output_errors([mask + 1e-8, pts + 1.0], [mask, pts], SPEC)
    assert not broke
    (n1, e1, on1), (n2, e2, on2) = errs
    assert (n1, on1, n2, on2) == ("mask", False, "points", True)
    assert e1 == pytest.approx(1e-8, rel=1e-3) and e2 == pytest.approx(1.0 / 200, rel=1e-3)
    assert FLAT * 1.0 > 1e-8   # the mask's range counts as flat


def tiny_onnx(path: Path) -> Path:
    """An ONNX model whose output is its input times 1e-9: flat on any sample in [0, 1)."""
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Mul", ["x", "k"], ["y"])], "tiny",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor("k", TensorProto.FLOAT, [1], [1e-9])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_a_path_below_fp32_whose_outputs_are_all_flat_cannot_be_judged_and_is_excluded(tmp_path: Path) -> None:
    """Its error (1e-9) is tiny and its range too: neither a pass nor a fail is evidence. A real sample
    on which the output varies decides."""
    model = tiny_onnx(tmp_path / "tiny.onnx")
    with edgert.Runtime(delegates=["ort-cpu", OffByDouble(1.0)], cpu_workers=1) as rt:
        rt.load(model, name="noise")
        rt.load(model, name="real", sample=np.linspace(0, 1e8, 8, dtype=np.float32)[None], tolerance=1e-3)
        st = rt.stats()
    assert "cannot be judged: every output is flat on the sample" in st["noise"]["excluded"]["off-double"]
    assert "error 1 of the output range" in st["real"]["excluded"]["off-double"]
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:   # an fp32 path is not judged on it
        rt.load(model, name="fp32", tolerance=1e-3)
        assert "excluded" not in rt.stats()["fp32"]


def test_the_command_line_says_which_paths_the_check_keeps(cnn) -> None:
    import json
    import subprocess
    import sys

    def ask(*extra: str) -> list[dict]:
        proc = subprocess.run([sys.executable, "-m", "edgert.cli", "devices", "--check", str(cnn["onnx"]),
                               "--delegates", "ort-cpu", "--json", *extra], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    (row,) = ask()
    assert (row["path"], row["precision"], row["verdict"]) == ("ort-cpu", "fp32", "not checked")
    (row,) = ask("--tolerance", "1e-3")
    assert row["verdict"] == "kept" and row["error"] == 0.0
