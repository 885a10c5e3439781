"""Generated models: the ONNX and the TFLite form of each network compute the same function.

Real backends on both sides: onnxruntime (CPU, 1 thread) and ai_edge_litert's
Interpreter (num_threads=1). A few networks are also checked against a
numpy reference, so "both writers agree" cannot hide "both are wrong".
"""

from __future__ import annotations

import functools

import numpy as np
import onnxruntime as ort
import pytest
from ai_edge_litert import schema_py_generated as fb
from ai_edge_litert.interpreter import Interpreter
from onnxruntime.capi.onnxruntime_pybind11_state import Fail as OrtFail

from edgert.testing import genmodels
from edgert.testing.genmodels import onnx_models, tflite_writer
from edgert.errors import ConfigError

TOL = 1e-5
PAIRED = [n for n in genmodels.NAMES if n != "raises"]


@functools.cache
def _bytes(name: str, fmt: str, seed: int = 0) -> bytes:
    return genmodels.build(name, fmt, seed)


def _ort(name: str, seed: int = 0) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    return ort.InferenceSession(_bytes(name, "onnx", seed), so, providers=["CPUExecutionProvider"])


class _LiteRT:
    """Runs a generated .tflite with inputs by name, resizing dynamic inputs as needed."""

    def __init__(self, name: str, seed: int = 0) -> None:
        self.interp = Interpreter(model_content=_bytes(name, "tflite", seed), num_threads=1)
        self.interp.allocate_tensors()

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        it = self.interp
        details = it.get_input_details()
        if any(tuple(d["shape"]) != feeds[d["name"]].shape for d in details):
            for d in details:
                it.resize_tensor_input(d["index"], list(feeds[d["name"]].shape), strict=True)
            it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], feeds[d["name"]])
        it.invoke()
        return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def _gru_reference(w: dict[str, np.ndarray], x: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x, h = x.astype(np.float64), h.astype(np.float64)
    z = _sigmoid(x @ w["W_z"].T + w["b_z"] + h @ w["U_z"].T)
    r = _sigmoid(x @ w["W_r"].T + w["b_r"] + h @ w["U_r"].T)
    n = np.tanh(x @ w["W_n"].T + w["b_n"] + (r * h) @ w["U_n"].T)
    h_next = (1 - z) * n + z * h
    return h_next @ w["W_y"].T + w["b_y"], h_next


@pytest.mark.parametrize("name", PAIRED)
@pytest.mark.parametrize("seed", [0, 1])
def test_onnx_and_tflite_agree(name: str, seed: int) -> None:
    net = genmodels.spec(name)
    sess, lite = _ort(name, seed), _LiteRT(name, seed)
    assert [i.name for i in sess.get_inputs()] == [t.name for t in net.inputs]
    assert [d["name"] for d in lite.interp.get_input_details()] == [t.name for t in net.inputs]
    assert [o.name for o in sess.get_outputs()] == [t.name for t in net.outputs]
    assert [d["name"] for d in lite.interp.get_output_details()] == [t.name for t in net.outputs]
    for d, t in zip(lite.interp.get_input_details(), net.inputs):
        assert np.dtype(d["dtype"]) == np.dtype(t.dtype)
        assert tuple(int(v) for v in d["shape_signature"]) == tuple(-1 if v is None else v for v in t.shape)
    for data_seed in (10, 11):
        feeds = genmodels.example_inputs(name, seed=data_seed)
        want, got = sess.run(None, feeds), lite.run(feeds)
        assert len(want) == len(got) == len(net.outputs)
        for a, b, t in zip(want, got, net.outputs):
            assert a.shape == b.shape and a.dtype == b.dtype == np.float32, t.name
            assert np.isfinite(a).all() and np.abs(a).max() > 1e-3, t.name   # not saturated to 0
            np.testing.assert_allclose(b, a, rtol=TOL, atol=TOL, err_msg=f"{name}/{t.name}")


def test_tiny_mlp_multi_input_match_numpy() -> None:
    w = genmodels.weights("tiny")
    x = genmodels.example_inputs("tiny", seed=3)["x"]
    np.testing.assert_allclose(_ort("tiny").run(None, {"x": x})[0],
                               np.maximum(x @ w["W0"].T + w["b0"], 0), rtol=TOL, atol=TOL)

    w = genmodels.weights("mlp")
    x = genmodels.example_inputs("mlp", seed=3)["x"].astype(np.float64)
    h = np.tanh(np.maximum(x @ w["W0"].T + w["b0"], 0) @ w["W1"].T + w["b1"])
    np.testing.assert_allclose(_LiteRT("mlp").run({"x": x.astype(np.float32)})[0],
                               _sigmoid(h @ w["W2"].T + w["b2"]), rtol=TOL, atol=TOL)

    w = genmodels.weights("multi_input")
    feeds = genmodels.example_inputs("multi_input", seed=3)
    feeds["k"] = np.array(3, dtype=np.int64)
    a, b = feeds["a"].astype(np.float64), feeds["b"].astype(np.float64)
    want = (a @ w["W_a"].T + w["b_a"] + b @ w["W_b"].T + w["b_b"]) * 3
    for got in (_ort("multi_input").run(None, feeds)[0], _LiteRT("multi_input").run(feeds)[0]):
        np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)


