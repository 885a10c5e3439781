"""edgert's overload plan driven directly (scheduler/policies/_overload.py): the credit counter that turns shares
into fates, the averaged budget, which processor each tight model reserves, when a check re-plans (and calls
``on_demand``), the options it hands the LP, and forgetting the fates of requests no longer pending.

Streams here are exactly periodic, so every rate and budget is known by hand.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from scheduler.policies._overload import CLOUD, LOCAL, SHED, OverloadPlan
from scheduler.policies._shares import Demand, plan_shares
from tests.scheduler.policy_snapshots import req


def _est(table: dict[str, dict[str, float]]):
    return lambda m, p: table.get(m, {}).get(p)


def _feed(plan: OverloadPlan, model: str, period: float, n: int, slo: float, first_id: int = 0,
          start: float = 0.0, downstream: float = 0.0) -> list:
    """``n`` requests of ``model`` every ``period`` ms from ``start``, each seen by ``plan.fate``."""
    out = []
    for k in range(n):
        t = start + k * period
        r = req(first_id + k, model, deadline=t + slo, arrival=t, downstream=downstream)
        plan.fate(r)
        out.append(r)
    return out


class RecorderDouble:
    """Test double for ``on_demand``: records each call's rates and budgets."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, float], dict[str, float]]] = []

    def __call__(self, rates, budgets, est, local) -> None:
        self.calls.append((dict(rates), dict(budgets)))


# -- fates from the shares: the credit counter --

def _fates(shares: tuple[float, float], n: int, spacing_ms: float = 200.0) -> str:
    """Fates of ``n`` requests ``spacing_ms`` apart with a 100 ms budget: at 200 ms the stream shows its
    rate (it is established); at 1 ms it is a burst, no rate to shed by."""
    plan = OverloadPlan()
    plan._shares = {"m": shares}   # the plan's output, set by hand to read the counter alone
    names = {LOCAL: "L", CLOUD: "C", SHED: "S"}
    return "".join(names[plan.fate(req(i, "m", deadline=i * spacing_ms + 100.0, arrival=i * spacing_ms))]
                   for i in range(n))


@pytest.mark.parametrize(("shares", "want"), [
    ((0.25, 0.0), "LLLCLLLC"),                 # every fourth request offloaded, the first three local
    ((0.1, 0.0), "LLLLLLLLLC"),                # ten 0.1 credits make one (within the 1e-9 tolerance)
    ((0.0, 0.5), "LSLSLS"),                    # shed every second
    ((0.5, 0.25), "LCSCLC"),                   # shed 0.25 of all = 0.5 of the half kept local
    ((1.0, 0.0), "CCCC"),
], ids=["quarter", "tenth", "shed-half", "both", "whole"])
def test_shares_become_an_evenly_spread_sequence(shares: tuple[float, float], want: str) -> None:
    assert _fates(shares, len(want)) == want


def test_a_stream_that_has_not_shown_its_rate_is_never_shed_by_the_plan() -> None:
    # a burst read as a rate is no ground to shed (issue 28): its share runs locally instead
    assert _fates((0.0, 0.5), 6, spacing_ms=1.0) == "LLLLLL"
    assert _fates((0.5, 0.25), 6, spacing_ms=1.0) == "LCLCLC"


def test_a_model_without_a_share_stays_local_and_fates_are_recorded() -> None:
    plan = OverloadPlan()
    assert plan.fate(req(7, "m", deadline=50.0, arrival=0.0)) == LOCAL
    assert plan.fate(req(8, "m")) == LOCAL      # no deadline: best effort
    assert plan.fates == {7: LOCAL, 8: LOCAL}


# -- the checks: when, what they compute --

def _checked(plan: OverloadPlan, now: float, est, local=("cpu",), cloud: str | None = None, slots: int = 0,
             pending=()) -> None:
    plan.update(list(pending), now, est, list(local), cloud, slots)


