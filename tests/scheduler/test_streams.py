"""The overload controller for streams (scheduler.streams), on virtual time: behaviour, never a host's frame counts.

Every test drives the controller through its public calls (``offer`` a frame behind a ``Backlog``, then ``ended``
with how it went), as the live runtime and the simulator do.
"""

from __future__ import annotations

import math
import random

import pytest

from scheduler import streams as S
from scheduler.streams import MIN_CHAINS, Backlog, FrameEnd, StreamController, Work

XR = (("hands", "critical"), ("face", "high"), ("pose", "normal"), ("segmentation", "low"))
IDLE = 0.3


def _controller(levels=XR, chain_ms: float = 5.0, fps: float = 30.0, warmup_ms: float = 0.0) -> StreamController:
    """A controller whose streams have learned a chain of ``chain_ms`` (``MIN_CHAINS`` frames each, ended on time at
    t < 0)."""
    c = StreamController(warmup_ms=warmup_ms)
    for name, level in levels:
        c.add(name, fps, level)
        c.streams[name].chains.extend([chain_ms] * MIN_CHAINS)
        c.streams[name].works.extend([chain_ms] * MIN_CHAINS)
        c.streams[name].chain_ms = c.streams[name].work_ms = chain_ms
    return c


def _frames(c: StreamController, t0: float, seconds: float, missing: str | None, busy: float) -> float:
    """Every stream offers a frame at 30 fps for ``seconds``; ``missing``'s frames that run end after their
    deadline, the others' on time. The end time (ms)."""
    t = t0
    while t < t0 + seconds * 1000.0:
        for name in list(c.streams):
            d = c.offer(name, t, Backlog(t, workers=2, busy_share=busy))
            if not d.taken:
                continue
            s = c.streams[name]
            end = d.deadline_ms + 1.0 if name == missing else t + s.chain_ms
            c.ended(name, d, FrameEnd(end, True, s.work_ms, s.chain_ms, None, busy))
        t += 1000.0 / 30.0
    return t


def _fed(c: StreamController) -> None:
    """Every stream took a frame at each of its frame times over the last window (none is starved)."""
    for s in c.streams.values():
        s.takes.extend(-1000.0 + k * 1000.0 / s.fps for k in range(int(s.fps)))


def _steps(c: StreamController) -> list[S.Step]:
    return sorted((st for s in c.streams.values() for st in s.steps), key=lambda st: st.at_ms)


# -- take or skip ----------------------------------------------------------------------------------------------

def test_a_frame_predicted_late_behind_the_work_ahead_of_it_is_not_taken():
    c = _controller((("pose", "normal"),), chain_ms=10.0)
    ahead = tuple(Work(20.0, 30.0, "normal", False) for _ in range(4))   # 80 ms due before it on 2 workers
    d = c.offer("pose", 0.0, Backlog(0.0, workers=2, work=ahead))
    assert not d.taken and d.reason == "predicted_late" and "after its 33.3 ms deadline" in d.detail
    assert c.stats("pose")["frames_shed_by"] == {"predicted_late": 1}


def test_work_due_after_it_is_not_ahead_of_it_unless_it_already_runs():
    c = _controller((("pose", "normal"),), chain_ms=10.0)
    later = tuple(Work(40.0, 500.0, "normal", False) for _ in range(4))
    assert c.offer("pose", 0.0, Backlog(0.0, workers=2, work=later)).taken
    c2 = _controller((("pose", "normal"),), chain_ms=10.0)
    running = tuple(Work(40.0, 500.0, "normal", True) for _ in range(2))   # a run is never preempted
    assert not c2.offer("pose", 0.0, Backlog(0.0, workers=2, work=running)).taken


def test_a_more_important_frame_goes_ahead_of_work_due_about_together():
    ahead = tuple(Work(30.0, 38.0, "normal", False) for _ in range(2))   # due 5 ms after the frame
    b = Backlog(0.0, workers=2, work=ahead)
    assert b.ahead_ms(33.3, "high") == 0.0 and b.ahead_ms(33.3, "normal") == 0.0 and b.ahead_ms(33.3, "low") == 60.0
    lanes = Backlog(0.0, workers=2, lanes=1, work=(Work(30.0, 10.0, "normal", True),))
    assert lanes.ahead_ms(33.3, "critical") == 0.0   # an urgent lane runs it: only urgent work is ahead there


def test_work_waiting_that_cannot_make_its_own_deadline_is_not_ahead_of_a_frame():
    doomed = tuple(Work(20.0, 10.0, "normal", False) for _ in range(4))   # 80 ms due in 10 ms on 2 workers
    b = Backlog(0.0, workers=2, work=doomed)
    assert b.ahead_ms(33.3, "normal") == 20.0   # the first two make it (10 ms each on a worker); the policy drops the rest
    running = Backlog(0.0, workers=2, work=(Work(15.0, 5.0, "normal", True),) + doomed)
    assert running.ahead_ms(33.3, "normal") == 15.0 + 0.0   # a run already holding a processor is ahead whatever its deadline
    c = _controller((("pose", "normal"),), chain_ms=10.0)
    assert c.offer("pose", 0.0, b).taken   # 20 ms ahead on 2 workers, then its 10 ms: 20 ms, in its 33.3 ms


