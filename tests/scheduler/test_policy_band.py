"""Band's five baselines over hand-built snapshots: each row is (snapshot, now_ms, expected plan).

Expected plans are worked out by hand from Band's source (mrsnu/band,
band/scheduler/*.cc and band/planner.cc); the comment on each row says why.
"""

from __future__ import annotations

import pytest

from scheduler.policies._band import PAST_DEADLINE
from scheduler.registry import make_policy
from tests.scheduler.policy_snapshots import plan, proc, req, view

LAT = {
    "a": {"cpu": 10.0, "gpu": 2.0, "npu": 1.0},
    "b": {"cpu": 12.0, "gpu": 6.0},
    "c": {"cpu": 40.0, "cloud": 30.0},
    "s": {"cloud": 25.0},
}
CG = [proc("cpu"), proc("gpu")]

# ----------------------------------------------------------------------------- fixed_worker
FIXED = [
    # every request goes at once to its model's fastest local processor, busy or not
    ("fastest local, queues build",
     view([req(0, "a"), req(1, "b"), req(2, "a")], [proc("cpu"), proc("gpu"), proc("npu", busy_until=50)], LAT),
     {}, [(0, "npu"), (1, "gpu"), (2, "npu")]),
    # the configured model->worker map wins
    ("mapping", view([req(0, "a"), req(1, "b")], [proc("cpu"), proc("gpu"), proc("npu")], LAT),
     {"mapping": {"a": "cpu"}}, [(0, "cpu"), (1, "gpu")]),
    # the cloud is not a static home when a local processor can run the model
    ("cloud left out", view([req(0, "c")], [proc("cpu"), proc("cloud")], LAT), {}, [(0, "cpu")]),
    # ... but a model only the cloud serves goes there
    ("cloud only", view([req(0, "s")], [proc("cpu"), proc("cloud")], LAT), {}, [(0, "cloud")]),
    # a direct request (allowed) is Band's target_worker_id
    ("direct request", view([req(0, "a", allowed=("cpu",))], [proc("cpu"), proc("npu")], LAT), {}, [(0, "cpu")]),
    # mapped processor unavailable: fall back to the fastest available
    ("mapped unavailable", view([req(0, "a")], [proc("cpu"), proc("npu", available=False)], LAT),
     {"mapping": {"a": "npu"}}, [(0, "cpu")]),
    # the planner's SLO check: already past its deadline -> finished, not run
    ("past deadline", view([req(0, "a", deadline=3.0)], CG, LAT), {}, [(0, None)]),
    ("unsupported", view([req(0, "zzz")], CG, LAT), {}, [(0, None)]),
]


@pytest.mark.parametrize("snap, opts, want", [c[1:] for c in FIXED], ids=[c[0] for c in FIXED])
def test_fixed_worker(snap, opts, want):
    assert plan(make_policy("fixed_worker", **opts).decide(snap, 5.0)) == want


def test_fixed_worker_map_is_fixed_ahead_of_time():
    """The static best comes from the estimator's priors: measurements that make another processor look
    faster do not move a model (Band's model->worker map is configuration), but a new seed does."""
    from scheduler.estimator import LatencyEstimator
    from scheduler.types import SchedulerView

    est = LatencyEstimator(0.5, {"a": {"cpu": 10.0, "gpu": 2.0}})
    pol = make_policy("fixed_worker")
    snap = lambda: SchedulerView((req(0, "a"),), (proc("cpu"), proc("gpu")), est)  # noqa: E731
    assert plan(pol.decide(snap(), 0.0)) == [(0, "gpu")]
    for _ in range(10):
        est.update("a", "gpu", 50.0)   # the gpu now measures far slower than the cpu's prior
    assert est.expected_ms("a", "gpu") > 40.0 and est.prior_ms("a", "gpu") == 2.0
    assert plan(pol.decide(snap(), 0.0)) == [(0, "gpu")]
    est.seed("a", "gpu", 20.0)         # re-profiled: the map is rebuilt
    assert plan(pol.decide(snap(), 0.0)) == [(0, "cpu")]


def test_fixed_worker_follows_availability_and_estimators_across_decisions():
    """One instance, many snapshots: its per-model target cache must follow a processor going down and
    coming back, a new estimator, and an estimator without priors (ranked on current estimates)."""
    from scheduler.estimator import LatencyEstimator
    from scheduler.types import SchedulerView

    pol = make_policy("fixed_worker")
    est = LatencyEstimator(0.5, LAT)
    up = (proc("cpu"), proc("gpu"), proc("npu"))
    down = (proc("cpu"), proc("gpu"), proc("npu", available=False))
    for procs, want in [(up, "npu"), (down, "gpu"), (up, "npu"), (down, "gpu")]:
        assert plan(pol.decide(SchedulerView((req(0, "a"),), procs, est), 0.0)) == [(0, want)]
    other = LatencyEstimator(0.5, {"a": {"cpu": 1.0, "gpu": 2.0, "npu": 3.0}})
    assert plan(pol.decide(SchedulerView((req(0, "a"),), up, other), 0.0)) == [(0, "cpu")]

    class CurrentOnly:   # a test double: an estimator with expected_ms and no priors
        def __init__(self) -> None:
            self.ms = {"cpu": 5.0, "gpu": 1.0}

        def expected_ms(self, model: str, processor: str) -> float | None:
            return self.ms.get(processor)

    cur = CurrentOnly()
    cg = (proc("cpu"), proc("gpu"))
    assert plan(pol.decide(SchedulerView((req(0, "a"),), cg, cur), 0.0)) == [(0, "gpu")]
    cur.ms = {"cpu": 1.0, "gpu": 5.0}
    assert plan(pol.decide(SchedulerView((req(0, "a"),), cg, cur), 0.0)) == [(0, "cpu")]


