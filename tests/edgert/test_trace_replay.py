"""Record -> profile -> replay: a live trace carries what happened, becomes this host's profile, and
``edgert simulate --trace`` replays it and compares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import edgert
from edgert._replay import handoff_samples, host_profile, live_figures, read_outcomes, run_times
from edgert.cli import main
from edgert.testing import genmodels
from scheduler.profile import DeviceProfile
from scheduler.sim.trace import read_trace


@pytest.fixture(scope="module")
def recorded(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A live trace: frames of a two-stage cascade plus sync calls, on two CPU workers."""
    path = tmp_path_factory.mktemp("rec") / "t.jsonl"
    with edgert.Runtime(delegates=["litert-xnnpack"], cpu_workers=2, trace=path) as rt:
        det = rt.load(model_dir / "tiny.tflite", name="det")
        land = rt.load(model_dir / "tiny.tflite", name="land")
        x = genmodels.example_inputs("tiny")
        for _ in range(30):
            with rt.frame(deadline_ms=50.0):
                first = det.submit(x)
            land.submit(x, after=first.result()).result()
        for _ in range(5):
            det(x)
    return path


def test_every_line_carries_its_outcome_in_submission_order(recorded: Path) -> None:
    lines = [json.loads(ln) for ln in recorded.read_text().splitlines()]
    assert lines.pop(0) == {"type": "header", "format": "edgert-trace", "version": 2}
    assert len(lines) == 65
    for ln in lines:
        assert ln["status"] in ("ok", "late") and ln["processor"] in ("cpu0", "cpu1")
        assert ln["latency_ms"] >= ln["wait_ms"] >= 0 and ln["arrival_ms"] >= ln["t_ms"] - 1e-6
    seen: set[str] = set()
    for ln in lines:    # a stage comes after the request it waited for
        assert ln.get("after") is None or ln["after"] in seen
        seen.add(ln["id"])
    arrivals = [ln["arrival_ms"] for ln in lines]
    assert arrivals == sorted(arrivals)
    assert len(read_trace(recorded).t_ms) == 65   # still a valid simulator input


def test_the_trace_becomes_this_hosts_profile(recorded: Path) -> None:
    live = read_outcomes(recorded)
    prof = host_profile(live)
    assert prof.models == ["det", "land"]
    assert {p.name for p in prof.processors} <= {"cpu0", "cpu1"}
    for m in prof.models:
        for p, v in prof.latency_ms[m].items():
            assert 0 < v <= prof.latency_p90_ms[m][p]
    assert all(x >= 0 for x in handoff_samples(live)) and handoff_samples(live)
    n, met, p50 = live_figures(live)["land"]
    assert n == 30 and met == 1.0 and p50 is not None and p50 > 0


def test_an_urgent_lane_of_the_run_is_a_cpu_lane_of_the_profile(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps({"t_ms": i, "model": "det", "status": "ok", "processor": proc, "arrival_ms": i,
                                     "wait_ms": 0.0, "latency_ms": ms}) + "\n"
                         for i, (proc, ms) in enumerate([("cpu0", 4.0), ("cpu1", 4.0), ("cpu-urgent", 6.0)])))
    prof = host_profile(read_outcomes(p), cores=4)   # a core each: the times as measured
    lane = next(x for x in prof.processors if x.name == "cpu-urgent")
    assert lane.kind == "cpu" and lane.urgent and not any(x.urgent for x in prof.processors if x is not lane)
    assert prof.latency_ms["det"] == {"cpu-urgent": 6.0, "cpu0": 4.0, "cpu1": 4.0}   # a lane's times kept apart
    out = tmp_path / "host.json"
    out.write_text(json.dumps(prof.to_json()))
    assert DeviceProfile.load(out).processors == prof.processors   # what `edgert simulate --device` reads back


def _runs_trace(path: Path, runs: list[tuple[str, float, float]]) -> Path:
    path.write_text("".join(json.dumps({"t_ms": t, "model": "det", "status": "ok", "processor": proc, "arrival_ms": t,
                                        "wait_ms": 0.0, "latency_ms": ms}) + "\n" for proc, t, ms in runs))
    return path


def test_runs_of_more_cpu_workers_than_cores_are_taken_apart_from_their_share(tmp_path: Path) -> None:
    # alone a run takes 4 ms; at 10 ms three start at once on two cores, each sharing them (x 1.5: 6 ms)
    runs = [("cpu0", 0.0, 4.0), ("cpu1", 10.0, 6.0), ("cpu-urgent", 10.0, 6.0), ("cpu0", 10.0, 6.0),
            ("cpu1", 20.0, 4.0)]
    p = _runs_trace(tmp_path / "t.jsonl", runs)
    prof = host_profile(read_outcomes(p), cores=2)
    assert prof.cpu_cores == 2
    assert prof.latency_ms["det"]["cpu-urgent"] == pytest.approx(4.0, abs=1e-3)
    assert prof.latency_ms["det"]["cpu0"] == pytest.approx(4.0, abs=1e-3)
    assert host_profile(read_outcomes(p), cores=4).cpu_cores is None   # a core each: times as measured
    assert host_profile(read_outcomes(p), cores=4).latency_ms["det"]["cpu-urgent"] == 6.0


