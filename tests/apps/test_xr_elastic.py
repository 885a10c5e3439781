"""Elastic work priced by the frame's deadline (apps.xr.budget), users per session, and what the
pipelines must do on the moving sample scene whatever the host's speed.

Budgets are made deterministic where a test needs a given decision: a deadline no run can meet
(0.01 ms), one every run meets (10 s), and, where the test is about the decision and not the
host, a test double for the ledger's figures (``monkeypatch`` on ``Ledger.cost_ms`` /
``OPTIONAL_BUSY_MAX``), named as such.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import edgert
from apps.xr import Pipelines, assets, budget
from apps.xr import ladder as ladder_mod
from apps.xr.pipelines import MAX_SHED_STREAK
from apps.xr_demo import STREAMS, USER_LAG_FRAMES, UserCameras, user_streams

HOPELESS_MS = 0.01
AMPLE_MS = 10_000.0


@pytest.fixture(scope="module")
def clip():
    """The demo's moving sample scene, its first 30 frames."""
    return list(itertools.islice(assets.sample_frames(), 30))


def test_on_the_moving_scene_detectors_run_once_then_tracking_holds(rt, clip):
    """What the pipeline must do on any host (no deadline: nothing is shed or dropped): one detector run
    per stream, then every frame tracked; the hand, the face and the person found on every frame."""
    px = Pipelines(rt, max_hands=1, max_faces=1, pose=True, segmentation=True)
    for f in clip:
        r = px.process(f)
        assert (len(r.hands), len(r.faces), len(r.poses)) == (1, 1, 1), r.stages
        assert r.mask is not None and r.mask.shape == f.shape[:2]
    for name, c in px.counts().items():
        assert c == {"detector_ran": 1, "tracked": len(clip) - 1, "detector_skipped": len(clip) - 1}, (name, c)


def test_the_search_for_a_second_hand_is_optional_and_skipped_with_a_reason(rt, clip, monkeypatch):
    """One hand in view, two allowed: while it is tracked the palm detector only searches for the second;
    with no spare capacity (test double: the busy bar below zero) the search is skipped with the reason,
    and the tracked hand is still found on every frame."""
    monkeypatch.setattr(budget, "OPTIONAL_BUSY_MAX", -1.0)
    px = Pipelines(rt, max_hands=2, max_faces=0, pose=False, segmentation=False)
    results = [px.process(f, deadline_ms=AMPLE_MS) for f in clip[:10]]
    assert all(len(r.hands) == 1 for r in results)
    assert results[0].stages["palm_detection"].ran            # nothing tracked: required
    for r in results[1:]:
        palm = r.stages["palm_detection"]
        assert not palm.ran and palm.reason.startswith("optional search skipped: no spare capacity"), palm
    assert px.elastic_counts()["optional_skipped"] == {"no spare capacity": 9}
    assert px.counts()["hands"] == {"detector_ran": 1, "tracked": 9, "detector_skipped": 9}


def test_with_spare_capacity_and_time_the_optional_search_runs(rt, clip, monkeypatch):
    """What a fast host sees (test double: no busy bar): the palm detector searches for a second hand on
    every frame, and the one hand is still tracked from each frame to the next (#39: "tracked" counts the
    frames that carried a hand over, whether or not the detector also ran)."""
    monkeypatch.setattr(budget, "OPTIONAL_BUSY_MAX", float("inf"))
    px = Pipelines(rt, max_hands=2, max_faces=0, pose=False, segmentation=False)
    results = [px.process(f, deadline_ms=AMPLE_MS) for f in clip[:5]]
    assert all(r.stages["palm_detection"].ran and len(r.hands) == 1 for r in results)
    assert px.counts()["hands"] == {"detector_ran": 5, "tracked": 4, "detector_skipped": 0}


def test_without_a_deadline_every_stage_runs_as_mediapipe_runs_it(rt, clip):
    """No deadline, no budget: the palm detector searches on every frame while fewer than two hands are
    tracked, full variants only (the mode compared with MediaPipe)."""
    px = Pipelines(rt, max_hands=2, max_faces=0, pose=False, segmentation=False)
    for f in clip[:5]:
        r = px.process(f)
        assert r.stages["palm_detection"].ran and r.stages["palm_detection"].model == "palm_detection_full"
        assert r.stages["hand_landmark"].model == "hand_landmark_full"
    assert set(px.elastic_counts()["variants"]) == {"palm_detection_full", "hand_landmark_full"}


