"""The rate ladder and the skip-not-late verdict, on virtual time: behaviour, never a host's frame counts."""

from __future__ import annotations

import pytest

from apps.xr import ladder as L
from apps.xr.budget import skip_reason
from apps.xr.ladder import RateLadder

XR = (("hands", "critical"), ("face", "high"), ("pose", "normal"), ("segmentation", "low"))


def _ladder(levels=XR, chain_ms: float = 5.0) -> RateLadder:
    lad = RateLadder(warmup_ms=0.0)
    for name, level in levels:
        lad.add(name, level, 30.0)
        lad.streams[name].chain_ms = chain_ms
    return lad


def _overload(lad: RateLadder, missing: str, t0: float, seconds: float, busy: float = 0.95) -> float:
    """``missing`` misses every frame, the others make every frame, at 30 fps for ``seconds``; the end time."""
    t = t0
    while t < t0 + seconds * 1000.0:
        for name in lad.streams:
            if lad.take(name, t):
                lad.note(name, t, name == missing, busy_share=busy)
        t += 1000.0 / 30.0
    return t


def _quiet(lad: RateLadder, t0: float, seconds: float, busy: float = 0.3) -> float:
    t = t0
    while t < t0 + seconds * 1000.0:
        for name in lad.streams:
            if lad.take(name, t):
                lad.note(name, t, False, busy_share=busy)
        t += 1000.0 / 30.0
    return t


def test_the_lowest_priority_steps_down_first_and_critical_last():
    lad = _ladder()
    _overload(lad, "hands", 0.0, 20.0)
    first = list(dict.fromkeys(s.stream for s in lad.steps))   # streams in the order of their first step
    assert first == ["segmentation", "pose", "face", "hands"]
    hands = [i for i, s in enumerate(lad.steps) if s.stream == "hands"]
    assert len(lad.steps) == 12 and hands == [9, 10, 11]   # only once no lower stream can yield
    assert all("hands (critical) missed" in s.reason for s in lad.steps)


@pytest.mark.parametrize("levels, first", [
    ((("a", "normal"), ("b", "normal"), ("c", "high")), "a"),   # equals: the costlier per second (equal: by name)
    ((("a", "high"), ("b", "critical"), ("c", "low")), "c"),
    ((("a", "critical"), ("b", "high")), "b"),
])
def test_who_gives_way_first(levels, first):
    lad = _ladder(levels)
    _overload(lad, levels[0][0], 0.0, 1.5)
    assert lad.steps and lad.steps[0].stream == first


def test_a_critical_stream_keeps_its_rate_while_a_lower_one_can_yield_even_when_its_chain_does_not_fit():
    lad = _ladder((("hands", "critical"), ("pose", "low")))
    lad.streams["hands"].chain_ms = 40.0   # longer than 80 % of 33 ms
    t = _overload(lad, "hands", 0.0, 2.2)
    assert [s.stream for s in lad.steps] == ["pose", "pose", "pose"] and lad.streams["hands"].rung == 0
    _overload(lad, "hands", t, 1.0)   # now no lower stream can yield: its own chain steps it down
    first = next(s for s in lad.steps if s.stream == "hands")
    assert "its chain needs 40.0 ms" in first.reason


def test_a_stream_whose_own_chain_does_not_fit_steps_itself_down():
    lad = _ladder((("face", "normal"), ("pose", "normal"), ("segmentation", "low")))
    lad.streams["pose"].chain_ms = 30.0   # > 0.8 x 33.3 ms: no other stream's rate can help it
    _overload(lad, "pose", 0.0, 0.6)
    assert lad.steps[0].stream == "pose" and "its chain needs 30.0 ms" in lad.steps[0].reason
    assert lad.streams["pose"].period_ms == pytest.approx(1000.0 / 20.0)   # its deadline is the new period


def test_a_step_that_frees_too_little_for_the_missing_stream_is_passed_over():
    lad = _ladder((("pose", "normal"), ("segmentation", "low")))
    lad.streams["pose"].chain_ms, lad.streams["segmentation"].chain_ms = 20.0, 1.0
    _overload(lad, "pose", 0.0, 0.6)
    # segmentation's 30 -> 10 fps frees 20 ms a second where pose misses 600: pose steps itself (it misses
    # every frame, so it serves more at a lower rate)
    assert [s.stream for s in lad.steps] == ["pose"]
    assert lad.streams["segmentation"].rung == 0


