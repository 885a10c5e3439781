"""Issue #16, the cloud wire format: bad frames are one WireError (an EdgeRTError); every request gets one reply."""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator

import numpy as np
import pytest

from edgert.errors import EdgeRTError
from edgert.offload._wire import MAGIC, WireError, decode_arrays, decode_header, encode
from tests.edgert.test_cloud_support import needs_mosquitto
from tests.inputs.wire_harness import WireRig


def _npy_header(shape: tuple[int, ...], dtype: str = "<f4") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


HUGE = _npy_header((4294967296, 4294967296))


@pytest.mark.parametrize(("payload", "message"), [
    (MAGIC, "truncated frame: 4 bytes, shorter than the 8-byte magic and header length"),
    (b"EDG", "expected magic b'EDG1', got b'EDG'"),
    (MAGIC + struct.pack(">I", 2) + b"[[", "frame header is not JSON"),
    (MAGIC + struct.pack(">I", 5000) + b"{}", "truncated frame: header of 5000 bytes"),
], ids=["4-byte", "short-magic", "bad-json", "short-header"])
def test_bad_frame_is_one_wire_error(payload: bytes, message: str) -> None:
    with pytest.raises(WireError) as info:
        decode_header(payload)
    assert message in str(info.value) and isinstance(info.value, EdgeRTError)


def test_huge_npy_shape_without_data_is_a_wire_error() -> None:
    frame = encode({"op": "run"}, [])
    head, off = decode_header(frame)
    payload = frame + HUGE
    with pytest.raises(WireError, match=r"tensor 0 is not a valid .npy blob: float32\[4294967296, 4294967296\] needs"):
        decode_arrays(payload, {**head, "sizes": [len(HUGE)]}, off)


def test_negative_npy_dim_is_a_wire_error() -> None:
    frame = encode({"op": "run"}, [])
    head, off = decode_header(frame)
    bad = _npy_header((2,)).replace(b"(2,)", b"(-2,)")
    with pytest.raises(WireError, match="tensor 0 is not a valid .npy blob"):
        decode_arrays(frame + bad, {**head, "sizes": [len(bad)]}, off)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireRig]:
    if needs_mosquitto.args[0]:
        pytest.skip("mosquitto is not installed")
    r = WireRig(tmp_path_factory.mktemp("wire"))
    yield r
    r.close()


@needs_mosquitto
@pytest.mark.parametrize(("header", "blobs", "code", "message"), [
    ({"op": "run", "model": "tiny", "sizes": [len(HUGE)]}, HUGE, "bad_request", "tensor 0 is not a valid .npy blob"),
    ({"op": "run", "model": "tiny", "budget_ms": -5}, b"", "bad_request", "budget_ms must be a number of ms > 0"),
    ({"op": "run", "model": "tiny", "budget_ms": "soon"}, b"", "bad_request", "budget_ms must be"),
    ({"op": "fly", "model": "tiny"}, b"", "bad_request", "unknown op 'fly'"),
], ids=["huge-shape", "budget-negative", "budget-string", "bad-op"])
def test_every_bad_request_gets_one_error_reply(rig: WireRig, header: dict, blobs: bytes, code: str,
                                                message: str) -> None:
    reply = rig.ask({**header, "digest": rig.digest}, blobs)
    assert reply is not None, "no reply"
    assert reply["ok"] is False and reply["code"] == code and message in reply["error"]


@needs_mosquitto
def test_a_good_request_still_runs_after_garbage(rig: WireRig) -> None:
    rig.send(MAGIC)
    rig.send(b"\0" * 3)
    x = np.zeros((1, 64), np.float32)
    blob = io.BytesIO()
    np.save(blob, x)
    reply = rig.ask({"op": "run", "model": "tiny", "digest": rig.digest, "sizes": [len(blob.getvalue())]},
                    blob.getvalue())
    assert reply is not None and reply["ok"] is True, reply
    assert rig.server.stats.garbage >= 2
