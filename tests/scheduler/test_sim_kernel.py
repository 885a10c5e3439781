"""The event kernel: order by (time, priority, FIFO), clock, errors."""

from __future__ import annotations

import math

import pytest

from scheduler.sim.kernel import PRIO_ARRIVAL, PRIO_DECIDE, PRIO_FINISH, EventLoop


def test_orders_by_time_then_priority_then_fifo():
    loop = EventLoop()
    seen: list[tuple[float, str]] = []

    def rec(tag: str) -> None:
        seen.append((loop.now_ms, tag))

    loop.schedule(2.0, PRIO_ARRIVAL, rec, "arrive@2 first")
    loop.schedule(1.0, PRIO_DECIDE, rec, "decide@1")
    loop.schedule(2.0, PRIO_FINISH, rec, "finish@2")
    loop.schedule(1.0, PRIO_ARRIVAL, rec, "arrive@1")
    loop.schedule(2.0, PRIO_ARRIVAL, rec, "arrive@2 second")
    loop.run()
    assert seen == [(1.0, "arrive@1"), (1.0, "decide@1"), (2.0, "finish@2"),
                    (2.0, "arrive@2 first"), (2.0, "arrive@2 second")]
    assert loop.now_ms == 2.0 and loop.events_run == 5


def test_handlers_schedule_more_events_at_the_same_instant():
    loop = EventLoop()
    seen: list[str] = []

    def first(_):
        seen.append("first")
        loop.schedule(loop.now_ms, PRIO_DECIDE, lambda _: seen.append("decide"))
        loop.schedule(loop.now_ms, PRIO_FINISH, lambda _: seen.append("finish-now"))

    loop.schedule(5.0, PRIO_ARRIVAL, first)
    loop.schedule(5.0, PRIO_ARRIVAL, lambda _: seen.append("second arrival"))
    loop.run()
    # a finish scheduled at now jumps ahead of the queued arrival; the decision runs last
    assert seen == ["first", "finish-now", "second arrival", "decide"]


def test_cannot_schedule_in_the_past_or_at_infinity():
    loop = EventLoop(start_ms=10.0)
    with pytest.raises(ValueError, match="clock is at 10.0 ms"):
        loop.schedule(9.0, PRIO_ARRIVAL, print)
    with pytest.raises(ValueError):
        loop.schedule(math.inf, PRIO_ARRIVAL, print)


def test_run_until_stops_before_later_events_and_resumes():
    loop = EventLoop()
    seen: list[float] = []
    for t in (1.0, 2.0, 3.0):
        loop.schedule(t, PRIO_ARRIVAL, seen.append, t)
    loop.run(until_ms=2.0)
    assert seen == [1.0, 2.0] and loop.peek_ms() == 3.0
    loop.run()
    assert seen == [1.0, 2.0, 3.0] and loop.peek_ms() == math.inf


def test_handler_error_propagates_with_the_event_time():
    loop = EventLoop()

    def boom(_):
        raise RuntimeError("policy bug")

    loop.schedule(7.5, PRIO_ARRIVAL, boom)
    with pytest.raises(RuntimeError, match="policy bug") as info:
        loop.run()
    assert any("t = 7.500 ms" in n for n in info.value.__notes__)


def test_on_tick_is_called_every_n_events():
    loop = EventLoop()
    ticks: list[float] = []
    for i in range(10):
        loop.schedule(float(i), PRIO_ARRIVAL, lambda _: None)
    loop.run(on_tick=ticks.append, tick_every=4)
    assert ticks == [3.0, 7.0]
