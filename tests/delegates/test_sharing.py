"""One copy of a model however many workers run it (delegates/sharing.py): a pool lends each run an idle
session and opens another only while every one is busy; a thread-safe session is shared as it is."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from delegates.base import Session, TensorSpec
from delegates.errors import InferenceError, ModelLoadError
from delegates.sharing import SessionPool, shared_session

SPEC = TensorSpec("x", (1,), np.dtype("float32"))


class BlockingSessionDouble(Session):
    """Test double: ``run`` waits on ``gate`` and records how many of its runs overlap (it must be 1)."""

    def __init__(self, gate: threading.Event) -> None:
        self.inputs = self.outputs = (SPEC,)
        self.gate, self.active, self.most, self.closed = gate, 0, 0, False
        self._lock = threading.Lock()

    def run(self, feeds: list[np.ndarray]) -> list[np.ndarray]:
        with self._lock:
            self.active += 1
            self.most = max(self.most, self.active)
        self.gate.wait(5)
        with self._lock:
            self.active -= 1
        return [feeds[0] + 1]

    def close(self) -> None:
        self.closed = True


class ThreadSafeDouble(BlockingSessionDouble):
    concurrent = True


def _run_in_threads(pool: Session, n: int, gate: threading.Event) -> list[list[np.ndarray]]:
    out: list[list[np.ndarray]] = []
    threads = [threading.Thread(target=lambda: out.append(pool.run([np.zeros(1, np.float32)]))) for _ in range(n)]
    for t in threads:
        t.start()
    threading.Event().wait(0.2)
    gate.set()
    for t in threads:
        t.join(5)
    return out


def test_sequential_runs_use_one_session() -> None:
    gate = threading.Event()
    gate.set()
    opened: list[Session] = []
    first = BlockingSessionDouble(gate)
    pool = SessionPool(first, lambda: opened.append(BlockingSessionDouble(gate)) or opened[-1], limit=4)
    for _ in range(5):
        assert pool.run([np.zeros(1, np.float32)])[0][0] == 1.0
    assert pool.size == 1 and not opened


def test_overlapping_runs_each_get_their_own_session_up_to_the_limit() -> None:
    gate = threading.Event()
    made: list[BlockingSessionDouble] = []

    def opener() -> Session:
        made.append(BlockingSessionDouble(gate))
        return made[-1]

    first = BlockingSessionDouble(gate)
    pool = SessionPool(first, opener, limit=3)
    out = _run_in_threads(pool, 5, gate)
    assert len(out) == 5 and all(o[0][0] == 1.0 for o in out)
    assert pool.size == 3 and len(made) == 2                # two more opened, never a fourth
    assert all(s.most == 1 for s in [first, *made])         # no session ran two runs at once
    pool.close()
    assert all(s.closed for s in [first, *made])
    with pytest.raises(InferenceError, match="closed"):
        pool.run([np.zeros(1, np.float32)])


def test_a_thread_safe_session_is_shared_as_it_is() -> None:
    s = ThreadSafeDouble(threading.Event())
    assert shared_session(s, lambda: pytest.fail("must not open another"), users=4) is s


def test_one_user_needs_no_pool() -> None:
    s = BlockingSessionDouble(threading.Event())
    assert shared_session(s, lambda: pytest.fail("must not open another"), users=1) is s


def test_a_failed_open_fails_that_run_only() -> None:
    gate = threading.Event()

    def opener() -> Session:
        raise ModelLoadError("test double: out of memory")

    pool = SessionPool(BlockingSessionDouble(gate), opener, limit=2)
    errors: list[Exception] = []

    def second() -> None:
        try:
            pool.run([np.zeros(1, np.float32)])
        except InferenceError as exc:
            errors.append(exc)

    t1 = threading.Thread(target=lambda: pool.run([np.zeros(1, np.float32)]))
    t1.start()
    threading.Event().wait(0.1)
    t2 = threading.Thread(target=second)
    t2.start()
    t2.join(5)
    gate.set()
    t1.join(5)
    assert len(errors) == 1 and "out of memory" in str(errors[0]) and isinstance(errors[0].__cause__, ModelLoadError)
    assert pool.size == 1
