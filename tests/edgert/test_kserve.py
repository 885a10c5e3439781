"""Offload to a real Open Inference Protocol server (MLServer, started and stopped by the fixture).

Needs ``mlserver`` and ``tritonclient`` (``pip install 'edgert[kserve,kserve-server]'``); skipped without.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import edgert
from edgert._core._result import FAILED, OK
from edgert.errors import ModelLoadError, OffloadError
from edgert.testing import genmodels
from tests.edgert.test_cloud_support import make_models
from tests.edgert.test_kserve_support import KServeServer, needs_kserve

pytestmark = [needs_kserve, pytest.mark.slow]

MODELS = ("tiny", "cnn", "multi_input", "dynamic_batch", "raises")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("kserve")
    models = make_models(tmp / "models", MODELS)
    s = KServeServer(models, tmp / "server.log")
    try:
        yield s
    finally:
        s.stop()


def local_outputs(path: Path, feeds: dict) -> list[np.ndarray]:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("proto", ["grpc", "http"])
def test_every_request_runs_on_the_server_with_the_local_outputs(server: KServeServer, proto: str) -> None:
    url = server.url if proto == "grpc" else server.http_url
    with edgert.Runtime(cpu_workers=0, offload=url) as rt:
        assert rt.processors == ["cloud"]
        for name, batch in (("cnn", None), ("multi_input", None), ("dynamic_batch", 3)):
            path = server.models / f"{name}.onnx"
            m = rt.load(path, name=name, slo_ms=2_000.0)
            assert rt.estimator.expected_ms(name, "cloud") > 0    # priced by measured round trips
            x = genmodels.example_inputs(name, batch=batch)
            res = m.submit(x).result(30)
            assert (res.status, res.processor, res.delegate) == (OK, "cloud", "kserve-cloud"), res.error
            for got, want in zip(res.outputs.values(), local_outputs(path, x)):
                assert got.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        assert rt.stats()["cnn"]["by_processor"] == {"cloud": 1}


def test_a_model_the_server_lacks_is_a_load_error_naming_the_server_and_what_it_serves(server: KServeServer,
                                                                                       tmp_path: Path) -> None:
    path = genmodels.save("mlp", tmp_path, formats=["onnx"])["onnx"]
    with edgert.Runtime(cpu_workers=0, offload=server.url) as rt:
        with pytest.raises(ModelLoadError, match=rf"kserve server {server.url} does not serve a model 'mlp'; "
                                                 r"it serves: cnn, dynamic_batch, multi_input, raises, tiny"):
            rt.load(path, name="mlp")


def test_a_missing_version_is_a_load_error_and_a_mapping_picks_name_and_version(server: KServeServer) -> None:
    path = server.models / "cnn.onnx"
    with edgert.Runtime(cpu_workers=0, offload=server.url + "?model.cnn=cnn:7") as rt:
        with pytest.raises(ModelLoadError, match=rf"kserve server {server.url} has model 'cnn' but not version '7'"):
            rt.load(path, name="cnn")
    with edgert.Runtime(cpu_workers=0, offload=server.url + "?model.vision=cnn:1") as rt:
        m = rt.load(path, name="vision", slo_ms=2_000.0)
        x = genmodels.example_inputs("cnn")
        np.testing.assert_allclose(m(x)["logits"], local_outputs(path, x)[0], rtol=1e-6)


def test_metadata_that_differs_in_shape_or_dtype_is_a_load_error_saying_which_tensor(server: KServeServer,
                                                                                      tmp_path: Path) -> None:
    tiny = server.models / "tiny.onnx"
    with edgert.Runtime(cpu_workers=0, offload=server.url + "?model.tiny=cnn") as rt:
        with pytest.raises(ModelLoadError, match=r"does not match the model edgert loaded: the server has no input "
                                                 r"'x' \(its inputs: image\)"):
            rt.load(tiny, name="tiny")
    f64 = _identity_model(tmp_path / "f64.onnx", "x", "y", np.float64, [1, 64])   # tiny's names, other dtype
    with edgert.Runtime(cpu_workers=0, offload=server.url) as rt:
        with pytest.raises(ModelLoadError, match=r"input 'x' is FP32\[1,64\] on the server, float64\[1,64\] here"):
            rt.load(f64, name="tiny")
    wide = _identity_model(tmp_path / "wide.onnx", "x", "y", np.float32, [1, 65])
    with edgert.Runtime(cpu_workers=0, offload=server.url) as rt:
        with pytest.raises(ModelLoadError, match=r"input 'x' is FP32\[1,64\] on the server, float32\[1,65\] here"):
            rt.load(wide, name="tiny")


def test_with_a_local_cpu_a_model_the_server_lacks_runs_here(server: KServeServer, tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    path = genmodels.save("mlp", tmp_path, formats=["onnx"])["onnx"]
    with caplog.at_level(logging.WARNING, "edgert.offload"):
        with edgert.Runtime(cpu_workers=1, offload=server.url) as rt:
            m = rt.load(path, name="mlp", slo_ms=1_000.0)
            assert rt.estimator.expected_ms("mlp", "cloud") is None
            assert m.submit(genmodels.example_inputs("mlp")).result(10).processor == "cpu0"
    assert "does not serve a model 'mlp'" in caplog.text and "runs on this device only" in caplog.text


def test_a_failing_inference_ends_failed_with_the_servers_reason(server: KServeServer) -> None:
    with edgert.Runtime(cpu_workers=0, offload=server.url) as rt:
        m = rt.load(server.models / "raises.onnx", name="raises", slo_ms=2_000.0)
        res = m.submit([np.ones((1, 16), np.float32), np.array(1, np.int64)]).result(30)
        assert res.status == FAILED
        assert str(res.error).startswith("cloud error reply: model 'raises' on kserve server "
                                         f"{server.url} refused the request: [INVALID_ARGUMENT] ONNX Runtime failed")


def test_a_session_refuses_a_wrong_dtype_at_the_server(server: KServeServer) -> None:
    """edgert checks inputs before queueing; the server checks again (any client may call it)."""
    from edgert.offload._kserve_client import KServeDelegate, KServeLink, KServeSession
    from edgert.offload._kserve_config import parse_kserve_url

    for url, code in ((server.url, "INVALID_ARGUMENT"), (server.http_url, "400")):
        link = KServeLink(parse_kserve_url(url))
        try:
            good = KServeDelegate(link).open_named("tiny", *_specs(server.models / "tiny.onnx"))
            bad = KServeSession(link, "tiny", "tiny", "", (good.inputs[0].__class__("x", (1, 64), np.dtype("float64")),),
                                good.outputs)
            with pytest.raises(OffloadError, match=rf"refused the request: \[{code}\] input 'x' of model 'tiny' is "
                                                   r"FP32\[1, 64\], got FP64\[1, 64\]"):
                bad.run([np.ones((1, 64))])
            assert good.run([np.ones((1, 64), np.float32)])[0].shape == (1, 64)
        finally:
            link.close()


@pytest.fixture
def cnn_server(tmp_path: Path):
    """A server of our own serving the cnn model, which a test may stop and start; stopped at the end."""
    models = make_models(tmp_path / "models", ("cnn",))
    s = KServeServer(models, tmp_path / "server.log")
    try:
        yield models, s
    finally:
        s.stop()


def test_server_down_every_request_ends_once_with_a_reason_naming_the_server(cnn_server) -> None:
    models, s = cnn_server
    x = genmodels.example_inputs("cnn")
    with edgert.Runtime(cpu_workers=0, offload=s.url) as rt:
        m = rt.load(models / "cnn.onnx", name="cnn", slo_ms=2_000.0)
        assert m.submit(x).result(30).status == OK
        s.stop()
        futs = [m.submit(x) for _ in range(20)]
        results = [f.result(30) for f in futs]
        assert Counter(r.status for r in results) == {FAILED: 20}
        assert all(s.url in str(r.error) and str(r.error).startswith("cloud server unreachable: ")
                   for r in results), {str(r.error) for r in results}
        st = rt.stats()["cnn"]
        assert (st["requests"], st["ok"], st["failed"]) == (21, 1, 20)
        s.start()   # back on the same port: the link notices and requests run there again
        for _ in range(100):
            if rt._dispatcher.decider.by_name["cloud"].link.connected:
                break
            import time

            time.sleep(0.05)
        assert m.submit(x).result(30).status == OK


def test_server_down_requests_fall_back_to_the_local_cpu(cnn_server) -> None:
    models, s = cnn_server
    x = genmodels.example_inputs("cnn")
    with edgert.Runtime(cpu_workers=1, offload=s.url) as rt:
        m = rt.load(models / "cnn.onnx", name="cnn", slo_ms=5_000.0)
        s.stop()
        results = []
        for _ in range(5):
            rt.estimator.reset("cnn", "cpu0", 1_000.0)   # the policy prefers the (dead) server
            results.append(m.submit(x).result(30))
        assert [r.status for r in results] == [OK] * 5
        assert {r.processor for r in results} == {"cpu0"}


def _specs(path: Path):
    from delegates.registry import get

    s = get("ort-cpu").open(__import__("delegates.base", fromlist=["Artifact"]).Artifact("onnx", path=path))
    try:
        return s.inputs, s.outputs
    finally:
        s.close()


def _identity_model(path: Path, x: str, y: str, dtype: type, shape: list[int]) -> Path:
    import onnx
    from onnx import helper

    t = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    g = helper.make_graph([helper.make_node("Identity", [x], [y])], "identity",
                          [helper.make_tensor_value_info(x, t, shape)], [helper.make_tensor_value_info(y, t, shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_tls_with_the_servers_ca_and_a_clear_error_without_it(server: KServeServer, tmp_path: Path) -> None:
    import shutil

    from tests.edgert.test_kserve_support import TlsTerminator, self_signed

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = self_signed(tmp_path)
    grpc_tls, http_tls = TlsTerminator(server.grpc_port, cert, key), TlsTerminator(server.http_port, cert, key)
    try:
        x = genmodels.example_inputs("cnn")
        want = local_outputs(server.models / "cnn.onnx", x)[0]
        for url in (f"kserves://127.0.0.1:{grpc_tls.port}?ca={cert}", f"kserve+https://127.0.0.1:{http_tls.port}?ca={cert}",
                    f"kserve+https://127.0.0.1:{http_tls.port}?insecure=1"):
            with edgert.Runtime(cpu_workers=0, offload=url) as rt:
                m = rt.load(server.models / "cnn.onnx", name="cnn", slo_ms=2_000.0)
                np.testing.assert_allclose(m(x)["logits"], want, rtol=1e-6)
        for url in (f"kserves://127.0.0.1:{grpc_tls.port}", f"kserve+https://127.0.0.1:{http_tls.port}"):
            with pytest.raises(OffloadError, match=r"kserve server kserve.* presented a TLS certificate that cannot be "
                                                   r"verified: .*give the CA that signed it with \?ca=PATH"):
                edgert.Runtime(cpu_workers=0, offload=url + "?connect_timeout_ms=1000")
    finally:
        grpc_tls.stop()
        http_tls.stop()


def test_a_file_named_model_onnx_finds_the_one_server_model_with_its_signature(server: KServeServer, tmp_path: Path,
                                                                                caplog: pytest.LogCaptureFixture) -> None:
    """A Triton repository names a model by its directory and its file ``model.onnx``: edgert's default name
    is then "model". Where exactly one served model has the file's inputs and outputs, that one is used."""
    import shutil

    path = tmp_path / "model.onnx"
    shutil.copy(server.models / "cnn.onnx", path)
    x = genmodels.example_inputs("cnn")
    with caplog.at_level(logging.WARNING, "edgert.offload"):
        with edgert.Runtime(cpu_workers=0, offload=server.url) as rt:
            m = rt.load(path, slo_ms=2_000.0)
            np.testing.assert_allclose(m(x)["logits"], local_outputs(path, x)[0], rtol=1e-6)
    assert "has no model 'model'; offloading it to 'cnn', the one model there whose metadata matches" in caplog.text
    with edgert.Runtime(cpu_workers=0, offload=server.url + "?model.model=model") as rt:   # mapped: no guessing
        with pytest.raises(ModelLoadError, match="does not serve a model 'model'"):
            rt.load(path)
