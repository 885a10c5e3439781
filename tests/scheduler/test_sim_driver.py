"""The simulator's driver: the driver contract, latency model, cloud slots, estimator updates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

from scheduler.errors import EdgeRTError
from scheduler.profile import CloudSpec, DeviceProfile, ProcessorSpec
from scheduler.sim import SimConfig, left_unplaced, parse_trace, run_simulation
from scheduler.sim.driver import Simulation
from scheduler.types import Assignment, SchedulerView


class NeverPlacesDouble:
    """Test double: a policy that never decides anything."""

    name: ClassVar[str] = "never_places_double"

    def __init__(self) -> None:
        self.views: list[SchedulerView] = []

    def decide(self, view, now_ms):
        self.views.append(view)
        return []


class FixedPlacementDouble:
    """Test double: puts every request on one named processor (or an unknown one / unknown id)."""

    name: ClassVar[str] = "fixed_placement_double"

    def __init__(self, proc: str, bad_id: bool = False) -> None:
        self.proc = proc
        self.bad_id = bad_id
        self.views: list[tuple[float, SchedulerView]] = []

    def decide(self, view, now_ms):
        self.views.append((now_ms, view))
        return [Assignment(r.id + (1000 if self.bad_id else 0), self.proc) for r in view.pending]


def _profile(cloud: CloudSpec | None = None) -> DeviceProfile:
    return DeviceProfile("dev", [ProcessorSpec("cpu", "cpu"), ProcessorSpec("gpu", "gpu")],
                         {"det": {"cpu": 10.0, "gpu": 4.0}, "tiny": {"cpu": 1.0}}, cloud=cloud)


def _trace(tmp_path: Path, rows: list[dict]) -> Path:
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_requests_left_pending_with_idle_processors_are_dropped(tmp_path):
    pol = NeverPlacesDouble()
    p = _trace(tmp_path, [{"t_ms": 0.0, "model": "det", "slo_ms": 30}, {"t_ms": 5.0, "model": "tiny"}])
    res = run_simulation(SimConfig(trace=p, profile=_profile(), scheduler=pol, offload=False))
    why = "left unplaced by scheduler 'never_places_double' while every processor that could run it was idle"
    assert left_unplaced("never_places_double") == why          # the live runtime's wording
    assert [(r.status, r.reason) for r in res.records] == [("dropped", why)] * 2
    assert len(pol.views) == 2 and pol.views[0].pending[0].model == "det"
    assert res.summary()["drop_reasons"] == {why: 2}


def test_queue_is_fifo_one_at_a_time_and_views_show_busy_and_queue(tmp_path):
    pol = FixedPlacementDouble("cpu")
    p = _trace(tmp_path, [{"t_ms": 0.0, "model": "det", "slo_ms": 15}, {"t_ms": 0.0, "model": "det", "slo_ms": 15},
                          {"t_ms": 1.0, "model": "tiny", "slo_ms": 100}])
    res = run_simulation(SimConfig(trace=p, profile=_profile(), scheduler=pol, noise=0.0, offload=False))
    rec = sorted(res.records, key=lambda r: r.id)
    assert [(r.start_ms, r.end_ms) for r in rec] == [(0.0, 10.0), (10.0, 20.0), (20.0, 21.0)]
    assert [r.status for r in rec] == ["ok", "late", "ok"]
    # both frames at t=0 were decided together; at t=1 the cpu shows busy until 10 and one queued (10 ms)
    assert [len(v.pending) for _, v in pol.views] == [2, 1]
    now, v = pol.views[1]
    cpu = next(x for x in v.processors if x.name == "cpu")
    assert now == 1.0 and cpu.busy_until_ms == 10.0 and cpu.n_queued == 1 and cpu.queued_ms == 10.0
    assert cpu.ready_at_ms(now) == 20.0 and not cpu.is_idle(now)


def test_dispatch_delay_shifts_the_start_and_keeps_the_processor_busy(tmp_path):
    p = _trace(tmp_path, [{"t_ms": 0.0, "model": "det"}, {"t_ms": 0.0, "model": "det"}])
    res = run_simulation(SimConfig(trace=p, profile=_profile(), scheduler=FixedPlacementDouble("cpu"), noise=0.0,
                                   offload=False, dispatch_ms=0.5))
    rec = sorted(res.records, key=lambda r: r.id)
    assert [(r.start_ms, r.end_ms) for r in rec] == [(0.5, 10.5), (11.0, 21.0)]
    assert res.summary()["per_processor"]["cpu"]["busy_ms"] == 20.0


def test_dispatch_samples_give_each_request_its_own_seeded_hand_off(tmp_path):
    rows = [{"t_ms": i * 50.0, "model": "det", "slo_ms": 50} for i in range(200)]
    p = _trace(tmp_path, rows)
    def starts(seed: int, dispatch) -> list[float]:
        res = run_simulation(SimConfig(trace=p, profile=_profile(), scheduler=FixedPlacementDouble("cpu"),
                                       noise=0.0, offload=False, seed=seed, dispatch_ms=dispatch))
        return [round(r.start_ms - r.arrival_ms, 9) for r in sorted(res.records, key=lambda r: r.id)]
    drawn = starts(0, (0.1, 0.2, 3.0))
    assert set(drawn) == {0.1, 0.2, 3.0} and 40 < drawn.count(3.0) < 95   # each sample ~1/3 of 200
    assert drawn == starts(0, (0.1, 0.2, 3.0)) and drawn != starts(1, (0.1, 0.2, 3.0))
    assert set(starts(0, [0.25])) == {0.25}
    for bad in ((), (0.1, -1.0), "fast", float("nan")):
        with pytest.raises(ValueError, match="dispatch_ms"):
            starts(0, bad)


def test_policy_bugs_are_errors_not_silent(tmp_path):
    p = _trace(tmp_path, [{"t_ms": 0.0, "model": "tiny"}])
    with pytest.raises(EdgeRTError, match="'gpu', which cannot run it"):
        run_simulation(SimConfig(trace=p, profile=_profile(), scheduler=FixedPlacementDouble("gpu")))
    with pytest.raises(EdgeRTError, match="'npu', which does not exist"):
        run_simulation(SimConfig(trace=p, profile=_profile(), scheduler=FixedPlacementDouble("npu")))
    with pytest.raises(EdgeRTError, match="which is not pending"):
        run_simulation(SimConfig(trace=p, profile=_profile(), scheduler=FixedPlacementDouble("cpu", bad_id=True)))


def test_latency_is_the_profile_mean_with_seeded_noise(tmp_path):
    rows = [{"t_ms": i * 50.0, "model": "det", "slo_ms": 50} for i in range(400)]
    p = _trace(tmp_path, rows)
    res = run_simulation(SimConfig(trace=p, profile=_profile(), scheduler=FixedPlacementDouble("gpu"),
                                   noise=0.1, offload=False))
    lat = [r.end_ms - r.start_ms for r in res.records]
    mean = sum(lat) / len(lat)
    assert mean == pytest.approx(4.0, rel=0.03) and min(lat) < 3.6 and max(lat) > 4.4
    exact = run_simulation(SimConfig(trace=p, profile=_profile(), scheduler=FixedPlacementDouble("gpu"),
                                     noise=0.0, offload=False))
    assert [r.end_ms - r.start_ms for r in exact.records] == [pytest.approx(4.0)] * 400


def test_p90_in_the_profile_makes_latency_ms_the_median_of_a_lognormal(tmp_path):
    prof = _profile()
    prof.latency_p90_ms = {"det": {"gpu": 6.0}}
    rows = [{"t_ms": i * 50.0, "model": "det", "slo_ms": 50} for i in range(2000)]
    res = run_simulation(SimConfig(trace=_trace(tmp_path, rows), profile=prof,
                                   scheduler=FixedPlacementDouble("gpu"), offload=False))
    lat = sorted(r.end_ms - r.start_ms for r in res.records)
    assert lat[len(lat) // 2] == pytest.approx(4.0, rel=0.04)
    assert lat[int(0.9 * len(lat))] == pytest.approx(6.0, rel=0.06)


def test_cloud_is_rtt_plus_bytes_over_bandwidth_plus_server_with_parallel_slots(tmp_path):
    cloud = CloudSpec(rtt_ms=20.0, uplink_mbps=10.0, downlink_mbps=80.0, latency_ms={"det": 2.0},
                      input_bytes={"det": 25_000}, output_bytes={"det": 10_000})
    expected = 20.0 + 25_000 * 8 / 10e3 + 10_000 * 8 / 80e3 + 2.0       # 20 + 20 + 1 + 2 = 43 ms
    assert cloud.expected_ms("det") == pytest.approx(expected)
    rows = [{"t_ms": 0.0, "model": "det", "slo_ms": 100} for _ in range(6)]
    res = run_simulation(SimConfig(trace=_trace(tmp_path, rows), profile=_profile(cloud),
                                   scheduler=FixedPlacementDouble("cloud"), noise=0.0, cloud_noise=0.0,
                                   cloud_slots=4))
    ends = sorted(r.end_ms for r in res.records)
    assert ends == [pytest.approx(expected)] * 4 + [pytest.approx(2 * expected)] * 2
    s = res.summary()
    assert s["offloaded"] == 6 and s["per_processor"]["cloud"]["kind"] == "cloud"


def test_cloud_view_shows_a_free_slot_as_not_busy(tmp_path):
    cloud = CloudSpec(rtt_ms=20.0, uplink_mbps=10.0, downlink_mbps=10.0, latency_ms={"det": 2.0})
    pol = FixedPlacementDouble("cloud")
    rows = [{"t_ms": float(i), "model": "det"} for i in range(3)]
    run_simulation(SimConfig(trace=_trace(tmp_path, rows), profile=_profile(cloud), scheduler=pol,
                             noise=0.0, cloud_noise=0.0, cloud_slots=2))
    now, v = pol.views[2]
    c = next(x for x in v.processors if x.name == "cloud")
    assert now == 2.0 and c.kind == "cloud" and c.busy_until_ms == 22.0 and c.n_queued == 0   # both slots busy
    assert (c.slots, c.free_slots) == (2, 0)
    now, v = pol.views[1]
    c = next(x for x in v.processors if x.name == "cloud")
    assert c.busy_until_ms <= now and c.is_idle(now)                                        # one slot free
    assert (c.slots, c.free_slots) == (2, 1)
    assert all((x.slots, x.free_slots) == (1, 1) for x in v.processors if x.kind != "cloud")


class NewestWhenIdleDouble:
    """Test double: places the newest pending request on the cpu, and only while the cpu has a free slot."""

    name: ClassVar[str] = "newest_when_idle_double"

    def __init__(self) -> None:
        self.views: list[tuple[float, tuple[str, ...]]] = []

    def decide(self, view, now_ms):
        self.views.append((now_ms, tuple(r.model for r in view.pending)))
        cpu = next(p for p in view.processors if p.name == "cpu")
        if cpu.free_slots and not cpu.n_queued:
            return [Assignment(view.pending[-1].id, "cpu")]
        return []


def test_cascade_stage_is_pending_when_its_parents_processor_is_decided_on(tmp_path):
    # as the live dispatcher's _run: the finished request's callbacks submit its cascade stage first,
    # then the policy is asked about the freed processor, with the stage among the pending requests
    rows = [{"t_ms": 0.0, "model": "det", "id": "a", "slo_ms": 100},
            {"t_ms": 0.0, "model": "tiny", "id": "b", "after": "a", "slo_ms": 100},
            {"t_ms": 1.0, "model": "det", "id": "c", "slo_ms": 100}]
    pol = NewestWhenIdleDouble()
    res = run_simulation(SimConfig(trace=_trace(tmp_path, rows), profile=_profile(), scheduler=pol, noise=0.0,
                                   offload=False))
    assert (10.0, ("det", "tiny")) in pol.views            # one decision at a's end, b already pending
    start = {r.id: r.start_ms for r in res.records}
    assert start == {0: 0.0, 1: 10.0, 2: 11.0}             # b (id 1) takes the cpu first, then c


def test_offload_false_removes_the_cloud():
    cloud = CloudSpec(rtt_ms=20.0, uplink_mbps=10.0, downlink_mbps=10.0, latency_ms={"det": 2.0})
    wl = parse_trace([json.dumps({"t_ms": 0, "model": "det"})])
    on = Simulation(wl, _profile(cloud), NeverPlacesDouble())
    assert [p.name for p in on.processors] == ["cpu", "gpu", "cloud"]
    off = Simulation(parse_trace([json.dumps({"t_ms": 0, "model": "det"})]), _profile(cloud),
                     NeverPlacesDouble(), offload=False)
    assert [p.name for p in off.processors] == ["cpu", "gpu"]


def test_estimator_seeded_from_profile_and_updated_by_ema(tmp_path):
    rows = [{"t_ms": i * 20.0, "model": "det", "slo_ms": 20} for i in range(200)]
    wl = parse_trace([json.dumps(r) for r in rows])
    sim = Simulation(wl, _profile(), FixedPlacementDouble("gpu"), noise=0.2, offload=False)
    assert sim.estimator.expected_ms("det", "gpu") == 4.0 and sim.estimator.expected_ms("tiny", "gpu") is None
    assert sim.estimator.alpha == 0.1
    sim.run()
    lat = [r.end_ms - r.start_ms for r in sorted(sim.outcome().records(), key=lambda r: r.end_ms)]
    est = 4.0
    for x in lat:
        est += 0.1 * (x - est)
    assert sim.estimator.expected_ms("det", "gpu") == pytest.approx(est)
    assert sim.estimator.expected_ms("det", "cpu") == 10.0                                   # never ran there


def test_upstream_drop_drops_the_cascade_stage(tmp_path):
    rows = [{"t_ms": 0.0, "model": "det", "id": "a", "slo_ms": 30},
            {"t_ms": 0.0, "model": "tiny", "id": "b", "after": "a", "slo_ms": 30}]
    res = run_simulation(SimConfig(trace=_trace(tmp_path, rows), profile=_profile(), scheduler=NeverPlacesDouble()))
    by = {r.model: r for r in res.records}
    assert by["det"].reason == left_unplaced("never_places_double")
    assert by["tiny"].status == "dropped" and by["tiny"].reason == "upstream request 'a' was dropped"


@pytest.mark.parametrize("policy", ["edgert", "fixed_worker", "round_robin", "shortest_expected_latency",
                                    "heterogeneous_earliest_finish_time", "least_slack_time_first"])
def test_every_registered_policy_runs_every_request_to_one_terminal_status(policy):
    res = run_simulation(SimConfig(scenario="ar_assistant", profile="pixel4", scheduler=policy, duration_s=3.0,
                                   load=2.0, seed=1))
    recs = res.records
    assert len({r.id for r in recs}) == len(recs)
    assert all(r.status in ("ok", "late", "dropped") for r in recs)
    s = res.summary()
    assert s["requests"] == s["ok"] + s["late"] + s["dropped"] + s["failed"]
    assert s["requests"] == sum(m["requests"] for m in s["per_model"].values())


class RecordingCpuDouble:
    """Test double: puts everything on the cpu and records the cpu's view with the estimates at that time."""

    name: ClassVar[str] = "recording_cpu_double"

    def __init__(self) -> None:
        self.seen: list[tuple[float, object, float, float]] = []

    def decide(self, view, now_ms):
        cpu = next(p for p in view.processors if p.name == "cpu")
        est = view.estimator.expected_ms
        self.seen.append((now_ms, cpu, est("det", "cpu"), est("tiny", "cpu")))
        return [Assignment(r.id, "cpu") for r in view.pending]


