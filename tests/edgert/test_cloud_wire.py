"""The cloud wire format, broker URLs and give-up times: no broker needed."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest

from edgert.offload import CloudConfig, parse_broker_url
from edgert.offload._wire import MAGIC, WireError, decode_arrays, decode_header, encode, spec_from_json, spec_to_json
from delegates.base import TensorSpec
from edgert.offload._worker import failure_reason, give_up_ms
from edgert.errors import ConfigError


def roundtrip(head: dict, arrays: list[np.ndarray]) -> tuple[dict, list[np.ndarray]]:
    payload = encode(head, arrays)
    h, off = decode_header(payload)
    return h, decode_arrays(payload, h, off)


def test_arrays_round_trip_as_npy_with_dtype_shape_and_order() -> None:
    arrays = [np.arange(12, dtype=np.float32).reshape(3, 4), np.array(7, dtype=np.int64),
              np.asfortranarray(np.arange(6, dtype=np.float16).reshape(2, 3)), np.zeros((0, 5), np.uint8),
              np.array([True, False])]
    head, out = roundtrip({"op": "run", "id": "1"}, arrays)
    assert head["op"] == "run" and head["sizes"] and len(out) == len(arrays)
    for a, b in zip(arrays, out):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_each_blob_is_a_plain_npy_file() -> None:
    a = np.arange(5, dtype=np.int32)
    payload = encode({"id": "x"}, [a])
    h, off = decode_header(payload)
    np.testing.assert_array_equal(np.load(io.BytesIO(payload[off:]), allow_pickle=False), a)


def test_object_arrays_are_refused_never_unpickled() -> None:
    buf = io.BytesIO()
    np.save(buf, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    blob = buf.getvalue()
    head = json.dumps({"id": "1", "sizes": [len(blob)]}).encode()
    payload = MAGIC + len(head).to_bytes(4, "big") + head + blob
    h, off = decode_header(payload)
    with pytest.raises(WireError, match="tensor 0 is not a valid .npy"):
        decode_arrays(payload, h, off)
    with pytest.raises(ValueError):  # and encoding one fails too
        encode({"id": "1"}, [np.array([object()], dtype=object)])


@pytest.mark.parametrize("payload, match", [
    (b"hello world", "not an edgert frame"),
    (b"", "not an edgert frame"),
    (MAGIC + (500).to_bytes(4, "big") + b"{}", "truncated"),
    (MAGIC + (3).to_bytes(4, "big") + b"{{{", "not JSON"),
    (MAGIC + (2).to_bytes(4, "big") + b"[]", "not a JSON object"),
])
def test_garbage_frames_are_named(payload: bytes, match: str) -> None:
    with pytest.raises(WireError, match=match):
        decode_header(payload)


def test_sizes_must_add_up_and_the_cap_holds() -> None:
    payload = encode({"id": "1"}, [np.zeros(10, np.float32)])
    h, off = decode_header(payload)
    with pytest.raises(WireError, match="add up"):
        decode_arrays(payload + b"x", h, off)
    with pytest.raises(WireError, match="over the 100-byte cap"):
        decode_header(payload, max_bytes=100)


def test_spec_json_round_trip() -> None:
    s = TensorSpec("x", (None, 3), np.dtype(np.float32))
    assert spec_from_json(json.loads(json.dumps(spec_to_json(s)))) == s


def test_broker_urls() -> None:
    assert parse_broker_url("mqtt://10.0.0.2:1999") == CloudConfig(host="10.0.0.2", port=1999)
    c = parse_broker_url("mqtts://bob:s%40cret@broker.example?ca=/ca.pem&capacity=8&timeout_ms=250&qos=0")
    assert (c.tls, c.port, c.username, c.password, c.ca, c.capacity, c.timeout_ms, c.qos) == (
        True, 8883, "bob", "s@cret", "/ca.pem", 8, 250.0, 0)
    assert "s@cret" not in c.url() and c.url() == "mqtts://bob@broker.example:8883"
    with pytest.raises(ConfigError, match="must start with mqtt://"):
        parse_broker_url("http://x:1883")
    with pytest.raises(ConfigError, match="did you mean 'capacity'"):
        parse_broker_url("mqtt://x?capacty=3")
    with pytest.raises(ConfigError, match="capacity=.x. is invalid"):
        parse_broker_url("mqtt://x?capacity=x")
    with pytest.raises(ConfigError, match="qos must be 0 or 1"):
        parse_broker_url("mqtt://x?qos=2")


def test_password_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGERT_MQTT_PASSWORD", "pw")
    assert parse_broker_url("mqtt://u@h:1").password == "pw"


@pytest.mark.parametrize("deadline, now, expected, reserve, want", [
    (100.0, 0.0, 10.0, 30.0, 70.0),      # leave the fastest local run time to fall back
    (100.0, 60.0, 10.0, 30.0, 80.0),     # but wait at least twice the expected cloud latency
    (100.0, 95.0, 10.0, 30.0, 100.0),    # and never past the deadline
    (math.inf, 5.0, 10.0, 30.0, 5005.0),  # no deadline: the configured timeout
])
def test_give_up_time(deadline: float, now: float, expected: float, reserve: float, want: float) -> None:
    assert give_up_ms(deadline, now, expected, reserve, 5000.0) == pytest.approx(want)


def test_unknown_offload_values() -> None:
    import threading

    from edgert.offload._factory import make_cloud_worker

    with pytest.raises(ConfigError, match="unknown offload 'tcp://x'"):
        make_cloud_worker("tcp://x", threading.Lock())
    with pytest.raises(ConfigError, match="offload must be"):
        make_cloud_worker(42, threading.Lock())  # type: ignore[arg-type]


@pytest.mark.parametrize(("error", "elapsed", "budget", "connected", "want"), [
    ("no reply from a cloud worker for 'm' within 20.0 ms", 20.4, 20.0, True,
     "cloud timeout: no reply after 20.4 ms (gave up at 20.0 ms; the deadline was 33.3 ms away)"),
    ("lost the connection to the MQTT broker at mqtt://127.0.0.1:1883 (rc=7)", 3.0, 20.0, False,
     "cloud broker lost: lost the connection to the MQTT broker at mqtt://127.0.0.1:1883 (rc=7)"),
    ("cloud worker w1 refused 'm': [unknown-model] no such digest", 3.0, 20.0, True,
     "cloud error reply [unknown-model]: cloud worker w1 refused 'm': [unknown-model] no such digest"),
    ("request for 'm' is 9 bytes, over the 8-byte cap", 0.1, 20.0, True,
     "cloud error: request for 'm' is 9 bytes, over the 8-byte cap"),
])
def test_a_failed_cloud_request_says_what_happened(error: str, elapsed: float, budget: float, connected: bool,
                                                    want: str) -> None:
    """The reason's head (before ': ') is what reports count by: timeout, broker lost, error reply [code]."""
    assert failure_reason(error, elapsed, budget, 33.3, connected) == want


def test_a_timeout_without_a_deadline_names_the_link_timeout() -> None:
    assert failure_reason("no reply", 5001.0, 5000.0, math.inf, True).endswith("no deadline: the link's timeout)")
