"""Per-model counters and percentiles (``rt.stats()``), on known latencies."""

from __future__ import annotations

import numpy as np
import pytest

from edgert._core._result import DROPPED, FAILED, LATE, OK
from edgert._core._stats import WINDOW, ModelStats


def test_percentiles_are_p50_and_p99_of_the_ok_and_late_latencies() -> None:
    s = ModelStats()
    for ms in range(1, 101):                       # 1 .. 100 ms: p50 50.5, p90 90.1, p99 99.01
        s.add(OK if ms % 4 else LATE, "cpu0" if ms % 2 else "gpu", float(ms))
    s.add(DROPPED, "", 1e6)                        # no latency of a request that never ran
    s.add(FAILED, "cpu0", 1e6)
    out = s.summary()
    assert out["p50_ms"] == pytest.approx(50.5)
    assert out["p99_ms"] == pytest.approx(99.01)
    assert (out["requests"], out[OK], out[LATE], out[DROPPED], out[FAILED]) == (102, 75, 25, 1, 1)
    assert out["slo_met_rate"] == pytest.approx(75 / 102)
    assert out["by_processor"] == {"cpu0": 51, "gpu": 50}


def test_no_latency_no_percentile_and_the_window_keeps_the_newest() -> None:
    s = ModelStats()
    assert s.summary()["p50_ms"] is None and s.summary()["slo_met_rate"] is None
    s.add(DROPPED, "", 3.0)
    assert s.summary()["p99_ms"] is None and s.summary()["slo_met_rate"] == 0.0
    for ms in np.concatenate([np.full(WINDOW, 1000.0), np.arange(WINDOW, dtype=float)]):
        s.add(OK, "cpu0", float(ms))
    assert s.summary()["p99_ms"] == pytest.approx(np.percentile(np.arange(WINDOW), 99))
