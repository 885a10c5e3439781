"""Issue #16, the Python API: each bad argument is one EdgeRTError naming it, before anything runs."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import edgert
from edgert.testing import genmodels


@pytest.fixture(scope="module")
def rt() -> Iterator[edgert.Runtime]:
    with edgert.Runtime(warmup_runs=1, cpu_workers=2) as r:
        yield r


@pytest.fixture(scope="module")
def hand(rt: edgert.Runtime, model_dir: Path) -> edgert.Model:
    return rt.load(model_dir / "tiny.tflite", name="hand")


X = genmodels.example_inputs("tiny")


def _cases(model_dir: Path, tmp: Path) -> list[tuple[str, Callable[[edgert.Runtime, edgert.Model], Any], type, str]]:
    (tmp / "empty.tflite").write_bytes(b"")
    (tmp / "dir.tflite").mkdir(exist_ok=True)
    tiny = model_dir / "tiny.tflite"
    return [
        ('hand("hello")', lambda rt, m: m("hello"), edgert.InputError, "'hello' does not convert"),
        ("hand([ragged])", lambda rt, m: m([[[1, 2], [3]]]), edgert.InputError, "must be a numpy array"),
        ("hand(object())", lambda rt, m: m(object()), edgert.InputError, "got object"),
        ("rt.load(42)", lambda rt, m: rt.load(42), edgert.ConfigError, "rt.load() takes a .tflite/.onnx path"),
        ('submit(after="xyz")', lambda rt, m: m.submit(X, after="xyz"), edgert.ConfigError,
         "after must be the Result (or Future) of an earlier request, got 'xyz'"),
        ('slo_ms="22"', lambda rt, m: rt.load(tiny, name="s1", slo_ms="22"), edgert.ConfigError,
         "slo_ms of model 's1' must be a number of ms"),
        ("slo_ms=0", lambda rt, m: rt.load(tiny, name="s2", slo_ms=0), edgert.ConfigError, "must be > 0"),
        ("slo_ms=-5", lambda rt, m: rt.load(tiny, name="s3", slo_ms=-5), edgert.ConfigError, "got -5"),
        ("slo_ms=nan", lambda rt, m: rt.load(tiny, name="s4", slo_ms=math.nan), edgert.ConfigError, "got nan"),
        ("slo_ms=True", lambda rt, m: rt.load(tiny, name="s5", slo_ms=True), edgert.ConfigError, "got True"),
        ('then="hand"', lambda rt, m: rt.load(tiny, name="t1", then="hand"), edgert.ConfigError,
         "then takes a list of names, got the string 'hand'"),
        ("name=''", lambda rt, m: rt.load(tiny, name=""), edgert.ConfigError, "name must be a non-empty string"),
        ("format='pt'", lambda rt, m: rt.load(tiny, name="f", format="pt"), edgert.ConfigError,
         "format must be 'onnx', 'tflite' or None"),
        ("empty .tflite", lambda rt, m: rt.load(tmp / "empty.tflite"), edgert.ModelLoadError, "is empty (0 bytes)"),
        ("directory", lambda rt, m: rt.load(tmp / "dir.tflite"), edgert.ModelLoadError, "is a directory"),
        ("b''", lambda rt, m: rt.load(b"", name="e"), edgert.ModelLoadError, "got 0 bytes of model"),
        ("frame(nan)", lambda rt, m: rt.frame(math.nan).__enter__(), edgert.ConfigError, "budget_ms must be > 0"),
        ("frame(deadline_ms=0)", lambda rt, m: rt.frame(deadline_ms=0.0).__enter__(), edgert.ConfigError,
         "deadline_ms must be > 0"),
        ("frame()", lambda rt, m: rt.frame().__enter__(), edgert.ConfigError, "takes one budget in ms"),
        ("frame(both)", lambda rt, m: rt.frame(1.0, deadline_ms=1.0).__enter__(), edgert.ConfigError,
         "takes one budget in ms"),
    ]




@pytest.mark.parametrize("i", range(17))
def test_bad_argument_is_one_edgert_error(i: int, rt: edgert.Runtime, hand: edgert.Model, model_dir: Path,
                                          tmp_path: Path) -> None:
    label, call, cls, message = _cases(model_dir, tmp_path)[i]
    with pytest.raises(cls) as info:
        call(rt, hand)
    assert message in str(info.value), label
    assert "\n" not in str(info.value)
    assert hand(X)["y"].shape   # still serving


def test_garbage_model_reason_is_given_once_not_per_worker(rt: edgert.Runtime) -> None:
    with pytest.raises(edgert.ModelLoadError) as info:
        rt.load(b"\0" * 100, name="g", format="tflite")
    msg = str(info.value)
    assert "litert-xnnpack on cpu0, cpu1: " in msg and msg.count("not a valid Flatbuffer") == 1


def test_unknown_then_name_is_caught_at_the_first_request(rt: edgert.Runtime, model_dir: Path) -> None:
    palm = rt.load(model_dir / "mlp.onnx", name="palm", then=["hnad"])
    with pytest.raises(edgert.ConfigError, match="then= of model 'palm': unknown model 'hnad'; did you mean 'hand'"):
        palm(genmodels.example_inputs("mlp"))
    with pytest.raises(edgert.ConfigError, match="hnad"):
        palm.submit(genmodels.example_inputs("mlp"))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"profile": "galaxy-s24"}, "did you mean 'galaxy-s23'"),
    ({"profile": 3}, "profile must be a shipped name"),
    ({"cpu_workers": -1}, "cpu_workers must be None (one per core) or an int from 0 to 1024, got -1"),
    ({"cpu_workers": 0, "delegates": ["ort-cpu"]}, "no processor to run on: cpu_workers=0"),
    ({"warmup_runs": -1}, "warmup_runs must be an int"),
    ({"alpha": 0}, "alpha must be a number in (0, 1]"),
    ({"delegates": 5}, "delegates must be 'auto' or a non-empty list"),
    ({"scheduler": 5}, "scheduler must be a policy name or an object with decide"),
    ({"offload": 5}, "offload must be 'off', 'auto'"),
    ({"trace": "/nonexistent/t.jsonl"}, "directory '/nonexistent' does not exist"),
], ids=lambda v: str(v))
def test_bad_runtime_argument(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(edgert.EdgeRTError) as info:
        edgert.Runtime(**kwargs)
    assert message in str(info.value)


def test_shipped_profile_name_is_accepted_as_simulate_does() -> None:
    with edgert.Runtime(profile="galaxy-s23", warmup_runs=0, cpu_workers=1) as r:
        assert r._profile is not None and r._profile.name == "galaxy-s23"


def test_load_after_close_is_refused(model_dir: Path) -> None:
    r = edgert.Runtime(warmup_runs=0, cpu_workers=1)
    r.close()
    with pytest.raises(edgert.EdgeRTError, match="the runtime is closed"):
        r.load(model_dir / "tiny.tflite")


def test_cascade_stage_submitted_by_a_callback_after_close_is_dropped_not_raised(model_dir: Path) -> None:
    r = edgert.Runtime(warmup_runs=0, cpu_workers=1)
    m = r.load(model_dir / "tiny.tflite")
    first = m.submit(X).result()
    r.close()
    fut = m.submit(X, after=first)   # what xr_demo's done-callback does while the runtime shuts down
    res = fut.result(timeout=5)
    assert res.status == "dropped" and "closed before it ran" in str(res.error)
    stats = r.stats()["tiny"]
    assert stats["requests"] == 2 and stats["dropped"] == 1


def test_onnx_input_of_unknown_rank_takes_what_onnxruntime_takes(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    h = onnx.helper
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
                     [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)],
                     [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "anyrank.onnx")
    with edgert.Runtime(warmup_runs=1, cpu_workers=1) as r:
        m = r.load(tmp_path / "anyrank.onnx")
        assert "x: float32[...]" in repr(m)
        assert m(np.full((2, 3), -1, np.float32))["y"].tolist() == [[0.0] * 3] * 2
        assert float(m(np.float32(4))["y"]) == 4.0
