"""Summary figures and XRBench's real-time score."""

from __future__ import annotations

import math

import pytest

from scheduler.sim import SimConfig, realtime_score, run_simulation
from scheduler.sim.metrics import reason_kind

DESIGN_KEYS = {"requests", "slo_met_rate", "dropped", "p50_ms", "p99_ms", "offloaded", "per_model",
               "per_processor", "realtime_score"}


def test_realtime_score_is_xrbench_sigmoid_in_ms():
    assert realtime_score(10.0, 10.0) == 0.5
    assert realtime_score(9.0, 10.0) == pytest.approx(1 / (1 + math.exp(-15)))
    assert realtime_score(10.1, 10.0) == pytest.approx(1 / (1 + math.exp(1.5)))
    assert realtime_score(1e6, 0.0) == 0.0                 # no overflow
    assert realtime_score(math.nan, 10.0) == 0.0           # dropped
    assert realtime_score(5.0, math.inf) == 1.0            # no deadline


def test_summary_has_design_keys_per_model_and_per_processor():
    s = run_simulation(SimConfig(scenario="social_a", profile="pixel4", duration_s=2.0)).summary()
    assert DESIGN_KEYS <= set(s)
    for m in s["per_model"].values():
        assert {"requests", "slo_met_rate", "dropped", "p50_ms", "p99_ms", "offloaded", "realtime_score"} <= set(m)
    for p in s["per_processor"].values():
        assert {"kind", "requests", "utilization", "busy_ms"} <= set(p)
        assert 0.0 <= p["utilization"] <= 1.0
    assert s["requests"] == 2 * (60 + 60 + 30 + 30)
    assert 0.0 <= s["slo_met_rate"] <= 1.0 and s["p50_ms"] <= s["p99_ms"]


def test_reason_kinds_group_numbers():
    assert reason_kind("superseded by frame 12 of stream 'hand'") == "superseded by frame # of stream 'hand'"
    assert reason_kind("finish 4124.82 ms > deadline 4122.22 ms") == "finish # ms > deadline # ms"
