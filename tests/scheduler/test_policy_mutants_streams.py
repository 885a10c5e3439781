"""Stream rates for the overload plan (scheduler/policies/_streams.py) and the simplex's input checks
(scheduler/policies/_lp.py), on arrivals and matrices small enough to work out by hand.

A stream's rate is ``(arrivals - 1) / (last - first)`` over its arrivals of the last 1000 ms (at least two),
at most its arrivals so far over its budget (no extrapolation from a burst); a stream with one arrival stops
after 1000 ms, one with more after ``timeout`` mean gaps. The helper's budget is 10 ms, which no rate here
exceeds, so the bound only cuts in the tests that say so.
"""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.policies._lp import LPError, minimize
from scheduler.policies._streams import Streams
from tests.scheduler.policy_snapshots import req


def _streams(arrivals: dict[str, list[float]], model: str = "m", timeout: float = 3.0,
             downstream: float = 0.0) -> Streams:
    s = Streams(keep=32, timeout=timeout, rel=0.05)
    i = 0
    for stream, times in arrivals.items():
        for t in times:
            s.see(req(i, model, deadline=t + 10.0, arrival=t, stream=stream, downstream=downstream))
            i += 1
    return s


@pytest.mark.parametrize(("times", "rate"), [
    ([0.0, 10.0, 20.0, 30.0, 35.0, 40.0], 5 / 40),    # all within 1000 ms: every arrival counts
    ([0.0, 1500.0], 1 / 1500),                        # two arrivals are kept however far apart
    ([0.0, 600.0, 1100.0], 1 / 500),                  # the first is more than 1000 ms before the last
    ([0.0, 400.0, 1000.0], 2 / 1000),                 # exactly 1000 ms: kept
    ([0.0, 10.0, 10.0], 1 / 10),                      # a repeated arrival time adds nothing
], ids=["all", "two-far", "span", "span-edge", "repeat"])
def test_rate_over_the_latest_arrivals(times: list[float], rate: float) -> None:
    rates, _ = _streams({"a": times}).rates(times[-1])
    assert rates == {"m": pytest.approx(rate)}


def test_streams_of_one_model_are_told_apart_by_their_key() -> None:
    rates, _ = _streams({"a": [0.0, 10.0, 20.0], "b": [0.0, 10.0, 20.0]}).rates(20.0)
    assert rates == {"m": pytest.approx(0.2)}


def test_a_stream_named_by_its_model_alone() -> None:
    s = Streams(keep=32, timeout=3.0, rel=0.05)
    for k in range(3):
        s.see(req(k, "m", deadline=10.0 * k + 10.0, arrival=10.0 * k, stream=""))
    assert s.rates(20.0)[0] == {"m": pytest.approx(0.1)}


def test_any_downstream_time_marks_a_head() -> None:
    assert _streams({"a": [0.0, 10.0]}, downstream=0.5).rates(10.0)[1] == {"m": True}
    assert _streams({"a": [0.0, 10.0]}).rates(10.0)[1] == {"m": False}


def test_a_new_fast_stream_is_due_at_once() -> None:
    s = _streams({"a": [0.0, 1.0]})   # 1 request per ms: a new rate, whatever the reference
    assert s.due(1.0)


def test_two_arrivals_stop_after_timeout_gaps() -> None:
    s = _streams({"a": [0.0, 10.0]})
    assert s.rates(10.0)[0] == {"m": pytest.approx(0.1)}
    assert not s.due(40.0)                 # 10 + 3 x 10: not silent for longer yet
    assert s.rates(40.0)[0] == {"m": pytest.approx(0.1)}
    assert s.due(40.5)
    assert s.rates(40.5) == ({}, {})


def test_a_lone_arrival_stops_after_a_second() -> None:
    s = _streams({"a": [0.0]})
    assert s.rates(0.0) == ({}, {})
    assert not s.due(999.0) and s.due(1000.5)


def test_a_stopped_or_lone_stream_does_not_hide_the_others() -> None:
    s = _streams({"a": [0.0, 10.0], "b": [100.0], "c": [100.0, 110.0, 120.0]})
    assert s.rates(120.0)[0] == {"m": pytest.approx(0.1)}   # a stopped at 40; b has one arrival


# -- the simplex's input checks --

def test_minimize_rejects_mismatched_shapes_one_at_a_time() -> None:
    a, b, c = np.eye(2), np.ones(2), np.zeros(2)
    with pytest.raises(ValueError, match=r"^shapes do not match: c \(3,\), a \(2, 2\), b \(2,\), basis of 2$"):
        minimize(np.zeros(3), a, b, [0, 1])
    with pytest.raises(ValueError, match=r"^shapes do not match: c \(2,\), a \(2, 2\), b \(3,\), basis of 2$"):
        minimize(c, a, np.ones(3), [0, 1])
    with pytest.raises(ValueError, match=r"^shapes do not match: c \(2,\), a \(2, 2\), b \(2,\), basis of 1$"):
        minimize(c, a, b, [0])


def test_minimize_messages() -> None:
    a = np.array([[1.0, -1.0, 1.0]])
    with pytest.raises(ValueError, match=r"^b must be >= 0 \(the starting basis must be feasible\)$"):
        minimize(np.zeros(3), a, np.array([-1.0]), [2])
    with pytest.raises(ValueError, match="^the basis columns of a must form the identity matrix$"):
        minimize(np.zeros(3), a, np.array([1.0]), [1])
    with pytest.raises(LPError, match="^the linear program is unbounded$"):
        minimize(np.array([0.0, -1.0, 0.0]), a, np.array([1.0]), [2])


def test_minimize_gives_up_after_max_iter_pivots() -> None:
    # max 3x + 2y s.t. x + y <= 4, x + 3y <= 6, x <= 3: two pivots to the optimum, a third look to know it
    a = np.array([[1.0, 1, 1, 0, 0], [1, 3, 0, 1, 0], [1, 0, 0, 0, 1]])
    c, b = np.array([-3.0, -2, 0, 0, 0]), np.array([4.0, 6, 3])
    with pytest.raises(LPError, match="^no optimum after 2 pivots$"):
        minimize(c, a, b, [2, 3, 4], max_iter=2)
    assert minimize(c, a, b, [2, 3, 4], max_iter=3)[:2] == pytest.approx([3.0, 1.0])