def test_runs_that_took_no_longer_beside_more_runs_than_cores_keep_their_times(tmp_path: Path) -> None:
    # three runs at once on two cores, each as long as alone (4 ms) and one alone longer: the times did not
    # come from sharing the cores, and taking shares apart would only spread them
    runs = [("cpu0", 0.0, 5.0), ("cpu1", 10.0, 4.0), ("cpu-urgent", 10.0, 4.0), ("cpu0", 10.0, 4.0),
            ("cpu1", 20.0, 4.0), ("cpu-urgent", 30.0, 4.0)]
    prof = host_profile(read_outcomes(_runs_trace(tmp_path / "t.jsonl", runs)), cores=2)
    assert prof.cpu_cores is None
    assert prof.latency_ms["det"] == {"cpu-urgent": 4.0, "cpu0": 4.0, "cpu1": 4.0}   # as measured


def test_a_trace_without_outcomes_cannot_make_a_profile(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"t_ms": 0, "model": "det"}\n')
    with pytest.raises(edgert.TraceError, match="status, processor and latency_ms"):
        host_profile(read_outcomes(p))


def test_profile_then_simulate_prints_the_comparison_at_80_columns(recorded: Path, tmp_path: Path, capsys,
                                                                     monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    prof = tmp_path / "host.json"
    assert main(["profile", "--from-trace", str(recorded), "-o", str(prof)]) == 0
    assert main(["simulate", "--trace", str(recorded), "--device", str(prof), "--json",
                 str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "live run (recorded in the trace) vs this replay" in out
    assert max(len(ln) for ln in out.splitlines() if not ln.startswith("wrote ")) <= 80
    row = next(ln for ln in out.splitlines()[out.splitlines().index("live run (recorded in the trace) vs this "
                                                                     "replay"):] if ln.startswith("land "))
    assert row.split()[1] == "30" and "100.0%" in row


def test_a_replay_with_measured_runs_runs_each_request_as_long_as_it_ran_live(recorded: Path, tmp_path: Path,
                                                                             capsys) -> None:
    live = read_outcomes(recorded)
    times = run_times(live)
    assert len(times) == 65 and all(kind == "cpu" and ms > 0 for kind, ms in times.values())
    one = next(o for o in live if o.key)
    assert times[one.key][1] == pytest.approx(one.latency_ms - one.wait_ms)
    prof = tmp_path / "host.json"
    assert main(["profile", "--from-trace", str(recorded), "-o", str(prof)]) == 0
    out = tmp_path / "s.json"
    assert main(["simulate", "--trace", str(recorded), "--device", str(prof), "--measured-runs", "--json",
                 str(out)]) == 0
    summary = json.loads(out.read_text())
    assert summary["config"]["measured_runs"] is True
    live_total = sum(ms for _, ms in times.values())
    busy = sum(p["busy_ms"] for p in summary["per_processor"].values())
    assert busy == pytest.approx(live_total, abs=0.01)   # every run as long as live (busy_ms is rounded to µs)


def _overload_trace(path: Path) -> Path:
    """A live run's trace (as TraceWriter writes it) where one stream was shed throughout: every ``pose``
    request dropped, every ``hand`` request ran."""
    lines = []
    for i in range(6):
        t = 33.3 * i
        lines.append({"t_ms": t, "model": "hand", "slo_ms": 30.0, "id": f"f{i}/hand", "p": 1.0, "status": "ok",
                      "processor": f"cpu{i % 2}", "arrival_ms": t, "wait_ms": 0.1, "latency_ms": 4.0 + 0.1 * i})
        lines.append({"t_ms": t, "model": "pose", "slo_ms": 30.0, "id": f"f{i}/pose", "p": 1.0, "status": "dropped",
                      "processor": "", "arrival_ms": t, "wait_ms": 0.0, "latency_ms": 0.0,
                      "reason": "expected to finish after its deadline"})
    path.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    return path


def test_a_model_shed_throughout_is_named_by_profile_and_simulate(tmp_path: Path, capsys) -> None:
    """``profile --from-trace`` names the model it cannot measure (none of its requests ran) in one line,
    and ``simulate --trace`` on that profile refuses in one line naming it and why, not with a bare
    "not in device profile"."""
    trace = _overload_trace(tmp_path / "t.jsonl")
    prof = tmp_path / "host.json"
    assert main(["profile", "--from-trace", str(trace), "-o", str(prof)]) == 0
    out = capsys.readouterr().out
    left = [ln for ln in out.splitlines() if "left out" in ln]
    assert len(left) == 1 and "'pose'" in left[0] and "6 dropped" in left[0] and "expected to finish" in left[0]
    assert json.loads(prof.read_text())["latency_ms"].keys() == {"hand"}
    assert main(["simulate", "--trace", str(trace), "--device", str(prof)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'pose'" in err[0] and "none of its 6 live requests ran" in err[0], err
    assert "edgert profile MODEL_FILE" in err[0]


def test_a_model_shed_throughout_replays_once_the_profile_has_its_latency(tmp_path: Path, capsys) -> None:
    trace = _overload_trace(tmp_path / "t.jsonl")
    prof = tmp_path / "host.json"
    assert main(["profile", "--from-trace", str(trace), "-o", str(prof)]) == 0
    obj = json.loads(prof.read_text())
    obj["latency_ms"]["pose"] = {p["name"]: 25.0 for p in obj["processors"]}   # measured apart, given by hand
    prof.write_text(json.dumps(obj))
    assert main(["simulate", "--trace", str(trace), "--device", str(prof)]) == 0
    assert "pose" in capsys.readouterr().out