def test_fixed_worker_answers_as_a_fresh_instance_across_many_decisions():
    """One instance's cached targets (its inline common case) give what a fresh instance's full rule gives,
    over random snapshots: requests in time or past their deadline, with and without an allowed list, of a model
    no processor runs, while processors go down and come back."""
    import random

    from scheduler.estimator import LatencyEstimator
    from scheduler.types import SchedulerView

    rng = random.Random(7)
    est = LatencyEstimator(0.5, LAT)
    pol = make_policy("fixed_worker")
    for i in range(400):
        procs = (proc("cpu"), proc("gpu", available=rng.random() < 0.8), proc("npu", available=rng.random() < 0.8))
        reqs = [req(10 * i + k, rng.choice("aab" if rng.random() < 0.9 else "abz"),
                    deadline=rng.choice([100.0, 100.0, 3.0]), allowed=None if rng.random() < 0.9 else ("cpu",))
                for k in range(rng.randint(1, 4))]
        snap = SchedulerView(tuple(reqs), procs, est)
        assert plan(pol.decide(snap, 5.0)) == plan(make_policy("fixed_worker").decide(snap, 5.0)), i


def test_estimator_prior_tracks_seeds_not_updates():
    from scheduler.estimator import LatencyEstimator

    est = LatencyEstimator(0.1, {"m": {"cpu": 4.0}})
    v = est.prior_version
    est.update("m", "cpu", 14.0)
    assert est.expected_ms("m", "cpu") == pytest.approx(5.0) and est.prior_ms("m", "cpu") == 4.0
    assert est.prior_version == v
    est.update("m", "cloud", 30.0)     # a pair learnt without a seed: its first measurement is its prior
    assert est.prior_ms("m", "cloud") == 30.0 and est.prior_version == v + 1
    est.forget("m", "cloud")
    assert est.prior_ms("m", "cloud") is None and est.expected_ms("m", "cloud") is None


# ----------------------------------------------------------------------------- round_robin
RR = [
    # each idle worker in order takes the first queued job it can run
    ("first supported", view([req(0, "b"), req(1, "a"), req(2, "a")], CG, LAT), [(0, "cpu"), (1, "gpu")]),
    # a busy worker takes nothing, even if it is the fastest
    ("busy skipped", view([req(0, "a"), req(1, "a")], [proc("cpu"), proc("gpu", busy_until=9)], LAT), [(0, "cpu")]),
    # a worker with a queue is not idle
    ("queued not idle", view([req(0, "a")], [proc("cpu", queued=3, n_queued=1), proc("gpu")], LAT), [(0, "gpu")]),
    # the npu runs only "a": it skips the older "b"
    ("skips unsupported", view([req(0, "b"), req(1, "a")], [proc("cpu", busy_until=9), proc("npu")], LAT),
     [(1, "npu")]),
    # past-deadline job dropped by the planner check, the worker takes the next one
    ("late dropped, next taken", view([req(0, "a", deadline=1.0), req(1, "a")], [proc("cpu")], LAT),
     [(0, None), (1, "cpu")]),
    # no estimate is consulted: the cpu takes "a" although the gpu is 5x faster and idle next
    ("no estimates", view([req(0, "a")], CG, LAT), [(0, "cpu")]),
]


@pytest.mark.parametrize("snap, want", [c[1:] for c in RR], ids=[c[0] for c in RR])
def test_round_robin(snap, want):
    assert plan(make_policy("round_robin").decide(snap, 5.0)) == want


# ------------------------------------------------------------- shortest_expected_latency / HEFT
# gpu busy for 5 ms more; x: gpu 1 / cpu 7, y: gpu 2 / cpu 8.5 (now = 0)
YIELD = view([req(0, "x"), req(1, "y")], [proc("cpu"), proc("gpu", busy_until=5)],
             {"x": {"cpu": 7.0, "gpu": 1.0}, "y": {"cpu": 8.5, "gpu": 2.0}})

