"""The XR pipelines as a client of the runtime's streams (scheduler.streams), users per session, and what the
pipelines must do on the moving sample scene whatever the host's speed.

Decisions are made deterministic where a test needs a given one: a deadline no run can meet (0.01 ms), one
every run meets (10 s), and, where the test is about the decision and not the host, test doubles named as
such: the controller's busy bar (``OPTIONAL_BUSY_MAX``), a model's expected ms (``StreamFrame.expected_ms``),
or work added to what the dispatcher holds (``Dispatcher.backlog_locked``).
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

import edgert
from apps.xr import Pipelines, assets
from edgert._core._run import Dispatcher
from scheduler import streams as controller
from scheduler.streams import MAX_SHED_STREAK, MIN_CHAINS, Work
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
    monkeypatch.setattr(controller, "OPTIONAL_BUSY_MAX", -1.0)
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
    monkeypatch.setattr(controller, "OPTIONAL_BUSY_MAX", float("inf"))
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
    real = edgert.StreamFrame.expected_ms
    monkeypatch.setattr(edgert.StreamFrame, "expected_ms",
                        lambda self, ms: sum(400.0 if m.endswith("_full") else real(self, [m]) for m in ms))
    px = Pipelines(rt, max_hands=1, max_faces=0, pose=False, segmentation=False)
    for f in clip[:5]:
        r = px.process(f, deadline_ms=300.0)
        assert len(r.hands) == 1 and r.stages["hand_landmark"].model == "hand_landmark_lite", r.stages
    v = px.elastic_counts()["variants"]
    assert v == {"palm_detection_lite": 1, "hand_landmark_lite": 5}, v


@pytest.fixture
def backlog(monkeypatch):
    """Test double for a loaded host: work added to what the dispatcher holds, as the stream controller reads it
    (``add(ms, due_in_ms)``: ``ms`` of work; due at each frame's offer (``due_in_ms`` 0), runs that hold every
    worker; due later, 10 ms requests waiting from ``due_in_ms`` on, each due when the workers can end it, so
    that each can make its deadline (work that cannot, the policy drops, and the controller does not count);
    those due past any frame's deadline are left out; ``clear()``)."""
    real = Dispatcher.backlog_locked
    extra: list[tuple[float, float]] = []

    def with_extra(self, now):
        b = real(self, now)
        per = 10.0 / max(1, b.workers)   # each 10 ms request ends this long after the one before it
        work = tuple(Work(ms / max(1, b.workers), now, "normal", True) for ms, due in extra if due <= 0.0
                     for _ in range(max(1, b.workers)))
        work += tuple(Work(10.0, now + due + k * per, "normal", False) for ms, due in extra if due > 0.0
                      for k in range(1, int(min(ms / 10.0, 2 * AMPLE_MS / per)) + 1))
        return type(b)(b.now_ms, b.workers, b.lanes, b.busy_share, b.work + work, b.cloud)

    monkeypatch.setattr(Dispatcher, "backlog_locked", with_extra)

    class Backlog:
        @staticmethod
        def add(ms: float, due_in_ms: float = 0.0) -> None:
            extra.append((ms, due_in_ms))

        @staticmethod
        def clear() -> None:
            extra.clear()
    return Backlog


def test_a_frame_the_backlog_makes_miss_is_shed_whole_and_tracking_survives(rt, clip, backlog):
    """Priced as one job by its whole chain: nothing of the frame is submitted (no half frame), every stage
    says why, and the tracked regions are kept for the next frame."""
    px = Pipelines(rt, max_hands=1, max_faces=1, pose=True, segmentation=True)
    for _ in range(MIN_CHAINS):   # its streams learn their chains
        px.process(clip[0], deadline_ms=AMPLE_MS)
    before = {n: s["requests"] for n, s in rt.stats().items()}
    backlog.add(1e6)
    r = px.process(clip[1], deadline_ms=AMPLE_MS)
    backlog.clear()
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
    monkeypatch.setattr(controller, "DOWN_MISS", 2.0)
    px = Pipelines(rt, max_hands=0, max_faces=0, pose=True, segmentation=False)
    for _ in range(MIN_CHAINS):   # its stream learns its chain
        px.process(clip[0], deadline_ms=1000.0)
    backlog.add(1e6)
    shed = [bool(px.process(f, deadline_ms=1000.0).shed) for f in clip[1:1 + MAX_SHED_STREAK + 1]]
    backlog.clear()
    assert shed == [True] * MAX_SHED_STREAK + [False]
    assert px.elastic_counts()["frames_rescued"] == 1
    assert px.elastic_counts()["frames_shed_by"] == {"predicted_late": MAX_SHED_STREAK}


def test_a_frame_is_not_shed_behind_work_due_after_it(rt, clip, backlog):
    """A face frame due in 1 s fits although 1e6 ms of work due later is queued (it runs ahead of it); the
    same work due at its offer, holding the workers, sheds it whole."""
    px = Pipelines(rt, max_hands=0, max_faces=1, pose=False, segmentation=False)
    for _ in range(MIN_CHAINS):   # its stream learns its chain
        px.process(clip[0], deadline_ms=1000.0)
    backlog.add(1e6, due_in_ms=1e7)
    r = px.process(clip[1], deadline_ms=1000.0)
    assert not r.shed and len(r.faces) == 1, (r.shed, r.stages)
    backlog.add(1e6, due_in_ms=0.0)
    r = px.process(clip[2], deadline_ms=1000.0)
    backlog.clear()
    assert r.shed.startswith("frame skipped whole: predicted to finish"), r.shed


def test_each_stream_of_one_pipelines_has_its_own_level(rt, clip):
    """``priority=`` by stream: each stream the Pipelines runs is a runtime stream at its own level."""
    with Pipelines(rt, max_hands=1, max_faces=1, pose=False, segmentation=False, stream="levels",
                   priority={"hands": "critical", "face": "low"}) as px:
        px.process(clip[0], deadline_ms=AMPLE_MS)
        got = {part: (s.name, s.priority) for part, s in px.streams().items()}
        assert got == {"hands": ("levels/hands", "critical"), "face": ("levels/face", "low")}
        assert set(rt.streams) >= {"levels/hands", "levels/face"}
    assert not set(rt.streams) & {"levels/hands", "levels/face"}   # closed with it


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


def test_an_urgent_lane_only_beside_workers_that_leave_a_core_free():
    """A lane beside one worker per core is a thread more than the cores (every run it overlaps shares a core):
    one lane only when a stream is critical or high and the app runs fewer CPU workers than cores."""
    from apps.xr import urgent_workers_for   # noqa: PLC0415
    cores = len(os.sched_getaffinity(0))
    assert urgent_workers_for({"hands": "critical"}) == 0                      # one worker per core (the default)
    assert urgent_workers_for({"hands": "critical"}, cpu_workers=cores) == 0
    assert urgent_workers_for({"hands": "critical"}, cpu_workers=cores - 1) == (cores > 1)
    assert urgent_workers_for({"face": "high", "pose": "low"}, cpu_workers=0) == 1
    assert urgent_workers_for({"pose": "normal", "segmentation": "low"}, cpu_workers=0) == 0
    assert urgent_workers_for(None, cpu_workers=0) == 0