def test_a_chain_longer_than_its_period_is_not_taken():
    c = _controller((("pose", "normal"),), chain_ms=40.0)
    d = c.offer("pose", 0.0, Backlog(0.0))
    assert (d.taken, d.reason) == (False, "chain_too_long")


def test_saturated_workers_shed_the_costliest_frames_first():
    c = _controller((("pose", "normal"), ("seg", "low")), chain_ms=20.0)
    c.streams["seg"].work_ms = 5.0
    _fed(c)
    busy = Backlog(0.0, workers=1, busy_share=0.95)
    first = c.offer("pose", 0.0, busy)   # 20 ms admitted of the 25 ms the workers may take in its 33 ms
    assert first.taken and c.offer("seg", 0.0, busy).taken
    c.streams["pose"].in_flight = c.streams["seg"].in_flight = 0   # (as if both had ended)
    later = Backlog(1.0, workers=1, busy_share=0.95)
    pose = c.offer("pose", 1.0, later)
    assert (pose.taken, pose.reason) == (False, "over_capacity") and "ms of capacity" in pose.detail
    assert c.offer("seg", 1.0, later).taken   # cheaper than the mean priced lately: never the one shed


def test_saturated_workers_shed_a_dear_frame_only_of_a_stream_taking_more_of_the_workers_than_the_mean():
    """A 10 fps text detector's 40 ms frame is dearer than the mean, but its stream takes less of the workers (400 ms a
    second) than the mean of the frames priced; a 30 fps face tracker's 4 ms frame is cheap: neither is shed, the 30 fps
    pose chain's (25 ms, 750 ms a second) is."""
    c = StreamController(warmup_ms=0.0)
    for name, fps, ms in (("pose", 30.0, 25.0), ("face", 30.0, 4.0), ("text", 10.0, 40.0)):
        c.add(name, fps, "normal")
        _learned(c, name, ms)
    _fed(c)

    def offer(name: str, t: float) -> S.Decision:
        d = c.offer(name, t, Backlog(t, workers=1, busy_share=0.95))
        c.streams[name].in_flight = 0   # (as if it had ended)
        return d
    assert all(offer(name, 0.0).taken for name in ("pose", "face", "text"))   # 69 ms admitted
    pose = offer("pose", 1.0)   # past the 24 ms the workers may take in its 32 ms
    assert (pose.taken, pose.reason) == (False, "over_capacity")
    assert offer("text", 1.0).taken   # past its 74 ms too, and its frame is the dearest, but its stream is no hog
    assert offer("face", 1.0).taken   # a fast stream's cheap frame


def test_the_share_of_the_workers_admitted_work_may_fill_is_learned_from_whether_the_frames_taken_end_on_time():
    """At first the work admitted may fill ADMIT_UTIL_MAX of the workers: a pose frame (20 ms) behind two face
    frames (8 ms) passes the 25 ms of a 33 ms span on one worker and is shed. After a run of frames that ended on
    time the share has risen to the workers' whole capacity, and the same frame is taken; a late frame and one
    the policy dropped bring the share down again, and it is shed again."""
    c = StreamController(warmup_ms=0.0)
    for name, ms in (("pose", 20.0), ("face", 4.0)):
        c.add(name, 30.0, "normal")
        _learned(c, name, ms)
    _fed(c)

    def offer(name: str, t: float, busy: float = 0.9) -> S.Decision:
        d = c.offer(name, t, Backlog(t, workers=1, busy_share=busy))
        c.streams[name].in_flight = 0   # (as if it had ended)
        return d

    def crowded(t: float) -> S.Decision:   # pose behind two face frames, the workers 90 % busy
        for s in c.streams.values():   # each took its frames over the last window (none is starved)
            s.takes.extend(t - 1000.0 + k * 1000.0 / s.fps for k in range(int(s.fps)))
        assert offer("face", t).taken and offer("face", t).taken
        return offer("pose", t)
    assert c.admit_util == S.ADMIT_UTIL_MAX
    assert crowded(0.0).reason == "over_capacity"
    t = 2000.0
    for _ in range(200):   # face frames on an idle worker, each ended on time
        d = offer("face", t, busy=0.3)
        c.ended("face", d, FrameEnd(t + 4.0, True, 4.0, 4.0))
        t += 1000.0 / 30.0
    assert c.admit_util == S.ADMIT_UTIL_TOP
    t += 2000.0
    assert crowded(t).taken
    d = offer("pose", t, busy=0.3)   # a pose frame that comes late
    c.ended("pose", d, FrameEnd(d.deadline_ms + 5.0, True, 20.0, 20.0))
    d = offer("pose", t, busy=0.3)   # and one whose request the policy dropped (before its deadline)
    c.ended("pose", d, FrameEnd(t + 5.0, False))
    assert c.admit_util == pytest.approx(S.ADMIT_UTIL_TOP - 2 * S.ADMIT_UTIL_STEP)
    assert crowded(t + 2000.0).reason == "over_capacity"


