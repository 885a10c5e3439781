"""Streams in the live runtime (rt.stream): what a frame's requests inherit, frames not taken, the figures, and
nothing lost or compounded. Behaviour on any host: no test counts frames a host serves in time."""

from __future__ import annotations

import os
import threading

import pytest

import edgert
from edgert._core import _run
from edgert._core._thread_priority import ThreadPriority
from edgert.testing import genmodels
from scheduler.streams import REASONS


@pytest.fixture(scope="module")
def rt(model_dir):
    with edgert.Runtime(cpu_workers=2) as r:
        yield r


@pytest.fixture(scope="module")
def cnn(rt, model_dir):
    return rt.load(model_dir / "cnn.onnx", name="cnn")


@pytest.fixture(scope="module")
def x():
    return genmodels.example_inputs("cnn")["image"]


def test_requests_inside_a_frame_inherit_its_deadline_priority_and_stream(rt, cnn, x):
    with rt.stream("inherit", fps=10.0, priority="high") as s:
        at = rt.now_ms()
        with s.frame(at_ms=at) as f:
            assert f.taken and bool(f) and f.reason == "" and f.deadline_ms == pytest.approx(at + 100.0)
            first = cnn.submit(x)
            second = cnn.submit(x, after=first.result())   # a cascade stage: the frame's too
        for res in (first.result(), second.result()):
            assert res.deadline_ms == pytest.approx(f.deadline_ms) and res.status in ("ok", "late")
        st = s.stats()
        assert st["priority"] == "high" and st["taken"] == 1 and st["frames"] == 1
        assert st["chain_ms"] > 0.0   # learned from the frame's two runs


def test_a_submit_inside_a_frame_not_taken_ends_dropped_with_the_frames_reason(rt, cnn, x):
    with rt.stream("one-at-a-time", fps=30.0, max_in_flight=1) as s:
        with s.frame() as first:
            running = cnn.submit(x)
            with s.frame() as second:   # the first frame still runs: max_in_flight
                assert not second and second.reason == "in_flight" and second.reason in REASONS
                dropped = cnn.submit(x).result()
                with pytest.raises(edgert.RequestDropped, match="did not take the frame: in_flight"):
                    cnn(x)
        assert first.taken and running.result().status in ("ok", "late")
        assert dropped.status == "dropped" and "did not take the frame: in_flight" in str(dropped.error)
        st = s.stats()
        assert st["frames"] == st["taken"] + st["frames_shed"] == 2 and st["frames_shed_by"] == {"in_flight": 1}


def test_a_frame_ends_when_its_block_has_exited_and_its_requests_ended(rt, cnn, x):
    with rt.stream("ends", fps=30.0) as s:
        with s.frame() as f:
            fut = cnn.submit(x)
        fut.result()
        done = threading.Event()
        for _ in range(200):   # the watch ends the frame on the thread that ended its last request
            if s.stats()["on_time"] + s.stats()["late"] == 1:
                done.set()
                break
            threading.Event().wait(0.005)
        assert done.is_set() and f.taken


def test_streams_are_listed_while_open_and_names_are_unique(rt):
    s = rt.stream("listed", fps=15.0)
    assert rt.streams["listed"] is s and s.rung_fps == 15.0
    with pytest.raises(edgert.ConfigError, match="is open already"):
        rt.stream("listed", fps=15.0)
    with pytest.raises(TypeError):
        rt.streams["other"] = s   # read-only
    s.close()
    assert "listed" not in rt.streams
    f = s.frame()
    assert not f and f.reason == "closed"


@pytest.mark.parametrize("kwargs, match", [
    ({"fps": 0.0}, "fps must be a number"),
    ({"fps": 30.0, "priority": "urgent"}, "unknown priority of stream 'bad'"),
    ({"fps": 30.0, "rates": [20.0, 10.0]}, "rates must start at fps=30"),
    ({"fps": 30.0, "rates": [30.0, 40.0]}, "rates must start at fps=30 and fall"),
    ({"fps": 30.0, "max_in_flight": 0}, "max_in_flight must be an int >= 1"),
    ({"fps": 30.0, "offload": "yes"}, "offload must be None"),
])
def test_a_bad_stream_argument_names_itself_and_the_fix(rt, kwargs, match):
    with pytest.raises(edgert.ConfigError, match=match):
        rt.stream("bad", **kwargs)
    assert "bad" not in rt.streams


def test_a_stream_with_its_own_rungs_reports_them(rt):
    with rt.stream("rungs", fps=30.0, rates=[30.0, 15.0]) as s:
        assert s.rung_fps == 30.0 and s.stats()["rung_fps"] == 30.0


