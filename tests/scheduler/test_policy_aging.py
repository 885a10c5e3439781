"""Stale estimates age back (scheduler.estimator.EstimateAger, the edgert policy's rule 10): one slow
run must not shut a model out for the rest of a session, on hand-built snapshots (no clock: each
decision gets its ``now_ms``)."""

from __future__ import annotations

import pytest

from scheduler.estimator import EstimateAger, LatencyEstimator
from scheduler.policies.edgert import EdgertPolicy
from scheduler.types import SchedulerView
from tests.scheduler.policy_snapshots import plan, proc, req

#: a 30 ms model (its warm-up) in a 66 ms frame budget; one 800 ms run lifts its estimate to 107 ms
PRIOR_MS, SLOW_MS, BUDGET_MS = 30.0, 800.0, 66.0


def _run(decisions: list[tuple[float, float | None]], **options: object) -> list[str]:
    """Decide on one request of "pose" (deadline ``now + BUDGET_MS``) at each ``(now_ms, measured)``:
    ``measured`` (ms), when given, is folded into the estimator first, as a finished run would be.
    Returns per decision "cpu" (admitted), "drop: <reason>" or "pending"."""
    est = LatencyEstimator(seed={"pose": {"cpu": PRIOR_MS}})
    policy = EdgertPolicy(**options)   # type: ignore[arg-type]
    out = []
    for i, (now, measured) in enumerate(decisions):
        if measured is not None:
            est.update("pose", "cpu", measured)
        view = SchedulerView((req(i, "pose", now + BUDGET_MS, now, frame=i),), (proc("cpu"),), est)
        got = policy.decide(view, now)
        out.append("pending" if not got else got[0].processor or f"drop: {got[0].reason}")
    return out


ADMIT, LATE = "cpu", "drop: cannot meet its deadline"
#: one slow run at 100 ms, no run after it; the ager looks at most every stale_ms / 4 (250 ms), so it
#: notices the change at 600 ms: 107 ms stays until 1600 ms, then ages toward 30 ms with a 500 ms
#: half-life (2100: 68.5 ms, still over the 66 ms budget; 2600: 49 ms, fits)
INFLATED_ONCE = [(0.0, None), (100.0, SLOW_MS), (600.0, None), (1100.0, None), (1600.0, None), (2100.0, None),
                 (2600.0, None)]