def test_a_stream_steps_itself_down_only_when_the_lower_rate_serves_more_on_time():
    lad = _ladder((("pose", "normal"),))
    t = 0.0
    for k in range(90):   # 3 s missing 30 % of its frames: at 20 fps it could serve at most 67 %, it serves 70
        lad.note("pose", t, k % 10 in (2, 5, 8), busy_share=0.9)
        t += 1000.0 / 30.0
    assert lad.steps == []
    for k in range(30):   # missing half: the step pays
        lad.note("pose", t, k % 2 == 1, busy_share=0.9)
        t += 1000.0 / 30.0
    assert (lad.steps[0].stream, lad.steps[0].to_fps) == ("pose", 20.0)


def test_a_stepped_down_stream_takes_every_other_or_third_frame():
    lad = _ladder((("pose", "normal"),))
    taken = []
    for rung in (0, 1, 2, 3):
        lad.streams["pose"].rung = rung
        lad.streams["pose"].next_due_ms = float("-inf")
        # camera frames 33.3 ms apart, each up to 5 ms late (a thread's wake-up)
        taken.append(sum(lad.take("pose", 10_000.0 * rung + k * 1000.0 / 30.0 + (k * 7) % 5) for k in range(30)))
    assert taken == [30, 20, 15, 10]


def test_it_steps_back_up_when_there_is_room_most_important_first():
    lad = _ladder()
    t = _overload(lad, "hands", 0.0, 6.0)   # segmentation, pose and face down
    down = {n: s.rung for n, s in lad.streams.items()}
    assert down["face"] > 0 and down["segmentation"] > 0
    t = _quiet(lad, t, 3.0, busy=0.95)   # no misses but no room: every stream's hold passes, none steps up
    n = len(lad.steps)
    _quiet(lad, t, 40.0)
    ups = [s for s in lad.steps[n:]]
    assert ups and all(s.to_fps > s.from_fps for s in ups)
    assert ups[0].stream == "face"   # the most important first
    assert all(s.rung == 0 for s in lad.streams.values())
    gaps = [b.t_ms - a.t_ms for a, b in zip(ups, ups[1:])]
    assert all(g >= L.UP_GAP_MS - 1e-6 for g in gaps)


def test_no_step_up_without_room():
    lad = _ladder()
    t = _overload(lad, "hands", 0.0, 3.0)
    n = len(lad.steps)
    _quiet(lad, t, 20.0, busy=0.79)   # + what the faster rate adds > UP_BUSY_MAX
    assert not [s for s in lad.steps[n:] if s.to_fps > s.from_fps]


def test_hysteresis_a_rate_that_does_not_hold_is_retried_later_each_time():
    """pose alone; it misses whenever it runs at 30 fps and never at 15: it must not oscillate every second."""
    lad = _ladder((("pose", "normal"),))
    t = 0.0
    while t < 120_000.0:
        if lad.take("pose", t):
            s = lad.streams["pose"]
            lad.note("pose", t, s.rung == 0, busy_share=0.3)
        t += 1000.0 / 30.0
    ups = [s.t_ms for s in lad.steps if s.to_fps > s.from_fps]
    gaps = [b - a for a, b in zip(ups, ups[1:])]
    assert len(ups) >= 3   # it keeps trying, less and less often, up to the longest hold
    assert all(b >= a - 100.0 for a, b in zip(gaps, gaps[1:])) and gaps[-1] >= L.MAX_HOLD_MS > 2 * gaps[0]


@pytest.mark.parametrize("span, chain, predicted, margin, capacity, kind", [
    (33.3, 10.0, 20.0, 5.0, "", ""),                      # fits with its error margin: started
    (33.3, 10.0, 30.0, 5.0, "", "predicted late"),        # behind the work beside it + margin: after the deadline
    (33.3, 10.0, 34.0, 0.0, "", "predicted late"),        # contention alone makes it late, though its chain is short
    (33.3, 40.0, 40.0, 0.0, "", "chain too long"),
    (66.7, 40.0, 45.0, 5.0, "", ""),                      # the same chain at a lower rate: its deadline is the period
    (33.3, 10.0, 11.0, 0.0, "workers 90% busy", "over capacity"),
])
def test_a_frame_expected_late_is_never_started(span, chain, predicted, margin, capacity, kind):
    got, why = skip_reason(span, chain, predicted, margin, capacity)
    assert got == kind and bool(why) == bool(kind)