# -- nothing lost, nothing compounded -------------------------------------------------------------------------

@pytest.mark.bug_log_expected
def test_a_failure_inside_edgerts_resolution_fails_every_future_it_held(rt, cnn):
    """Test double: the resolver's work raises. Every request it held still ends, failed with the reason, and
    the resolver thread goes on."""
    from concurrent.futures import Future

    reqs = []
    for k in range(3):
        r = _run.Request(10_000 + k, rt._dispatcher.models["cnn"], [], 0.0, 1e9, None, None)
        r.future = Future()
        reqs.append(r)
    broke = RuntimeError("test double: resolution broke")

    def work(item):
        raise broke
    thread = _run.ResolverThread(work)
    thread.hand(_run.Handed([(r, None) for r in reqs]))
    thread.close()
    thread.join()
    for r in reqs:
        res = r.future.result(timeout=5)
        assert res.status == "failed" and "resolution broke" in str(res.error)


def test_an_apps_raising_done_callback_changes_nothing(rt, cnn, x):
    fut = cnn.submit(x)
    fut.add_done_callback(lambda f: 1 / 0)   # logged by concurrent.futures after the result is final
    assert fut.result().status in ("ok", "late")
    assert cnn.submit(x).result().status in ("ok", "late")   # the runtime goes on


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="this OS has no per-thread niceness")
def test_nested_frames_do_not_compound_niceness():
    tp = ThreadPriority(True)
    tid = threading.get_native_id()
    base = os.getpriority(os.PRIO_PROCESS, tid)
    with tp.caller_at("high"):
        if not tp.enabled:
            pytest.skip(f"the OS refused a higher thread priority here: {tp.state}")
        assert os.getpriority(os.PRIO_PROCESS, tid) == base - 5
        with tp.caller_at("critical"):
            assert os.getpriority(os.PRIO_PROCESS, tid) == base - 10   # the level's, not -15
            with tp.caller_at("critical"):
                assert os.getpriority(os.PRIO_PROCESS, tid) == base - 10
            with tp.caller_at("high"):   # less important than the frame around it: unchanged
                assert os.getpriority(os.PRIO_PROCESS, tid) == base - 10
        assert os.getpriority(os.PRIO_PROCESS, tid) == base - 5
    assert os.getpriority(os.PRIO_PROCESS, tid) == base


def test_stream_state_is_read_under_the_lock_while_others_open_and_close(rt):
    """Threads opening, offering and closing streams while another reads every stream's figures: no reader
    raises (a dict changed size during iteration)."""
    errors: list[BaseException] = []
    stop = threading.Event()

    def churn(k: int) -> None:
        try:
            for i in range(100):
                with rt.stream(f"churn{k}-{i}", fps=30.0) as s:
                    with s.frame():
                        pass
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    def read() -> None:
        try:
            while not stop.is_set():
                for s in list(rt.streams.values()):
                    s.stats()
                    s.rung_fps
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
    readers = [threading.Thread(target=read) for _ in range(2)]
    workers = [threading.Thread(target=churn, args=(k,)) for k in range(3)]
    for t in readers + workers:
        t.start()
    for t in workers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert errors == []


def test_a_cascade_stage_belongs_to_its_parents_stream_frame(rt, cnn, x):
    """The second stage, submitted after= the first once it ended and inside another stream's frame block, is
    the first one's frame's: the frame ends when both have, and learns both runs as its chain."""
    with rt.stream("cascade-a", fps=10.0) as a, rt.stream("cascade-b", fps=10.0, priority="low") as b:
        with a.frame() as fa:
            first = cnn.submit(x).result()   # ended: nothing of fa open now, but its block is
            with b.frame() as fb:
                second = cnn.submit(x, after=first).result()
            assert second.deadline_ms == fa.deadline_ms != fb.deadline_ms
        sa = a.stats()
        assert sa["taken"] == 1 and sa["on_time"] + sa["late"] == 1
        assert sa["chain_ms"] > (first.latency_ms - first.queued_ms)   # both runs on its path
        assert b.stats()["chain_ms"] == 0.0 and fb.taken   # nothing ran in b's frame


def test_the_busy_window_stays_bounded_with_no_stream_reading_it(rt, cnn, x):
    """Every local run is noted for the streams' busy share; with no stream asking, the window still forgets
    runs older than it (memory flat however long the runtime runs)."""
    from scheduler.streams import WINDOW_MS

    t0 = rt.now_ms()
    while rt.now_ms() - t0 < 1.3 * WINDOW_MS:   # runs spanning more than the window
        cnn(x)
    runs = list(rt._dispatcher._runs)
    assert runs and runs[-1][0] - runs[0][0] <= WINDOW_MS
