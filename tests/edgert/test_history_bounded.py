"""The runtime's history is bounded: the same bytes after N and after 10×N requests, records kept only when
asked for (``Runtime(records=)``). Nothing here is timed."""

from __future__ import annotations

import numpy as np
import pytest

import edgert
from edgert._core._run import FOLD_EVERY
from edgert._core._records import RECORDS_DEFAULT, RecordBuffer, records_capacity
from edgert._core._stats import WINDOW, LatencyRing, ModelStats
from edgert.testing import genmodels


def _row(i: int, status: str = "ok") -> tuple:
    return (i, f"m{i % 3}", status, float(i), float(i) + 5.0, f"cpu{i % 2}", float(i) + 1.0, float(i) + 2.0,
            i // 4, "" if status == "ok" else f"dropped #{i}")


def test_a_latency_ring_holds_the_same_bytes_after_n_and_10n_and_keeps_the_newest() -> None:
    ring = LatencyRing(100)
    for ms in range(100):
        ring.append(float(ms))
    size = ring.nbytes
    for ms in range(100, 1100):
        ring.append(float(ms))
    assert ring.nbytes == size == 100 * 8
    assert (len(ring), ring.count) == (100, 1100)
    np.testing.assert_array_equal(ring.values(), np.arange(1000, 1100, dtype=float))
    np.testing.assert_array_equal(ring.last(3), [1097.0, 1098.0, 1099.0])
    np.testing.assert_array_equal(np.asarray(ring), ring.values())
    assert ring.percentile(50) == pytest.approx(np.percentile(np.arange(1000, 1100), 50))


def test_model_stats_hold_the_same_bytes_after_n_and_10n_requests() -> None:
    s = ModelStats()
    for i in range(WINDOW):
        s.add("ok", "cpu0", float(i))
    size = s.latencies_ms.nbytes
    for i in range(10 * WINDOW):
        s.add("ok" if i % 2 else "late", "cpu1", 5.0)
    assert s.latencies_ms.nbytes == size and len(s.latencies_ms) == WINDOW
    assert s.summary()["p99_ms"] == 5.0 and s.summary()["requests"] == 11 * WINDOW


def test_a_record_buffer_holds_the_same_bytes_after_n_and_10n_and_keeps_the_latest_in_order() -> None:
    buf = RecordBuffer(50)
    buf.extend(_row(i) for i in range(50))
    size = buf.nbytes
    buf.extend(_row(i, "dropped" if i % 5 == 0 else "ok") for i in range(50, 550))
    assert buf.nbytes == size and len(buf) == 50 and buf.count == 550
    recs = buf.records()
    assert [r.id for r in recs] == list(range(500, 550))
    r = recs[0]   # id 500: dropped, every field back as given
    assert (r.model, r.status, r.arrival_ms, r.deadline_ms, r.processor, r.start_ms, r.end_ms, r.frame, r.reason) == (
        "m2", "dropped", 500.0, 505.0, "cpu0", 501.0, 502.0, 125, "dropped #500")
    assert recs[1].reason == "" and recs[1].status == "ok"


@pytest.mark.parametrize(("given", "kept"), [(None, 0), (False, 0), (0, 0), (True, RECORDS_DEFAULT), (7, 7)])
def test_records_option_says_how_many_are_kept(given: object, kept: int) -> None:
    assert records_capacity(given) == kept


@pytest.mark.parametrize("bad", [-1, 2.5, "all"])
def test_a_bad_records_option_says_what_to_pass(bad: object) -> None:
    with pytest.raises(edgert.ConfigError, match=r"records must be True .* got"):
        edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1, records=bad)


def _history_bytes(rt: edgert.Runtime) -> int:
    ends = rt._dispatcher.ends   # the runtime's own history: what this test is about
    kept = ends.kept.nbytes if ends.kept is not None else 0
    return kept + sum(s.latencies_ms.nbytes for s in ends.stats.values())


@pytest.mark.parametrize("records", [False, 40])
def test_the_runtime_holds_the_same_history_bytes_after_n_and_10n_requests(model_dir, records) -> None:
    n = 3 * FOLD_EVERY
    x = genmodels.example_inputs("tiny")
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1, records=records) as rt:
        tiny = rt.load(model_dir / "tiny.onnx", name="tiny")
        for _ in range(n):
            tiny(x)
        rt.stats()
        after_n = _history_bytes(rt)
        for _ in range(10 * n):
            tiny(x)
        stats = rt.stats()["tiny"]
        assert _history_bytes(rt) == after_n
        assert len(rt._dispatcher.ends._fresh) < FOLD_EVERY   # folded as it goes, never piling up
        if records:
            recs = rt.records()
            assert len(recs) == records and [r.id for r in recs] == sorted(r.id for r in recs)
        else:
            with pytest.raises(edgert.ConfigError, match=r"Runtime\(records=True\)"):
                rt.records()
    assert stats["requests"] == 11 * n and stats["p50_ms"] is not None
