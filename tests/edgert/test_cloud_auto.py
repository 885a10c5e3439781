"""``offload="auto"``: the embedded amqtt broker and a local worker process, started and stopped with the runtime."""

from __future__ import annotations

import socket

import numpy as np
import pytest

import edgert
from edgert.testing import genmodels
from edgert._core._result import OK

pytestmark = pytest.mark.broker


def test_auto_offload_needs_no_setup_and_cleans_up() -> None:
    x = genmodels.example_inputs("multi_input")
    with edgert.Runtime(cpu_workers=0, offload="auto") as rt:
        # bytes, not a file: the runtime hands the file to its local worker, which serves it by digest
        m = rt.load(genmodels.build("multi_input", "onnx"), name="multi", format="onnx", slo_ms=2_000.0)
        w = rt._dispatcher.decider.by_name["cloud"]
        emb = w._embedded
        assert emb is not None and (emb.dir / "models" / "multi.onnx").exists()
        res = m.submit(x).result(20)
        assert (res.status, res.processor) == (OK, "cloud"), res
        with edgert.Runtime(cpu_workers=1, offload=None) as local:
            want = local.load(genmodels.build("multi_input", "onnx"), name="multi", format="onnx")(x)
        np.testing.assert_allclose(res.outputs["y"], want["y"], rtol=1e-5)
        assert w.link.rtt_ms is not None
        port, proc = emb.port, emb.proc
    assert proc is not None and proc.poll() == 0                  # drained and exited cleanly
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    assert not emb.dir.exists()


def test_auto_offload_with_a_local_cpu_worker_uses_the_cloud_only_on_overflow() -> None:
    x = genmodels.example_inputs("tiny")
    with edgert.Runtime(cpu_workers=1, offload="auto") as rt:
        m = rt.load(genmodels.build("tiny", "onnx"), name="tiny", format="onnx", slo_ms=500.0)
        assert rt.estimator.expected_ms("tiny", "cloud") > rt.estimator.expected_ms("tiny", "cpu0")
        results = [m.submit(x).result(10) for _ in range(20)]        # one at a time: local suffices
    assert {r.processor for r in results} == {"cpu0"}
