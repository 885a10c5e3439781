"""A live trace's first stages replay from when the app submitted them (``arrival_ms``), deadlines kept."""

from __future__ import annotations

import json

import numpy as np

from scheduler.sim.trace import read_trace


def test_root_arrives_at_its_submission_and_keeps_its_deadline(tmp_path):
    lines = [
        {"t_ms": 100.0, "model": "a", "slo_ms": 33.0, "id": "f0/a", "arrival_ms": 101.5},   # live, root
        {"t_ms": 100.0, "model": "b", "slo_ms": 33.0, "id": "f0/b", "after": "f0/a", "arrival_ms": 108.0},
        {"t_ms": 200.0, "model": "a", "slo_ms": 33.0, "id": "f1/a"},                         # no arrival
        {"t_ms": 300.0, "model": "a", "slo_ms": 5.0, "id": "f2/a", "arrival_ms": 310.0},     # after its deadline
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    wl = read_trace(path)
    i = {k: n for n, k in enumerate(wl.keys)}
    t = np.asarray(wl.t_ms)
    deadline = t + np.asarray(wl.slo_ms)
    assert [t[i[k]] for k in ("f0/a", "f0/b", "f1/a")] == [101.5, 100.0, 200.0]   # a cascade stage keeps t_ms
    assert [deadline[i[k]] for k in ("f0/a", "f0/b", "f1/a")] == [133.0, 133.0, 233.0]   # deadlines unchanged
    assert t[i["f2/a"]] == 310.0 and deadline[i["f2/a"]] <= 310.0 + 1e-6   # submitted too late: hopeless


def test_a_cascade_stage_becomes_ready_its_measured_gap_after_its_upstream_ends(tmp_path):
    """``stage_gap_ms``: the app's own work between a stage's upstream end and its submission, replayed."""
    from edgert._replay import read_outcomes, stage_gaps
    from scheduler.sim.run import SimConfig, run_simulation

    lines = []
    for f in range(20):
        t = f * 50.0
        lines.append({"t_ms": t, "model": "hand_tracking", "slo_ms": 1e6, "id": f"f{f}/a", "status": "ok",
                      "processor": "cpu0", "arrival_ms": t, "wait_ms": 0.0, "latency_ms": 2.0})
        lines.append({"t_ms": t, "model": "gaze_estimation", "slo_ms": 1e6, "id": f"f{f}/b", "after": f"f{f}/a",
                      "status": "ok", "processor": "cpu0", "arrival_ms": t + 2.0 + 3.0, "wait_ms": 0.0,
                      "latency_ms": 1.0})
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    gaps = stage_gaps(read_outcomes(path))
    assert gaps == {f"f{f}/b": 3.0 for f in range(20)}              # submitted 3 ms after its upstream ended

    def ready_after_upstream(stage_gap_ms):
        res = run_simulation(SimConfig(trace=path, profile="galaxy-s23", stage_gap_ms=stage_gap_ms))
        keys = read_trace(path).keys   # by request id
        recs = {keys[r.id]: r for r in res.records}
        return [recs[f"f{f}/b"].arrival_ms - recs[f"f{f}/a"].end_ms for f in range(20)]

    assert ready_after_upstream(None) == [0.0] * 20                 # without: ready the moment it ends
    assert ready_after_upstream(gaps) == [3.0] * 20                 # with: after the app's measured work