def test_a_critical_stream_missing_its_frames_is_not_shed_for_capacity_while_the_others_are():
    c = _controller((("hands", "critical"), ("pose", "normal"), ("seg", "low")), chain_ms=20.0)
    c.streams["pose"].work_ms, c.streams["seg"].work_ms = 30.0, 2.0
    _fed(c)

    def offer(name: str, t: float) -> S.Decision:
        d = c.offer(name, t, Backlog(t, workers=2, busy_share=0.95))   # the workers take 50 ms in 33 ms
        c.streams[name].in_flight = 0   # (as if it had ended)
        return d
    assert offer("pose", 0.0).taken and all(offer("seg", 0.0).taken for _ in range(3))   # 36 ms admitted
    assert not c.streams["hands"].guarded(0.0)
    hands = offer("hands", 0.0)   # not missing: the costliest go first, critical or not
    assert (hands.taken, hands.reason) == (False, "over_capacity")
    assert c.streams["hands"].guarded(1.0)   # that was a miss: its level acts now
    assert offer("hands", 1.0).taken
    pose = offer("pose", 2.0)
    assert (pose.taken, pose.reason) == (False, "over_capacity")   # the others give way


def test_a_stream_taking_fewer_frames_than_its_bottom_rung_is_not_shed_for_capacity_while_the_bottoms_fit():
    c = _controller((("pose", "normal"), ("text", "normal")), chain_ms=10.0)
    c.streams["pose"].work_ms, c.streams["text"].work_ms = 5.0, 30.0   # text: the costliest, 10 fps
    c.streams["text"].rates = (10.0, 10.0 / 3.0)
    _fed(c)
    c.streams["text"].takes.clear()   # it has taken nothing lately
    busy = Backlog(0.0, workers=1, busy_share=0.95)
    for _ in range(10):   # 50 ms admitted of the 75 ms the worker may take in text's 100 ms
        assert c.offer("pose", 0.0, busy).taken
        c.streams["pose"].in_flight = 0
    assert c.offer("text", 0.0, busy).taken   # starved: its bottom rung's frames go first
    c.streams["text"].in_flight = 0
    c.streams["text"].takes.extend([-10.0] * 3)   # (now at its bottom rung's rate)
    d = c.offer("text", 1.0, Backlog(1.0, workers=1, busy_share=0.95))
    assert (d.taken, d.reason) == (False, "over_capacity")


def test_beside_a_critical_stream_that_misses_only_the_bottom_rungs_that_fit_their_share_go_first():
    c = _controller((("hands", "critical"), ("pose", "normal"), ("text", "normal")), chain_ms=10.0)
    c.streams["hands"].work_ms = 20.0    # at 30 fps: 600 of the 1,600 ms a second 80 % of two workers give
    c.streams["pose"].work_ms = 100.0    # its bottom rung, 10 fps: 1,000 ms a second, more than its share
    c.streams["text"].work_ms = 30.0     # its bottom rung, 10 fps: 300, within its share
    c.streams["hands"].guard_until_ms = math.inf   # its level acts
    busy = Backlog(0.0, workers=2, busy_share=0.95)
    for _ in range(8):   # 160 ms admitted: past the 150 the workers may take in 100 ms
        assert c.offer("hands", 0.0, busy).taken
        c.streams["hands"].in_flight = 0
    pose, text = c.offer("pose", 0.0, busy), c.offer("text", 0.0, busy)   # neither took a frame lately
    assert (pose.taken, pose.reason) == (False, "over_capacity") and text.taken


def test_a_lower_frame_beside_a_critical_stream_that_misses_is_predicted_on_the_backlog_alone():
    """The critical stream's frames still to come are not spread over the workers ahead of it: a policy that places
    the lower stream on other processors runs it in time, and what does run ahead of it is in the backlog."""
    c = _controller((("hands", "critical"), ("pose", "normal")), chain_ms=20.0)   # hands: 0.6 of a worker
    c.streams["pose"].chains.append(12.0)
    c.streams["pose"].chain_ms = 12.0
    missed = c.offer("hands", 10.0, Backlog(10.0))
    c.ended("hands", missed, FrameEnd(missed.deadline_ms + 1.0, True, 20.0, 20.0))
    c.streams["hands"].takes.extend(10.0 - 1000.0 / 30.0 * k for k in range(1, 30))   # it took its 30 fps
    assert c.streams["hands"].guarded(100.0)   # its level acts
    d = c.offer("pose", 100.0, Backlog(100.0))
    assert d.taken and d.predicted_ms == pytest.approx(100.0 + 12.0)
    running = Backlog(100.0, work=(Work(10.0, 100.0 + 1000.0 / 30.0, "critical", running=True),))
    c.streams["pose"].in_flight = 0
    assert c.offer("pose", 100.0, running).predicted_ms == pytest.approx(100.0 + 10.0 + 12.0)   # what runs, first


