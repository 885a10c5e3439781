"""The driver's fast snapshot builders make exactly the objects the NamedTuple constructors make."""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest

from scheduler.sim._views import (
    processor_view,
    request_view,
    scheduler_view,
    tuple_builder,
)
from scheduler.types import ProcessorView, RequestView, SchedulerView


def test_request_view_equals_the_constructor_and_stays_frozen():
    fast = request_view(3, "hand", 1.5, 23.7, "hand#b1", 7, 2.25, None, "normal")
    slow = RequestView(3, "hand", 1.5, 23.7, "hand#b1", 7, 2.25, None)
    assert type(fast) is RequestView and fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    with pytest.raises(AttributeError):
        fast.id = 4   # type: ignore[misc]


def test_processor_and_scheduler_views_equal_the_constructors():
    pv = processor_view("cloud", "cloud", 0.0, 12.5, 2, True, 4, 1)
    assert pv == ProcessorView("cloud", "cloud", 0.0, 12.5, 2, True, 4, 1)
    assert pv.ready_at_ms(3.0) == 15.5 and not pv.is_idle(3.0)
    rv = request_view(0, "m", 0.0, math.inf, "m", -1, 0.0, None, "normal")
    sv = scheduler_view((rv,), (pv,), None)
    assert sv == SchedulerView((rv,), (pv,), None)


def test_every_field_is_set_so_a_new_field_cannot_be_missed():
    # if scheduler/types.py grows a field, the builders take one more argument; an old call fails loudly
    for cls, build in ((RequestView, request_view), (ProcessorView, processor_view),
                       (SchedulerView, scheduler_view)):
        n = len(cls._fields)
        assert build.__code__.co_argcount == n


def test_refuses_what_is_not_a_named_tuple():
    class Plain:
        x: int

    with pytest.raises(TypeError, match="not a NamedTuple"):
        tuple_builder(Plain)
    with pytest.raises(TypeError, match="not a NamedTuple"):
        tuple_builder(tuple)

    class Point(NamedTuple):
        x: int
        y: int = 0

    assert tuple_builder(Point)(1, 2) == Point(1, 2) and type(tuple_builder(Point)(1, 2)) is Point