def test_the_lite_variant_runs_rather_than_miss_the_deadline(rt, clip, monkeypatch):
    """Test double for the estimates: full variants cost more than the frame has, lite ones fit; the lite
    hand models run and still find the hand."""
    real = budget.Ledger.cost_ms
    monkeypatch.setattr(budget.Ledger, "cost_ms",
                        lambda self, m: 400.0 if m.endswith("_full") else real(self, m))
    px = Pipelines(rt, max_hands=1, max_faces=0, pose=False, segmentation=False)
    for f in clip[:5]:
        r = px.process(f, deadline_ms=300.0)
        assert len(r.hands) == 1 and r.stages["hand_landmark"].model == "hand_landmark_lite", r.stages
    v = px.elastic_counts()["variants"]
    assert v == {"palm_detection_lite": 1, "hand_landmark_lite": 5}, v


@pytest.fixture
def backlog(rt, monkeypatch):
    """Test double for a loaded host: ``ms`` of backlog ahead of every frame (``Ledger.ahead_ms``)."""
    led = budget.Ledger.of(rt)
    real = led.ahead_ms

    def set_ms(ms: float) -> None:
        monkeypatch.setattr(led, "ahead_ms", (lambda d, p="normal": ms + real(d, p)) if ms else real)
    yield set_ms


def test_a_frame_the_backlog_makes_miss_is_shed_whole_and_tracking_survives(rt, clip, backlog):
    """Priced as one job by its whole chain: nothing of the frame is submitted (no half frame), every stage
    says why, and the tracked regions are kept for the next frame."""
    px = Pipelines(rt, max_hands=1, max_faces=1, pose=True, segmentation=True)
    px.process(clip[0])
    before = {n: s["requests"] for n, s in rt.stats().items()}
    backlog(1e6)
    r = px.process(clip[1], deadline_ms=1000.0)
    backlog(0.0)
    assert r.shed.startswith("frame skipped whole") and not (r.hands or r.faces or r.poses) and r.mask is None
    assert {n: s["requests"] for n, s in rt.stats().items()} == before
    assert {s.status for s in r.stages.values()} == {"shed"} and all(s.reason for s in r.stages.values())
    again = px.process(clip[2])
    assert not any(again.stages[d].ran for d in ("palm_detection", "face_detection", "pose_detection"))
    assert (len(again.hands), len(again.faces), len(again.poses)) == (1, 1, 1)
    assert px.elastic_counts()["frames_shed"] == 1


def test_a_stream_is_never_starved_by_skipping(rt, clip, backlog, monkeypatch):
    """After MAX_SHED_STREAK frames skipped in a row (predicted late, or a chain longer than the deadline) the
    next one runs lean (a probe: its models' estimates stay measured), with its own deadline; the runtime
    decides its requests. (The rate ladder is held still: this is the frame-level rule alone.)"""
    monkeypatch.setattr(ladder_mod, "DOWN_MISS", 2.0)
    px = Pipelines(rt, max_hands=0, max_faces=0, pose=True, segmentation=False)
    px.process(clip[0])
    backlog(1e6)
    shed = [bool(px.process(f, deadline_ms=1000.0).shed) for f in clip[1:1 + MAX_SHED_STREAK + 1]]
    backlog(0.0)
    assert shed == [True] * MAX_SHED_STREAK + [False]
    assert px.elastic_counts()["frames_rescued"] == 1
    assert px.elastic_counts()["frames_shed_by"] == {"predicted late": MAX_SHED_STREAK}
    hopeless = [px.process(f, deadline_ms=HOPELESS_MS) for f in clip[1:1 + MAX_SHED_STREAK + 1]]
    assert [bool(r.shed) for r in hopeless] == [True] * MAX_SHED_STREAK + [False]
    assert all("its chain needs" in r.shed for r in hopeless[:-1])
    probe = hopeless[-1]
    assert probe.budget_ms == HOPELESS_MS and any(s.ran and s.status == "dropped" for s in probe.stages.values())


class _Done:
    """Test double for a finished request's result (what the ledger reads of it)."""

    status, latency_ms, queued_ms = "ok", 1.0, 0.0