CASES = {
    # name: (decisions, policy options, expected per decision)
    "inflated once, admitted again after the aging period":
        (INFLATED_ONCE, {}, [ADMIT, LATE, LATE, LATE, LATE, LATE, ADMIT]),
    "aging off: shut out for good (the bug)":
        (INFLATED_ONCE + [(10_000.0, None), (60_000.0, None)], {"stale_ms": None}, [ADMIT] + [LATE] * 8),
    "a shorter stale period admits it sooner":
        (INFLATED_ONCE, {"stale_ms": 200.0, "stale_half_life_ms": 200.0}, [ADMIT, LATE] + [ADMIT] * 5),
    # the probe measures it slow again: the estimate climbs back from the aged value (49 -> 124 ms,
    # noticed at 3100) and the model waits one more aging period (4600: 77 ms; 5100: 54 ms, fits)
    "truly slow: the probe's run puts it back out": (
        INFLATED_ONCE + [(2700.0, SLOW_MS)] + [(3100.0 + 500.0 * k, None) for k in range(5)], {},
        [ADMIT] + [LATE] * 5 + [ADMIT] + [LATE] * 5 + [ADMIT]),
    # runs keep coming (each one measured 800 ms): nothing is stale, so the ager never lowers it
    "measured often: never aged": (
        [(0.0, None)] + [(100.0 + 400.0 * k, SLOW_MS) for k in range(8)], {}, [ADMIT] + [LATE] * 8),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_stale_inflated_estimate_ages_back(name: str) -> None:
    decisions, options, expected = CASES[name]
    got = _run(decisions, **options)
    assert [g if g in (ADMIT, "pending") else g[:len(LATE)] for g in got] == expected, got


def test_the_aged_estimate_follows_the_half_life_and_stops_at_the_prior() -> None:
    est = LatencyEstimator(seed={"m": {"cpu": 10.0, "gpu": 2.0}})
    ager = EstimateAger(stale_ms=1000.0, half_life_ms=500.0)
    assert ager.age(est, 0.0) == []
    est.update("m", "cpu", 910.0)                       # 100 ms
    assert ager.age(est, 100.0) == []                   # at most one pass per stale_ms / 4: not seen yet
    assert ager.age(est, 300.0) == [] and est.expected_ms("m", "cpu") == pytest.approx(100.0)   # noticed
    assert ager.age(est, 1200.0) == []                  # 900 ms without a run: not stale yet
    assert ager.age(est, 1800.0) == [("m", "cpu")]      # 500 ms past stale: half the gap to 10 ms
    assert est.expected_ms("m", "cpu") == pytest.approx(55.0)
    assert ager.age(est, 1900.0) == []                  # too soon for another pass
    assert ager.age(est, 2300.0) == [("m", "cpu")]
    assert est.expected_ms("m", "cpu") == pytest.approx(32.5)
    ager.age(est, 100_000.0)
    assert est.expected_ms("m", "cpu") == pytest.approx(10.0, abs=1e-9)
    assert est.expected_ms("m", "gpu") == 2.0 and est.prior_ms("m", "cpu") == 10.0   # never raised, prior kept


def test_a_run_after_aging_folds_into_the_aged_estimate_and_restarts_the_clock() -> None:
    est = LatencyEstimator(seed={"m": {"cpu": 10.0}})
    ager = EstimateAger(stale_ms=1000.0, half_life_ms=500.0)
    ager.age(est, 0.0)
    est.update("m", "cpu", 910.0)
    ager.age(est, 300.0)
    ager.age(est, 1800.0)                               # 55 ms
    est.update("m", "cpu", 15.0)                        # the probe: 55 + 0.1 * (15 - 55) = 51 ms
    assert ager.age(est, 2100.0) == [] and est.expected_ms("m", "cpu") == pytest.approx(51.0)
    assert ager.age(est, 3000.0) == []                  # fresh since 2100: stale only after 3100
    assert ager.age(est, 3600.0) == [("m", "cpu")]
    assert est.expected_ms("m", "cpu") == pytest.approx(10.0 + 41.0 * 0.5)


def test_the_floor_is_the_lowest_estimate_held_when_the_prior_is_higher() -> None:
    # learnt without a seed: the first (slow) run is the prior; the estimate later fell to 20 ms
    est = LatencyEstimator()
    ager = EstimateAger(stale_ms=100.0, half_life_ms=100.0)
    est.update("m", "cpu", 200.0)
    ager.age(est, 0.0)
    est.reset("m", "cpu", 20.0)
    ager.age(est, 50.0)
    est.update("m", "cpu", 1020.0)                      # 120 ms
    ager.age(est, 100.0)
    ager.age(est, 10_000.0)
    assert est.expected_ms("m", "cpu") == pytest.approx(20.0, abs=1e-6)


def test_only_the_given_processors_age_and_forgotten_pairs_are_dropped() -> None:
    est = LatencyEstimator(seed={"m": {"cpu": 10.0, "cloud": 10.0}})
    ager = EstimateAger(stale_ms=100.0, half_life_ms=100.0)
    ager.age(est, 0.0, ("cpu",))
    est.update("m", "cpu", 1000.0)
    est.update("m", "cloud", 1000.0)
    ager.age(est, 50.0, ("cpu",))
    ager.age(est, 10_000.0, ("cpu",))
    assert est.expected_ms("m", "cpu") == pytest.approx(10.0, abs=1e-6)
    assert est.expected_ms("m", "cloud") == pytest.approx(109.0)   # the cloud path has its own ager
    est.forget("m", "cpu")
    assert ager.age(est, 20_000.0, ("cpu",)) == [] and est.expected_ms("m", "cpu") is None


@pytest.mark.parametrize("options", [{"stale_ms": 0.0}, {"stale_ms": -1.0}, {"half_life_ms": 0.0}])
def test_bad_aging_times_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be > 0 ms"):
        EstimateAger(**options)


def test_the_policy_refuses_a_bad_stale_period() -> None:
    with pytest.raises(ValueError, match="stale_ms"):
        EdgertPolicy(stale_ms=0.0)


def test_only_refused_models_age_and_an_observation_clears_the_mark() -> None:
    # a model the application stopped asking for (a detector while tracking holds) keeps its estimate:
    # only one the policy refused on its estimate since its last run ages
    est = LatencyEstimator(seed={"det": {"cpu": 10.0}, "lm": {"cpu": 10.0}})
    ager = EstimateAger(stale_ms=100.0, half_life_ms=100.0)
    refused = {"lm"}
    ager.age(est, 0.0, refused=refused)
    est.update("det", "cpu", 1000.0)
    est.update("lm", "cpu", 1000.0)
    ager.age(est, 50.0, refused=refused)               # both observed: the mark on lm is cleared
    assert refused == set()
    refused.add("lm")                                  # the policy refuses lm again
    ager.age(est, 10_000.0, refused=refused)
    assert est.expected_ms("lm", "cpu") == pytest.approx(10.0, abs=1e-6)
    assert est.expected_ms("det", "cpu") == pytest.approx(109.0)


def test_the_policy_ages_only_a_model_it_refused() -> None:
    est = LatencyEstimator(seed={"pose": {"cpu": PRIOR_MS}, "other": {"cpu": 1.0}})
    policy = EdgertPolicy()

    def other(i: int, now: float) -> list[tuple[int, str | None]]:   # a decision over another model only
        return plan(policy.decide(SchedulerView((req(i, "other", now + 1e6, now),), (proc("cpu"),), est), now))

    assert plan(policy.decide(SchedulerView((req(0, "pose", BUDGET_MS, 0.0),), (proc("cpu"),), est), 0.0)) == [
        (0, "cpu")]
    est.update("pose", "cpu", SLOW_MS)
    assert other(1, 300.0) == [(1, "cpu")] and other(2, 5000.0) == [(2, "cpu")]   # not asked for: not aged
    assert est.expected_ms("pose", "cpu") == pytest.approx(107.0) and policy.refused == set()
    view = SchedulerView((req(3, "pose", 5100.0 + BUDGET_MS, 5100.0),), (proc("cpu"),), est)
    assert plan(policy.decide(view, 5100.0)) == [(3, None)] and policy.refused == {"pose"}
    assert other(4, 5400.0) == [(4, "cpu")]            # refused, and stale for 5 s: it ages at once
    assert est.expected_ms("pose", "cpu") < 35.0
