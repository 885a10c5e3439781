"""edgert's default policy over hand-built snapshots: (snapshot, now_ms, expected plan) per row."""

from __future__ import annotations

import pytest

from scheduler.policies.edgert import EdgertPolicy
from scheduler.registry import DEFAULT_POLICY, make_policy
from tests.scheduler.policy_snapshots import plan, proc, req, view

LAT = {
    "a": {"cpu": 10.0, "gpu": 2.0, "npu": 1.0},
    "b": {"cpu": 12.0, "gpu": 6.0},
    "h": {"cpu": 8.0, "cloud": 12.0},
    "big": {"cpu": 30.0, "cloud": 15.0},
    "c": {"cpu": 6.0, "gpu": 4.0},
    "d": {"cpu": 20.0, "gpu": 9.0},
    "e": {"cpu": 12.0, "gpu": 6.0},
}
CG = [proc("cpu"), proc("gpu")]

CASES = [
    # EDF: the later arrival with the earlier deadline goes first and gets the gpu (6); the other
    # then finishes at 12 on either processor, a tie the first in view order (the idle cpu) wins
    ("edf", view([req(0, "b", deadline=20.0), req(1, "b", deadline=8.0)], CG, LAT), 0.0,
     [(1, "gpu"), (0, "cpu")]),
    # cascade-aware: r0's frame deadline is later but 9 ms of downstream work leaves it 11 ms
    ("cascade-aware", view([req(0, "b", deadline=15.0), req(1, "b", deadline=20.0, downstream=9.0)], CG, LAT),
     0.0, [(1, "gpu"), (0, "cpu")]),
    # idle first: the idle cpu makes the deadline with 20 % headroom (12 <= 30) and the faster gpu, busy
    # until 9, would finish at 11, not sooner by more than its own run time (11 + 2 >= 10): start on the cpu
    ("idle first", view([req(0, "a", deadline=30.0)], [proc("cpu"), proc("gpu", busy_until=9.0)], LAT), 0.0,
     [(0, "cpu")]),
    # earliest finish: the gpu, busy until 3, finishes at 5, sooner than the idle cpu (10) by more than its
    # run time (5 + 2 < 10): the request waits for the gpu (late dispatch) instead of taking the slow cpu
    ("earliest finish over idle", view([req(0, "a", deadline=30.0)], [proc("cpu"), proc("gpu", busy_until=3.0)],
                                       LAT), 0.0, []),
    # late dispatch: the cpu is too slow for a deadline of 11 (12 > 11); the gpu makes it after its
    # current job (3 + 2 * 1.2 <= 11), so the request waits for it, pending, instead of queueing
    ("late dispatch", view([req(0, "a", deadline=11.0)], [proc("cpu"), proc("gpu", busy_until=3.0)], LAT), 0.0, []),
    # ... and a less urgent "b" takes the idle cpu meanwhile (the gpu is claimed until 5)
    ("claims respected",
     view([req(0, "a", deadline=11.0), req(1, "b", deadline=40.0)], [proc("cpu"), proc("gpu", busy_until=3.0)],
          LAT), 0.0, [(1, "cpu")]),
    # hopeless: even the fastest processor from now finishes at 1 > 0.5: dropped now
    ("drop hopeless", view([req(0, "a", deadline=0.5)], [proc("cpu"), proc("npu")], LAT), 0.0, [(0, None)]),
    # could make it alone (6 <= 8) but not behind the more urgent claim (12 > 8): dropped on arrival (a request
    # seen at an earlier decision stays pending instead: test_behind_a_claim_a_request_seen_before_stays_pending)
    ("behind the queue on arrival",
     view([req(0, "b", deadline=7.0), req(1, "b", deadline=8.0, stream="b2")], [proc("gpu")], LAT), 0.0,
     [(0, "gpu"), (1, None)]),
    # local first: the cpu makes it (8 <= 20), the faster-to-return cloud is left out
    ("local first", view([req(0, "h", deadline=20.0)], [proc("cpu"), proc("cloud")], LAT), 0.0, [(0, "cpu")]),
    # the cpu is busy for 10 more ms: local finish 18 > 15, the cloud makes it (12): offload
    ("cloud on overflow",
     view([req(0, "h", deadline=15.0)], [proc("cpu", busy_until=10.0), proc("cloud")], LAT), 0.0, [(0, "cloud")]),
    # waiting for the cpu (busy until 6) would make it (6 + 8 * 1.2 = 15.6 <= 20), but this is the cloud's last
    # safe moment (12 + 0.4 * 12 = 16.8, within 5 ms of 20) and the claim is fragile (a 6 ms wait, 4.4 ms of
    # slack left): it goes to the cloud now
    ("cloud's last safe moment",
     view([req(0, "h", deadline=20.0)], [proc("cpu", busy_until=6.0), proc("cloud")], LAT), 0.0, [(0, "cloud")]),
    # the same moment with a robust claim (a 5 ms wait, 5.4 ms of slack): it stays local, waiting for the cpu
    ("robust claim stays local",
     view([req(0, "h", deadline=20.0)], [proc("cpu", busy_until=5.0), proc("cloud")], LAT), 0.0, []),
    # no swap when the holder has nowhere else to go: the urgent "e" (deadline 10) needs the gpu (6 ms; the
    # cpu's 12 ms is too slow), so "d" (deadline 13; gpu 9 ms after e's 6 = 15, cpu 20) is dropped on arrival
    ("no swap when the holder has nowhere to go",
     view([req(0, "e", deadline=10.0), req(1, "d", deadline=13.0)], CG, LAT), 0.0, [(0, "gpu"), (1, None)]),
    # swap: the urgent "c" (deadline 10) takes the idle gpu (4 ms) first; "d" (deadline 13) makes it only on
    # the gpu (9 ms, cpu 20 ms); "c" also makes it on the idle cpu (6 * 1.2 <= 10): they swap, both start now
    ("swap", view([req(0, "c", deadline=10.0), req(1, "d", deadline=13.0)], CG, LAT), 0.0,
     [(1, "gpu"), (0, "cpu")]),
    # with more time left the cloud stays open: it waits for the cpu
    ("waits while the cloud stays open",
     view([req(0, "h", deadline=30.0)], [proc("cpu", busy_until=5.0), proc("cloud")], LAT), 0.0, []),
    # the burst has passed (cpu idle again): the same request stays local
    ("back to local", view([req(0, "h", deadline=15.0)], [proc("cpu"), proc("cloud")], LAT), 0.0, [(0, "cpu")]),
    # neither makes the effective deadline, the cloud makes the frame deadline: cloud
    ("own deadline", view([req(0, "big", deadline=20.0, downstream=10.0)], [proc("cpu"), proc("cloud")], LAT), 0.0,
     [(0, "cloud")]),
    # several cloud slots: the free one is used
    ("cloud slots",
     view([req(0, "h", deadline=15.0)], [proc("cpu", busy_until=10.0), proc("cloud0", "cloud", busy_until=9.0),
                                         proc("cloud1", "cloud")],
          {"h": {"cpu": 8.0, "cloud0": 12.0, "cloud1": 12.0}}), 0.0, [(0, "cloud1")]),
    ("unsupported", view([req(0, "zzz"), req(1, "a")], CG, LAT), 0.0, [(0, None), (1, "gpu")]),
    ("allowed", view([req(0, "a", allowed=("cpu",))], CG, LAT), 0.0, [(0, "cpu")]),
    ("unavailable skipped", view([req(0, "a")], [proc("cpu"), proc("gpu", available=False)], LAT), 0.0, [(0, "cpu")]),
]


