"""A live run with streams records every frame it offered, taken or not; the simulator offers them again to the
same controller; the live driver's calls replayed into a fresh controller give the same decisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import edgert
from edgert._core import _streams
from edgert._replay import host_profile, read_outcomes
from edgert.testing import genmodels
from scheduler.sim import SimConfig, run_simulation
from scheduler.sim.trace import read_trace
from tests.scheduler.test_sim_streams import RecordingController, replay_into_a_fresh_controller


@pytest.fixture(scope="module")
def live(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RecordingController]:
    """A live trace of a stream whose frames come faster than one runs (max_in_flight 1): some are not taken."""
    path = tmp_path_factory.mktemp("streams") / "t.jsonl"
    made: list[RecordingController] = []
    mp = pytest.MonkeyPatch()

    def make() -> RecordingController:
        made.append(RecordingController())
        return made[-1]

    mp.setattr(_streams, "StreamController", make)
    try:
        with edgert.Runtime(delegates=["litert-xnnpack"], cpu_workers=1, trace=path) as rt:
            det = rt.load(model_dir / "tiny.tflite", name="det")
            land = rt.load(model_dir / "tiny.tflite", name="land")
            x = genmodels.example_inputs("tiny")
            with rt.stream("hands", fps=30.0, priority="high") as s:
                pending = []
                for i in range(40):
                    with s.frame() as f:
                        if f:
                            first = det.submit(x)
                            pending.append(land.submit(x, after=first.result()))
                    if i % 4:   # three frames in four offered while the last may still run
                        continue
                    for p in pending:
                        p.result()
                    pending.clear()
                for p in pending:
                    p.result()
    finally:
        mp.undo()
    return path, made[0]


def test_every_frame_offered_is_a_typed_record_before_its_requests(live: tuple[Path, RecordingController]) -> None:
    path, ctl = live
    lines = [json.loads(ln) for ln in path.read_text().splitlines()]
    assert lines[0] == {"type": "header", "format": "edgert-trace", "version": 2}
    (stream,) = [ln for ln in lines if ln.get("type") == "stream"]
    assert stream["stream"] == "hands" and stream["priority"] == "high" and stream["rates"][0] == 30.0
    frames = [ln for ln in lines if ln.get("type") == "frame"]
    assert len(frames) == 40
    offers = [d for what, _, d in ctl.log if what == "offer"]
    assert [f["taken"] for f in frames] == [d.taken for d in offers]
    assert [f["reason"] for f in frames] == [d.reason for d in offers]
    seen: set[int] = set()
    for ln in lines:
        if ln.get("type") == "frame":
            seen.add(ln["frame"])
        elif "type" not in ln and "frame" in ln:
            assert ln["frame"] in seen   # a request comes after its frame's record
    taken = {f["frame"] for f in frames if f["taken"]}
    assert {ln["frame"] for ln in lines if "type" not in ln} == taken


def test_the_live_driver_drives_the_one_controller(live: tuple[Path, RecordingController]) -> None:
    _, ctl = live
    assert replay_into_a_fresh_controller(ctl.log) == 40


def test_the_replay_offers_every_live_frame_again(live: tuple[Path, RecordingController], tmp_path: Path) -> None:
    path, _ = live
    outcomes = read_outcomes(path)
    assert outcomes and all(o.model in ("det", "land") for o in outcomes)   # typed records are not outcomes
    prof = host_profile(outcomes)
    wl = read_trace(path)
    assert len(wl.stream_frames) == 40
    res = run_simulation(SimConfig(trace=path, profile=prof))
    st = res.summary()["per_stream"]["hands"]
    assert st["frames"] == 40 and st["priority"] == "high"