def test_multi_input_scalar_changes_output() -> None:
    feeds = genmodels.example_inputs("multi_input", seed=4)
    assert feeds["k"].shape == () and feeds["k"].dtype == np.int64
    lite = _LiteRT("multi_input")
    y1 = lite.run({**feeds, "k": np.array(1, np.int64)})[0]
    y4 = lite.run({**feeds, "k": np.array(4, np.int64)})[0]
    np.testing.assert_allclose(y4, 4 * y1, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("batch", [1, 7])
def test_dynamic_batch(batch: int) -> None:
    sess, lite = _ort("dynamic_batch"), _LiteRT("dynamic_batch")
    assert sess.get_inputs()[0].shape == ["batch", 64]
    feeds = genmodels.example_inputs("dynamic_batch", seed=5, batch=batch)
    want, got = sess.run(None, feeds)[0], lite.run(feeds)[0]
    assert want.shape == got.shape == (batch, 8)
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)
    # rows are independent: row 0 of the batch equals a batch-1 run on it
    np.testing.assert_allclose(sess.run(None, {"x": feeds["x"][:1]})[0], want[:1], rtol=TOL, atol=TOL)


def test_stateful_round_trip() -> None:
    sess, lite = _ort("stateful"), _LiteRT("stateful")
    w = genmodels.weights("stateful")
    rng = np.random.default_rng(6)
    h_ort = h_lite = h_ref = np.zeros((1, 32), np.float32)
    for _step in range(6):
        x = rng.standard_normal((1, 16)).astype(np.float32)
        y_o, h_ort = sess.run(None, {"x": x, "h_prev": h_ort})
        y_l, h_lite = lite.run({"x": x, "h_prev": h_lite})
        y_r, h_ref = _gru_reference(w, x, h_ref)
        np.testing.assert_allclose(h_lite, h_ort, rtol=TOL, atol=TOL)
        np.testing.assert_allclose(y_l, y_o, rtol=TOL, atol=TOL)
        np.testing.assert_allclose(y_o, y_r, rtol=1e-4, atol=1e-4)
    assert np.abs(h_ort).max() > 0.05                    # the state is carried
    x = np.ones((1, 16), np.float32)                     # and it matters
    assert not np.allclose(sess.run(None, {"x": x, "h_prev": h_ort})[0],
                           sess.run(None, {"x": x, "h_prev": np.zeros_like(h_ort)})[0])


def test_raises_inside_the_backend() -> None:
    sess, lite = _ort("raises"), _LiteRT("raises")
    feeds = genmodels.example_inputs("raises")
    zeros = {k: np.zeros_like(v) for k, v in feeds.items()}         # a zero-filled warm-up runs
    for f in (feeds, zeros):
        assert sess.run(None, f)[0].shape == lite.run(f)[0].shape == (4, 4)
    np.testing.assert_array_equal(lite.run(feeds)[0], feeds["x"].reshape(4, 4))
    for fail in (1, -1, 12):
        bad = {**feeds, "fail": np.array(fail, np.int64)}
        with pytest.raises(OrtFail, match="Reshape"):
            sess.run(None, bad)
        with pytest.raises(RuntimeError, match="RESHAPE"):
            lite.run(bad)
    assert lite.run(feeds)[0].shape == sess.run(None, feeds)[0].shape == (4, 4)    # both recover


def test_seeded_and_deterministic() -> None:
    assert genmodels.build("mlp", "onnx", 0) == genmodels.build("mlp", "onnx", 0)
    assert genmodels.build("mlp", "tflite", 0) == genmodels.build("mlp", "tflite", 0)
    assert genmodels.build("mlp", "tflite", 0) != genmodels.build("mlp", "tflite", 1)
    a, b = genmodels.weights("cnn", 0), genmodels.weights("cnn", 1)
    assert a.keys() == b.keys() and not np.array_equal(a["W0"], b["W0"])


def test_tflite_file_layout() -> None:
    data = _bytes("cnn", "tflite")
    assert data[4:8] == b"TFL3"
    model = fb.Model.GetRootAs(data, 0)
    assert model.Buffers(0).DataLength() == 0          # the empty sentinel
    for i in range(1, model.BuffersLength()):
        buf = model.Buffers(i)
        if buf.DataLength():
            start = buf._tab.Vector(buf._tab.Offset(4))
            assert start % 16 == 0, f"buffer {i} starts at {start}"


def test_save_writes_loadable_files(tmp_path) -> None:
    paths = genmodels.save("tiny", tmp_path / "m")
    assert set(paths) == {"onnx", "tflite"}
    assert paths["onnx"].name == "tiny.onnx" and paths["tflite"].read_bytes() == _bytes("tiny", "tflite")
    ort.InferenceSession(str(paths["onnx"]), providers=["CPUExecutionProvider"])
    Interpreter(model_path=str(paths["tflite"])).allocate_tensors()
    assert set(genmodels.save("cnn", tmp_path, formats=("onnx",))) == {"onnx"}
    assert onnx_models.save_onnx("stateful", tmp_path / "s.onnx").stat().st_size > 0
    assert tflite_writer.save_tflite("stateful", tmp_path / "s.tflite").stat().st_size > 0


def test_unknown_names_say_did_you_mean() -> None:
    with pytest.raises(ConfigError, match="did you mean 'mlp'"):
        genmodels.build("mpl", "onnx")
    with pytest.raises(ConfigError, match="did you mean 'tflite'"):
        genmodels.build("tiny", "tflte")
    with pytest.raises(ConfigError, match="generated model"):
        genmodels.spec("resnet")


def test_public_names_and_docstring_table() -> None:
    assert sorted(genmodels.__all__) == sorted(
        ["FORMATS", "NAMES", "NetSpec", "TensorInfo", "build", "example_inputs", "save", "spec", "weights"])
    assert genmodels.NAMES == ("tiny", "mlp", "cnn", "multi_input", "dynamic_batch", "stateful", "raises")
    doc = genmodels.__doc__ or ""
    for name in genmodels.NAMES:
        assert f"\n{name} " in doc, f"{name} missing from the package docstring table"
