"""edgert's decision as a whole (scheduler/policies/edgert.py) in small hand-built situations: its options, the
window of most urgent requests, the plan's fates (shed with its reason, offload, whole models, fixed once),
the long-run rule on an overloaded device, the energy objective, and a latency model other than the
built-in estimator.

Where a case needs the overload plan in a given state (shares, fates, overloaded) it sets that state
directly on ``policy.plan`` before the first decision (whose plan check only starts the plan's clock).
"""

from __future__ import annotations

import pytest

from scheduler.policies._energy import EnergyTable
from scheduler.policies._overload import CLOUD, LOCAL
from scheduler.policies.edgert import EdgertPolicy
from scheduler.power import ThermalLevel, ThermalSpec
from scheduler.types import ProcessorView, RequestView, SchedulerView
from tests.scheduler.policy_snapshots import plan, proc, req, view

CLOUD4 = ProcessorView("cloud", "cloud", slots=4, free_slots=4)


# -- options --

@pytest.mark.parametrize("opt", ["eft_slack", "risky_margin", "short_first"])
def test_negative_options_rejected(opt: str) -> None:
    with pytest.raises(ValueError, match=f"^{opt} must be >= 0, got -1$"):
        EdgertPolicy(**{opt: -1})


@pytest.mark.parametrize("window", [0, 1.5, "2"])
def test_window_must_be_a_positive_int(window: object) -> None:
    with pytest.raises(ValueError, match=f"^window must be an int >= 1, got {window!r}$"):
        EdgertPolicy(window=window)  # type: ignore[arg-type]


def test_plan_options_and_risky_margin_reach_the_plan() -> None:
    pol = EdgertPolicy(risky_margin=0.3, target=0.5, window=1, objective="deadlines")
    assert pol.plan.risky_margin == 0.3 and pol.plan.target == 0.5
    assert pol.window == 1 and pol.objective == "deadlines"


# -- the window and the order --

LAT = {"m": {"cpu": 5.0, "gpu": 5.0, "npu": 5.0}}


def test_a_decision_looks_at_the_window_most_urgent_requests() -> None:
    pending = [req(0, "m", deadline=90.0, stream="a"), req(1, "m", deadline=30.0, stream="b"),
               req(2, "m", deadline=60.0, stream="c")]
    got = EdgertPolicy(window=2).decide(view(pending, [proc("cpu"), proc("gpu"), proc("npu")], LAT), 0.0)
    assert plan(got) == [(1, "cpu"), (2, "gpu")]


def test_two_requests_are_placed_most_urgent_first() -> None:
    pending = [req(0, "m", deadline=90.0, stream="a"), req(1, "m", deadline=30.0, stream="b")]
    assert plan(EdgertPolicy().decide(view(pending, [proc("cpu")], LAT), 0.0)) == [(1, "cpu")]


class EstimatorDouble:
    """Test double for a latency model that is not the built-in LatencyEstimator."""

    def expected_ms(self, model: str, processor: str) -> float | None:
        return {"cpu": 10.0, "gpu": 2.0}.get(processor) if model == "m" else None


def test_any_latency_model_will_do() -> None:
    snap = SchedulerView((req(0, "m", deadline=50.0),), (proc("cpu"), proc("gpu")), EstimatorDouble())
    assert plan(EdgertPolicy().decide(snap, 0.0)) == [(0, "gpu")]


# -- the plan's fates --

def test_a_shed_request_is_dropped_with_the_reason_and_the_next_is_placed() -> None:
    pol = EdgertPolicy()
    pol.plan._shares = {"m": (0.0, 1.0)}   # shed every request of m
    pol.plan.kept = 0.5
    got = pol.decide(view([req(0, "m", deadline=50.0), req(1, "n", deadline=60.0)], [proc("cpu")],
                          {"m": {"cpu": 5.0}, "n": {"cpu": 5.0}}), 0.0)
    assert plan(got) == [(0, None), (1, "cpu")]
    assert got[0].reason == ("shed under overload: the device can run at most 50% of the current work in time, "
                             "so a share of 'm', the costliest per request, is dropped on arrival")


def test_a_fate_is_fixed_when_the_request_is_first_seen() -> None:
    pol = EdgertPolicy()
    pol.plan._shares = {"m": (0.5, 0.0)}   # every second request of m offloaded: this one stays local
    snap = view([req(0, "m", deadline=50.0)], [proc("cpu", busy_until=1.0), CLOUD4], {"m": {"cpu": 5.0, "cloud": 8.0}})
    assert plan(pol.decide(snap, 0.0)) == []                      # waits for the cpu (a claim)
    assert pol.plan.fates == {0: LOCAL}
    assert plan(pol.decide(snap, 0.0)) == []                      # deciding again: the same answer


