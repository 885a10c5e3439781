"""The overload plan's arithmetic on small hand-built demands (scheduler/policies/_shares.py): the greedy
utilization bound, the odds a round trip is late, which models the LP may use, and the rule that sends a
long model to the cloud whole (longest first, only when the cloud serves it safely and has room).

Each case is small enough to work out by hand; the expected placement is written next to it.
"""

from __future__ import annotations

import math

import pytest

from scheduler.policies._shares import (
    MIN_SHARE,
    Demand,
    _long_models_whole,
    greedy_utilization,
    late_odds,
    plan_shares,
)

# -- greedy_utilization --

@pytest.mark.parametrize(("work", "want"), [
    ([[0.5]], 0.5),                                     # one processor: all of it
    ([[]], 0.0),                                        # no processor
    ([], 0.0),
    ([[0.3, 0.3], [0.5, 0.5], [0.4, 0.4]], 0.7),        # largest first: .5 | .4 + .3
    ([[0.5, 0.5], [0.3, 0.6]], 0.6),                    # a tie goes to the first processor: .5 | .6
], ids=["one", "none", "empty", "largest-first", "tie-first"])
def test_greedy_utilization(work: list[list[float | None]], want: float) -> None:
    assert greedy_utilization(work) == pytest.approx(want)


def test_greedy_utilization_skips_a_class_nothing_runs() -> None:
    assert greedy_utilization([[None, None], [0.2, None]]) == pytest.approx(0.2)


# -- late_odds --

def test_late_odds_edges() -> None:
    assert late_odds(0.1, 1.0, 0.2) < 1e-12          # a positive budget far above the run: never late
    assert late_odds(10.0, 0.0, 0.2) == 1.0          # no budget: always late
    assert late_odds(10.0, 10.0, 0.0) == 0.0         # no jitter, just in time
    assert late_odds(10.0, 9.0, 0.0) == 1.0


# -- which models the LP may use --

def _est(table: dict[str, dict[str, float]]):
    return lambda m, p: table.get(m, {}).get(p)


def test_a_local_run_exactly_the_budget_counts_as_in_budget() -> None:
    # 0.2 req/ms x 10 ms = 2x the cpu: half must be shed; the run just fits the budget
    shares, kept = plan_shares([Demand("m", 0.2, 10.0)], _est({"m": {"cpu": 10.0}}), ["cpu"], None, 0)
    assert shares == {"m": (0.0, pytest.approx(0.5))} and kept == pytest.approx(0.5)


def test_a_cloud_run_with_exactly_the_risky_margin_counts() -> None:
    # cpu can take 0.85 of the 2x load under target; the cloud (20 ms x 1.25 = the 25 ms budget) takes the rest
    shares, kept = plan_shares([Demand("m", 0.2, 25.0)], _est({"m": {"cpu": 10.0, "cloud": 20.0}}), ["cpu"],
                               "cloud", 10, risky_margin=0.25)
    assert kept == 1.0 and shares["m"][0] == pytest.approx(0.575) and shares["m"][1] == 0.0


def test_a_model_nothing_runs_in_time_does_not_hide_the_next() -> None:
    est = _est({"slow": {"cpu": 50.0}, "m": {"cpu": 10.0}})
    shares, _ = plan_shares([Demand("slow", 0.01, 10.0), Demand("m", 0.2, 20.0)], est, ["cpu"], None, 0)
    assert set(shares) == {"m"}


def test_the_cloud_caps_its_slot_time() -> None:
    # 2x the cpu; the cloud (one slot, at most 0.5 busy) takes 0.5 / (0.2 x 20) of the requests, the cpu
    # the most it may (shed_target 1.0): the rest is shed
    shares, kept = plan_shares([Demand("m", 0.2, 100.0)], _est({"m": {"cpu": 10.0, "cloud": 20.0}}), ["cpu"],
                               "cloud", 1, cloud_util=0.5)
    assert shares["m"][0] == pytest.approx(0.125) and shares["m"][1] == pytest.approx(0.375)
    assert kept == pytest.approx(0.625)


