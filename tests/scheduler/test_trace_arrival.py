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