def test_a_stream_whose_frames_all_fail_learns_the_work_that_ran_until_one_ends_ok():
    # a pose chain whose second stage the policy drops every time: its first stage's work still ran
    c = StreamController(warmup_ms=0.0)
    c.add("pose", 30.0, "normal")
    s = c.streams["pose"]
    d = c.offer("pose", 0.0, Backlog(0.0))
    c.ended("pose", d, FrameEnd(12.0, False, 10.0, 10.0))
    assert s.chain_ms == 10.0 and s.work_ms == 10.0   # not 0: capacity and the ladder's relief can price it
    d = c.offer("pose", 33.3, Backlog(33.3))
    c.ended("pose", d, FrameEnd(70.0, True, 35.0, 35.0))
    d = c.offer("pose", 66.7, Backlog(66.7))
    c.ended("pose", d, FrameEnd(80.0, False, 2.0, 2.0))   # once a chain is known, a failed frame teaches nothing
    assert list(s.chains) == [10.0, 35.0] and s.chain_ms == 22.5


def test_a_frame_whose_request_the_policy_dropped_does_not_widen_the_margin_a_late_one_does():
    c = _controller((("pose", "normal"),), chain_ms=5.0)
    s = c.streams["pose"]
    before, errors = s.quantile, len(s.errors)
    d = c.offer("pose", 0.0, Backlog(0.0))
    c.ended("pose", d, FrameEnd(d.deadline_ms + 40.0, False, 5.0, 5.0))   # dropped after a wait in a queue
    assert s.quantile == before and len(s.errors) == errors and c.stats("pose")["failed"] == 1
    late = c.offer("pose", 33.3, Backlog(33.3))
    c.ended("pose", late, FrameEnd(late.deadline_ms + 1.0, True, 5.0, 5.0))
    assert s.quantile > before and len(s.errors) == errors + 1 and c.stats("pose")["late"] == 1


def test_after_a_streak_of_skips_one_frame_is_taken_lean():
    c = _controller((("pose", "normal"),), chain_ms=10.0, warmup_ms=1e9)   # (no step of its rate meanwhile)
    reasons = []
    for k in range(S.MAX_SHED_STREAK + 1):   # 64 ms due before it, each of it in time for its own deadline
        ahead = tuple(Work(16.0, k * 33.3 + 32.0, "normal", False) for _ in range(4))
        d = c.offer("pose", k * 33.3, Backlog(k * 33.3, workers=2, work=ahead))
        reasons.append(d.reason)
    assert reasons[:-1] == ["predicted_late"] * S.MAX_SHED_STREAK and d.taken and d.lean


def test_max_in_flight_frames_run_at_once():
    c = _controller((("mic", "normal"),), chain_ms=1.0)
    first = c.offer("mic", 0.0, Backlog(0.0))
    second = c.offer("mic", 33.3, Backlog(33.3))
    assert first.taken and (second.taken, second.reason) == (False, "in_flight")
    c.ended("mic", first, FrameEnd(40.0, True, 1.0, 1.0))
    assert c.offer("mic", 66.7, Backlog(66.7)).taken


def test_every_reason_is_documented():
    c = _controller((("pose", "normal"),))
    c.streams["pose"].rung = 2
    seen = {c.offer("pose", t, Backlog(t)).reason for t in (0.0, 1.0)}
    assert seen <= set(S.REASONS) | {""} and "rate" in seen


def test_the_same_offers_give_the_same_decisions():
    def run() -> list[tuple[bool, str]]:
        rng = random.Random(7)
        c = _controller(chain_ms=8.0)
        out = []
        t = 0.0
        for _ in range(600):
            for name in c.streams:
                work = tuple(Work(rng.uniform(1, 20), t + rng.uniform(0, 60), "normal", rng.random() < 0.3)
                             for _ in range(rng.randrange(6)))
                d = c.offer(name, t, Backlog(t, workers=2, busy_share=rng.random(), work=work))
                out.append((d.taken, d.reason))
                if d.taken:
                    c.ended(name, d, FrameEnd(t + rng.uniform(2, 40), rng.random() < 0.95, 8.0, 8.0, None, 0.5))
            t += 33.3
        return out
    assert run() == run()


# -- the ladder --------------------------------------------------------------------------------------------

def test_the_lowest_priority_steps_down_first_and_critical_last():
    c = _controller()
    _frames(c, 0.0, 20.0, "hands", 0.95)
    steps = _steps(c)
    first = list(dict.fromkeys(s.stream for s in steps))
    assert first == ["segmentation", "pose", "face", "hands"]
    hands = [i for i, s in enumerate(steps) if s.stream == "hands"]
    assert hands and min(hands) >= 3   # only once no lower stream's step would pay
    for i in hands:   # and then no lower stream's next step pays for it
        assert "hands (critical) missed" in steps[i].why
    assert all("hands (critical) missed" in s.why for s in steps)