# -- _long_models_whole --

def _whole(demand: list[Demand], local: list[list[float | None]], cloud: list[float | None],
           off: list[float] | None = None, shed: list[float] | None = None, cap: float = 10.0,
           safe: float = 0.8) -> list[float]:
    off = off if off is not None else [0.0] * len(demand)
    _long_models_whole(demand, local, cloud, off, shed if shed is not None else [0.0] * len(demand), cap, safe)
    return off


SHORT = Demand("short", 0.1, 50.0)   # needs a processor for 5 ms within 50 ms: a run over 25 ms blocks it


def test_a_long_model_goes_whole_when_the_cloud_serves_it_safely() -> None:
    assert _whole([Demand("long", 0.01, 100.0), SHORT], [[60.0], [5.0]], [40.0, None]) == [1.0, 0.0]


@pytest.mark.parametrize(("run", "whole"), [(25.0, False), (25.5, True)], ids=["half-budget", "longer"])
def test_only_a_run_over_half_another_budget_is_long(run: float, whole: bool) -> None:
    off = _whole([Demand("long", 0.01, 100.0), SHORT], [[run], [5.0]], [40.0, None])
    assert off[0] == (1.0 if whole else 0.0)


def test_a_run_shorter_than_the_budget_but_over_half_is_long() -> None:
    assert _whole([Demand("long", 0.01, 100.0), SHORT], [[40.0], [5.0]], [40.0, None])[0] == 1.0


def test_a_lone_model_is_never_long() -> None:
    assert _whole([Demand("long", 0.01, 100.0)], [[90.0]], [40.0]) == [0.0]


@pytest.mark.parametrize(("cloud_ms", "whole"), [(50.0, True), (50.5, False), (70.0, False)],
                         ids=["safe-edge", "unsafe", "far"])
def test_the_cloud_must_serve_it_with_the_safe_margin(cloud_ms: float, whole: bool) -> None:
    # budget 100, safe margin 1.0: a cloud run of at most 50 ms
    off = _whole([Demand("long", 0.01, 100.0), SHORT], [[60.0], [5.0]], [cloud_ms, None], safe=1.0)
    assert off[0] == (1.0 if whole else 0.0)


def test_a_model_being_shed_or_without_cloud_stays() -> None:
    demand = [Demand("long", 0.01, 100.0), SHORT]
    assert _whole(demand, [[60.0], [5.0]], [40.0, None], shed=[0.1, 0.0]) == [0.0, 0.0]
    assert _whole(demand, [[60.0], [5.0]], [40.0, None], shed=[MIN_SHARE, 0.0]) == [1.0, 0.0]
    assert _whole(demand, [[60.0], [5.0]], [None, None]) == [0.0, 0.0]


def test_room_counts_the_cloud_time_already_planned() -> None:
    # long: 1/16 req/ms x 32 ms = 2 slot-ms per ms when whole; half is planned already
    demand = [Demand("long", 0.0625, 64.0), SHORT]
    assert _whole(demand, [[30.0], [5.0]], [32.0, None], off=[0.5, 0.0], cap=2.0) == [1.0, 0.0]   # room 1 = extra 1
    assert _whole(demand, [[30.0], [5.0]], [32.0, None], off=[0.5, 0.0], cap=1.9) == [0.5, 0.0]


def test_longest_first_while_the_cloud_has_room() -> None:
    # two long models, room for one (each needs 1 slot-ms per ms): the longer local run goes
    demand = [Demand("a", 0.025, 100.0), Demand("b", 0.025, 100.0), SHORT]
    off = _whole(demand, [[40.0], [60.0], [5.0]], [40.0, 40.0, None], cap=1.5)
    assert off == [0.0, 1.0, 0.0]


def test_a_skipped_longer_model_does_not_stop_the_next() -> None:
    demand = [Demand("a", 0.025, 100.0), Demand("b", 0.025, 100.0), SHORT]
    off = _whole(demand, [[40.0], [60.0], [5.0]], [40.0, None, None], cap=1.5)
    assert off == [1.0, 0.0, 0.0]


