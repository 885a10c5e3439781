"""edgert's overload plan: the LP solver, the plan's shares, stream rates, fates, re-planning and determinism."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.policies._lp import LPError, minimize
from scheduler.policies._overload import CLOUD, LOCAL, SHED, OverloadPlan
from scheduler.policies._shares import (
    Demand,
    greedy_utilization,
    late_odds,
    plan_shares,
)
from scheduler.policies._streams import Streams
from scheduler.policies.edgert import EdgertPolicy
from scheduler.types import ProcessorView
from tests.scheduler.policy_snapshots import plan, proc, req, view


# --------------------------------------------------------------------------- the simplex
def _min_max_utilization(work: list[list[float | None]]) -> float:
    """The fluid LP ``min U s.t. sum_c work[c][p] x[c][p] <= U, sum_p x[c][p] = 1`` through minimize()."""
    cols = [(c, p) for c, row in enumerate(work) for p, v in enumerate(row) if v is not None]
    n_c, n_p = len(work), len(work[0])
    # variables: x (cols), U, slack per processor row; rows: n_c equalities, n_p rows sum - U + s = 0
    # substitute U = u0 + (U - u0) is not needed: start from U large via x on the first column of each class
    nv = len(cols) + 1 + n_p
    a = np.zeros((n_c + n_p, nv + n_c))
    b = np.zeros(n_c + n_p)
    c = np.zeros(nv + n_c)
    for j, (ci, p) in enumerate(cols):
        a[ci, j] = 1.0
        a[n_c + p, j] = work[ci][p]
    a[n_c:, len(cols)] = -1.0
    for p in range(n_p):
        a[n_c + p, len(cols) + 1 + p] = 1.0
    for ci in range(n_c):              # artificial per class (big-M), so the start basis is feasible
        a[ci, nv + ci] = 1.0
    b[:n_c] = 1.0
    c[len(cols)] = 1.0
    c[nv:] = 1e6
    x = minimize(c, a, b, [nv + ci for ci in range(n_c)] + [len(cols) + 1 + p for p in range(n_p)])
    assert x[nv:].max() < 1e-9
    return float(x[len(cols)])


@pytest.mark.parametrize("work, want", [
    ([[1.0, 1.0]], 0.5),                              # one class split evenly over two equal processors
    ([[0.6, None], [0.2, 0.2]], 0.6),                 # a cpu-only class pins p0; the other goes to p1
    ([[1.0, 3.0], [3.0, 1.0]], 1.0),                  # comparative advantage: each on its own fast processor
    ([[0.9, 0.9, 0.9]], 0.3),
])
def test_minimize_solves_the_fluid_lp(work, want):
    assert _min_max_utilization(work) == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_greedy_utilization_bounds_the_lp_from_above(seed):
    rng = np.random.default_rng(seed)
    work = [[None if rng.random() < 0.2 else float(rng.random()) for _ in range(3)] for _ in range(6)]
    work = [row if any(v is not None for v in row) else [0.5, None, None] for row in work]
    assert greedy_utilization(work) >= _min_max_utilization(work) - 1e-9


def test_minimize_small_textbook_problem():
    # max 3x + 2y s.t. x + y <= 4, x + 3y <= 6, x <= 3  ->  x = 3, y = 1, value 11
    a = np.array([[1.0, 1, 1, 0, 0], [1, 3, 0, 1, 0], [1, 0, 0, 0, 1]])
    x = minimize(np.array([-3.0, -2, 0, 0, 0]), a, np.array([4.0, 6, 3]), [2, 3, 4])
    assert x[:2] == pytest.approx([3.0, 1.0])


def test_minimize_reports_unbounded_and_bad_input():
    a = np.array([[1.0, -1.0, 1.0]])
    with pytest.raises(LPError, match="unbounded"):
        minimize(np.array([0.0, -1.0, 0.0]), a, np.array([1.0]), [2])
    with pytest.raises(ValueError, match="b must be >= 0"):
        minimize(np.zeros(3), a, np.array([-1.0]), [2])
    with pytest.raises(ValueError, match="identity"):
        minimize(np.zeros(3), np.array([[2.0, -1.0, 1.0]]), np.array([1.0]), [0])


# --------------------------------------------------------------------------- the plan's LP
LAT = {"hand": {"cpu": 10.0, "gpu": 10.0, "cloud": 12.0}, "eye": {"cpu": 2.0, "gpu": 2.0},
       "speech": {"cpu": 40.0, "cloud": 45.0}, "gaze": {"cpu": 3.0, "gpu": 3.0}}


def _est(model: str, p: str) -> float | None:
    return LAT.get(model, {}).get(p)


def test_plan_shares_nothing_when_the_device_keeps_up():
    shares, kept = plan_shares([Demand("hand", 0.05, 100.0)], _est, ["cpu", "gpu"], "cloud", 4)
    assert shares == {} and kept == 1.0


def test_plan_offloads_just_enough_to_reach_the_target():
    # 2.5 processors of work on 2: 0.8 of it must go to bring both to 0.85
    shares, kept = plan_shares([Demand("hand", 0.25, 100.0)], _est, ["cpu", "gpu"], "cloud", 4)
    off, shed = shares["hand"]
    assert off == pytest.approx(0.8 / 2.5) and shed == 0.0 and kept == 1.0


def test_plan_sheds_the_most_local_time_per_lost_deadline():
    # no cloud: eye (2 ms) and hand (10 ms) cannot both fit; dropping hands saves the most time per request
    shares, kept = plan_shares([Demand("eye", 0.5, 16.0), Demand("hand", 0.15, 22.0)], _est, ["cpu", "gpu"],
                               None, 0)
    assert "eye" not in shares
    assert shares["hand"][1] == pytest.approx(1.0 - (2.0 - 1.0) / 1.5)   # 1.0 of the 2.0 left runs hands
    assert kept == pytest.approx(1.0 - shares["hand"][1] * 0.15 / 0.65)


def test_plan_values_a_cascade_head_twice():
    # eye (3 ms) heads a cascade, gaze (3 ms) is its last stage: at equal cost the plan sheds the last stage
    lat = {"eye": {"cpu": 3.0, "gpu": 3.0}, "gaze": {"cpu": 3.0, "gpu": 3.0}}
    shares, _ = plan_shares([Demand("eye", 0.4, 16.0, value=2.0), Demand("gaze", 0.4, 16.0)],
                            lambda m, p: lat[m].get(p), ["cpu", "gpu"], None, 0)
    assert "eye" not in shares and shares["gaze"][1] == pytest.approx(1.0 - (2.0 - 1.2) / 1.2)


def test_plan_sends_a_long_model_to_the_cloud_whole():
    # speech (40 ms a run) is worth offloading first; once it is offloaded at all it goes whole, since each
    # local run would block the cpu longer than half of hand's 22 ms budget
    shares, _ = plan_shares([Demand("hand", 0.17, 22.0), Demand("speech", 0.005, 300.0)], _est, ["cpu", "gpu"],
                            "cloud", 4)
    assert shares["speech"] == (1.0, 0.0)


def test_late_odds_of_a_jittered_round_trip():
    # pixel4's cloud: hand tracking 25.2 ms and depth refinement 27.8 ms expected, both against 33.3 ms
    assert late_odds(25.22, 33.33, 0.2) == pytest.approx(0.068, abs=0.002)
    assert late_odds(27.81, 33.33, 0.2) == pytest.approx(0.16, abs=0.005)
    assert late_odds(10.0, 100.0, 0.2) < 1e-20
    assert late_odds(10.0, 10.0, 0.2) == pytest.approx(0.46, abs=0.01)   # the median is below the mean
    assert late_odds(10.0, 9.0, 0.0) == 1.0 and late_odds(10.0, 11.0, 0.0) == 0.0
    assert late_odds(10.0, 0.0, 0.2) == 1.0


def test_plan_offloads_the_model_the_cloud_serves_more_surely():
    # both round trips (20 ms) are risky; "tight" relieves a little more local time per cloud ms (10.5 ms
    # local) but its 24 ms budget makes the round trip late ~16 % of the time, "loose" (30 ms) ~2 %: the
    # cloud takes the loose one (pricing cloud time alone would have picked "tight")
    lat = {"tight": {"cpu": 10.5, "gpu": 10.5, "cloud": 20.0}, "loose": {"cpu": 10.0, "gpu": 10.0, "cloud": 20.0}}
    shares, kept = plan_shares([Demand("tight", 0.1, 24.0), Demand("loose", 0.1, 30.0)],
                               lambda m, p: lat[m].get(p), ["cpu", "gpu"], "cloud", 4)
    assert "tight" not in shares and shares["loose"][0] == pytest.approx(0.35) and kept == 1.0


def test_plan_leaves_out_a_model_nothing_can_run_in_time():
    shares, kept = plan_shares([Demand("hand", 1.0, 5.0)], _est, ["cpu", "gpu"], "cloud", 4)
    assert shares == {} and kept == 1.0


# --------------------------------------------------------------------------- stream rates
def test_stream_rate_is_exact_for_a_periodic_stream_and_stops_after_the_timeout():
    s = Streams(keep=8, timeout=3.0, rel=0.05)
    assert not s.due(0.0)
    for k in range(20):
        s.see(req(k, "hand", deadline=k * 7.5 + 22.0, arrival=k * 7.5, stream="h"))
    assert s.due(20 * 7.5)                    # a new stream
    rates, head = s.rates(20 * 7.5)
    assert rates == {"hand": pytest.approx(1 / 7.5)} and head == {"hand": False}
    s.see(req(20, "hand", deadline=20 * 7.5 + 22.0, arrival=20 * 7.5, stream="h"))
    assert not s.due(20 * 7.5 + 22.5)         # same rate, not silent for 3 periods yet: nothing to re-check
    assert s.due(20 * 7.5 + 22.6)             # silent for more than 3 periods: it has stopped
    assert s.rates(20 * 7.5 + 22.6) == ({}, {})


def test_streams_of_one_model_add_up_and_a_head_is_marked():
    s = Streams(keep=8, timeout=3.0, rel=0.05)
    for k in range(10):
        s.see(req(2 * k, "eye", deadline=k * 10.0 + 16.0, arrival=k * 10.0, stream="e", downstream=3.0))
        s.see(req(2 * k + 1, "eye", deadline=k * 10.0 + 21.0, arrival=k * 10.0 + 5.0, stream="e#b1",
                  downstream=3.0))
    rates, head = s.rates(95.0)
    assert rates["eye"] == pytest.approx(0.2) and head["eye"] is True


# --------------------------------------------------------------------------- the plan inside the policy
PLAT = {"hand": {"cpu": 10.0, "gpu": 10.0, "cloud": 12.0}, "eye": {"cpu": 2.0, "gpu": 2.0}}
PROCS = [proc("cpu"), proc("gpu"), ProcessorView("cloud", "cloud", slots=4, free_slots=4)]


def _drive(policy: EdgertPolicy, period_ms: float, until_ms: float, model: str = "hand", slo_ms: float = 100.0,
           start_ms: float = 0.0, first_id: int = 0) -> list[tuple[int, str | None]]:
    """Feed one request of ``model`` every ``period_ms`` (each decided alone on idle processors)."""
    got = []
    t, i = start_ms, first_id
    while t < until_ms:
        snap = view([req(i, model, deadline=t + slo_ms, arrival=t, frame=i)], PROCS, PLAT)
        got += plan(policy.decide(snap, t))
        t += period_ms
        i += 1
    return got


def test_no_plan_under_light_load():
    pol = EdgertPolicy()
    got = _drive(pol, 20.0, 1000.0)           # 10 ms of work every 20 ms on two processors: 25 % busy
    assert all(p != "cloud" for _, p in got)
    assert pol.plan.shares == {} and pol.plan.replans == 0


def test_overload_offloads_a_share_then_stops_after_the_burst():
    pol = EdgertPolicy()
    burst = _drive(pol, 4.0, 1000.0)          # 10 ms every 4 ms on two processors: 125 % of capacity
    share = pol.plan.shares["hand"][0]
    assert share == pytest.approx(0.32, abs=0.01)   # just enough to bring both processors to 85 %
    late = burst[len(burst) // 2:]
    offloaded = sum(p == "cloud" for _, p in late) / len(late)
    assert offloaded == pytest.approx(share, abs=0.05)   # the credit counter spreads the share exactly
    after = _drive(pol, 20.0, 2000.0, start_ms=1000.0, first_id=10_000)
    assert pol.plan.shares == {}
    assert all(p != "cloud" for _, p in after[len(after) // 4:])   # offload stops once the rate falls


def test_overloaded_and_tightest_budget_follow_the_demand():
    pol = EdgertPolicy()
    _drive(pol, 20.0, 1000.0)
    assert not pol.plan.overloaded and pol.plan.tight_ms == pytest.approx(100.0)
    _drive(pol, 4.0, 2000.0, start_ms=1000.0, first_id=10_000)
    assert pol.plan.overloaded


def test_a_long_run_leaves_an_overloaded_device_for_the_cloud():
    # hand (10 ms, 20 ms budget) at 125 % of two processors: overloaded, tightest budget 20 ms. A speech
    # request (15 ms on the cpu only, > half of 20; 30 ms in the cloud, 300 ms budget) then goes to a free
    # cloud slot although the cpu is idle; on a device that keeps up it runs on the cpu
    lat = {"hand": {"cpu": 10.0, "gpu": 10.0, "cloud": 12.0}, "speech": {"cpu": 15.0, "cloud": 30.0}}

    def speech_goes_to(period_ms: float) -> str | None:
        pol = EdgertPolicy()
        t = 0.0
        for i in range(400):
            t = i * period_ms
            pol.decide(view([req(i, "hand", deadline=t + 20.0, arrival=t, frame=i)], PROCS, lat), t)
        snap = view([req(999, "speech", deadline=t + 300.0, arrival=t)], PROCS, lat)
        assert pol.plan.overloaded == (period_ms < 5.0)
        return pol.decide(snap, t)[0].processor

    assert speech_goes_to(4.0) == "cloud"
    assert speech_goes_to(20.0) == "cpu"


def test_steady_overload_is_planned_once():
    pol = EdgertPolicy()
    _drive(pol, 4.0, 2000.0, slo_ms=4.0)       # a budget of one period: the rate stands from the 2nd arrival
    assert pol.plan.replans == 1               # the demand does not move, so the LP is not solved again


def test_a_stream_faster_than_its_budget_is_planned_until_its_rate_stands_then_never_again():
    # 25 arrivals per 100 ms budget: until 100 ms have passed, the demand counted is the arrivals so far over
    # the budget (no extrapolation), so the LP follows it a few times; then the rate stands and it stops
    pol = EdgertPolicy()
    _drive(pol, 4.0, 200.0)
    settled = pol.plan.replans
    assert 1 <= settled <= 3
    _drive(pol, 4.0, 2000.0, start_ms=200.0, first_id=50)
    assert pol.plan.replans == settled


def test_shed_when_the_cloud_cannot_help():
    pol = EdgertPolicy()
    _drive(pol, 0.5, 500.0, model="eye")      # 2 ms every 0.5 ms on two processors: 200 %, no cloud for eye
    off, shed = pol.plan.shares["eye"]
    assert off == 0.0 and shed == pytest.approx(0.5, abs=0.01)
    fates = [pol.plan.fate(r) for r in [req(100_000 + k, "eye", deadline=600.0, arrival=500.0 + k / 2)
                                        for k in range(20)]]
    assert fates.count(SHED) == 10 and fates.count(LOCAL) == 10 and CLOUD not in fates
    snap = view([req(99_999, "eye", deadline=600.0, arrival=510.0)], PROCS, PLAT)
    got = pol.decide(snap, 510.0)
    if got[0].processor is None:
        assert got[0].reason.startswith("shed under overload")


def test_same_snapshots_same_decisions_and_idempotent():
    a, b = EdgertPolicy(), EdgertPolicy()
    assert _drive(a, 4.0, 600.0) == _drive(b, 4.0, 600.0)
    snap = view([req(50_000, "hand", deadline=700.0, arrival=600.0)], PROCS, PLAT)
    assert plan(a.decide(snap, 600.0)) == plan(a.decide(snap, 600.0)) == plan(b.decide(snap, 600.0))


def test_plan_off_is_the_plain_policy():
    pol = EdgertPolicy(plan=False)
    got = _drive(pol, 4.0, 500.0)
    assert pol.plan.shares == {} and all(p != "cloud" for _, p in got)


def test_several_requests_to_a_multi_slot_cloud_in_one_decision():
    # both processors busy for 50 ms; two requests that only the cloud can make in time: both go now,
    # one per free slot (a single-slot view would have sent one and kept the other waiting)
    procs = [proc("cpu", busy_until=50.0), proc("gpu", busy_until=50.0),
             ProcessorView("cloud", "cloud", slots=4, free_slots=2)]
    snap = view([req(0, "hand", deadline=30.0), req(1, "hand", deadline=31.0, stream="h2"),
                 req(2, "hand", deadline=32.0, stream="h3")], procs, PLAT)
    got = plan(EdgertPolicy().decide(snap, 0.0))
    assert got[:2] == [(0, "cloud"), (1, "cloud")]
    assert (2, "cloud") not in got            # no third free slot: it is not queued behind the others


@pytest.mark.parametrize("opt", ["target", "shed_target", "replan_ms", "replan_delta", "safe_margin",
                                 "cloud_util", "cloud_jitter", "stream_timeout"])
def test_bad_plan_options_rejected(opt):
    with pytest.raises(ValueError, match=f"^{opt} must be > 0, got 0$"):
        OverloadPlan(**{opt: 0})


def test_bad_stream_keep_rejected():
    with pytest.raises(ValueError, match="^stream_keep must be an int >= 2, got 1$"):
        OverloadPlan(stream_keep=1)


def test_requests_without_deadline_are_never_shed_or_offloaded():
    plan_ = OverloadPlan()
    assert plan_.fate(req(1, "m")) == LOCAL   # no deadline
    assert plan_._streams.rates(0.0) == ({}, {})


def _vertex_optimum(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """min c·x over a x = b, x >= 0 by enumerating every basis (the optimum of a bounded LP is a vertex)."""
    from itertools import combinations

    m, n = a.shape
    best = np.inf
    for cols in combinations(range(n), m):
        sub = a[:, cols]
        if abs(np.linalg.det(sub)) < 1e-9:
            continue
        xb = np.linalg.solve(sub, b)
        if (xb >= -1e-9).all():
            best = min(best, float(c[list(cols)] @ xb))
    return best


@pytest.mark.parametrize("degenerate", [False, True])
def test_minimize_matches_vertex_enumeration_on_random_lps(degenerate):
    # a = [A | I] with A > 0 keeps every LP bounded and the slack basis feasible; zeros in b make
    # degenerate pivots (ties, stalls: the Bland's-rule path)
    rng = np.random.default_rng(7 + degenerate)
    for _ in range(60):
        m, k = int(rng.integers(2, 4)), int(rng.integers(2, 5))
        a = np.hstack([rng.integers(1, 5, (m, k)).astype(float), np.eye(m)])
        b = rng.integers(0 if degenerate else 1, 6, m).astype(float)
        if degenerate:
            a[:, :k] = np.where(rng.random((m, k)) < 0.5, a[:, :k], a[0, :k])   # repeated rows: ties
        c = np.concatenate([rng.integers(-5, 3, k).astype(float), np.zeros(m)])
        x = minimize(c, a, b, list(range(k, k + m)))
        assert (x >= 0).all() and np.allclose(a @ x, b, atol=1e-9)
        assert c @ x == pytest.approx(_vertex_optimum(c, a, b), abs=1e-9)
