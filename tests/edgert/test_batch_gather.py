"""The gather rule (edgert/_core/_batch.py, issue 30): which waiting requests join the one a worker starts,
table-driven over hand-built requests (a test double with only a deadline) and batch costs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from edgert._core._batch import Gathered, feed_key, gather


@dataclass(frozen=True)
class Req:
    """A test double for a waiting request: a name and an absolute deadline (ms)."""

    name: str
    deadline_ms: float


def table(*ms: float):
    """batch_ms from a table: ms[k-1] for a batch of k (inf beyond it)."""
    return lambda k: ms[k - 1] if k <= len(ms) else math.inf


CHEAP = table(10, 12, 14, 16)          # a batch grows by 2 ms a request: pays
NO_GAIN = table(10, 20, 30)            # a batch of k costs k singles: pays nothing


def names(g: Gathered) -> list[str]:
    return [r.name for r in g.members]


@pytest.mark.parametrize(("head", "cands", "max_batch", "cost", "want", "note"), [
    # now 100; CHEAP ends a batch of 1..4 at 110, 112, 114, 116
    # everyone fits: all taken, earliest deadline first
    (1e3, [Req("b", 150), Req("a", 140)], 4, CHEAP, ["a", "b"], ""),
    # the model does not batch / batching pays nothing
    (1e3, [Req("a", 140)], 1, CHEAP, [], "does not batch"),
    (1e3, [Req("a", 140), Req("b", 140)], 4, NO_GAIN, [], "no batch saves more than 0% of its single runs"),
    # not greedy: a batch of 2 costs more than two runs, one of 3 less than three
    (1e3, [Req("a", 140), Req("b", 140)], 4, table(10, 21, 27), ["a", "b"], ""),
    # the batch that saves the most: 3 (saves 3 ms), not 4 (costs 10 more than four runs)
    (1e3, [Req("a", 500), Req("b", 500), Req("c", 500)], 4, table(10, 21, 27, 50), ["a", "b"],
     "a batch of 3 saves the most (3.000 ms)"),
    # the batch is full
    (1e3, [Req("a", 140), Req("b", 140), Req("c", 140), Req("d", 140)], 3, CHEAP, ["a", "b"], "batch is full (3)"),
    # a candidate whose deadline a batch of 2 misses (ends at 112) is passed over; a later one fits
    (1e3, [Req("tight", 111), Req("loose", 200)], 4, CHEAP, ["loose"], "passed over"),
    # the head's deadline (115) allows a batch of 3 (114), not of 4 (116)
    (115, [Req("a", 300), Req("b", 300), Req("c", 300)], 4, CHEAP, ["a", "b"], "deadline (115.000 ms)"),
    # a member's deadline bounds later members: a's 113 allows 2 (112), not 3 (114)
    (1e3, [Req("a", 113), Req("b", 300)], 4, CHEAP, ["a"], "after a member's deadline (113.000 ms)"),
    # equal deadlines keep the caller's order
    (1e3, [Req("x", 160), Req("y", 160), Req("z", 160)], 3, CHEAP, ["x", "y"], "batch is full"),
])
def test_the_rule(head, cands, max_batch, cost, want, note) -> None:
    g = gather(Req("head", head), cands, max_batch, cost, now_ms=100.0)
    assert names(g) == want
    assert note in g.note
    assert g.size == 1 + len(want)
    assert g.finish_ms == 100.0 + cost(g.size)


def test_every_member_and_the_head_finish_by_their_deadlines_and_the_batch_pays() -> None:
    rng = np.random.default_rng(0)
    for _ in range(500):
        single = float(rng.uniform(1, 20))
        growth = float(rng.uniform(0, 1.5)) * single
        cost = lambda k, s=single, g=growth: s + (k - 1) * g   # noqa: E731
        now = float(rng.uniform(0, 100))
        head = Req("head", now + float(rng.uniform(0, 5)) * single)
        cands = [Req(f"c{i}", now + float(rng.uniform(0, 5)) * single) for i in range(int(rng.integers(0, 6)))]
        mb = int(rng.integers(1, 6))
        g = gather(head, cands, mb, cost, now)
        assert g.size <= max(mb, 1)
        if g.members:
            assert g.finish_ms == now + cost(g.size)
            assert all(g.finish_ms <= r.deadline_ms for r in (head, *g.members))
            assert cost(g.size) < g.size * single          # it pays
            assert len(set(map(id, g.members))) == len(g.members) and all(m in cands for m in g.members)


def test_a_saving_must_clear_the_margin() -> None:
    cands = [Req("a", 1e3), Req("b", 1e3)]
    # CHEAP saves 8 of 20 ms at 2 (40 %), 16 of 30 at 3 (53 %)
    assert names(gather(Req("head", 1e3), cands, 4, CHEAP, 0.0, min_saving=0.5)) == ["a", "b"]
    g = gather(Req("head", 1e3), cands[:1], 4, CHEAP, 0.0, min_saving=0.4)        # 40 %, not more
    assert g.members == () and g.note == "no batch saves more than 40% of its single runs (10.000 ms each; tried up to 2)"
    assert g.finish_ms == 10.0
    with pytest.raises(ValueError, match=r"min_saving is a share .* in \[0, 1\); got 1.0"):
        gather(Req("head", 1e3), cands, 4, CHEAP, 0.0, min_saving=1.0)


def test_a_head_late_alone_gathers_nothing() -> None:
    g = gather(Req("head", 105), [Req("a", 500)], 4, CHEAP, now_ms=100.0)
    assert g.members == () and "misses its deadline alone (110.000 > 105.000 ms)" in g.note
    assert g.finish_ms == 110.0


def test_no_candidates_is_a_single_run_without_a_note() -> None:
    assert gather(Req("head", 1e9), [], 4, CHEAP, 0.0) == Gathered((), 10.0, "")


def test_no_deadline_is_unbounded() -> None:
    g = gather(Req("head", math.inf), [Req("a", math.inf), Req("b", math.inf)], 8, CHEAP, 0.0)
    assert names(g) == ["a", "b"] and g.note == ""


@pytest.mark.parametrize(("mb", "cost", "match"), [
    (0, CHEAP, "max_batch must be >= 1"),
    (4, lambda k: math.nan, r"batch_ms\(1\) gave nan"),
    (4, lambda k: 10.0 if k == 1 else -1.0, r"batch_ms\(2\) gave -1.0"),
])
def test_bad_arguments_are_named(mb, cost, match) -> None:
    with pytest.raises(ValueError, match=match):
        gather(Req("head", 1e9), [Req("a", 1e9)], mb, cost, 0.0)


def test_feed_key_groups_by_shape_and_dtype() -> None:
    a = [np.zeros((1, 4), np.float32)]
    assert feed_key(a) == feed_key([np.ones((1, 4), np.float32)])
    assert feed_key(a) != feed_key([np.zeros((2, 4), np.float32)])
    assert feed_key(a) != feed_key([np.zeros((1, 4), np.float64)])
