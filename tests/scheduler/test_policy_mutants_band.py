"""Band's baseline policies (shortest_expected_latency, heterogeneous_earliest_finish_time,
least_slack_time_first) on hand-built snapshots: ties between jobs, repeated jobs of one model, yielding to a
busy processor, drops, the window, and the waiting time a decision adds.

Band's ``shortest`` sends a tie between processors to the later one in view order; each case below says
which processor that is.
"""

from __future__ import annotations

import pytest

from scheduler.policies.heterogeneous_earliest_finish_time import (
    HeterogeneousEarliestFinishTimePolicy,
)
from scheduler.policies.least_slack_time_first import LeastSlackTimeFirstPolicy
from scheduler.policies.shortest_expected_latency import ShortestExpectedLatencyPolicy
from tests.scheduler.policy_snapshots import plan, proc, req, view

CG = [proc("cpu"), proc("gpu")]
SAME = {"a": {"cpu": 1.0, "gpu": 1.0}, "b": {"cpu": 5.0, "gpu": 5.0}}


SORTING = [ShortestExpectedLatencyPolicy, HeterogeneousEarliestFinishTimePolicy]


@pytest.mark.parametrize("policy", SORTING, ids=["SEL", "HEFT"])
def test_equal_jobs_go_in_arrival_order(policy: type) -> None:
    snap = view([req(0, "a", deadline=100.0), req(1, "c", deadline=100.0)], [proc("cpu")],
                {"a": {"cpu": 5.0}, "c": {"cpu": 5.0}})
    assert plan(policy().decide(snap, 0.0)) == [(0, "cpu")]


@pytest.mark.parametrize("policy", SORTING, ids=["SEL", "HEFT"])
def test_a_repeated_model_does_not_hide_a_larger_job(policy: type) -> None:
    # b (5 ms) is the largest: it goes first (to the gpu, the later of two equal processors), then a to the cpu
    snap = view([req(0, "a", deadline=100.0), req(1, "a", deadline=100.0), req(2, "b", deadline=100.0)], CG, SAME)
    assert plan(policy().decide(snap, 0.0)) == [(2, "gpu"), (0, "cpu")]


def test_heft_a_job_yielding_to_its_busy_processor_lets_the_next_one_go() -> None:
    # b runs only on the gpu (busy until 100): it yields, and a takes the idle cpu
    snap = view([req(0, "b", deadline=500.0), req(1, "a", deadline=500.0)],
                [proc("cpu"), proc("gpu", busy_until=100.0)], {"a": {"cpu": 1.0}, "b": {"gpu": 1.0}})
    assert plan(HeterogeneousEarliestFinishTimePolicy().decide(snap, 0.0)) == [(1, "cpu")]


def test_heft_a_drop_past_the_deadline_does_not_end_the_decision() -> None:
    snap = view([req(0, "b", deadline=5.0), req(1, "a", deadline=100.0)], CG, SAME)
    assert plan(HeterogeneousEarliestFinishTimePolicy().decide(snap, 10.0)) == [(0, None), (1, "gpu")]


def test_lst_looks_at_the_window_only() -> None:
    snap = view([req(0, "a", deadline=100.0), req(1, "b", deadline=100.0)], CG, {"a": {"cpu": 1.0}, "b": {"gpu": 1.0}})
    assert plan(LeastSlackTimeFirstPolicy(window_size=1).decide(snap, 0.0)) == [(0, "cpu")]


def test_lst_a_finish_exactly_at_the_deadline_is_kept() -> None:
    snap = view([req(0, "a", deadline=5.0)], [proc("gpu")], {"a": {"gpu": 5.0}})
    assert plan(LeastSlackTimeFirstPolicy().decide(snap, 0.0)) == [(0, "gpu")]


def test_lst_jobs_given_to_one_processor_add_up_their_waits() -> None:
    # by slack: j0 (12 - 5) gets the gpu; j1 (14) and j2 (14.5) queue behind it in Band's local copy of the
    # waiting times: j1 would end at 10 (re-queued), j2 at 15 > 14.5 (dropped)
    snap = view([req(0, "m", deadline=12.0, stream="x"), req(1, "m", deadline=14.0, stream="y"),
                 req(2, "m", deadline=14.5, stream="z")], [proc("gpu")], {"m": {"gpu": 5.0}})
    got = LeastSlackTimeFirstPolicy().decide(snap, 0.0)
    assert plan(got) == [(0, "gpu"), (2, None)]
    assert got[1].reason.startswith("cannot meet its deadline: best expected finish 15.00 ms on gpu")