def test_a_request_of_a_model_the_plan_sends_whole_goes_to_the_cloud() -> None:
    pol = EdgertPolicy()
    pol.plan.fates[0] = LOCAL                    # seen before the plan sent m whole
    pol.plan._whole = frozenset({"m"})
    snap = view([req(0, "m", deadline=50.0)], [proc("cpu"), CLOUD4], {"m": {"cpu": 5.0, "cloud": 8.0}})
    assert plan(pol.decide(snap, 0.0)) == [(0, "cloud")]


@pytest.mark.parametrize(("deadline", "where"), [(21.0, "cloud"), (20.5, "cpu")], ids=["edge", "short"])
def test_a_planned_offload_needs_the_risky_margin(deadline: float, where: str) -> None:
    pol = EdgertPolicy()                          # risky_margin 0.05: 20 ms + 1 ms
    pol.plan.fates[0] = CLOUD
    snap = view([req(0, "m", deadline=deadline)], [CLOUD4, proc("cpu")], {"m": {"cpu": 5.0, "cloud": 20.0}})
    assert plan(pol.decide(snap, 0.0)) == [(0, where)]


def test_a_planned_offload_to_a_busy_cloud_stays_local() -> None:
    pol = EdgertPolicy()
    pol.plan.fates[0] = CLOUD
    busy = ProcessorView("cloud", "cloud", busy_until_ms=5.0, queued_ms=0.0, slots=4, free_slots=0)
    snap = view([req(0, "m", deadline=100.0)], [busy, proc("cpu")], {"m": {"cpu": 5.0, "cloud": 20.0}})
    assert plan(pol.decide(snap, 0.0)) == [(0, "cpu")]


# -- the order under overload: the shorter of two requests due about together goes first --

def _first(overloaded: bool, pose_deadline: float = 33.0, **options: float) -> list:
    """A 9 ms pose and a 1 ms face request on one cpu: which one starts now."""
    pol = EdgertPolicy(objective="deadlines", **options)
    pol.plan.overloaded = overloaded
    snap = view([req(0, "pose", deadline=pose_deadline), req(1, "face", deadline=33.5)], [proc("cpu")],
                {"pose": {"cpu": 9.0}, "face": {"cpu": 1.0}})
    return plan(pol.decide(snap, 0.0))


@pytest.mark.parametrize(("overloaded", "pose_deadline", "options", "first"), [
    (False, 33.0, {}, 0),                        # everything fits: plain EDF, the earlier deadline
    (True, 33.0, {}, 1),                         # 33.5 + 2 x 1 < 33 + 2 x 9: the short one
    (True, 33.0, {"short_first": 0.0}, 0),       # the rule off
    (True, 17.4, {}, 0),                         # 17.4 + 18 = 35.4 < 33.5 + 2: due enough earlier, the long one
    (True, 17.6, {}, 1),                         # 35.6 > 35.5
    (True, 33.0, {"short_first": 0.05}, 0),      # 33 + 0.45 < 33.5 + 0.05
], ids=["fits", "overloaded", "off", "edge-below", "edge-above", "weight"])
def test_under_overload_the_shorter_request_due_about_together_goes_first(
        overloaded: bool, pose_deadline: float, options: dict, first: int) -> None:
    assert _first(overloaded, pose_deadline, **options)[0] == (first, "cpu")


def test_under_overload_a_cascade_head_still_leaves_its_later_stages_time() -> None:
    # both 5 ms and due at 40 ms; the head's later stages need 10 ms: its key is 40 - 10 + 5 = 35 < 45
    pol = EdgertPolicy(objective="deadlines")
    pol.plan.overloaded = True
    snap = view([req(0, "tail", deadline=40.0), req(1, "head", deadline=40.0, downstream=10.0)], [proc("cpu")],
                {"tail": {"cpu": 5.0}, "head": {"cpu": 5.0}})
    assert plan(pol.decide(snap, 0.0))[0] == (1, "cpu")


# -- a long run on an overloaded device --

def _long_run(cpu_ms: float, deadline: float, overloaded: bool = True) -> list:
    pol = EdgertPolicy()
    pol.plan.overloaded = overloaded
    pol.plan.tight_ms = 20.0                      # a long run: over half of it, 10 ms
    snap = view([req(0, "s", deadline=deadline)], [CLOUD4, proc("cpu")], {"s": {"cpu": cpu_ms, "cloud": 30.0}})
    return plan(pol.decide(snap, 0.0))


