"""Fuzzing the CLI arguments, the Python API and the cloud wire (against a real mosquitto), issue #16.

Invariant: a clear EdgeRTError (exit 2 and one line for the CLI), or a correct result; never another
exception, a hang, or a request without a terminal status. Default run: a few dozen cases each;
``pytest -m fuzz``: 2,000 each (tests/conftest.py).
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import edgert
from edgert.cli import main
from edgert.offload._wire import _HEAD, MAGIC, WireError, decode_arrays, decode_header
from edgert.testing import genmodels
from tests.edgert.test_cloud_support import MOSQUITTO
from tests.inputs.wire_harness import WireRig

pytestmark = [pytest.mark.fuzz, pytest.mark.timeout(1800)]

NUMBERS = st.one_of(st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e9", "1e400", "abc", "", "0x10", "1_0"]),
                    st.floats(0.001, 0.3).map(str), st.integers(-3, 3).map(str))


@given(argv=st.lists(st.one_of(
    st.tuples(st.just("--load"), NUMBERS), st.tuples(st.just("--duration"), NUMBERS),
    st.tuples(st.just("--seed"), NUMBERS), st.tuples(st.just("--scheduler"), st.sampled_from(["edgert", "edgrt", ""])),
    st.tuples(st.just("--burst"), st.one_of(st.sampled_from(["0:0.1:2", "1:2", "0:1:1e9", "a:b:c", "0:inf:2"]),
                                            st.text(max_size=8))),
    st.tuples(st.just("--plot"), st.sampled_from(["x.txt", "/nonexistent/p.png", "/", ""])),
    st.tuples(st.just("--json"), st.sampled_from(["/nonexistent/s.json", "/", ""])),
    st.tuples(st.just("--device"), st.sampled_from(["galaxy-s23", "pixle4", "/", "/nonexistent.json"]))),
    max_size=4), scenario=st.sampled_from(["ar_assistant", "vr_gaming", "ar_asistant"]))
def test_fuzz_cli_arguments(argv: list[tuple[str, str]], scenario: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--scenario", scenario, "--device", "galaxy-s23", "--duration", "0.05"]
    for flag, value in argv:
        args += [flag, value]
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err
    if rc == 2:
        assert err.count("\n") == 1 and "error: " in err
    else:
        assert "requests/s" in out


@pytest.fixture(scope="module")
def rt(model_dir: Path) -> Iterator[edgert.Runtime]:
    with edgert.Runtime(warmup_runs=0, cpu_workers=2) as r:
        r.load(model_dir / "tiny.tflite", name="tiny", slo_ms=1000.0)
        r.load(model_dir / "multi_input.onnx", name="multi")
        yield r


ARRAYS = st.one_of(
    st.sampled_from([(1, 64), (64,), (1, 63), (2, 64), (1, 64, 1), ()]).flatmap(
        lambda shape: st.sampled_from(["float32", "float64", "int64", "uint8", "bool"]).map(
            lambda dt: np.zeros(shape, dt))),
    st.just(np.zeros((1, 64), np.float32)[:, ::1]), st.just(np.ones((64, 1), np.float32).T),
    st.sampled_from(["hello", None, 3, 2.5, b"x", [1, 2], [[0.0] * 64], [[[1, 2], [3]]], {"x": 1}, {"y": 1}, object()]),
)
INPUTS = st.one_of(ARRAYS, st.lists(ARRAYS, max_size=3), st.dictionaries(st.sampled_from(["x", "a", "b", "X"]), ARRAYS,
                                                                          max_size=3))
AFTER = st.one_of(st.none(), st.sampled_from(["xyz", 3, object()]), st.just("result"), st.just("future"))


def _check_result(res: Any, model: edgert.Model) -> None:
    assert isinstance(res, edgert.Result) and res.status in ("ok", "late", "dropped", "failed")
    if res.outputs is not None:
        assert list(res.outputs) == [o.name for o in model.outputs]


@given(inputs=INPUTS, after=AFTER, which=st.sampled_from(["tiny", "multi"]), sync=st.booleans())
def test_fuzz_api_requests(rt: edgert.Runtime, inputs: Any, after: Any, which: str, sync: bool) -> None:
    m = edgert.Model(rt._dispatcher, rt._dispatcher.models[which])   # the loaded model's public handle
    if after == "result":
        after = m.submit(genmodels.example_inputs("tiny" if which == "tiny" else "multi_input")).result(30)
    elif after == "future":
        fut: Future = Future()
        fut.set_result(rt_result := m.submit(genmodels.example_inputs(
            "tiny" if which == "tiny" else "multi_input")).result(30))
        after = fut if rt_result else None
    try:
        if sync:
            outs = m(inputs)
            assert list(outs) == [o.name for o in m.outputs]
        else:
            _check_result(m.submit(inputs, after=after).result(timeout=30), m)
    except edgert.EdgeRTError as exc:
        assert str(exc) and "\n" not in str(exc)


@given(source=st.one_of(st.sampled_from([42, None, 3.5, [], [1], b"", b"\0" * 64, "x.pt", "/nonexistent.onnx", "/"]),
                        st.binary(max_size=64)),
       name=st.one_of(st.none(), st.text(max_size=4), st.integers()),
       slo=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["22", True, 0, -1])),
       fmt=st.sampled_from([None, "onnx", "tflite", "pt", 3]),
       then=st.one_of(st.just(()), st.sampled_from(["hand", ["tiny"], [3], None])))
def test_fuzz_api_load(rt: edgert.Runtime, source: Any, name: Any, slo: Any, fmt: Any, then: Any) -> None:
    try:
        m = rt.load(source, name=name, slo_ms=slo, format=fmt, then=then)
    except edgert.EdgeRTError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert m.slo_ms is None or (math.isfinite(m.slo_ms) and m.slo_ms > 0)   # pragma: no cover - bytes never load


@given(kwargs=st.fixed_dictionaries({}, optional={
    "delegates": st.sampled_from(["auto", ["ort-cpu"], ["ort-cpu", "nope"], [], 5, "ort-cpuu"]),
    "scheduler": st.sampled_from([None, "edgert", "edgrt", 5, ""]),
    "offload": st.sampled_from([None, "off", 5, "ftp://x"]),
    "cpu_workers": st.sampled_from([None, 0, 1, -1, 2.5, True, 10**9]),
    "warmup_runs": st.sampled_from([0, -1, 2.5, 10**9]),
    "alpha": st.sampled_from([0.1, 0, 2, math.nan, "x"]),
    "profile": st.sampled_from([None, "galaxy-s23", "galaxy-s24", "/", 3]),
    "trace": st.sampled_from([None, "/nonexistent/t.jsonl", "/", 7])}))
def test_fuzz_runtime_arguments(kwargs: dict[str, Any]) -> None:
    kwargs.setdefault("cpu_workers", 1)
    kwargs.setdefault("warmup_runs", 0)
    try:
        r = edgert.Runtime(**kwargs)
    except edgert.EdgeRTError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    r.close()


# -- the wire: pure decoding, then frames through a real mosquitto to a real worker ---------------

def _npy(shape: tuple[int, ...], descr: str) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


BLOB = st.one_of(
    st.binary(max_size=40),
    st.tuples(st.lists(st.integers(0, 2**33), max_size=3).map(tuple), st.sampled_from(["<f4", "<i8", "|u1", ">f8"]),
              st.binary(max_size=32)).map(lambda t: _npy(t[0], t[1]) + t[2]),
    st.sampled_from([(1, 64), (64,), (1, 63)]).map(lambda s: _npy(s, "<f4") + bytes(4 * math.prod(s))),
)
HEADER = st.fixed_dictionaries({"op": st.sampled_from(["run", "describe", "ping", "fly", None])}, optional={
    "model": st.sampled_from(["tiny", "nope", 3]), "budget_ms": st.one_of(st.floats(allow_nan=True), st.just("x")),
    "id": st.one_of(st.integers(), st.text(max_size=4)), "digest": st.sampled_from(["DIGEST", "x", 5])})


def _frame(head: bytes, blobs: list[bytes]) -> bytes:
    return MAGIC + _HEAD.pack(len(head)) + head + b"".join(blobs)


@given(payload=st.one_of(st.binary(max_size=64), st.tuples(HEADER, st.lists(BLOB, max_size=2)).map(
    lambda t: _frame(json.dumps({**t[0], "sizes": [len(b) for b in t[1]]}).encode(), t[1]))))
def test_fuzz_wire_decoding(payload: bytes) -> None:
    try:
        head, off = decode_header(payload)
        arrays = decode_arrays(payload, head, off)
    except WireError as exc:
        assert isinstance(exc, edgert.EdgeRTError) and str(exc)
        return
    assert all(isinstance(a, np.ndarray) and not a.dtype.hasobject for a in arrays)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireRig]:
    if MOSQUITTO is None:
        pytest.skip("mosquitto is not installed")
    r = WireRig(tmp_path_factory.mktemp("wire"))
    yield r
    r.close()


@given(header=HEADER, blobs=st.lists(BLOB, max_size=2), sizes_ok=st.booleans(), garbage=st.binary(max_size=16))
def test_fuzz_wire_through_mosquitto(rig: WireRig, header: dict[str, Any], blobs: list[bytes], sizes_ok: bool,
                                     garbage: bytes) -> None:
    rig.send(garbage)   # no reply topic: logged, counted, and the worker keeps serving
    if header.get("digest") == "DIGEST":
        header["digest"] = rig.digest
    sizes = [len(b) for b in blobs] if sizes_ok else [len(b) + 1 for b in blobs]
    reply = rig.ask({**header, "sizes": sizes}, b"".join(blobs))
    assert reply is not None, "a request with a reply topic got no reply"
    assert isinstance(reply.get("ok"), bool)
    if not reply["ok"]:
        assert reply["code"] in ("bad_request", "unknown_model", "too_large", "bad_input", "expired",
                                 "inference_failed"), reply
