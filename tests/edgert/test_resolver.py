"""The worker starts its next run before the ended request is resolved (issue 28): the resolver thread
resolves futures with no callback; a future with a callback is resolved on the worker first, as before."""

from __future__ import annotations

import threading

import numpy as np

import edgert
from edgert._core._trace import TraceWriter
from edgert.testing import genmodels
from edgert.testing.sized import DET_HW, cnn_at


def test_a_burst_on_one_worker_ends_every_request_once_and_the_resolver_stops_at_close(model_dir, tmp_path,
                                                                                      monkeypatch):
    # Where each request is resolved, seen through the trace its resolution writes to (``resolve`` gives each
    # outcome to the trace, then to the future, on the resolving thread): a spy around the trace writer, which
    # stays interpreted when the request path is compiled (tools/compile.py).
    resolved_on: list[str] = []
    real = TraceWriter.finish

    def spy(self, res):   # a test double around the trace's finish: records the thread, then writes
        resolved_on.append(threading.current_thread().name)
        real(self, res)
    with edgert.Runtime(cpu_workers=1, delegates="ort-cpu", trace=tmp_path / "t.jsonl") as rt:
        m = rt.load(model_dir / "cnn.onnx", name="cnn", slo_ms=60_000.0)
        feeds = genmodels.example_inputs("cnn")
        m(feeds)
        monkeypatch.setattr(TraceWriter, "finish", spy)
        futs = [m.submit(feeds) for _ in range(40)]
        results = [f.result(timeout=30) for f in futs]
        resolver = rt._dispatcher._resolver
    assert [r.status for r in results] == ["ok"] * 40
    assert sorted(r.id for r in results) == sorted({r.id for r in results})
    assert rt.stats()["cnn"]["requests"] == 41 and rt.stats()["cnn"]["ok"] == 41
    assert len(resolved_on) == 40   # each once
    assert "edgert-resolver" in resolved_on   # the worker went on to its next run
    assert rt._dispatcher._resolver is None and resolver is not None and not resolver.is_alive()


def test_a_future_with_a_callback_is_resolved_before_the_next_decision():
    # A completion callback may submit a cascade's next stage: it must be pending when the freed
    # processor is decided on, so such a future is resolved on the worker, before the decision.
    # The ~20 ms model: the callbacks are added long before the first run ends.
    with edgert.Runtime(cpu_workers=1, delegates="ort-cpu") as rt:
        m = rt.load(cnn_at(DET_HW), name="det", slo_ms=60_000.0)
        x = np.zeros((1, DET_HW, DET_HW, 3), np.float32)
        m(x)
        ran_on: list[str] = []
        futs = [m.submit(x) for _ in range(4)]
        for f in futs:
            f.add_done_callback(lambda _f: ran_on.append(threading.current_thread().name))
        assert all(f.result(timeout=30).status == "ok" for f in futs)
    assert len(ran_on) == 4
    assert "edgert-resolver" not in ran_on


def test_a_cancelled_future_still_ends_its_request_once_and_the_worker_goes_on():
    # The holder may cancel a future the runtime has not resolved yet: the request still runs and ends
    # (counted once), resolving it does not raise on the worker, and the next request runs there.
    with edgert.Runtime(cpu_workers=1, delegates="ort-cpu") as rt:
        m = rt.load(cnn_at(DET_HW), name="det", slo_ms=60_000.0)
        x = np.zeros((1, DET_HW, DET_HW, 3), np.float32)
        m(x)
        first = m.submit(x)
        queued = m.submit(x)   # behind the first (a ~20 ms run): still pending when cancelled
        assert queued.cancel() and queued.cancelled()
        assert first.result(timeout=30).status == "ok"
        assert m.submit(x).result(timeout=30).status == "ok"   # the worker is alive
    assert rt.stats()["det"]["requests"] == 4 and rt.stats()["det"]["ok"] == 4