@pytest.mark.parametrize(("cpu_ms", "deadline", "overloaded", "where"), [
    (15.0, 300.0, True, "cloud"),
    (10.0, 300.0, True, "cpu"),                  # exactly half the tightest budget: not long
    (15.0, 300.0, False, "cpu"),
    (15.0, 42.0, True, "cloud"),                 # 30 + 0.4 x 30 = 42: the cloud's margin exactly
    (15.0, 41.0, True, "cpu"),
], ids=["long", "half", "not-overloaded", "margin-edge", "margin-short"])
def test_a_long_run_leaves_an_overloaded_device(cpu_ms: float, deadline: float, overloaded: bool, where: str) -> None:
    assert _long_run(cpu_ms, deadline, overloaded) == [(0, where)]


# -- the energy objective --

def _energy_policy(objective: str, thermal: ThermalSpec | None = None) -> EdgertPolicy:
    return EdgertPolicy(objective=objective, energy=EnergyTable({"cpu": 3.0}, {}, {"m": 1.0}, thermal=thermal))


def test_the_energy_objective_takes_a_cheaper_free_cloud_slot() -> None:
    snap = view([req(0, "m", deadline=100.0)], [proc("cpu"), CLOUD4], {"m": {"cpu": 10.0, "cloud": 20.0}})
    assert plan(_energy_policy("energy").decide(snap, 0.0)) == [(0, "cloud")]     # 1 mJ of radio < 30 mJ
    assert plan(_energy_policy("deadlines").decide(snap, 0.0)) == [(0, "cpu")]


def test_the_energy_objective_plans_homes_with_the_demand_and_watches_the_heat() -> None:
    thermal = ThermalSpec(10.0, 10.0, 25.0, (ThermalLevel("light", 35.0, {"cpu": 0.9}),))
    pol = _energy_policy("balanced", thermal)
    assert pol.green is not None and pol.watch is not None
    assert pol.plan.on_demand == pol.green.plan
    pol.decide(view([req(0, "m", deadline=100.0)], [proc("cpu")], {"m": {"cpu": 10.0}}), 0.0)
    assert pol.green.frugal is False


def test_no_energy_choice_while_overloaded() -> None:
    pol = _energy_policy("energy")
    pol.plan.overloaded = True
    snap = view([req(0, "m", deadline=100.0)], [proc("cpu"), CLOUD4], {"m": {"cpu": 10.0, "cloud": 20.0}})
    assert plan(pol.decide(snap, 0.0)) == [(0, "cpu")]


def test_a_request_without_deadline_waits_when_nothing_is_free() -> None:
    snap = view([RequestView(0, "m", 0.0)], [proc("cpu", busy_until=5.0)], {"m": {"cpu": 1.0}})
    assert plan(EdgertPolicy().decide(snap, 0.0)) == []


# -- order and the late request's choices (no local processor makes the effective deadline with the margin) --

def test_the_effective_deadline_orders_the_requests() -> None:
    # one gpu: the cascade head (deadline 20, 9 ms downstream: 11) goes first; the other (15) waits for it
    pending = [req(0, "b", deadline=15.0, stream="x"), req(1, "b", deadline=20.0, downstream=9.0, stream="y")]
    assert plan(EdgertPolicy().decide(view(pending, [proc("gpu")], {"b": {"gpu": 6.0}}), 0.0)) == [(1, "gpu")]


def test_unsupported_among_the_allowed_processors_says_so() -> None:
    got = EdgertPolicy().decide(view([req(0, "m", allowed=("npu",))], [proc("cpu")], {"m": {"cpu": 1.0}}), 0.0)
    assert got[0].reason == "no available processor can run model 'm' among the allowed processors ['npu']"


@pytest.mark.parametrize(("cpu_busy", "deadline", "downstream", "want"), [
    (3.0, 12.0, 0.0, [(0, "cloud")]),   # cloud 12 = target; the cpu (11) lacks the margin: the cloud
    (10.0, 12.0, 2.0, [(0, "cloud")]),  # nothing makes 10; the cloud makes the frame deadline exactly
    (4.0, 14.0, 4.0, []),               # cpu and cloud both finish at 12, after 10: the cpu (a claim)
], ids=["cloud-at-target", "cloud-at-deadline", "tie-local"])
def test_a_late_request_takes_what_makes_it_in_time(cpu_busy: float, deadline: float, downstream: float,
                                                     want: list) -> None:
    snap = view([req(0, "h", deadline=deadline, downstream=downstream)], [proc("cpu", busy_until=cpu_busy), CLOUD4],
                {"h": {"cpu": 8.0, "cloud": 12.0}})
    assert plan(EdgertPolicy().decide(snap, 0.0)) == want