@pytest.mark.parametrize("levels, first", [
    ((("a", "normal"), ("b", "normal"), ("c", "high")), "a"),   # equals: the costlier per second (equal: by name)
    ((("a", "high"), ("b", "critical"), ("c", "low")), "c"),
    ((("a", "critical"), ("b", "high")), "b"),
])
def test_who_gives_way_first(levels, first):
    c = _controller(levels)
    _frames(c, 0.0, 1.5, levels[0][0], 0.95)
    assert _steps(c) and _steps(c)[0].stream == first


def _learned(c: StreamController, name: str, ms: float) -> None:
    """Stream ``name`` has learned a chain and work of ``ms``."""
    s = c.streams[name]
    s.chains.extend([ms] * S.CHAINS_KEPT)
    s.works.extend([ms] * S.CHAINS_KEPT)
    s.chain_ms = s.work_ms = ms


def test_a_cheaper_lower_stream_does_not_step_down_for_a_costlier_one_unless_that_one_is_critical():
    """Stepping segmentation (10 ms a frame) down for pose (12 ms) would lose more segmentation frames than it
    frees pose frames, though it frees MIN_RELIEF of pose's misses: pose steps itself. For a critical stream
    just as costly, segmentation yields first."""
    for missing, level, first in (("pose", "normal", "pose"), ("hands", "critical", "segmentation")):
        c = _controller(((missing, level), ("segmentation", "low")))
        _learned(c, missing, 12.0)
        _learned(c, "segmentation", 10.0)
        _frames(c, 0.0, 1.5, missing, 0.95)
        assert _steps(c) and _steps(c)[0].stream == first, _steps(c)


def test_a_level_yields_only_while_a_more_important_stream_misses():
    c = _controller()
    _frames(c, 0.0, 10.0, None, IDLE)   # everyone served: declared levels move nothing
    assert _steps(c) == []
    c2 = _controller()
    _frames(c2, 0.0, 10.0, "segmentation", 0.95)   # the least important misses: nobody above it yields
    steps = _steps(c2)                               # until it is at its bottom rung (then see the next test)
    bottom = next(i for i, s in enumerate(steps) if s.to_fps == c2.streams["segmentation"].rates[-1])
    assert {s.stream for s in steps[:bottom + 1]} == {"segmentation"}


def test_a_stream_whose_own_chain_does_not_fit_steps_itself_down():
    c = _controller((("face", "normal"), ("pose", "normal"), ("segmentation", "low")))
    c.streams["pose"].chain_ms = 30.0   # > 0.8 x 33.3 ms: no other stream's rate can help it
    c.streams["pose"].chains.clear()
    c.streams["pose"].chains.append(30.0)
    _frames(c, 0.0, 0.8, "pose", 0.95)
    assert _steps(c)[0].stream == "pose" and "its chain needs 30.0 ms" in _steps(c)[0].why
    assert c.streams["pose"].period_ms == pytest.approx(1000.0 / 20.0)   # its deadline is the new period


def test_a_stepped_down_stream_takes_two_frames_in_three_then_one_in_two_then_one_in_three():
    taken = []
    for rung in (0, 1, 2, 3):
        c = _controller((("pose", "normal"),), chain_ms=1.0, warmup_ms=1e9)   # (it holds its rung)
        c.streams["pose"].rung = rung
        n = 0
        for k in range(30):
            t = k * 1000.0 / 30.0 + (k * 7) % 5   # each frame up to 5 ms late (a thread's wake-up)
            d = c.offer("pose", t, Backlog(t))
            if d.taken:
                n += 1
                c.ended("pose", d, FrameEnd(t + 1.0, True, 1.0, 1.0))
        taken.append(n)
    assert taken == [30, 20, 15, 10]


def test_it_steps_back_up_when_there_is_room_most_important_first():
    c = _controller()
    t = _frames(c, 0.0, 6.0, "hands", 0.95)
    assert c.streams["face"].rung > 0 and c.streams["segmentation"].rung > 0
    t = _frames(c, t, 3.0, None, 0.95)   # no misses but no room: none steps up
    down = [n for n, s in c.streams.items() if s.rung]
    n = len(_steps(c))
    _frames(c, t, 40.0, None, IDLE)
    ups = _steps(c)[n:]
    assert ups and all(s.to_fps > s.from_fps for s in ups)
    assert ups[0].stream == min(down, key=lambda n: S.RANK[c.streams[n].priority])   # the most important first
    assert all(s.rung == 0 for s in c.streams.values())


def test_hysteresis_a_rate_that_does_not_hold_is_retried_later_each_time():
    c = _controller((("pose", "normal"),))
    t = 0.0
    while t < 120_000.0:
        d = c.offer("pose", t, Backlog(t, busy_share=IDLE))
        if d.taken:
            s = c.streams["pose"]
            end = d.deadline_ms + 1.0 if s.rung == 0 else t + 5.0
            c.ended("pose", d, FrameEnd(end, True, 5.0, 5.0, None, IDLE))
        t += 1000.0 / 30.0
    ups = [s.at_ms for s in c.streams["pose"].steps if s.to_fps > s.from_fps]
    gaps = [b - a for a, b in zip(ups, ups[1:])]
    assert len(ups) >= 3 and gaps[-1] >= S.MAX_HOLD_MS and gaps[-1] > 1.5 * gaps[0]
    assert all(b >= a - 100.0 for a, b in zip(gaps, gaps[1:]))   # less and less often, up to the longest hold


