"""JSONL traces (docs/design.md §6): parsing, errors naming file:line, cascades, cycles, replay."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from scheduler.errors import TraceError
from scheduler.profile import DeviceProfile, ProcessorSpec
from scheduler.sim import (
    SimConfig,
    build_scenario,
    read_trace,
    run_simulation,
    write_trace,
)


def _write(tmp_path: Path, lines: list) -> Path:
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return p


def _profile(**lat) -> DeviceProfile:
    lat = lat or {"palm": {"cpu": 4.0, "gpu": 2.0}, "hand": {"cpu": 3.0, "gpu": 1.5}}
    return DeviceProfile("test-device", [ProcessorSpec("cpu", "cpu"), ProcessorSpec("gpu", "gpu")], lat)


@pytest.mark.parametrize("line, msg", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "a trace line is a JSON object"),
    ({"model": "hand"}, "missing 't_ms'"),
    ({"t_ms": "soon", "model": "hand"}, "t_ms must be a number"),
    ({"t_ms": -1, "model": "hand"}, "t_ms must be >= 0"),
    ({"t_ms": 1.0}, "missing or empty 'model'"),
    ({"t_ms": 1.0, "model": "hand", "slo_ms": 0}, "slo_ms must be > 0"),
    ({"t_ms": 1.0, "model": "hand", "p": 1.5}, r"p must be in \[0, 1\]"),
    ({"t_ms": 1.0, "model": "hand", "frame": "x"}, "frame must be an integer"),
])
def test_malformed_line_names_file_and_line(tmp_path, line, msg):
    p = _write(tmp_path, [{"t_ms": 0.0, "model": "palm", "id": "a"}, "", line])
    with pytest.raises(TraceError, match=msg) as info:
        read_trace(p)
    assert str(info.value).startswith(f"{p}:3: ")


def test_duplicate_id_and_unknown_after(tmp_path):
    p = _write(tmp_path, [{"t_ms": 0, "model": "palm", "id": "a"}, {"t_ms": 1, "model": "palm", "id": "a"}])
    with pytest.raises(TraceError, match=r":2: duplicate id 'a' \(first on line 1\)"):
        read_trace(p)
    p = _write(tmp_path, [{"t_ms": 0, "model": "hand", "id": "h", "after": "nope"}])
    with pytest.raises(TraceError, match=r":1: 'after' names id 'nope', which no line of the trace has"):
        read_trace(p)


def test_cycle_in_after_is_named(tmp_path):
    p = _write(tmp_path, [
        {"t_ms": 0, "model": "palm", "id": "ok"},
        {"t_ms": 0, "model": "palm", "id": "a", "after": "c"},
        {"t_ms": 0, "model": "hand", "id": "b", "after": "a"},
        {"t_ms": 0, "model": "hand", "id": "c", "after": "b"},
    ])
    with pytest.raises(TraceError, match="cycle in 'after'") as info:
        read_trace(p)
    msg = str(info.value)
    assert all(f"'{k}' (line {n})" in msg for k, n in (("a", 2), ("b", 3), ("c", 4)))
    p = _write(tmp_path, [{"t_ms": 0, "model": "palm", "id": "self", "after": "self"}])
    with pytest.raises(TraceError, match="cycle in 'after': 'self' \\(line 1\\) -> 'self'"):
        read_trace(p)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(TraceError, match="not found"):
        read_trace(tmp_path / "none.jsonl")
    p = _write(tmp_path, ["# only a comment"])
    with pytest.raises(TraceError, match="has no requests"):
        read_trace(p)


def test_unknown_model_and_unsupported_model_fail_before_the_run(tmp_path):
    p = _write(tmp_path, [{"t_ms": 0, "model": "palm"}, {"t_ms": 1, "model": "hadn"}])
    with pytest.raises(TraceError, match=r"model 'hadn' \(.*t.jsonl:2\) is not in device profile 'test-device'.*"
                                         r"did you mean 'hand'"):
        run_simulation(SimConfig(trace=p, profile=_profile()))
    prof = _profile(palm={"cpu": 4.0}, hand={})
    p = _write(tmp_path, [{"t_ms": 0, "model": "hand"}])
    with pytest.raises(TraceError, match="no processor of device profile 'test-device' supports model 'hand'"):
        run_simulation(SimConfig(trace=p, profile=prof))


def test_cascade_stage_becomes_ready_when_its_upstream_completes(tmp_path):
    p = _write(tmp_path, [
        {"t_ms": 10.0, "model": "hand", "slo_ms": 30.0, "id": "f1/hand", "after": "f1/palm"},   # order free
        {"t_ms": 10.0, "model": "palm", "slo_ms": 30.0, "id": "f1/palm"},
    ])
    res = run_simulation(SimConfig(trace=p, profile=_profile(), scheduler="edgert", noise=0.0))
    by = {r.model: r for r in res.records}
    assert by["palm"].start_ms == 10.0 and by["palm"].end_ms == pytest.approx(12.0)     # gpu, 2 ms
    assert by["hand"].arrival_ms == pytest.approx(12.0)                                 # ready at palm's end
    assert by["hand"].end_ms == pytest.approx(13.5)
    assert by["hand"].deadline_ms == 40.0                                               # t_ms + slo_ms


def test_p_zero_stage_never_fires_and_p_one_always_does(tmp_path):
    lines = []
    for f in range(50):
        lines.append({"t_ms": f * 20.0, "model": "palm", "id": f"{f}/palm", "slo_ms": 20})
        lines.append({"t_ms": f * 20.0, "model": "hand", "id": f"{f}/hand", "after": f"{f}/palm", "p": 0.0})
    res = run_simulation(SimConfig(trace=_write(tmp_path, lines), profile=_profile()))
    assert res.summary()["per_model"].keys() == {"palm"}
    for line in lines:
        line.pop("p", None)
    res = run_simulation(SimConfig(trace=_write(tmp_path, lines), profile=_profile()))
    assert res.summary()["per_model"]["hand"]["requests"] == 50


def test_live_trace_lines_with_extra_keys_replay(tmp_path):
    # what edgert._core._trace.TraceWriter writes, plus keys a live run may add
    p = _write(tmp_path, [
        {"t_ms": 0.0, "model": "palm", "slo_ms": 33.3, "id": "1", "p": 1.0, "status": "ok", "processor": "cpu0"},
        {"t_ms": 0.0, "model": "hand", "slo_ms": 33.3, "id": "2", "after": "1", "p": 1.0},
        {"t_ms": 5.0, "model": "palm", "id": "3", "p": 1.0},                          # no deadline
    ])
    res = run_simulation(SimConfig(trace=p, profile=_profile()))
    s = res.summary()
    assert s["requests"] == 3 and s["slo_met_rate"] == 1.0
    assert any(math.isinf(r.deadline_ms) for r in res.records)


def test_scenario_written_as_trace_replays_to_the_same_summary(tmp_path):
    wl = build_scenario("vr_gaming", duration_s=2.0, seed=5)
    path = tmp_path / "vr.jsonl"
    n = write_trace(path, wl.all)
    assert n == sum(r.fires for r in wl.all)
    a = run_simulation(SimConfig(scenario="vr_gaming", duration_s=2.0, seed=5, profile="xr2-gen2")).summary()
    b = run_simulation(SimConfig(trace=path, seed=5, profile="xr2-gen2")).summary()
    for k in ("requests", "ok", "late", "dropped", "p50_ms", "p99_ms", "per_model"):
        assert a[k] == b[k], k


def test_trace_load_and_duration_and_burst(tmp_path):
    lines = [{"t_ms": f * 10.0, "model": "palm", "slo_ms": 10.0, "id": str(f)} for f in range(100)]   # 1 s
    p = _write(tmp_path, lines)
    assert run_simulation(SimConfig(trace=p, profile=_profile(), duration_s=0.5)).summary()["requests"] == 50
    fast = run_simulation(SimConfig(trace=p, profile=_profile(), load=2.0))
    assert max(r.arrival_ms for r in fast.records) == pytest.approx(495.0)
    from scheduler.sim import Burst
    burst = run_simulation(SimConfig(trace=p, profile=_profile(), burst=Burst(0.2, 0.3, 2.0)))
    assert burst.summary()["requests"] == 130


def test_a_root_line_with_p_below_one_fires_by_its_draw(tmp_path):
    lines = [{"t_ms": f * 20.0, "model": "palm", "id": str(f), "slo_ms": 20, "p": 0.0 if f % 2 else 1.0}
             for f in range(40)]
    res = run_simulation(SimConfig(trace=_write(tmp_path, lines), profile=_profile()))
    assert res.summary()["requests"] == 20                           # the p = 0 half never arrives
    assert all(r.arrival_ms % 40.0 == 0.0 for r in res.records)


def test_trace_workload_columns_match_its_lines(tmp_path):
    p = _write(tmp_path, [
        {"t_ms": 5.0, "model": "hand", "slo_ms": 30.0, "id": "f1/hand", "after": "f1/palm", "frame": 1},
        {"t_ms": 5.0, "model": "palm", "slo_ms": 30.0, "id": "f1/palm", "frame": 1},
        {"t_ms": 0.0, "model": "palm", "id": "f0/palm"},
    ])
    wl = read_trace(p)
    assert len(wl) == 3 and [wl.key(i) for i in range(len(wl))] == ["f0/palm", "f1/hand", "f1/palm"]   # by time, then line
    assert [wl.models[m] for m in wl.model.tolist()] == ["palm", "hand", "palm"]
    assert wl.parent.tolist() == [-1, 2, -1] and (wl.parent < 0).nonzero()[0].tolist() == [0, 2]
    assert math.isinf(wl.deadline_ms[0]) and wl.deadline_ms[1] == 35.0
    hand = wl.all[1]
    assert hand.parent is wl.all[2] and wl.all[2].children == [hand] and hand.key == "f1/hand"