def test_processor_view_is_built_from_the_estimator_now_as_the_live_runtime_builds_it(tmp_path):
    # scheduler.contract.processor_view, as the live runtime: busy_until = start + expected latency, queued_ms = sum of the queue's expected
    # latencies, both from the estimator at view time (it moves as runs finish)
    rows = [{"t_ms": 0.0, "model": "det"}] * 3 + [{"t_ms": 1.0, "model": "tiny"}, {"t_ms": 12.0, "model": "tiny"}]
    pol = RecordingCpuDouble()
    res = run_simulation(SimConfig(trace=_trace(tmp_path, rows), profile=_profile(), scheduler=pol, noise=0.3,
                                   offload=False))
    first_end = min(r.end_ms for r in res.records)
    assert first_end < 12.0                                  # one det has finished by t = 12 ...
    now, cpu, det, tiny = pol.seen[-1]
    assert now == 12.0 and det != 10.0                       # ... and moved the estimate off the profile's 10 ms
    assert (cpu.slots, cpu.free_slots, cpu.n_queued) == (1, 0, 2)   # one det runs; one det and one tiny wait
    assert cpu.queued_ms == pytest.approx(det + tiny)
    second = sorted(res.records, key=lambda r: r.start_ms)[1]
    assert cpu.busy_until_ms == pytest.approx(second.start_ms + det)
