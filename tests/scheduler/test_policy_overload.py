"""edgert's overload plan: the fluid utilization, offload/shed shares, fates, and determinism."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.policies._overload import CLOUD, LOCAL, SHED, OverloadPlan, fluid_utilization
from scheduler.policies.edgert import EdgertPolicy
from scheduler.types import ProcessorView
from tests.scheduler.policy_snapshots import plan, proc, req, view


@pytest.mark.parametrize("work, want", [
    ([[1.0, 1.0]], 0.5),                              # one class split evenly over two equal processors
    ([[0.6, None], [0.2, 0.2]], 0.6),                 # a cpu-only class pins p0; the other goes to p1
    ([[1.0, 3.0], [3.0, 1.0]], 1.0),                  # comparative advantage: each on its own fast processor
    ([[0.9, 0.9, 0.9]], 0.3),
    ([[0.307 * 0.36 / 0.307, 0.841 * 0.36, 0.307 * 0.36]], None),   # smoke: three processors
])
def test_fluid_utilization_matches_the_lp(work, want):
    got = fluid_utilization(work)
    if want is not None:
        assert got == pytest.approx(want, rel=0.02)
        assert got <= want + 1e-9          # the dual never over-estimates the LP optimum
    else:
        assert 0.0 < got < sum(min(v for v in row if v is not None) for row in work)


def test_fluid_utilization_of_nothing():
    assert fluid_utilization([]) == 0.0


LAT = {"hand": {"cpu": 10.0, "gpu": 10.0, "cloud": 12.0}, "eye": {"cpu": 2.0, "gpu": 2.0}}
PROCS = [proc("cpu"), proc("gpu"), ProcessorView("cloud", "cloud", slots=4, free_slots=4)]


def _drive(policy: EdgertPolicy, period_ms: float, until_ms: float, model: str = "hand", slo_ms: float = 100.0,
           start_ms: float = 0.0, first_id: int = 0) -> list[tuple[int, str | None]]:
    """Feed one request of ``model`` every ``period_ms`` (each decided alone on idle processors)."""
    got = []
    t, i = start_ms, first_id
    while t < until_ms:
        snap = view([req(i, model, deadline=t + slo_ms, arrival=t, frame=i)], PROCS, LAT)
        got += plan(policy.decide(snap, t))
        t += period_ms
        i += 1
    return got


def test_no_plan_under_light_load():
    pol = EdgertPolicy()
    got = _drive(pol, 20.0, 1000.0)           # 10 ms of work every 20 ms on two processors: 25 % busy
    assert all(p != "cloud" for _, p in got)
    assert pol.plan.shares == {}


def test_overload_offloads_a_share_then_stops_after_the_burst():
    pol = EdgertPolicy()
    burst = _drive(pol, 4.0, 1000.0)          # 10 ms every 4 ms on two processors: 125 % of capacity
    share = pol.plan.shares["hand"][0]
    assert 0.2 < share < 0.7                  # enough to get under 85 %, not everything
    late = burst[len(burst) // 2:]
    offloaded = sum(p == "cloud" for _, p in late) / len(late)
    assert offloaded == pytest.approx(share, abs=0.05)   # the credit counter spreads the share exactly
    after = _drive(pol, 20.0, 2000.0, start_ms=1000.0, first_id=10_000)
    assert pol.plan.shares == {}
    assert all(p != "cloud" for _, p in after[len(after) // 4:])   # offload stops once the rate falls


def test_shed_when_the_cloud_cannot_help():
    pol = EdgertPolicy()
    _drive(pol, 0.5, 500.0, model="eye")      # 2 ms every 0.5 ms on two processors: 200 %, no cloud for eye
    off, shed = pol.plan.shares["eye"]
    assert off == 0.0 and 0.3 < shed < 0.7
    snap = view([req(99_999, "eye", deadline=600.0, arrival=500.0)], PROCS, LAT)
    fates = [pol.plan.fate(r) for r in [req(100_000 + k, "eye", deadline=600.0, arrival=500.0) for k in range(20)]]
    assert SHED in fates and LOCAL in fates and CLOUD not in fates
    got = pol.decide(snap, 500.0)
    if got[0].processor is None:
        assert got[0].reason.startswith("shed under overload")


def test_same_snapshots_same_decisions_and_idempotent():
    a, b = EdgertPolicy(), EdgertPolicy()
    assert _drive(a, 4.0, 600.0) == _drive(b, 4.0, 600.0)
    snap = view([req(50_000, "hand", deadline=700.0, arrival=600.0)], PROCS, LAT)
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
                 req(2, "hand", deadline=32.0, stream="h3")], procs, LAT)
    got = plan(EdgertPolicy().decide(snap, 0.0))
    assert got[:2] == [(0, "cloud"), (1, "cloud")]
    assert (2, "cloud") not in got            # no third free slot: it is not queued behind the others


@pytest.mark.parametrize("opt", ["target", "shed_target", "window_ms", "replan_ms", "safe_margin"])
def test_bad_plan_options_rejected(opt):
    with pytest.raises(ValueError, match=f"^{opt} must be > 0, got 0$"):
        OverloadPlan(**{opt: 0})


@pytest.mark.parametrize("seed", range(20))
def test_greedy_utilization_bounds_the_fluid_optimum_from_above(seed):
    from scheduler.policies._overload import fluid_utilization, greedy_utilization

    rng = np.random.default_rng(seed)
    work = [[None if rng.random() < 0.2 else float(rng.random()) for _ in range(3)] for _ in range(6)]
    work = [row if any(v is not None for v in row) else [0.5, None, None] for row in work]
    assert greedy_utilization(work) >= fluid_utilization(work) - 1e-9


def test_requests_without_deadline_are_never_shed_or_offloaded():
    plan_ = OverloadPlan()
    r = req(1, "m")  # no deadline
    assert plan_.fate(r) == LOCAL
    assert plan_._counts == {}