@pytest.fixture
def ledger(rt, monkeypatch):
    """The runtime's ledger, its model costs a test double: ``small`` 1 ms, ``big`` 1e6 ms, ``mid`` 10 ms."""
    costs = {"small": 1.0, "big": 1e6, "mid": 10.0}
    real = budget.Ledger.cost_ms
    monkeypatch.setattr(budget.Ledger, "cost_ms", lambda self, m: costs[m] if m in costs else real(self, m))
    return budget.Ledger.of(rt)


def backlog_ms(ledger) -> float:
    """Expected ms of every request the ledger tracks and has not seen finish (read inside the test only)."""
    with ledger._lock:
        return sum(c for c, *_ in ledger._open.values())


def test_only_the_backlog_due_first_is_ahead_of_a_request(ledger):
    """The policy runs the earliest deadline first and does not preempt: work due by the same time or
    sooner is ahead in full; of the work due later, only the ``workers`` oldest requests (those that may
    hold a worker) count, BLOCKING_SHARE of each."""
    from concurrent.futures import Future   # noqa: PLC0415

    now, w = ledger.rt.now_ms(), ledger.workers
    base = backlog_ms(ledger)
    holding = [Future() for _ in range(w)]
    for f in holding:
        ledger.track(f, "mid", now + 500.0)        # oldest, due later: may be running
    queued_late, due_first = Future(), Future()
    ledger.track(queued_late, "big", now + 500.0)  # due later and not among the oldest: runs after
    ledger.track(due_first, "small", now + 10.0)
    try:
        assert ledger.ahead_ms(now + 20.0) - base == pytest.approx(1.0 + budget.BLOCKING_SHARE * 10.0 * w)
        assert ledger.ahead_ms(now + 5.0) - base == pytest.approx(budget.BLOCKING_SHARE * 10.0 * w)
        assert ledger.ahead_ms(float("inf")) - base == pytest.approx(backlog_ms(ledger) - base) \
            == pytest.approx(1e6 + 1.0 + 10.0 * w)
        due_first.set_result(_Done())                  # finished: out of the backlog
        assert ledger.ahead_ms(now + 20.0) - base == pytest.approx(budget.BLOCKING_SHARE * 10.0 * w)
    finally:
        for f in (*holding, queued_late, due_first):
            if not f.done():
                f.set_result(_Done())
    assert backlog_ms(ledger) == pytest.approx(base)


def test_a_frame_is_not_shed_behind_work_due_after_it(rt, clip, ledger):
    """A face frame due in 1 s fits although 1e6 ms of work due later is queued (it runs ahead of it); the
    same work due before it sheds it whole."""
    from concurrent.futures import Future   # noqa: PLC0415

    px = Pipelines(rt, max_hands=0, max_faces=1, pose=False, segmentation=False)
    px.process(clip[0])
    holding = [Future() for _ in range(ledger.workers)]
    later, sooner = Future(), Future()
    now = rt.now_ms()
    for f in holding:
        ledger.track(f, "small", now + 1e7)
    ledger.track(later, "big", now + 1e7)
    try:
        r = px.process(clip[1], deadline_ms=1000.0)
        assert not r.shed and len(r.faces) == 1, (r.shed, r.stages)
        ledger.track(sooner, "big", rt.now_ms())
        r = px.process(clip[2], deadline_ms=1000.0)
        assert r.shed.startswith("frame skipped whole: predicted to finish"), r.shed
    finally:
        for f in (*holding, later, sooner):
            if not f.done():
                f.set_result(_Done())


def test_user_streams_are_named_per_user():
    assert [s.name for s in user_streams(1)] == [s.name for s in STREAMS] == ["hands", "face", "pose",
                                                                               "segmentation"]
    three = user_streams(3)
    assert [s.name for s in three[:5]] == ["hands#0", "face#0", "pose#0", "segmentation#0", "hands#1"]
    assert [s.user for s in three] == [k for k in range(3) for _ in STREAMS]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(edgert.ConfigError, match="users must be a whole number"):
            user_streams(bad)  # type: ignore[arg-type]


def test_user_k_sees_the_source_40_k_frames_behind():
    src = (np.full((2, 2, 3), i, np.uint8) for i in itertools.count())
    cams = UserCameras(src, 3)
    assert [int(f[0, 0, 0]) for f in cams.latest()] == [2 * USER_LAG_FRAMES, USER_LAG_FRAMES, 0]
    assert [int(f[0, 0, 0]) for f in cams.advance()] == [2 * USER_LAG_FRAMES + 1, USER_LAG_FRAMES + 1, 1]