def test_budget_is_averaged_from_arrival_to_effective_deadline() -> None:
    plan = OverloadPlan()
    rec = RecorderDouble()
    plan.on_demand = rec
    _checked(plan, 0.0, _est({}))                        # the first call only starts the clock
    _feed(plan, "m", 10.0, 2, slo=100.0, downstream=20.0)      # budget 80, twice
    plan.fate(req(2, "m", deadline=20.0 + 60.0, arrival=20.0))  # budget 60: the average moves 5 % of the way
    _checked(plan, 60.0, _est({"m": {"cpu": 1.0}}))
    assert rec.calls and rec.calls[-1][1] == {"m": pytest.approx(80.0 + 0.05 * (60.0 - 80.0))}
    assert plan.tight_ms == pytest.approx(79.0)


def _fed_plan(replan_ms: float) -> tuple[OverloadPlan, RecorderDouble, Any]:
    """A plan whose clock started at 0 and has seen stream "m" (every 5 ms, SLO 40 ms: 10 arrivals stand for
    its rate over a budget), its demand recorder, and an estimator that runs "m" on the cpu in 1 ms."""
    plan = OverloadPlan(replan_ms=replan_ms)
    rec = RecorderDouble()
    plan.on_demand = rec
    _checked(plan, 0.0, _est({}))
    _feed(plan, "m", 5.0, 10, slo=40.0)
    return plan, rec, _est({"m": {"cpu": 1.0}})


def test_a_check_waits_for_replan_ms_exactly() -> None:
    plan, rec, est = _fed_plan(50.0)
    _checked(plan, 49.9, est)
    assert rec.calls == [] and plan.tight_ms == math.inf
    _checked(plan, 50.0, est)
    assert len(rec.calls) == 1 and rec.calls[0][0] == {"m": pytest.approx(0.2)}
    _feed(plan, "n", 5.0, 10, slo=30.0, first_id=100, start=50.0)      # a new stream: due again
    _checked(plan, 99.0, est)
    assert len(rec.calls) == 1                          # 49 ms since the last check
    _checked(plan, 100.0, est)
    assert len(rec.calls) == 2 and plan.tight_ms == 30.0


def test_a_check_with_nothing_due_changes_nothing() -> None:
    plan, rec, est = _fed_plan(10.0)
    _checked(plan, 46.0, est)
    assert len(rec.calls) == 1
    plan.tight_ms = -1.0                                # a marker: a check that is not due leaves it
    _checked(plan, 60.0, est)                           # the stream keeps its rate and is not silent
    assert plan.tight_ms == -1.0 and len(rec.calls) == 1


def test_reserved_processors_of_the_tight_models() -> None:
    plan = OverloadPlan()
    _checked(plan, 0.0, _est({}))
    _feed(plan, "a", 10.0, 10, slo=100.0)             # gpu 10, cpu 12.5: exactly 1.25x -> needs the gpu
    _feed(plan, "b", 10.0, 10, slo=100.0, first_id=100)  # gpu 10, cpu 12: not needed
    _feed(plan, "c", 10.0, 10, slo=5.0, first_id=200)    # only the npu runs it, in exactly its budget
    _feed(plan, "d", 10.0, 10, slo=100.0, first_id=300)  # the dsp, but over its budget
    est = _est({"a": {"gpu": 10.0, "cpu": 12.5}, "b": {"gpu": 10.0, "cpu": 12.0}, "c": {"npu": 5.0},
                "d": {"dsp": 101.0, "cpu": 200.0}})
    _checked(plan, 95.0, est, local=("cpu", "gpu", "npu", "dsp"))
    assert plan.reserved == {"gpu": ("a", 100.0), "npu": ("c", 5.0)}


def test_the_tighter_model_keeps_the_reservation_and_a_tie_the_first_by_name() -> None:
    plan = OverloadPlan()
    _checked(plan, 0.0, _est({}))
    _feed(plan, "x", 10.0, 10, slo=80.0)
    _feed(plan, "y", 10.0, 10, slo=60.0, first_id=100)
    _feed(plan, "z", 10.0, 10, slo=60.0, first_id=200)
    est = _est({m: {"gpu": 10.0} for m in "xyz"})
    _checked(plan, 95.0, est, local=("gpu",))
    assert plan.reserved == {"gpu": ("y", 60.0)}


def test_streams_that_stopped_leave_no_tightest_budget() -> None:
    plan = OverloadPlan(replan_ms=1.0)
    _checked(plan, 0.0, _est({}))
    _feed(plan, "m", 10.0, 10, slo=100.0)
    est = _est({"m": {"cpu": 1.0}})
    _checked(plan, 95.0, est)
    assert plan.tight_ms == 100.0
    _checked(plan, 10_000.0, est)                       # silent for far more than 6 periods
    assert plan.tight_ms == math.inf and plan.reserved == {}


