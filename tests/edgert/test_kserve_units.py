"""kserve offload without a server: URLs, the metadata check, a missing server, the REST wire (a test double)."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

import edgert
from delegates.base import TensorSpec
from edgert.errors import ConfigError, OffloadError
from edgert.offload._kserve_client import check_metadata
from edgert.offload._kserve_config import KServeConfig, parse_kserve_url
from tests.edgert.test_cloud_support import free_port


def test_url_forms_pick_protocol_tls_and_default_ports() -> None:
    assert parse_kserve_url("kserve://h") == KServeConfig(host="h", port=8001)
    c = parse_kserve_url("kserve+http://10.0.0.2:9000")
    assert (c.protocol, c.tls, c.port, c.url()) == ("http", False, 9000, "kserve+http://10.0.0.2:9000")
    c = parse_kserve_url("kserves://h?ca=/ca.pem")
    assert (c.protocol, c.tls, c.port, c.ca) == ("grpc", True, 443, "/ca.pem")
    c = parse_kserve_url("kserve+https://h:8443?insecure=1&capacity=8&timeout_ms=250")
    assert (c.protocol, c.tls, c.insecure, c.capacity, c.timeout_ms) == ("http", True, True, 8, 250.0)


def test_model_mapping_and_headers_from_the_url_the_arguments_and_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    c = parse_kserve_url("kserve://h:1?model.hand=hand_landmark:3&model.face=face_mesh&header=X-Api-Key:k1",
                         models={"pose": "pose_full:2"}, headers={"X-Tenant": "xr"})
    assert c.server_model("hand") == ("hand_landmark", "3")
    assert c.server_model("face") == ("face_mesh", "")
    assert c.server_model("pose") == ("pose_full", "2")
    assert c.server_model("other") == ("other", "")
    monkeypatch.setenv("EDGERT_KSERVE_TOKEN", "s3cret")
    assert c.header_dict() == {"X-Api-Key": "k1", "X-Tenant": "xr", "Authorization": "Bearer s3cret"}
    assert "s3cret" not in repr(c) and "k1" not in c.url()


@pytest.mark.parametrize("url, msg", [
    ("kserve://h:99999", "bad port"),
    ("kserve://h?capacty=2", "did you mean 'capacity'"),
    ("kserve://u:p@h", "takes no user:password@"),
    ("kserve://h/v2/models", "has no path"),
    ("kserve://h?header=novalue", "must be Name:Value"),
    ("kserve://h?model.x=", "model.EDGERT_NAME=SERVER_NAME"),
    ("kserve://h?insecure=1", "only for kserve+https://"),
    ("kserve://h?capacity=0", "capacity must be >= 1"),
    ("grpc://h", "must start with kserve://"),
])
def test_bad_urls_say_what_is_wrong(url: str, msg: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(msg)):
        parse_kserve_url(url)


def test_runtime_names_the_kserve_scheme_for_an_unknown_offload() -> None:
    with pytest.raises(ConfigError, match=r"'kserve://host:port'"):
        edgert.Runtime(cpu_workers=0, offload="grpc://127.0.0.1:1")


F32 = np.dtype("float32")


@pytest.mark.parametrize("theirs, problem", [
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
      "outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 2]}]}, None),
    ({}, None),                                                    # a server that lists nothing
    ({"inputs": [{"name": "x", "datatype": "FP16", "shape": [1, 4]}]}, "input 'x' is FP16[1,4] on the server"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4, 1]}]}, "input 'x' is FP32[1,4,1] on the server"),
    ({"inputs": [{"name": "input_0", "datatype": "FP32", "shape": [1, 4]}]}, "the server has no input 'x'"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4]}, {"name": "k", "datatype": "INT64", "shape": []}]},
     "also takes input(s) 'k'"),
    ({"outputs": [{"name": "y", "datatype": "INT64", "shape": [1, 2]}]}, "output 'y' is INT64[1,2] on the server"),
])
def test_metadata_check(theirs: dict, problem: str | None) -> None:
    ins = (TensorSpec("x", (None, 4), F32),)
    outs = (TensorSpec("y", (1, 2), F32),)
    got = check_metadata(theirs, ins, outs)
    assert (got == []) if problem is None else (len(got) == 1 and problem in got[0]), got


def test_no_server_at_the_address_is_an_offload_error_naming_it() -> None:
    port = free_port()
    for url in (f"kserve://127.0.0.1:{port}", f"kserve+http://127.0.0.1:{port}"):
        with pytest.raises(OffloadError, match=re.escape(f"no Open Inference Protocol server answered at {url}")):
            edgert.Runtime(cpu_workers=0, offload=url + "?connect_timeout_ms=500")


class _RecordingServer(BaseHTTPRequestHandler):
    """A test double of a REST server of the protocol: live, and an echo model ``m`` (records headers)."""

    seen: list[dict] = []

    def log_message(self, *a: object) -> None:  # quiet
        pass

    def _reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self.seen.append(dict(self.headers))
        self._reply(200 if self.path == "/v2/health/live" else 404, {"error": "no"})

    def do_POST(self) -> None:  # noqa: N802
        self.seen.append(dict(self.headers))
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        x = body["inputs"][0]
        self._reply(200, {"model_name": "m", "outputs": [{"name": "y", "datatype": x["datatype"],
                                                          "shape": x["shape"], "data": x["data"]}]})


def test_rest_requests_carry_the_configured_headers_and_json_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    from edgert.offload._kserve_client import KServeLink, KServeSession

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _RecordingServer)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    monkeypatch.setenv("EDGERT_KSERVE_TOKEN", "tok")
    link = KServeLink(parse_kserve_url(f"kserve+http://127.0.0.1:{httpd.server_port}?header=X-Api-Key:k1"))
    try:
        spec = (TensorSpec("x", (2, 3), F32),)
        s = KServeSession(link, "m", "m", "", spec, (TensorSpec("y", (2, 3), F32),))
        x = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
        np.testing.assert_array_equal(s.run([x])[0], x)      # float32 -> JSON -> float32 is exact
        assert all(h.get("X-Api-Key") == "k1" and h.get("Authorization") == "Bearer tok" for h in _RecordingServer.seen)
    finally:
        link.close()
        httpd.shutdown()
        httpd.server_close()


def test_grpc_outputs_come_from_raw_contents_or_from_typed_contents() -> None:
    """Triton and MLServer answer raw_output_contents; the kserve SDK, among others, typed contents."""
    service_pb2 = pytest.importorskip("tritonclient.grpc.service_pb2")
    from edgert.offload._kserve_transport import _grpc_outputs

    r = service_pb2.ModelInferResponse()
    y = r.outputs.add(name="y", datatype="FP32", shape=[1, 2])
    y.contents.fp32_contents.extend([0.5, -1.25])
    k = r.outputs.add(name="k", datatype="INT64", shape=[])
    k.contents.int64_contents.append(7)
    got = _grpc_outputs(r)
    assert list(got) == ["y", "k"]
    np.testing.assert_array_equal(got["y"], np.array([[0.5, -1.25]], np.float32))
    assert got["k"].dtype == np.int64 and got["k"].shape == () and got["k"] == 7
    raw = service_pb2.ModelInferResponse()
    raw.outputs.add(name="y", datatype="FP16", shape=[3])
    raw.raw_output_contents.append(np.array([1, 2, 3], np.float16).tobytes())
    np.testing.assert_array_equal(_grpc_outputs(raw)["y"], np.array([1, 2, 3], np.float16))


def test_cloud_serve_takes_a_broker_or_a_kserve_address(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    from edgert.cli import _cloud

    assert _cloud.main(["serve", "--models", str(tmp_path)]) == 2
    assert "give --broker mqtt://HOST:PORT (MQTT workers) or --kserve HOST:PORT" in capsys.readouterr().err
    assert _cloud.main(["serve", "--kserve", "127.0.0.1", "--models", str(tmp_path)]) == 2
    assert "--kserve '127.0.0.1' must be HOST:PORT" in capsys.readouterr().err
    if __import__("importlib").util.find_spec("mlserver") is not None:
        assert _cloud.main(["serve", "--kserve", "127.0.0.1:1", "--models", str(tmp_path)]) == 2
        assert "has no .onnx file to serve" in capsys.readouterr().err


def test_grpc_offload_in_a_process_that_imported_mlserver_says_why_it_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLServer and tritonclient.grpc both register the protocol's protobuf messages: one process holds one."""
    import edgert.offload._kserve_worker as kw

    def clash(module: str, feature: str) -> None:
        raise TypeError("Couldn't build proto file into descriptor pool: duplicate symbol 'inference.ServerLiveRequest'")

    monkeypatch.setattr(kw, "require", clash)   # a test double of the import that clashes
    with pytest.raises(OffloadError, match=r"cannot reach kserve://127.0.0.1:1: tritonclient.grpc cannot be imported "
                                           r"in this process .*use kserve\+http:// from this one"):
        kw.make_kserve_worker("kserve://127.0.0.1:1", threading.Lock())


class _Locked(_RecordingServer):
    """A test double of a server that wants credentials: live answers, model metadata is 401."""

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/v2/health/live":
            self._reply(200, {})
        else:
            self._reply(401, {"error": "missing bearer token"})


def test_a_server_that_refuses_the_credentials_says_so_not_that_the_model_is_missing() -> None:
    from edgert.errors import ModelLoadError
    from edgert.offload._kserve_client import KServeDelegate, KServeLink

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Locked)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    link = KServeLink(parse_kserve_url(f"kserve+http://127.0.0.1:{httpd.server_port}"))
    try:
        with pytest.raises(ModelLoadError, match=r"refused the credentials: \[401\] missing bearer token \(send a "
                                                 r"token with EDGERT_KSERVE_TOKEN"):
            KServeDelegate(link).open_named("m", (TensorSpec("x", (1,), F32),), ())
    finally:
        link.close()
        httpd.shutdown()
        httpd.server_close()
