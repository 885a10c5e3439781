"""A request's level as its worker thread's OS niceness (``edgert._core._thread_priority``).

Linux keeps a niceness per thread; lowering it needs CAP_SYS_NICE (root here and in CI). Where the OS
refuses, the runtime turns the feature off, says why, and serves every request as before.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import edgert
from edgert._core import _thread_priority

pytestmark = pytest.mark.skipif(not hasattr(os, "setpriority"), reason="no per-thread niceness on this OS")


def _may_raise() -> bool:
    """Whether this process may lower a thread's niceness (tried on a throwaway thread)."""
    ok: list[bool] = []

    def probe() -> None:
        tid = threading.get_native_id()
        base = os.getpriority(os.PRIO_PROCESS, tid)
        try:
            os.setpriority(os.PRIO_PROCESS, tid, base - 1)
            ok.append(True)
        except OSError:
            ok.append(False)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return ok[0]


needs_raise = pytest.mark.skipif(not _may_raise(), reason="needs CAP_SYS_NICE or RLIMIT_NICE (root in CI)")


def _worker_niceness() -> dict[str, int]:
    """Each edgert worker thread's niceness now, by thread name."""
    return {t.name: os.getpriority(os.PRIO_PROCESS, t.native_id) for t in threading.enumerate()
            if t.name.startswith("edgert-cpu") and t.native_id is not None}


def _one(m: edgert.Model) -> None:
    assert m.submit(np.zeros((1, 64), np.float32)).result(timeout=10).status == "ok"


@needs_raise
def test_a_critical_request_runs_its_worker_ten_below_the_process_and_a_normal_one_puts_it_back(model_dir):
    base = os.getpriority(os.PRIO_PROCESS, 0)
    with edgert.Runtime(delegates="cpu", cpu_workers=1) as rt:
        assert rt.thread_priority.startswith("on")
        crit = rt.load(model_dir / "tiny.onnx", name="crit", priority="critical")
        norm = rt.load(model_dir / "tiny.onnx", name="norm")
        fut = crit.submit(np.zeros((1, 64), np.float32))
        assert fut.result(timeout=10).status == "ok"
        assert set(_worker_niceness().values()) == {base - 10}   # it stays until a request of another level
        assert norm.submit(np.zeros((1, 64), np.float32)).result(timeout=10).status == "ok"
        assert set(_worker_niceness().values()) == {base}


@needs_raise
def test_a_high_frame_runs_the_calling_thread_five_below_inside_the_block_only():
    tid = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, tid)
    with edgert.Runtime(delegates="cpu", cpu_workers=1) as rt:
        with rt.frame(33.3, priority="high"):
            assert os.getpriority(os.PRIO_PROCESS, tid) == before - 5
        assert os.getpriority(os.PRIO_PROCESS, tid) == before
        with rt.frame(33.3, priority="low"):
            assert os.getpriority(os.PRIO_PROCESS, tid) == before   # low is never made nicer (see the module)


def test_turned_off_every_worker_stays_at_the_process_niceness(model_dir):
    base = os.getpriority(os.PRIO_PROCESS, 0)
    with edgert.Runtime(delegates="cpu", cpu_workers=1, thread_priority=False) as rt:
        assert rt.thread_priority == "off (thread_priority=False)"
        _one(rt.load(model_dir / "tiny.onnx", name="crit", priority="critical"))
        assert set(_worker_niceness().values()) == {base}


def test_where_the_os_refuses_it_says_why_and_serves_every_request(model_dir, monkeypatch):
    calls: list[int] = []

    def refusing_setpriority(which: int, who: int, prio: int) -> None:   # test double: an unprivileged process
        calls.append(prio)
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(_thread_priority.os, "setpriority", refusing_setpriority)
    with edgert.Runtime(delegates="cpu", cpu_workers=1) as rt:
        m = rt.load(model_dir / "tiny.onnx", name="crit", priority="critical")
        for _ in range(3):
            assert m.submit(np.zeros((1, 64), np.float32)).result(timeout=10).status == "ok"
        with rt.frame(33.3, priority="critical"):
            _one(m)
        assert rt.thread_priority.startswith("off: the OS refused a higher thread priority")
        assert "CAP_SYS_NICE" in rt.thread_priority
    assert len(calls) == 1   # refused once, then never tried again


def test_an_urgent_lane_runs_only_critical_and_high_requests(model_dir):
    x = np.zeros((1, 64), np.float32)
    image = np.zeros((1, 64, 64, 3), np.float32)
    with edgert.Runtime(delegates="cpu", cpu_workers=1, urgent_workers=1) as rt:
        assert rt.processors == ["cpu0", "cpu-urgent"] and rt.urgent_processors == ["cpu-urgent"]
        norm = rt.load(model_dir / "tiny.onnx", name="norm")
        low = rt.load(model_dir / "tiny.onnx", name="low", priority="low")
        heavy = rt.load(model_dir / "cnn.onnx", name="heavy")
        crit = rt.load(model_dir / "tiny.onnx", name="crit", priority="critical")
        futs = [m.submit(x) for _ in range(40) for m in (norm, low)]
        futs += [heavy.submit(image) for _ in range(10)]   # cpu0 has a backlog of CNN runs when the critical come
        with rt.frame(33.3, priority="high"):
            futs += [norm.submit(x) for _ in range(5)]   # a high frame's requests may take the lane
        futs += [crit.submit(x) for _ in range(5)]
        res = [f.result(timeout=60) for f in futs]
        assert all(r.status in ("ok", "late") for r in res)
        assert not [r for r in res[:90] if r.processor == "cpu-urgent"]   # never a normal or low request
        assert any(r.processor == "cpu-urgent" for r in res[90:])   # the lane took urgent work cpu0 had no room for


def test_urgent_workers_must_be_a_count():
    with pytest.raises(edgert.ConfigError, match="urgent_workers must be an int from 0 to 1024"):
        edgert.Runtime(delegates="cpu", urgent_workers=-1)
