"""The dispatcher's own steps on real workers and requests, without a backend: what a busy worker looks like
to the policy (``Dispatcher._view``), when a request that faulted on an accelerator is placed again
(``_replace_locked``), and the timeline's tracks (``Runtime.write_timeline``). Each pins values that mutation
testing found unchecked (a mutant changed them and the suite stayed green)."""

from __future__ import annotations

import json
import math
import threading
from collections import deque

import pytest

import edgert
from edgert._dispatch import REPROBE_MS, Dispatcher
from edgert._model import LoadedModel
from edgert._result import Request
from edgert._worker import Worker
from scheduler.estimator import LatencyEstimator
from scheduler.types import ProcessorView, RequestView


class PlacesNothing:
    """Test double policy: the dispatcher's steps below never ask it."""

    name = "places_nothing"

    def decide(self, view, now_ms):   # noqa: ANN001
        return []


def _request(rid: int, model: str, start_ms: float = math.nan, deadline_ms: float = 100.0) -> Request:
    m = LoadedModel(model, [], (), (), None)
    req = Request(rid, m, [], 0.0, deadline_ms, RequestView(rid, model, 0.0, deadline_ms), f"r{rid}/{model}", 0.0)
    req.start_ms = start_ms
    return req


def _dispatcher(seed: dict[str, dict[str, float]], *workers: tuple[str, str, int]) -> Dispatcher:
    d = Dispatcher(PlacesNothing(), LatencyEstimator(seed=seed))
    d._workers = [Worker(name, kind, [], d._lock, capacity) for name, kind, capacity in workers]
    return d


# -- a busy worker as the policy sees it --

def test_a_full_worker_is_busy_until_its_earliest_run_ends_and_queues_the_sum_of_its_queue() -> None:
    d = _dispatcher({"a": {"gpu": 5.0}, "b": {"gpu": 3.0}, "q": {"gpu": 2.0}}, ("gpu", "gpu", 2))
    w = d._workers[0]
    w.running = [_request(0, "a", start_ms=100.0), _request(1, "b", start_ms=101.0)]
    w.queue = deque([_request(2, "q"), _request(3, "unknown"), _request(4, "q")])
    got = d._view(w, 102.0, d.estimator.expected_ms)
    # busy until the first of its runs ends (a + 5 = 105 vs b + 3 = 104); queue 2 + 0 (no estimate) + 2
    assert got == ProcessorView("gpu", "gpu", 104.0, 4.0, 3, True, 2, 0)


def test_a_run_without_an_estimate_ends_when_it_started() -> None:
    d = _dispatcher({}, ("npu", "npu", 1))
    w = d._workers[0]
    w.running = [_request(0, "unknown", start_ms=50.0)]
    assert d._view(w, 60.0, d.estimator.expected_ms) == ProcessorView("npu", "npu", 50.0, 0.0, 0, True, 1, 0)


def test_a_worker_with_a_free_slot_is_not_busy_and_an_unhealthy_one_is_unavailable() -> None:
    d = _dispatcher({"a": {"cloud": 30.0}}, ("cloud", "cloud", 4))
    w = d._workers[0]
    w.running = [_request(0, "a", start_ms=10.0)]
    assert d._view(w, 20.0, d.estimator.expected_ms) == ProcessorView("cloud", "cloud", 0.0, 0.0, 0, True, 4, 3)
    w.running, w.unhealthy_until_ms = [], 500.0
    assert d._view(w, 20.0, d.estimator.expected_ms) == ProcessorView("cloud", "cloud", 0.0, 0.0, 0, False, 4, 4)


# -- a fault on an accelerator --

def _faulted(attempts: int = 0, deadline_ms: float = 100.0, cpu_runs_it: bool = True,
             kind: str = "gpu") -> tuple[Dispatcher, Worker, Request]:
    seed = {"m": {"gpu": 4.0, **({"cpu0": 9.0} if cpu_runs_it else {})}}
    d = _dispatcher(seed, ("gpu", kind, 1), ("cpu0", "cpu", 1))
    req = _request(7, "m", start_ms=40.0, deadline_ms=deadline_ms)
    req.attempts = attempts
    req.worker = d._workers[0]
    return d, d._workers[0], req


@pytest.mark.parametrize("attempts", [0, 1])
def test_a_faulted_request_is_placed_again_and_the_accelerator_rests(attempts: int) -> None:
    d, gpu, req = _faulted(attempts)
    assert d._replace_locked(gpu, req, 50.0) is True
    assert gpu.unhealthy_until_ms == 50.0 + REPROBE_MS
    assert (req.attempts, req.worker, d._pending) == (attempts + 1, None, {7: req})


@pytest.mark.parametrize(("attempts", "deadline_ms", "cpu_runs_it", "kind"), [
    (2, 100.0, True, "gpu"),     # twice already
    (0, 50.0, True, "gpu"),      # its deadline is now
    (0, 100.0, False, "gpu"),    # no other processor runs it
    (0, 100.0, True, "cpu"),     # a CPU fault is the model's, not the processor's
], ids=["attempts", "deadline", "nowhere-else", "cpu"])
def test_a_faulted_request_fails_instead(attempts: int, deadline_ms: float, cpu_runs_it: bool, kind: str) -> None:
    d, w, req = _faulted(attempts, deadline_ms, cpu_runs_it, kind)
    assert d._replace_locked(w, req, 50.0) is False
    assert (w.unhealthy_until_ms, req.attempts, req.worker, d._pending) == (-math.inf, attempts, w, {})


# -- the timeline --

def test_the_timeline_has_a_track_for_every_processor_even_one_that_ran_nothing(tmp_path) -> None:
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=2) as rt:
        rt.write_timeline(tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert {e["args"]["name"] for e in events if e.get("name") == "thread_name"} == {"cpu0", "cpu1"}


def test_worker_state_helpers_count_slots() -> None:
    w = Worker("cloud", "cloud", [], threading.Lock(), capacity=2)
    w.running = [_request(0, "a")]
    assert w.has_free_slot() and w.idle_view == ProcessorView("cloud", "cloud", 0.0, 0.0, 0, True, 2, 2)