def test_the_cloud_is_the_last_rung_and_the_first_to_come_back():
    c = _controller((("hands", "critical"), ("pose", "low")))
    for s in c.streams.values():
        s.rung = len(s.rates) - 1
    t = 0.0
    while t < 3000.0:
        for name in c.streams:
            d = c.offer(name, t, Backlog(t, workers=2, busy_share=0.95, cloud=True))
            if d.taken:
                end = d.deadline_ms + 1.0 if name == "hands" and not d.cloud else t + 5.0
                c.ended(name, d, FrameEnd(end, True, 5.0, 5.0, 40.0, 0.95))
        t += 1000.0 / 30.0
    moves = [s for s in _steps(c) if s.why.startswith("to the cloud")]
    assert moves and moves[0].stream == "pose" and c.streams["pose"].offloaded
    assert "its chain takes 40.0 ms there, within its 100.0 ms period" in moves[0].why
    d = c.offer("pose", t + 100.0, Backlog(t + 100.0, cloud=True))
    assert d.cloud or d.reason == "rate"


def test_no_cloud_rung_for_a_stream_that_declines_it():
    c = StreamController(warmup_ms=0.0)
    s = c.add("pose", 30.0, "low", offload=False)
    s.rung = len(s.rates) - 1
    s.chains.append(5.0)
    s.chain_ms = 5.0
    _frames(c, 0.0, 2.0, "pose", 0.95)
    assert not c.streams["pose"].offloaded


def test_misses_while_warming_up_do_not_count():
    c = _controller((("pose", "normal"),), warmup_ms=S.WARMUP_MS)
    _frames(c, 0.0, S.WARMUP_MS / 1000.0 - 0.05, "pose", 0.95)
    assert _steps(c) == []
    _frames(c, S.WARMUP_MS, 1.5, "pose", 0.95)
    assert _steps(c) and _steps(c)[0].at_ms >= S.WARMUP_MS


def test_optional_work_waits_while_the_streams_are_strained():
    c = _controller()
    d = c.offer("hands", 0.0, Backlog(0.0))
    assert c.spare("hands", d, 5.0, Backlog(0.0)) == ""
    c.streams["pose"].rung = 1
    assert c.spare("hands", d, 5.0, Backlog(0.0)) == "no spare capacity: pose runs at 20 of its 30 fps"
    c.streams["pose"].rung = 0
    assert c.spare("hands", d, 5.0, Backlog(0.0, busy_share=0.9)).startswith("no spare capacity: workers 90%")
    assert c.spare("hands", d, 40.0, Backlog(0.0)).startswith("no time")


def test_the_margin_quantile_settles_where_the_late_target_of_frames_come_late():
    c = _controller((("pose", "normal"),), chain_ms=1.0)
    s = c.streams["pose"]
    rng = random.Random(0)
    late = []
    t = 0.0
    for _ in range(20000):
        d = c.offer("pose", t, Backlog(t))
        if d.taken:   # late when a uniform draw is above its margin's quantile: P(late) = 1 - q
            late.append(rng.random() > s.quantile)
            end = d.deadline_ms + 1.0 if late[-1] else t + 1.0
            c.ended("pose", d, FrameEnd(end, True, 1.0, 1.0))
        s.rung = 0
        t += 1000.0 / 30.0
    assert abs(sum(late[-10000:]) / 10000 - S.LATE_TARGET) < 0.01


def test_a_prediction_that_ran_pessimistic_is_corrected_and_a_frame_it_called_late_is_taken():
    c = _controller((("pose", "normal"),), chain_ms=10.0)
    s = c.streams["pose"]
    s.errors.extend((0.0, e) for e in (-12.0, -10.0, -9.0, -8.0))   # its frames ended 8-12 ms before their prediction
    assert s.margin_ms(0.0) == pytest.approx(-8.3)   # the 0.9 quantile: still early
    ahead = tuple(Work(15.0, 30.0, "normal", False) for _ in range(4))   # 60 ms on 2 workers: 30 + 10 ms > 33.3
    d = c.offer("pose", 0.0, Backlog(0.0, workers=2, work=ahead))
    assert d.taken and d.predicted_ms == pytest.approx(40.0)


def test_past_the_largest_error_the_margin_grows_beyond_it():
    s = _controller((("pose", "normal"),)).streams["pose"]
    s.errors.extend((0.0, e) for e in (2.0, 4.0, 6.0, 10.0))
    s.quantile = 1.0
    assert s.margin_ms(0.0) == pytest.approx(10.0)
    s.quantile = 1.5   # frames kept coming late with the largest error as the margin
    assert s.margin_ms(0.0) == pytest.approx(15.0)


