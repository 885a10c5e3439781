"""Streams in the simulator: the overload controller decides every frame, closed-loop, on simulated time."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

import scheduler.sim.streams as sim_streams
from scheduler.errors import ConfigError, TraceError
from scheduler.profile import DeviceProfile, ProcessorSpec
from scheduler.sim import SimConfig, run_simulation
from scheduler.sim.trace import parse_trace
from scheduler.streams import REASONS, StreamController

STATS_KEYS = {"frames", "taken", "on_time", "late", "failed", "frames_shed", "frames_shed_by", "rate_fps",
              "rung_fps", "priority", "offloaded", "chain_ms", "steps"}


def _overloaded(seed: int = 0, **kw: Any) -> dict[str, Any]:
    cfg = SimConfig(scenario="ar_gaming", profile="pixel4", duration_s=6.0, load=3.0, seed=seed,
                    priorities={"hand_tracking": "critical", "plane_detection": "low"}, **kw)
    return run_simulation(cfg).summary()


def test_per_stream_has_the_live_stats_keys_and_frames_add_up() -> None:
    s = _overloaded()
    per = s["per_stream"]
    assert set(per) == {f"{m}{u}" for m in ("hand_tracking", "depth_estimation", "plane_detection")
                        for u in ("", "#b1", "#b2")}
    for name, st in per.items():
        assert set(st) == STATS_KEYS, name
        assert st["frames"] == st["taken"] + st["frames_shed"]
        assert st["taken"] >= st["on_time"] + st["late"]
        assert set(st["frames_shed_by"]) <= set(REASONS)
    assert per["hand_tracking#b1"]["priority"] == "critical" and per["plane_detection#b2"]["priority"] == "low"


def test_overload_sheds_frames_and_a_frame_not_taken_is_a_dropped_request() -> None:
    s = _overloaded()
    shed = sum(st["frames_shed"] for st in s["per_stream"].values())
    assert shed > 0
    not_taken = sum(n for r, n in s["drop_reasons"].items() if r.startswith("its stream did not take the frame"))
    assert not_taken >= shed   # a frame's cascade stages go with it


def test_a_frame_whose_requests_ran_past_its_deadline_is_late_not_failed() -> None:
    per = _overloaded()["per_stream"].values()
    assert sum(st["late"] for st in per) > 0   # (a late request made its frame count as failed before)


def test_the_same_seed_gives_the_same_per_stream_result() -> None:
    a, b = _overloaded(seed=3), _overloaded(seed=3)
    assert a["per_stream"] == b["per_stream"]
    assert {k: v for k, v in a.items() if "wall" not in k} == {k: v for k, v in b.items() if "wall" not in k}


def test_a_critical_stream_holds_better_than_a_low_one() -> None:
    per = _overloaded()["per_stream"]
    on = {n: st["on_time"] / st["frames"] for n, st in per.items()}
    assert min(on[f"hand_tracking{u}"] for u in ("", "#b1", "#b2")) > \
        max(on[f"plane_detection{u}"] for u in ("", "#b1", "#b2"))


def test_streams_off_is_the_open_loop_run() -> None:
    cfg = dict(scenario="ar_gaming", profile="galaxy-s23", duration_s=2.0)
    s = run_simulation(SimConfig(**cfg)).summary()
    assert "per_stream" not in s
    with pytest.raises(ConfigError, match="does not have"):
        run_simulation(SimConfig(**cfg, priorities={"hands": "critical"}))


def test_a_load_below_one_user_is_refused_with_streams() -> None:
    with pytest.raises(ConfigError, match="users"):
        run_simulation(SimConfig(scenario="ar_gaming", profile="galaxy-s23", duration_s=1.0, load=0.5, streams=True))


# -- a live trace's frames, replayed ---------------------------------------------------------------------
def _profile() -> DeviceProfile:
    return DeviceProfile("two-cores", [ProcessorSpec("cpu0", "cpu"), ProcessorSpec("cpu1", "cpu")],
                         {"palm": {"cpu0": 6.0, "cpu1": 6.0}, "hand": {"cpu0": 8.0, "cpu1": 8.0}})


def _trace(path: Path, frames: int = 60, taken_every: int = 2) -> Path:
    """A trace as a live run with one stream writes it: every other frame not taken (no requests)."""
    lines: list[dict[str, Any]] = [
        {"type": "header", "format": "edgert-trace", "version": 2},
        {"type": "stream", "stream": "hands", "fps": 30.0, "priority": "high", "rates": [30.0, 20.0, 15.0, 10.0],
         "offload": False, "max_in_flight": 1}]
    for n in range(frames):
        t = round(n * 1000.0 / 30.0, 3)
        taken = n % taken_every == 0
        lines.append({"type": "frame", "stream": "hands", "frame": n, "t_ms": t, "offered_ms": t, "taken": taken,
                      "reason": "" if taken else "predicted_late", "deadline_ms": round(t + 33.333, 3)})
        if taken:
            lines.append({"t_ms": t, "model": "palm", "slo_ms": 33.333, "id": f"f{n}/palm", "p": 1.0, "frame": n,
                          "status": "ok", "processor": "cpu0", "arrival_ms": t + 1.0, "wait_ms": 0.1,
                          "latency_ms": 6.2})
            lines.append({"t_ms": t, "model": "hand", "slo_ms": 33.333, "id": f"f{n}/hand", "after": f"f{n}/palm",
                          "p": 1.0, "frame": n, "status": "ok", "processor": "cpu0", "arrival_ms": t + 7.2,
                          "wait_ms": 0.1, "latency_ms": 8.1})
    path.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    return path


def test_a_skipped_frame_in_a_trace_is_offered_again_in_the_replay(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.jsonl")
    wl = parse_trace(trace.read_text().splitlines(), "t")
    assert len(wl.stream_frames) == 60
    assert "f1/palm" in wl.keys and "f1/hand" in wl.keys   # frame 1 was not taken live: given frame 0's requests
    s = run_simulation(SimConfig(trace=trace, profile=_profile())).summary()
    st = s["per_stream"]["hands"]
    assert st["frames"] == 60   # every frame offered live, taken or not, is offered again
    assert st["taken"] > 30     # on an idle two-core profile the controller takes frames live skipped
    assert st["priority"] == "high"
    assert s["requests"] == 120


def test_an_old_trace_replays_open_loop_and_streams_need_frame_records(tmp_path: Path) -> None:
    old = tmp_path / "old.jsonl"
    old.write_text('{"t_ms": 0.0, "model": "palm", "slo_ms": 30.0, "id": "a"}\n'
                   '{"t_ms": 0.0, "model": "hand", "slo_ms": 30.0, "id": "b", "after": "a"}\n')
    s = run_simulation(SimConfig(trace=old, profile=_profile())).summary()
    assert s["requests"] == 2 and "per_stream" not in s
    with pytest.raises(ConfigError, match="no stream frames"):
        run_simulation(SimConfig(trace=old, profile=_profile(), streams=True))


def test_a_newer_trace_format_is_refused_naming_the_version() -> None:
    with pytest.raises(TraceError, match="version 3"):
        parse_trace(['{"type": "header", "format": "edgert-trace", "version": 3}'], "t")
    with pytest.raises(TraceError, match="unknown record type"):
        parse_trace(['{"type": "nonsense"}'], "t")


# -- one controller, two drivers --------------------------------------------------------------------------
class RecordingController(StreamController):
    """Test double: a StreamController that logs every call and its answer."""

    log: list[tuple[str, tuple[Any, ...], Any]]

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.log = []

    def add(self, *a: Any, **kw: Any) -> Any:
        self.log.append(("add", a, kw))
        return super().add(*a, **kw)

    def offer(self, *a: Any) -> Any:
        d = super().offer(*a)
        self.log.append(("offer", a, d))
        return d

    def ended(self, *a: Any) -> Any:
        step = super().ended(*a)
        self.log.append(("ended", a, step))
        return step


def replay_into_a_fresh_controller(log: list[tuple[str, tuple[Any, ...], Any]]) -> int:
    """Feed the same calls to a new controller; every answer must be the same. Returns the offers compared."""
    fresh = StreamController()
    offers = 0
    for what, args, answer in log:
        if what == "add":
            fresh.add(*args, **answer)
        elif what == "offer":
            assert comparable(fresh.offer(*args)) == comparable(answer)
            offers += 1
        else:
            assert comparable(fresh.ended(*args)) == comparable(answer)
    return offers


def comparable(answer: Any) -> Any:
    """A controller's answer (a frozen dataclass or None) as a tuple with NaN as None: Python 3.13's dataclass
    ``__eq__`` compares field by field, so a NaN field (no prediction yet) never equals itself there."""
    if answer is None:
        return None
    return tuple(None if isinstance(v, float) and math.isnan(v) else v
                 for v in (getattr(answer, f.name) for f in dataclasses.fields(answer)))


def test_the_simulator_drives_the_one_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[RecordingController] = []

    def make() -> RecordingController:
        made.append(RecordingController())
        return made[-1]

    monkeypatch.setattr(sim_streams, "StreamController", make)
    _overloaded()
    (ctl,) = made
    assert any(w for what, a, _ in ctl.log if what == "offer" for w in [a[2].work])   # it saw the queues
    assert replay_into_a_fresh_controller(ctl.log) > 500


# -- urgent lanes ---------------------------------------------------------------------------------------
def _lane_profile() -> DeviceProfile:
    return DeviceProfile("two-cores-and-a-lane",
                         [ProcessorSpec("cpu-urgent", "cpu", urgent=True), ProcessorSpec("cpu0", "cpu"),
                          ProcessorSpec("cpu1", "cpu")],
                         {"palm": {p: 6.0 for p in ("cpu-urgent", "cpu0", "cpu1")},
                          "hand": {p: 8.0 for p in ("cpu-urgent", "cpu0", "cpu1")}})


def test_a_profile_keeps_its_urgent_lane_through_json() -> None:
    prof = _lane_profile()
    raw = prof.to_json()
    assert raw["processors"][0] == {"name": "cpu-urgent", "kind": "cpu", "urgent": True}
    assert "urgent" not in raw["processors"][1]
    assert DeviceProfile.from_json(raw).processors == prof.processors
    raw["processors"][0]["urgent"] = "yes"
    with pytest.raises(ValueError, match=r"processors\[0\].urgent must be true or false"):
        DeviceProfile.from_json(raw)


def test_an_urgent_lane_runs_only_critical_and_high_requests_while_it_is_closed(tmp_path: Path) -> None:
    for level, lane_runs in (("normal", False), ("low", False), ("high", True), ("critical", True)):
        trace = tmp_path / f"{level}.jsonl"   # bursts of six at once on three processors, no streams: lanes closed
        trace.write_text("".join(json.dumps({"t_ms": 40.0 * (i // 6), "model": "palm", "slo_ms": 200.0,
                                             "id": f"r{i}", "priority": level}) + "\n" for i in range(60)))
        s = run_simulation(SimConfig(trace=trace, profile=_lane_profile())).summary()
        assert (s["per_processor"]["cpu-urgent"]["requests"] > 0) is lane_runs, level
        assert s["per_processor"]["cpu0"]["requests"] > 0


def test_the_controller_sees_the_lanes_as_the_live_dispatcher_counts_them(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path) -> None:
    made: list[RecordingController] = []

    def make() -> RecordingController:
        made.append(RecordingController())
        return made[-1]

    monkeypatch.setattr(sim_streams, "StreamController", make)
    run_simulation(SimConfig(trace=_trace(tmp_path / "t.jsonl", taken_every=1), profile=_lane_profile(), load=4.0))
    seen = {(b.workers, b.lanes) for what, a, _ in made[0].log if what == "offer" for b in [a[2]]}
    assert seen <= {(3, 0), (2, 1)} and (3, 0) in seen   # an open lane is capacity like the rest


# -- CPU processors sharing fewer cores -------------------------------------------------------------------
def test_cpu_processors_sharing_fewer_cores_run_slower_together(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"   # two requests at once on two CPU processors, then one alone
    trace.write_text("".join(json.dumps({"t_ms": t, "model": "palm", "slo_ms": 100.0, "id": f"r{i}"}) + "\n"
                             for i, t in enumerate([0.0, 0.0, 50.0])))
    prof = _profile()
    ends = {}
    for cores in (None, 1):
        prof.cpu_cores = cores
        out = run_simulation(SimConfig(trace=trace, profile=prof, noise=0.0, thermal=False)).outcome
        ends[cores] = sorted(round(float(e - s), 6) for s, e in zip(out.start_ms, out.end_ms))
    assert ends[None] == [6.0, 6.0, 6.0]
    assert ends[1] == [6.0, 6.0, 12.0]   # the second to start shares the one core; the third runs alone
    raw = prof.to_json()
    assert raw["cpu_cores"] == 1 and DeviceProfile.from_json(raw).cpu_cores == 1
    raw["cpu_cores"] = 0
    with pytest.raises(ValueError, match="cpu_cores is the number of CPU cores"):
        DeviceProfile.from_json(raw)


# -- an app that waits for its frames -------------------------------------------------------------------
def test_a_trace_streams_app_that_waits_for_its_frames_is_replayed_waiting(tmp_path: Path) -> None:
    slow = DeviceProfile("one-slow-core", [ProcessorSpec("cpu0", "cpu")], {"palm": {"cpu0": 30.0},
                                                                           "hand": {"cpu0": 30.0}})
    waits = _trace(tmp_path / "w.jsonl", taken_every=1)   # live, no frame was skipped in_flight: the app waits
    assert parse_trace(waits.read_text().splitlines(), "w").stream_specs["hands"].waits
    st = run_simulation(SimConfig(trace=waits, profile=slow)).summary()["per_stream"]["hands"]
    assert st["frames"] == 60 and "in_flight" not in st["frames_shed_by"]   # each offered once its previous ended
    overlaps = tmp_path / "o.jsonl"   # one frame skipped in_flight live: the app offers frames while one runs
    overlaps.write_text(waits.read_text().replace('"taken": true, "reason": ""', '"taken": false, "reason": '
                                                  '"in_flight"', 1))
    assert not parse_trace(overlaps.read_text().splitlines(), "o").stream_specs["hands"].waits
    st = run_simulation(SimConfig(trace=overlaps, profile=slow)).summary()["per_stream"]["hands"]
    assert st["frames"] == 60 and st["frames_shed_by"].get("in_flight", 0) > 0
