"""Threads and open fds stay flat across a cloud worker that goes away and comes back (real mosquitto, real
``edgert cloud serve`` processes). Counts only: nothing is timed."""

from __future__ import annotations

import gc
import os
import signal
from pathlib import Path

import numpy as np
import pytest

import edgert
from edgert._core._result import DROPPED, FAILED, LATE, OK
from tests.edgert.test_cloud_support import Mosquitto, WorkerProc, make_models, needs_mosquitto

pytestmark = [needs_mosquitto, pytest.mark.broker]


def threads_and_fds(skip: Path) -> tuple[int, int]:
    """This process's threads (every one, native too) and open file descriptors, from /proc, less the fds of
    files under ``skip`` (the test's own handles on the workers' logs)."""
    gc.collect()   # a closed socket whose object is garbage is not a leak
    fds = [os.path.join("/proc/self/fd", fd) for fd in os.listdir("/proc/self/fd")]
    targets = [_target(fd) for fd in fds]
    return len(os.listdir("/proc/self/task")), sum(bool(t) and not t.startswith(str(skip)) for t in targets)


def _target(link: str) -> str:
    try:
        return os.readlink(link)
    except OSError:   # closed meanwhile: not open
        return ""


def test_threads_and_fds_are_flat_across_a_cloud_worker_that_goes_away_and_comes_back(tmp_path: Path) -> None:
    broker = Mosquitto(tmp_path)
    models = make_models(tmp_path / "models", ("tiny",))
    worker = WorkerProc(broker.url, models, tmp_path / "w0.log")
    x = np.ones((1, 64), np.float32)
    try:
        worker.ready()
        with edgert.Runtime(cpu_workers=0, offload=broker.url) as rt:
            m = rt.load(models / "tiny.onnx", name="tiny", slo_ms=2_000.0)
            assert m.submit(x).result(30).status == OK
            before = threads_and_fds(tmp_path)
            seen = []
            for cycle in range(1, 4):
                worker.stop(signal.SIGKILL)                       # gone: what is sent now gets no reply
                gone = [m.submit(x).result(60) for _ in range(3)]
                assert {r.status for r in gone} <= {OK, LATE, DROPPED, FAILED}
                worker = WorkerProc(broker.url, models, tmp_path / f"w{cycle}.log")
                worker.ready()
                back = [m.submit(x).result(60) for _ in range(20)]
                assert OK in {r.status for r in back}, back[-1]   # served by the new worker
                seen.append(threads_and_fds(tmp_path))
            # no cycle leaves a thread or an fd behind (a socket being set up may be gone by the next look)
            assert all(t == before[0] and f <= before[1] for t, f in seen), (before, seen)
    finally:
        worker.stop(signal.SIGKILL)
        broker.stop()