def test_a_local_finish_exactly_at_the_deadline_without_the_margin_still_runs() -> None:
    snap = view([req(0, "h", deadline=8.0)], [proc("cpu")], {"h": {"cpu": 8.0}})
    assert plan(EdgertPolicy().decide(snap, 0.0)) == [(0, "cpu")]


def test_a_request_that_could_finish_just_in_time_alone_stays_pending() -> None:
    # "a" (effective deadline 4.5) takes the cpu until 3; "b" could end at 5 = its deadline on an idle cpu
    # (seen at an earlier decision: on arrival it would be dropped behind "a", 8 > 5)
    pending = [req(0, "a", deadline=6.0, downstream=1.5), req(1, "b", deadline=5.0)]
    pol = EdgertPolicy()
    pol.plan.fate(pending[1])
    got = pol.decide(view(pending, [proc("cpu")], {"a": {"cpu": 3.0}, "b": {"cpu": 5.0}}), 0.0)
    assert plan(got) == [(0, "cpu")]


def test_the_effective_deadline_decides_whether_a_free_processor_is_in_time() -> None:
    # the idle cpu ends at 12 > 20 - 10 with the margin; the cloud (5) makes the effective deadline
    snap = view([req(0, "h", deadline=20.0, downstream=10.0)], [proc("cpu"), CLOUD4], {"h": {"cpu": 10.0, "cloud": 5.0}})
    assert plan(EdgertPolicy().decide(snap, 0.0)) == [(0, "cloud")]


def test_a_free_processor_is_taken_when_the_wait_saves_exactly_the_slack() -> None:
    # idle cpu ends at 10; the gpu (busy until 3) at 6.5: sooner by 3.5 = its run time x eft_slack 1: not more
    snap = view([req(0, "h", deadline=30.0)], [proc("cpu"), proc("gpu", busy_until=3.0)],
                {"h": {"cpu": 10.0, "gpu": 3.5}})
    assert plan(EdgertPolicy().decide(snap, 0.0)) == [(0, "cpu")]


# -- the cloud's last safe moment (cloud listed first; margin 0.25, cloud_margin 0.5: exact sums) --

@pytest.mark.parametrize(("now", "cpu_busy", "deadline", "guard", "want"), [
    (0.0, 6.0, 18.0, 5.0, [(0, "cloud")]),    # cloud 12 + 6 = 18: its last safe moment; a 6 ms wait > 2 ms slack
    (0.0, 4.0, 18.0, 5.0, [(0, "cloud")]),    # a 4 ms wait = the 4 ms slack left: fragile
    (100.0, 103.5, 118.0, 5.0, []),           # a 3.5 ms wait, 4.5 ms slack: the claim holds
    (0.0, 6.0, 18.0, 0.0, []),                # no guard: not yet the last safe moment
    (0.0, 6.0, 17.5, 5.0, []),                # the cloud is late with its margin: wait for the cpu (16 <= 17.5)
], ids=["fragile", "wait-equals-slack", "robust", "no-guard", "cloud-late"])
def test_the_cloud_at_its_last_safe_moment(now: float, cpu_busy: float, deadline: float, guard: float,
                                           want: list) -> None:
    pol = EdgertPolicy(margin=0.25, cloud_margin=0.5, guard_ms=guard)
    snap = view([req(0, "h", deadline=deadline, arrival=now)], [CLOUD4, proc("cpu", busy_until=cpu_busy)],
                {"h": {"cpu": 8.0, "cloud": 12.0}})
    assert plan(pol.decide(snap, now)) == want


class ChooserDouble:
    """Test double for the energy choice: records what it was asked and keeps the deadline rules' pick."""

    frugal = False

    def __init__(self) -> None:
        self.asked: list[tuple] = []

    def choose(self, model, row, pick, finish, procs, target, now_ms):
        self.asked.append((model, list(row), pick, finish, target, now_ms))
        return pick, finish


def test_the_energy_choice_is_asked_about_a_claim_with_the_request_s_figures() -> None:
    pol = EdgertPolicy(plan=False)
    chooser = ChooserDouble()
    pol.green = chooser
    snap = view([req(0, "h", deadline=40.0, downstream=5.0, arrival=10.0)], [proc("cpu", busy_until=15.0)],
                {"h": {"cpu": 8.0}})
    assert plan(pol.decide(snap, 10.0)) == []                       # waits for the cpu: a claim
    assert chooser.asked == [("h", [(0, 8.0)], 0, 23.0, 35.0, 10.0)]