def test_the_cloud_is_the_last_rung_and_the_first_to_come_back():
    """Every stream at the bottom and still missing: the least important whose chain fits its period on the
    cloud worker goes there, rather than collapsing; with room again it comes back before any rate steps up."""
    lad = _ladder((("hands", "critical"), ("pose", "low")))
    for s in lad.streams.values():
        s.rung = len(L.RUNGS) - 1
    t = 0.0
    while t < 2000.0:
        for name in lad.streams:
            if lad.take(name, t):
                lad.note(name, t, name == "hands", busy_share=0.95, cloud_ms=40.0)
        t += 1000.0 / 30.0
    moves = [s for s in lad.steps if s.reason.startswith("to the cloud")]
    assert [s.stream for s in moves] == ["pose", "hands"] and lad.offloaded("pose")
    assert "its chain takes 40.0 ms there, within its 100.0 ms period" in moves[0].reason
    _quiet(lad, t, 10.0)
    back = [s for s in lad.steps if s.reason.startswith("back from the cloud")]
    assert sorted(s.stream for s in back) == ["hands", "pose"] and not lad.offloaded("hands")
    ups = [i for i, s in enumerate(lad.steps) if s.to_fps > s.from_fps]
    assert ups and min(ups) > lad.steps.index(back[-1])


def test_no_cloud_rung_without_a_cloud_that_fits():
    lad = _ladder((("pose", "low"),))
    lad.streams["pose"].rung = len(L.RUNGS) - 1
    for k in range(60):
        lad.note("pose", k * 100.0, True, busy_share=0.95, cloud_ms=None if k < 30 else 500.0)
    assert lad.steps == [] and not lad.offloaded("pose")


def test_misses_while_warming_up_do_not_count():
    lad = RateLadder()
    lad.add("pose", "normal", 30.0)
    for k in range(int(L.WARMUP_MS / 33.0)):
        assert lad.note("pose", k * 33.0, True, busy_share=0.95) is None
    t = _overload(lad, "pose", L.WARMUP_MS, 1.0)
    assert lad.steps and lad.steps[0].t_ms >= L.WARMUP_MS and t > L.WARMUP_MS


def test_strained_while_a_stream_is_stepped_down_or_missing_and_not_once_all_keep_up():
    lad = _ladder()
    t = _quiet(lad, 0.0, 1.0)
    assert lad.strained(t) == ""
    t = _overload(lad, "pose", t, 1.5)
    assert lad.strained(t)                             # pose missing, or someone stepped down for it
    lad2 = _ladder()
    lad2.streams["pose"].rung = 1
    assert lad2.strained(0.0) == "pose runs at 20 of its 30 fps"


def test_optional_work_waits_while_the_streams_are_strained():
    from apps.xr.budget import FrameBudget

    class IdleLedger:   # test double: a ledger whose workers are idle
        class rt:
            @staticmethod
            def now_ms() -> float:
                return 0.0
        workers = 2

        def busy_share(self) -> float:
            return 0.0

        def finish_ms(self, chain_ms: float, deadline_ms: float = float("inf"), priority: str = "normal") -> float:
            return chain_ms

    assert FrameBudget(IdleLedger(), 33.3).optional(5.0) is None
    why = FrameBudget(IdleLedger(), 33.3, strained="pose runs at 20 of its 30 fps").optional(5.0)
    assert why == "no spare capacity: pose runs at 20 of its 30 fps"


def test_the_margin_quantile_settles_where_the_late_target_of_frames_come_late():
    from apps.xr import pipelines as P

    px = P.Pipelines.__new__(P.Pipelines)   # only the quantile tracker's state (no runtime, no models)
    px.margin_quantile = 0.9
    rng = __import__("random").Random(0)
    late = []
    for _ in range(20000):
        # a frame comes late when a uniform draw is above its margin's quantile: P(late) = 1 - q
        late.append(rng.random() > px.margin_quantile)
        px._follow_lateness(late[-1])
    assert abs(sum(late[-10000:]) / 10000 - P.LATE_TARGET) < 0.01
    for _ in range(200):
        px._follow_lateness(True)
    assert px.margin_quantile == P.QUANTILE_RANGE[1]