@pytest.mark.parametrize("snap, now, want", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_edgert(snap, now, want):
    assert plan(make_policy("edgert").decide(snap, now)) == want


def test_default_policy_is_edgert():
    assert DEFAULT_POLICY == "edgert"
    assert isinstance(make_policy(None), EdgertPolicy)


# --------------------------------------------------------------------------- superseding
def _frames(d_old: float, d_new: float):
    return view([req(0, "b", deadline=d_old, stream="s", frame=7), req(1, "b", deadline=d_new, stream="s", frame=8)],
                [proc("gpu")], LAT)


def test_newer_frame_supersedes_older_when_both_cannot_run():
    # gpu: frame 7 would run 0-6, frame 8 then ends at 12 > 10: frame 8 takes frame 7's slot
    got = make_policy("edgert").decide(_frames(9.0, 10.0), 0.0)
    assert plan(got) == [(1, "gpu"), (0, None)]
    assert got[1].reason == "superseded by frame 8 of stream 's'"


def test_both_frames_kept_when_both_fit():
    # frame 8 ends at 12 (13.2 with headroom) <= 14: it stays pending with its claim, frame 7 runs
    assert plan(make_policy("edgert").decide(_frames(9.0, 14.0), 0.0)) == [(0, "gpu")]


def test_supersede_off_keeps_the_older_frame():
    # the newer frame cannot follow (12 > 10) and may not take the slot: it is dropped on arrival
    got = EdgertPolicy(supersede=False).decide(_frames(9.0, 10.0), 0.0)
    assert plan(got) == [(0, "gpu"), (1, None)]
    assert got[1].reason == ("cannot meet its deadline behind the work queued ahead of it: earliest expected finish "
                             "12.00 ms > deadline 10.00 ms on every processor that can run it, so it is dropped "
                             "on arrival")


def test_behind_a_claim_a_request_seen_before_stays_pending():
    # the arrival drop is for the decision that first sees a request; one seen before (here: its fate fixed by
    # an earlier decision) waits, claiming nothing: the claim ahead may still end early or be dropped
    pol = EdgertPolicy()
    late = req(1, "b", deadline=8.0, stream="b2")
    pol.plan.fate(late)
    assert plan(pol.decide(view([req(0, "b", deadline=7.0), late], [proc("gpu")], LAT), 0.0)) == [(0, "gpu")]


def test_behind_the_queue_the_cloud_or_another_processor_still_takes_it():
    # behind "e" on the gpu (6 + 9 = 15 > 13) but the cloud makes it: no arrival drop
    lat = {**LAT, "d": {"cpu": 20.0, "gpu": 9.0, "cloud": 10.0}}
    snap = view([req(0, "e", deadline=10.0), req(1, "d", deadline=13.0)], [*CG, proc("cloud")], lat)
    assert (1, "cloud") in plan(EdgertPolicy().decide(snap, 0.0))


def test_supersede_takes_a_claimed_slot_too():
    # gpu busy until 1: frame 7 claims 1-7 (not dispatched), frame 8 (deadline 10) cannot follow:
    # frame 7 is dropped, frame 8 keeps the claim and stays pending
    snap = view([req(0, "b", deadline=9.0, stream="s", frame=7), req(1, "b", deadline=10.0, stream="s", frame=8)],
                [proc("gpu", busy_until=1.0)], LAT)
    assert plan(make_policy("edgert").decide(snap, 0.0)) == [(0, None)]


# --------------------------------------------------------------------------- reasons and options
def test_drop_reason_names_finish_and_deadline():
    got = make_policy("edgert").decide(view([req(0, "a", deadline=0.5)], CG, LAT), 0.0)
    assert got[0].reason == "cannot meet its deadline: earliest expected finish 2.00 ms > deadline 0.50 ms"


def test_unsupported_reason():
    got = make_policy("edgert").decide(view([req(0, "zzz")], CG, LAT), 0.0)
    assert got[0].reason == "no available processor can run model 'zzz'"


def test_margin_sends_a_tight_local_fit_to_the_cloud():
    # cpu finishes at 8 = deadline exactly; with 20 % headroom that is not enough, the cloud (7) is
    snap = view([req(0, "h", deadline=8.0)], [proc("cpu"), proc("cloud")], {"h": {"cpu": 8.0, "cloud": 7.0}})
    assert plan(EdgertPolicy(margin=0.0).decide(snap, 0.0)) == [(0, "cpu")]
    assert plan(EdgertPolicy().decide(snap, 0.0)) == [(0, "cloud")]


@pytest.mark.parametrize("opt", ["margin", "cloud_margin", "guard_ms"])
def test_negative_options_rejected(opt):
    with pytest.raises(ValueError, match=f"^{opt} must be >= 0, got -1$"):
        EdgertPolicy(**{opt: -1})


def test_no_available_processor_decides_without_raising():
    from scheduler.policies.edgert import EdgertPolicy
    from scheduler.estimator import LatencyEstimator
    from scheduler.types import ProcessorView, RequestView, SchedulerView

    est = LatencyEstimator(seed={"m": {"cloud": 5.0}})
    v = SchedulerView((RequestView(1, "m", 0.0), RequestView(2, "m", 0.0, 50.0)),
                      (ProcessorView("cloud", "cloud", available=False, slots=4, free_slots=4),), est)
    policy = EdgertPolicy()
    for now in (0.0, 30.0, 60.0):   # past the first re-plan too
        out = policy.decide(v, now)
        assert all(a.processor is None for a in out)


def test_random_snapshots_name_each_request_once_and_do_swap(monkeypatch):
    # swap_slot and take_older_slot rewrite earlier assignments of the decision: on random crowded snapshots
    # no request may be named twice or placed where its model cannot run, and swaps must actually happen
    import random

    import scheduler.policies._late as edgert_module   # where the late placement calls swap_slot

    swaps = []
    real = edgert_module.swap_slot
    monkeypatch.setattr(edgert_module, "swap_slot", lambda *a, **k: swaps.append(real(*a, **k)) or swaps[-1])
    lat = {"a": {"cpu": 10.0, "gpu": 2.0, "npu": 1.0, "cloud": 20.0}, "b": {"cpu": 12.0, "gpu": 6.0, "cloud": 25.0},
           "c": {"cpu": 6.0, "gpu": 4.0}, "d": {"cpu": 20.0, "gpu": 9.0, "npu": 8.0}}
    rng = random.Random(1)
    for _ in range(3000):
        reqs = [req(i, m, deadline=rng.uniform(1, 30), stream=m + str(rng.randint(0, 1)), frame=rng.randint(0, 3),
                    downstream=rng.choice([0.0, 0.0, 2.0]))
                for i, m in enumerate(rng.choice("abcd") for _ in range(rng.randint(1, 10)))]
        procs = [proc(n, busy_until=rng.choice([0.0, 0.0, rng.uniform(0, 10)])) for n in ("cpu", "gpu", "npu")]
        out = EdgertPolicy(plan=False).decide(view(reqs, procs + [proc("cloud", busy_until=rng.choice([0.0, 5.0]))],
                                                   lat), 0.0)
        ids = [a.request_id for a in out]
        assert len(ids) == len(set(ids))
        assert all(a.processor is None or a.processor in lat[reqs[a.request_id].model] for a in out)
    assert sum(swaps) > 50
