"""Runtime.close: in-flight work finishes when there is time, and what is left is dropped, each with the reason.

A real 9 ms model (MediaPipe's pose landmarks) on one CPU worker keeps requests waiting long enough for
close to find them: pending at the policy (edgert's late dispatch) or queued at the worker (fixed_worker
queues every request at once). Every future resolves exactly once either way.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import edgert

N = 6
REASON = "the runtime closed before it ran"
X = np.zeros((1, 256, 256, 3), np.float32)


def _submit_and_close(mediapipe_dir: Path, scheduler: str, timeout_s: float | None) -> tuple[list, edgert.Runtime]:
    rt = edgert.Runtime(scheduler=scheduler, cpu_workers=1, warmup_runs=1, records=True)
    m = rt.load(mediapipe_dir / "pose_landmark_full.tflite", name="pose")
    futs = [m.submit(X) for _ in range(N)]
    if timeout_s is None:
        rt.close()
    else:
        rt.close(timeout_s=timeout_s)
    return [f.result(timeout=10) for f in futs], rt


@pytest.mark.parametrize("scheduler", ["edgert", "fixed_worker"])
def test_close_with_time_finishes_everything_in_flight(mediapipe_dir: Path, scheduler: str) -> None:
    results, rt = _submit_and_close(mediapipe_dir, scheduler, None)
    assert [r.status for r in results] == ["ok"] * N
    assert rt.stats()["pose"]["requests"] == N and rt.stats()["pose"]["dropped"] == 0


@pytest.mark.parametrize("timeout_s", [0.0, 0.005], ids=["no-time", "less-than-one-run"])
@pytest.mark.parametrize("scheduler", ["edgert", "fixed_worker"])
def test_close_without_time_drops_what_has_not_started_with_the_reason(mediapipe_dir: Path, scheduler: str,
                                                                       timeout_s: float) -> None:
    results, rt = _submit_and_close(mediapipe_dir, scheduler, timeout_s)
    dropped = [r for r in results if r.status == "dropped"]
    assert dropped, "a 9 ms model on one worker: most of six requests cannot have started"
    assert {r.status for r in results} <= {"ok", "dropped"}
    for r in dropped:
        assert str(r.error) == f"request for model 'pose' was dropped: {REASON}"
        assert r.outputs is None and r.processor == ""
        assert math.isfinite(r.latency_ms) and r.latency_ms >= 0.0 and r.queued_ms == r.latency_ms   # dropped at close
    s = rt.stats()["pose"]
    assert s["requests"] == N and s["dropped"] == len(dropped) and s["ok"] == N - len(dropped)
    recs = [rec for rec in rt.records() if rec.status == "dropped"]
    assert sorted(rec.id for rec in recs) == sorted(r.id for r in dropped)
    for rec in recs:
        assert rec.reason == f"request for model 'pose' was dropped: {REASON}" and rec.processor == ""
        assert math.isnan(rec.start_ms) and rec.arrival_ms <= rec.end_ms   # ended (dropped) at close, never started


def test_close_twice_is_a_no_op(mediapipe_dir: Path) -> None:
    results, rt = _submit_and_close(mediapipe_dir, "edgert", None)
    rt.close(timeout_s=0.0)
    assert rt.stats()["pose"]["requests"] == N
