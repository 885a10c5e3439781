"""edgert's policy with declared priorities, over hand-built snapshots: who goes first, and the room kept for
the next critical frame (``scheduler/policies/_reserve.py``)."""

from __future__ import annotations

import pytest

from scheduler.errors import ConfigError, TraceError
from scheduler.policies.edgert import EdgertPolicy
from scheduler.policies._reserve import CriticalRoom, stands_in_the_way
from scheduler.priority import check, parse_levels
from scheduler.profile import DeviceProfile, ProcessorSpec
from scheduler.sim import SimConfig, read_trace, run_simulation
from scheduler.types import RequestView
from tests.scheduler.policy_snapshots import plan, proc, view

LAT = {"hand": {"cpu0": 4.0, "cpu1": 4.0}, "seg": {"cpu0": 10.0, "cpu1": 10.0}, "pose": {"cpu0": 40.0, "cpu1": 40.0}}


def _r(id: int, model: str, arrival: float, deadline: float, priority: str = "normal") -> RequestView:
    return RequestView(id, model, arrival, deadline, model, -1, 0.0, None, priority)


@pytest.mark.parametrize("seg_level, hand_level, first", [
    ("normal", "normal", 1),       # plain EDF: seg is due 2 ms earlier
    ("low", "critical", 2),        # the critical hand frame, due about together, goes first
    ("normal", "critical", 2),
    ("high", "normal", 1),
])
def test_of_two_requests_due_about_together_the_more_important_goes_first(seg_level, hand_level, first):
    pol = EdgertPolicy(plan=False)
    v = view([_r(1, "seg", 0.0, 30.0, seg_level), _r(2, "hand", 0.0, 32.0, hand_level)],
             [proc("cpu0"), proc("cpu1", busy_until=100.0)], LAT)
    out = plan(pol.decide(v, 0.0))
    assert out[0] == (first, "cpu0")


def test_a_lead_is_a_nudge_not_a_class_order():
    """A low request due long before a critical one still goes first: EDF keeps every deadline it can."""
    pol = EdgertPolicy(plan=False)
    v = view([_r(1, "seg", 0.0, 15.0, "low"), _r(2, "hand", 0.0, 60.0, "critical")],
             [proc("cpu0"), proc("cpu1", busy_until=100.0)], LAT)
    assert plan(pol.decide(v, 0.0))[0] == (1, "cpu0")


def _with_critical_stream(pol: EdgertPolicy) -> None:
    """Show the policy a critical hand stream at 30 fps (arrivals at 0 and 33.3 ms, each run at once)."""
    for t in (0.0, 100.0 / 3.0):
        pol.decide(view([_r(int(t), "hand", t, t + 100.0 / 3.0, "critical")], [proc("cpu0"), proc("cpu1")], LAT), t)


@pytest.mark.parametrize("model, other_busy_until, placed", [
    ("pose", 200.0, False),   # 40 ms from 50 ms ends at 90: past the next hand frame's latest start
                              # (66.7 + half its slack, (33.3 - 4.8) / 2)
    ("seg", 200.0, True),     # 10 ms ends at 60, before the next hand frame arrives (66.7)
    ("pose", 75.0, True),     # the other processor is free in time for the hand frame
    ("pose", 0.0, True),      # both free: it takes one, the other stays free
])
def test_a_long_low_run_does_not_take_the_last_processor_a_critical_frame_needs(model, other_busy_until, placed):
    pol = EdgertPolicy(plan=False, keep_room=True)
    _with_critical_stream(pol)
    v = view([_r(10, model, 50.0, 200.0, "low")], [proc("cpu0"), proc("cpu1", busy_until=other_busy_until)], LAT)
    out = plan(pol.decide(v, 50.0))
    assert (out == [(10, "cpu0")]) is placed
    if not placed:
        assert out == []   # it waits (pending), it is not dropped: it still has time


def test_without_a_critical_stream_a_long_run_takes_the_processor():
    pol = EdgertPolicy(plan=False, keep_room=True)
    for t in (0.0, 100.0 / 3.0):   # the same stream, declared high: no room is kept for it
        pol.decide(view([_r(int(t), "hand", t, t + 33.3, "high")], [proc("cpu0"), proc("cpu1")], LAT), t)
    v = view([_r(10, "pose", 50.0, 200.0, "low")], [proc("cpu0"), proc("cpu1", busy_until=200.0)], LAT)
    assert plan(pol.decide(v, 50.0)) == [(10, "cpu0")]


def test_critical_room_predicts_the_next_frame_and_forgets_a_silent_stream():
    room = CriticalRoom()
    for t in (0.0, 33.0, 66.0):
        room.see(_r(int(t), "hand", t, t + 33.0, "critical"), 4.0)
    (arrival, latest), = room.next_starts(70.0, 1.2)
    assert arrival == pytest.approx(99.0) and latest == pytest.approx(99.0 + (33.0 - 4.8) / 2)
    assert stands_in_the_way(0, 120.0, [0.0, 200.0], [0, 1], [(arrival, latest)])
    assert not stands_in_the_way(0, 120.0, [0.0, 100.0], [0, 1], [(arrival, latest)])   # the other one is free
    assert not stands_in_the_way(0, 95.0, [0.0, 200.0], [0, 1], [(arrival, latest)])    # it ends before it arrives
    assert room.next_starts(66.0 + 4 * 33.0, 1.2) == [] and room.empty


def test_levels_are_checked_with_a_hint():
    assert check("critical") == "critical"
    with pytest.raises(ConfigError, match="did you mean 'critical'"):
        check("critcal")
    assert parse_levels("hands=critical, pose=low", ["hands", "face", "pose"]) == {"hands": "critical", "pose": "low"}
    with pytest.raises(ConfigError, match="did you mean 'hands'"):
        parse_levels("hand=critical", ["hands", "face"])
    with pytest.raises(ConfigError, match="stream=level"):
        parse_levels("hands", ["hands"])


def test_a_traces_priority_reaches_the_policy_and_a_stream_has_one(tmp_path):
    seen: dict[str, str] = {}

    class Records(EdgertPolicy):
        """Test double: edgert's own policy, noting each request's priority."""

        def decide(self, view, now_ms):
            for r in view.pending:
                seen[r.model] = r.priority
            return super().decide(view, now_ms)

    lines = ['{"t_ms": 0, "model": "hand", "slo_ms": 30, "priority": "critical"}',
             '{"t_ms": 1, "model": "seg", "slo_ms": 60, "priority": "low"}', '{"t_ms": 2, "model": "pose", "slo_ms": 60}']
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert read_trace(path).priorities == {"hand": "critical", "seg": "low"}
    device = DeviceProfile("test-device", [ProcessorSpec("cpu", "cpu")],
                           {m: {"cpu": 3.0} for m in ("hand", "seg", "pose")})
    run_simulation(SimConfig(trace=path, profile=device, scheduler=Records()))
    assert seen == {"hand": "critical", "seg": "low", "pose": "normal"}
    path.write_text(lines[0] + '\n{"t_ms": 5, "model": "hand", "slo_ms": 30, "priority": "low"}\n')
    with pytest.raises(TraceError, match="a stream has one priority"):
        read_trace(path)
    path.write_text('{"t_ms": 5, "model": "hand", "priority": "urgent"}\n')
    with pytest.raises(TraceError, match="priority must be one of critical, high, normal, low"):
        read_trace(path)