def test_a_stream_learns_its_chain_from_its_frames():
    c = StreamController()
    c.add("kws", 10.0, "normal")
    for k in range(MIN_CHAINS):   # too little learned: taken whatever the work ahead, and learned from
        d = c.offer("kws", 100.0 * k, Backlog(100.0 * k))
        assert d.taken and math.isnan(d.predicted_ms)
        c.ended("kws", d, FrameEnd(100.0 * k + 30.0, True, work_ms=12.0, path_ms=9.0))
    assert c.streams["kws"].chain_ms == 9.0 and c.streams["kws"].work_ms == 12.0
    t = 100.0 * MIN_CHAINS
    d2 = c.offer("kws", t, Backlog(t))
    assert d2.predicted_ms == pytest.approx(t + 9.0)
    c.ended("kws", d2, FrameEnd(t + 40.0, False, 1.0, 1.0))   # a frame with a request dropped teaches nothing
    assert c.streams["kws"].chain_ms == 9.0 and c.stats("kws")["failed"] == 1


def test_a_cold_first_frame_does_not_skip_the_frames_after_it():
    """The first frame's chain (a cold first run, every stream starting at once) is longer than the period; the
    next frames are still taken until MIN_CHAINS are learned, and the median then is the warm chain."""
    c = StreamController(warmup_ms=0.0)
    c.add("hands", 30.0, "critical")
    chains = [48.0] + [5.0] * MIN_CHAINS
    for k, path in enumerate(chains):
        t = 1000.0 / 30.0 * k
        d = c.offer("hands", t, Backlog(t, workers=2))
        assert d.taken, d.detail
        c.ended("hands", d, FrameEnd(t + path, True, path, path))
    assert c.streams["hands"].chain_ms == 5.0


def test_a_critical_stream_takes_its_frames_during_the_warm_up():
    """Its first frames set up what its later frames build on (a tracker's first detection), so a critical
    stream's frames are taken during the warm-up whatever their chain; a normal stream's are not, and after the
    warm-up neither is."""
    c = _controller((("hands", "critical"), ("pose", "normal")), chain_ms=200.0, warmup_ms=1000.0)
    first = c.offer("hands", 0.0, Backlog(0.0, workers=2))
    assert first.taken and c.warming(500.0)
    c.ended("hands", first, FrameEnd(200.0, True, 200.0, 200.0))
    assert c.offer("hands", 500.0, Backlog(500.0, workers=2)).taken
    assert c.offer("pose", 500.0, Backlog(500.0, workers=2)).reason == "chain_too_long"
    c.ended("hands", first, FrameEnd(700.0, True, 200.0, 200.0))
    assert c.offer("hands", 1500.0, Backlog(1500.0, workers=2)).reason == "chain_too_long"


def test_a_probe_on_time_resets_the_margin_a_stall_widened():
    """A stall made a few frames come 30 ms late, which moves the margin's quantile past 1: the margin is then the
    largest error and skips every frame (skipped frames teach it nothing). The probe after MAX_SHED_STREAK skips
    ends on time, so the errors behind the margin go and the next frame is taken."""
    c = StreamController(warmup_ms=0.0)
    c.add("face", 30.0, "high", rates=(30.0,))   # (one rung: the ladder cannot lengthen its period)
    period = 1000.0 / 30.0
    face = c.streams["face"]
    face.chains.extend([5.0] * MIN_CHAINS)
    face.works.extend([5.0] * MIN_CHAINS)
    face.chain_ms = face.work_ms = 5.0
    face.errors.extend([(0.0, 0.0)] * 10 + [(0.0, 30.0)] * 3)   # the last three frames came 30 ms late
    face.quantile = 1.05
    t = period
    assert face.margin_ms(t) > period - 5.0
    probe = None
    for _ in range(S.MAX_SHED_STREAK + 1):
        d = c.offer("face", t, Backlog(t, workers=2))
        if d.taken:
            probe = d
            break
        assert d.reason == "predicted_late"
        t += period
    assert probe is not None and probe.lean and probe.predicted_ms <= probe.deadline_ms
    c.ended("face", probe, FrameEnd(t + 5.0, True, 5.0, 5.0))
    assert c.streams["face"].margin_ms(t) == 0.0 and c.streams["face"].chain_ms == 5.0
    t += period
    assert c.offer("face", t, Backlog(t, workers=2)).taken


def test_a_stream_whose_chain_does_not_fit_steps_down_during_the_warm_up():
    """Misses do not count during the warm-up, but a normal stream whose chain as learned (45 ms) is longer than its
    30 fps period steps down, once per frame it learns from, to a rung whose period it fits (20 fps), rather than
    take its first frames late; a critical stream with the same chain keeps its rate (it steps by its misses only)."""
    c = StreamController(warmup_ms=1000.0)
    c.add("pose", 30.0, "normal")
    c.add("hands", 30.0, "critical")
    t = 0.0
    for _ in range(MIN_CHAINS):
        for name in ("pose", "hands"):
            d = c.offer(name, t, Backlog(t, workers=2))
            if d.taken:
                c.ended(name, d, FrameEnd(t + 45.0, True, 45.0, 45.0))
        t += 100.0
    assert c.warming(t)
    assert c.stats("pose")["rung_fps"] == 20.0 and c.stats("hands")["rung_fps"] == 30.0
    assert [st["why"].endswith("(warm-up)") for st in c.stats("pose")["steps"]] == [True]