def test_a_cloud_only_model_has_no_local_run_to_keep_off() -> None:
    demand = [Demand("c", 0.01, 100.0), Demand("tiny", 0.1, 1.5)]
    assert _whole(demand, [[None], [0.5]], [40.0, None]) == [0.0, 0.0]


def test_not_whole_when_the_first_fills_the_room() -> None:
    demand = [Demand("a", 0.025, 100.0), Demand("b", 0.025, 100.0), SHORT]
    off = _whole(demand, [[60.0], [50.0], [5.0]], [40.0, 40.0, None], cap=2.0)   # 1 + 1 = 2: both fit
    assert off == [1.0, 1.0, 0.0]
    assert math.isclose(sum(d.rate * 40.0 * o for d, o in zip(demand, off)), 2.0)


# -- whole plans worked out by hand, with an option changed and with the defaults --

SINGLE = {"m": {"cpu": 10.0, "cloud": 12.0}}


@pytest.mark.parametrize(("demand", "lat", "slots", "options", "want", "kept"), [
    # 1.0 of the cpu: offload down to the target (0.85 by default)
    ([Demand("m", 0.1, 100.0)], SINGLE, 4, {}, {"m": (0.15, 0.0)}, 1.0),
    ([Demand("m", 0.1, 100.0)], SINGLE, 4, {"target": 0.5}, {"m": (0.5, 0.0)}, 1.0),
    # 1.25 of the cpu; the cloud (20 ms) fits the 23 ms budget with a 5 % margin, not with 20 %: then shed
    ([Demand("m", 0.125, 23.0)], {"m": {"cpu": 10.0, "cloud": 20.0}}, 4, {}, {"m": (0.32, 0.0)}, 1.0),
    ([Demand("m", 0.125, 23.0)], {"m": {"cpu": 10.0, "cloud": 20.0}}, 4, {"risky_margin": 0.2}, {"m": (0.0, 0.2)},
     0.8),
    # a long model (30 ms of a 50 ms budget elsewhere) goes whole only when the cloud serves it safely
    ([Demand("long", 0.02, 60.0), Demand("short", 0.1, 50.0)], {"long": {"cpu": 30.0, "cloud": 40.0},
                                                                  "short": {"cpu": 7.0}}, 1, {},
     {"long": (0.75, 0.0)}, 1.0),
    ([Demand("long", 0.02, 60.0), Demand("short", 0.1, 50.0)], {"long": {"cpu": 30.0, "cloud": 40.0},
                                                                  "short": {"cpu": 7.0}}, 1, {"safe_margin": 0.3},
     {"long": (1.0, 0.0)}, 1.0),
    # a round trip of 10 ms against an 11 ms budget: cheap with no jitter, dear with the default
    ([Demand("a", 0.05, 11.0), Demand("b", 0.05, 100.0)], {"a": {"cpu": 10.0, "cloud": 10.0},
                                                            "b": {"cpu": 10.0, "cloud": 15.0}}, 4, {},
     {"b": (1.0, 0.0)}, 1.0),
    ([Demand("a", 0.05, 11.0), Demand("b", 0.05, 100.0)], {"a": {"cpu": 10.0, "cloud": 10.0},
                                                            "b": {"cpu": 10.0, "cloud": 15.0}}, 4,
     {"cloud_jitter": 0.01}, {"a": (0.3, 0.0), "b": (1.0, 0.0)}, 1.0),
], ids=["target-default", "target", "risky-default", "risky", "safe-default", "safe", "jitter-default", "jitter"])
def test_plans_worked_out_by_hand(demand, lat, slots, options, want, kept) -> None:
    shares, got_kept = plan_shares(demand, _est(lat), ["cpu"], "cloud", slots, **options)
    assert set(shares) == set(want) and got_kept == pytest.approx(kept)
    for m, share in want.items():
        assert shares[m] == pytest.approx(share, abs=1e-9)