@pytest.mark.parametrize(("rate_change", "replanned"), [(0.25, False), (0.5, True)], ids=["small", "large"])
def test_re_plan_only_when_the_demand_moved_by_replan_delta(rate_change: float, replanned: bool) -> None:
    # cpu 0.1 ms per request; a stream at 1 / 10 ms, then 40 requests (its whole kept history) at a shorter
    # period: load 0.01 -> 0.0133 (moved less than 0.005) or 0.02
    plan = OverloadPlan(replan_ms=1.0, replan_delta=0.005)
    rec = RecorderDouble()
    plan.on_demand = rec
    _checked(plan, 0.0, _est({}))
    est = _est({"m": {"cpu": 0.1}})
    _feed(plan, "m", 10.0, 3, slo=10.0)          # budgets of one period: each rate stands at once
    _checked(plan, 25.0, est)
    assert len(rec.calls) == 1
    period = 10.0 * (1.0 - rate_change)
    _feed(plan, "m", period, 40, slo=period, first_id=10, start=20.0 + period)
    _checked(plan, 20.0 + 40 * period, est)
    assert len(rec.calls) == (2 if replanned else 1)


def test_two_models_moving_a_little_each_add_up() -> None:
    plan = OverloadPlan(replan_ms=1.0, replan_delta=0.015)
    rec = RecorderDouble()
    plan.on_demand = rec
    _checked(plan, 0.0, _est({}))
    est = _est({"a": {"cpu": 0.1}, "b": {"cpu": 0.1}})
    _feed(plan, "a", 10.0, 3, slo=10.0)          # budgets of one period: each rate stands at once
    _feed(plan, "b", 10.0, 3, slo=10.0, first_id=100)
    _checked(plan, 25.0, est)
    assert len(rec.calls) == 1
    # both double their rate: each model's load moves by 0.01, together by 0.02 >= 0.015
    _feed(plan, "a", 5.0, 40, slo=5.0, first_id=10, start=25.0)
    _feed(plan, "b", 5.0, 40, slo=5.0, first_id=110, start=25.0)
    _checked(plan, 25.0 + 39 * 5.0, est)
    assert len(rec.calls) == 2


def _planned(streams: list[tuple[str, float, float, float]], lat: dict[str, dict[str, float]], slots: int,
             **options: float) -> OverloadPlan:
    """A plan that saw each ``(model, period, slo, downstream)`` stream arrive from 0 to 900 ms, checked at 900."""
    plan = OverloadPlan(replan_ms=1.0, **options)
    _checked(plan, 0.0, _est({}))
    for i, (model, period, slo, down) in enumerate(streams):
        _feed(plan, model, period, int(900 / period) + 1, slo=slo, first_id=1000 * i, downstream=down)
    _checked(plan, 900.0, _est(lat), cloud="cloud" if slots else None, slots=slots)
    return plan


LP_CASES = [  # (streams, latencies, cloud slots, options): each option changes the plan here
    ([("m", 10.0, 100.0, 0.0)], {"m": {"cpu": 10.0, "cloud": 12.0}}, 4, {"target": 0.5}),
    ([("m", 8.0, 23.0, 0.0)], {"m": {"cpu": 10.0, "cloud": 20.0}}, 4, {"risky_margin": 0.2}),
    ([("long", 50.0, 60.0, 0.0), ("short", 10.0, 50.0, 0.0)],
     {"long": {"cpu": 30.0, "cloud": 40.0}, "short": {"cpu": 7.0}}, 1, {"safe_margin": 0.3}),
    ([("a", 20.0, 11.0, 0.0), ("b", 20.0, 100.0, 0.0)],
     {"a": {"cpu": 10.0, "cloud": 10.0}, "b": {"cpu": 10.0, "cloud": 15.0}}, 4, {"cloud_jitter": 0.01}),
    ([("hand", 10.0, 30.0, 0.0), ("eye", 5.0, 20.0, 4.0), ("long", 45.0, 300.0, 0.0)],
     {"hand": {"cpu": 8.0, "cloud": 14.0}, "eye": {"cpu": 3.0, "cloud": 9.0}, "long": {"cpu": 30.0, "cloud": 40.0}},
     2, {"shed_target": 0.8, "cloud_util": 0.5}),
]