def test_a_probe_that_beats_its_predicted_miss_replaces_the_stale_chain():
    """A stream whose learned chain (200 ms) cannot fit even its bottom rung's period skips its frames, probes after
    MAX_SHED_STREAK skips, and when the probe ends on time in 5 ms the stale samples go: the next frame is taken."""
    c = _controller((("pose", "normal"),), chain_ms=200.0)
    t, probe = 0.0, None
    for _ in range(50 * S.MAX_SHED_STREAK):
        d = c.offer("pose", t, Backlog(t, workers=2))
        if d.taken:
            probe = d
            break
        t += 1000.0 / 30.0
    assert probe is not None and probe.lean and probe.predicted_ms > probe.deadline_ms
    assert c.stats("pose")["frames_shed_by"]["chain_too_long"] == S.MAX_SHED_STREAK
    c.ended("pose", probe, FrameEnd(t + 5.0, True, 5.0, 5.0))
    assert c.streams["pose"].chain_ms == 5.0
    while not c.offer("pose", t, Backlog(t, workers=2)).taken:   # (frames not its turn at its rung are skipped)
        assert c.stats("pose")["frames_shed_by"]["chain_too_long"] == S.MAX_SHED_STREAK
        t += 1000.0 / 30.0


def test_the_controller_keeps_only_its_window_however_many_frames_ran():
    """Frames priced and taken longer than WINDOW_MS ago are forgotten as new ones come, even when nothing reads
    them: N then 10 x N frames, the same memory; and a stream's steps are bounded."""
    c = _controller((("pose", "normal"),), chain_ms=1.0)

    def frames(n: int, t0: float) -> tuple[int, int]:
        t = t0
        for _ in range(n):
            d = c.offer("pose", t, Backlog(t))
            c.ended("pose", d, FrameEnd(t + 1.0, True, 1.0, 1.0))
            t += 1.0
        return len(c._admitted), len(c._offered)

    n = int(2 * S.WINDOW_MS)
    after_n = frames(n, 0.0)
    assert frames(10 * n, float(n)) == after_n and max(after_n) <= S.WINDOW_MS + 1
    assert len(c.streams["pose"].outcomes) <= S.WINDOW_MS + 1 and len(c.streams["pose"].steps) <= S.STEPS_KEPT


def test_a_declared_level_acts_only_while_its_stream_misses():
    """Every stream served: every frame runs as normal (levels cost nothing). The critical stream misses: its
    frames run critical for GUARD_MS after its latest miss, and the low stream's run low meanwhile."""
    c = _controller()
    t = _frames(c, 0.0, 2.0, None, IDLE)
    assert {c.offer(n, t, Backlog(t)).priority for n in ("hands", "face", "segmentation")} == {"normal"}
    for n in c.streams:
        c.streams[n].in_flight = 0
    t = _frames(c, t + 40.0, 0.5, "hands", 0.95)
    levels = {n: c.level(n, t) for n in c.streams}
    assert levels == {"hands": "critical", "face": "normal", "pose": "normal", "segmentation": "low"}
    t = _frames(c, t, (S.GUARD_MS + S.ERROR_TTL_MS) / 1000.0 + 1.0, None, IDLE)   # (its error margin ages out)
    assert {c.level(n, t) for n in c.streams} == {"normal"}


def test_a_critical_stream_acts_during_the_warm_up():
    """Every stream starts at once, cold, and misses do not count yet: a critical stream's requests run critical
    from its first frame until the warm-up ends (its first frames were late behind the others' first runs);
    the other levels act only once a stream misses. After the warm-up, with no miss, all run normal."""
    c = _controller(warmup_ms=1000.0)
    c.offer("hands", 0.0, Backlog(0.0))
    assert {n: c.level(n, 500.0) for n in c.streams} == {"hands": "critical", "face": "normal", "pose": "normal",
                                                         "segmentation": "normal"}
    assert {c.level(n, 1500.0) for n in c.streams} == {"normal"}


def test_a_stream_at_its_bottom_rung_keeps_it_while_every_bottom_rung_fits():
    """The low stream is at its bottom rung and still misses; every stream's bottom fits two workers: a more
    important stream above its own bottom rung yields (its rate above the bottom is the optional work)."""
    c = _controller((("text", "low"), ("pose", "normal")), chain_ms=10.0)
    c.streams["text"].rung = len(c.streams["text"].rates) - 1
    _frames(c, 0.0, 2.0, "text", 0.95)
    steps = _steps(c)
    assert steps and steps[0].stream == "pose" and "at its bottom rung" in steps[0].why