SEL = [
    # most urgent = largest shortest latency: b (6 on gpu) before a (2 on gpu); a's best is then
    # the gpu again (6 + 2 < 10 on cpu), which is now busy, so a stays pending (no move to the cpu)
    ("largest shortest first", view([req(0, "a"), req(1, "b")], CG, LAT), {}, [(1, "gpu")]),
    # y (7 on busy gpu) and x (6 on busy gpu) both stay pending: SEL does not yield like HEFT
    ("no yield", YIELD, {}, []),
    # equal totals: the later processor wins (Band compares with >=)
    ("tie to later processor", view([req(0, "t")], CG, {"t": {"cpu": 5.0, "gpu": 5.0}}), {}, [(0, "gpu")]),
    # window: only the first window_size requests are looked at
    ("window", view([req(0, "a"), req(1, "a"), req(2, "b")], [proc("cpu"), proc("gpu"), proc("npu")], LAT),
     {"window_size": 2}, [(0, "npu")]),
    ("past deadline", view([req(0, "a", deadline=-1.0)], CG, LAT), {}, [(0, None)]),
    ("unsupported", view([req(0, "zzz"), req(1, "a")], CG, LAT), {}, [(0, None), (1, "gpu")]),
]

HEFT = [
    ("largest shortest first", view([req(0, "a"), req(1, "b")], CG, LAT), {}, [(1, "gpu")]),
    # y is most urgent but its best (gpu) is busy: it yields, adding 2 ms to the gpu's wait;
    # x then finishes earliest on the idle cpu (7 < 5 + 2 + 1) and goes there
    ("yield", YIELD, {}, [(0, "cpu")]),
    # no idle processor: nothing to do
    ("no idle", view([req(0, "a")], [proc("cpu", busy_until=3), proc("gpu", busy_until=4)], LAT), {}, []),
    # the same model twice: only the first is considered per round, so the older goes first
    ("dedupe by model", view([req(0, "a"), req(1, "a")], [proc("npu"), proc("gpu")], LAT), {},
     [(0, "npu"), (1, "gpu")]),
    ("window", view([req(0, "a"), req(1, "b")], CG, LAT), {"window_size": 1}, [(0, "gpu")]),
    ("past deadline", view([req(0, "a", deadline=-1.0)], CG, LAT), {}, [(0, None)]),
]


@pytest.mark.parametrize("snap, opts, want", [c[1:] for c in SEL], ids=[c[0] for c in SEL])
def test_shortest_expected_latency(snap, opts, want):
    assert plan(make_policy("shortest_expected_latency", **opts).decide(snap, 0.0)) == want


@pytest.mark.parametrize("snap, opts, want", [c[1:] for c in HEFT], ids=[c[0] for c in HEFT])
def test_heterogeneous_earliest_finish_time(snap, opts, want):
    assert plan(make_policy("heterogeneous_earliest_finish_time", **opts).decide(snap, 0.0)) == want


# ----------------------------------------------------------------------------- least_slack_time_first
LSF = [
    # r2 can finish no earlier than 2 ms > its deadline 1 ms: dropped. Slack order: r2, r1 (8 - 6 = 2),
    # r0 (98). r1 -> gpu; r0's best is then the gpu (6 + 2 < 10) which already holds a job: pending.
    ("slack order, drop, one per worker",
     view([req(0, "a", deadline=100.0), req(1, "b", deadline=8.0), req(2, "a", deadline=1.0)], CG, LAT),
     [(2, None), (1, "gpu")]),
    # no idle worker: Band returns before looking, not even drops
    ("no idle, no drops",
     view([req(0, "a", deadline=1.0)], [proc("cpu", busy_until=5), proc("gpu", busy_until=5)], LAT), []),
    # the best worker is busy (not idle at the start): the job waits although the cpu is idle
    ("best busy waits",
     view([req(0, "a", deadline=50.0)], [proc("cpu"), proc("gpu", busy_until=3)], LAT), []),
    # a request without a deadline sorts last and is never dropped
    ("no deadline last",
     view([req(0, "a"), req(1, "a", deadline=30.0)], [proc("npu"), proc("gpu")], LAT), [(1, "npu"), (0, "gpu")]),
]


@pytest.mark.parametrize("snap, want", [c[1:] for c in LSF], ids=[c[0] for c in LSF])
def test_least_slack_time_first(snap, want):
    assert plan(make_policy("least_slack_time_first").decide(snap, 0.0)) == want


def test_least_slack_reasons_name_the_finish_and_deadline():
    snap = view([req(0, "a", deadline=1.0), req(1, "a", deadline=-2.0)], CG, LAT)
    reasons = {a.request_id: a.reason for a in make_policy("least_slack_time_first").decide(snap, 0.0)}
    assert reasons[0] == ("cannot meet its deadline: best expected finish 2.00 ms on gpu > deadline 1.00 ms "
                          "(least slack first)")
    assert reasons[1] == PAST_DEADLINE


@pytest.mark.parametrize("name", ["shortest_expected_latency", "heterogeneous_earliest_finish_time",
                                  "least_slack_time_first"])
def test_window_size_must_be_positive(name):
    with pytest.raises(ValueError, match="window_size must be >= 1, got 0"):
        make_policy(name, window_size=0)