@pytest.mark.parametrize(("streams", "lat", "slots", "options"), LP_CASES,
                         ids=["target", "risky", "safe-whole", "jitter", "shed-cloud-util"])
def test_the_plan_hands_its_options_and_the_demand_to_the_lp(streams, lat, slots, options) -> None:
    plan = _planned(streams, lat, slots, **options)
    demand = [Demand(m, 1.0 / period, slo - down, 2.0 if down > 0 else 1.0)
              for m, period, slo, down in sorted(streams)]
    cloud = "cloud" if slots else None
    want, kept = plan_shares(demand, _est(lat), ["cpu"], cloud, slots, **options)
    assert plan_shares(demand, _est(lat), ["cpu"], cloud, slots) != (want, kept)   # the options matter here
    assert plan.overloaded and plan.replans == 1
    assert plan.shares.keys() == want.keys() and plan.kept == pytest.approx(kept)
    assert all(plan.shares[m] == pytest.approx(want[m]) for m in want)   # (approx takes no nested mappings)
    assert plan.whole == frozenset(m for m, (off, _) in want.items() if off >= 1.0 - 1e-4)
    assert plan.utilization == pytest.approx(1.0 / kept)


def test_a_whole_model_is_named() -> None:
    plan = _planned(*LP_CASES[2][:3], **LP_CASES[2][3])
    assert plan.whole == frozenset({"long"}) and plan.shares == {"long": (1.0, 0.0)}


def test_a_cascade_head_counts_twice_when_the_plan_sheds() -> None:
    # two models, each the cpu's full time; no cloud: one is shed, the one whose loss costs one deadline
    plan = _planned([("a", 5.0, 100.0, 0.0), ("b", 5.0, 105.0, 5.0)], {"a": {"cpu": 5.0}, "b": {"cpu": 5.0}}, 0)
    assert plan.shares == {"a": (0.0, pytest.approx(1.0))} and plan.kept == pytest.approx(0.5)


def test_back_under_the_target_the_plan_empties() -> None:
    plan = OverloadPlan(replan_ms=1.0)
    _checked(plan, 0.0, _est({}))
    est = _est({"m": {"cpu": 8.0, "cloud": 12.0}})
    _feed(plan, "m", 5.0, 19, slo=100.0)
    _checked(plan, 92.0, est, cloud="cloud", slots=4)
    assert plan.overloaded and plan.shares and plan.replans == 1
    _feed(plan, "m", 50.0, 30, slo=100.0, first_id=100, start=100.0)
    _checked(plan, 100.0 + 29 * 50.0, est, cloud="cloud", slots=4)
    assert not plan.overloaded and plan.shares == {} and plan.whole == frozenset()
    assert plan.kept == 1.0 and plan.utilization == 1.0 and plan.replans == 1


def test_load_of_a_model_only_the_cloud_runs_counts() -> None:
    # the cloud-only model's 0.5 slot-ms per ms is demand too: enough to trigger a re-plan on its own
    plan = OverloadPlan(replan_ms=1.0, replan_delta=0.3)
    rec = RecorderDouble()
    plan.on_demand = rec
    _checked(plan, 0.0, _est({}))
    _feed(plan, "c", 10.0, 10, slo=100.0)
    _checked(plan, 95.0, _est({"c": {"cloud": 5.0}}), cloud="cloud", slots=1)
    assert len(rec.calls) == 1


# -- forgetting fates --

@pytest.mark.parametrize(("n_fates", "forgets"), [(276, False), (277, True)], ids=["at-bound", "over"])
def test_fates_of_requests_no_longer_pending_are_forgotten_past_the_bound(n_fates: int, forgets: bool) -> None:
    plan = OverloadPlan()
    _checked(plan, 0.0, _est({}))
    reqs = _feed(plan, "m", 1.0, n_fates, slo=1e6)
    pending = reqs[-10:]                                 # bound: 2 x 10 + 256 = 276
    _checked(plan, 0.5, _est({"m": {"cpu": 0.1}}), pending=pending)
    assert set(plan.fates) == ({r.id for r in pending} if forgets else {r.id for r in reqs})
