"""The dispatcher's own steps on real workers and requests, without a backend: what a busy worker looks like
to the policy (``Decider.view``), when a request that faulted on an accelerator is placed again
(``Dispatcher._replace_locked``), and the timeline's tracks (``Runtime.write_timeline``). Each pins values that mutation
testing found unchecked (a mutant changed them and the suite stayed green)."""

from __future__ import annotations

import json
import logging
import math
import threading
from collections import deque

import pytest

import edgert
from edgert._core._run import AHEAD_PENDING, REPROBE_MS, Dispatcher, Handed, Request, Worker
from edgert._core._model import LoadedModel
from edgert._core._stats import ModelStats
from scheduler.contract import sweep_unplaced
from scheduler.estimator import LatencyEstimator
from scheduler.types import ProcessorView, RequestView


class PlacesNothing:
    """Test double policy: the dispatcher's steps below never ask it."""

    name = "places_nothing"

    def decide(self, view, now_ms):   # noqa: ANN001
        return []


def _request(rid: int, model: str, start_ms: float = math.nan, deadline_ms: float = 100.0) -> Request:
    m = LoadedModel(model, [], (), (), None)
    req = Request(rid, m, [], 0.0, deadline_ms, RequestView(rid, model, 0.0, deadline_ms), None)
    req.start_ms = start_ms
    return req


def _dispatcher(seed: dict[str, dict[str, float]], *workers: tuple[str, str, int]) -> Dispatcher:
    d = Dispatcher(PlacesNothing(), LatencyEstimator(seed=seed))
    d.workers = [Worker(name, kind, [], d.lock, capacity) for name, kind, capacity in workers]
    d.decider.adopt(d.workers)
    return d


# -- a busy worker as the policy sees it --

def test_a_full_worker_is_busy_until_its_earliest_run_ends_and_queues_the_sum_of_its_queue() -> None:
    d = _dispatcher({"a": {"gpu": 5.0}, "b": {"gpu": 3.0}, "q": {"gpu": 2.0}}, ("gpu", "gpu", 2))
    w = d.workers[0]
    w.running = [_request(0, "a", start_ms=100.0), _request(1, "b", start_ms=101.0)]
    w.queue = deque([_request(2, "q"), _request(3, "unknown"), _request(4, "q")])
    got = d.decider.view(w, 102.0)
    # busy until the first of its runs ends (a + 5 = 105 vs b + 3 = 104); queue 2 + 0 (no estimate) + 2
    assert got == ProcessorView("gpu", "gpu", 104.0, 4.0, 3, True, 2, 0)


def test_a_run_without_an_estimate_ends_when_it_started() -> None:
    d = _dispatcher({}, ("npu", "npu", 1))
    w = d.workers[0]
    w.running = [_request(0, "unknown", start_ms=50.0)]
    assert d.decider.view(w, 60.0) == ProcessorView("npu", "npu", 50.0, 0.0, 0, True, 1, 0)


def test_a_worker_with_a_free_slot_is_not_busy_and_an_unhealthy_one_is_unavailable() -> None:
    d = _dispatcher({"a": {"cloud": 30.0}}, ("cloud", "cloud", 4))
    w = d.workers[0]
    w.running = [_request(0, "a", start_ms=10.0)]
    assert d.decider.view(w, 20.0) == ProcessorView("cloud", "cloud", 0.0, 0.0, 0, True, 4, 3)
    w.running, w.unhealthy_until_ms = [], 500.0
    assert d.decider.view(w, 20.0) == ProcessorView("cloud", "cloud", 0.0, 0.0, 0, False, 4, 4)


def test_a_worker_is_available_again_from_the_moment_its_rest_ends() -> None:
    d = _dispatcher({}, ("gpu", "gpu", 1))
    w = d.workers[0]
    w.unhealthy_until_ms = 20.0
    assert d.decider.view(w, 20.0).available is True
    assert d.decider.view(w, 19.9).available is False


# -- what a run teaches the estimator --

def test_the_first_run_of_an_unmeasured_pair_is_its_prior_then_runs_average_in() -> None:
    d = _dispatcher({"m": {"gpu": 1.0, "gpu2": 1.0}, "n": {"gpu": 4.0, "gpu2": 4.0}}, ("gpu", "gpu", 1),
                    ("gpu2", "gpu", 1))
    gpu = d.workers[0]
    gpu.peers = ("gpu", "gpu2")   # one processor, two workers: one estimate
    d.unmeasured = {("m", "gpu"), ("m", "gpu2")}
    est, alpha = d.estimator, d.estimator.alpha
    d._observe("n", gpu, 10.0)    # a measured pair averages in, whatever else is still unmeasured
    assert est.expected_ms("n", "gpu") == est.expected_ms("n", "gpu2") == 4.0 + alpha * 6.0
    d._observe("m", gpu, 10.0)    # the first run of m: the prior of both peers
    assert (est.expected_ms("m", "gpu"), est.prior_ms("m", "gpu2"), d.unmeasured) == (10.0, 10.0, set())
    d._observe("m", gpu, 20.0)
    assert est.expected_ms("m", "gpu") == est.expected_ms("m", "gpu2") == 10.0 + alpha * 10.0


# -- requests nothing will place --

def _unplaceable(*pending: Request, busy: bool = False, gpu_rests_until: float = -math.inf) -> list[str]:
    """Reasons of the requests the "left unplaced" sweep drops at now = 50 ms; gpu and cpu0 run "m"."""
    d = _dispatcher({"m": {"gpu": 4.0, "cpu0": 9.0}}, ("gpu", "gpu", 1), ("cpu0", "cpu", 1))
    d.workers[0].unhealthy_until_ms = gpu_rests_until
    if busy:
        d.workers[0].running = [_request(99, "m", start_ms=45.0)]
    for req in pending:
        d.decider.pending[req.id] = req
        d.ends.stats.setdefault(req.model.name, ModelStats())
        d.ends.inflight += 1
    with d.lock:   # (as the dispatcher calls it: its completion notifies waiters on that lock)
        sweep_unplaced(d.decider, d.decider.pending, 50.0)
        done = d.ends.take()
    assert sorted(d.decider.pending) == sorted(r.id for r in pending if all(r is not q for q, _ in done))
    return [res.error.reason for _, res in done]


def test_a_model_no_processor_runs_is_dropped_saying_so() -> None:
    assert _unplaceable(_request(0, "x")) == ["no processor of this runtime can run model 'x'"]


def test_a_request_left_unplaced_while_its_processors_idle_is_dropped_naming_the_policy() -> None:
    assert _unplaceable(_request(0, "m")) == [
        "left unplaced by scheduler 'places_nothing' while every processor that could run it was idle"]


def test_a_request_whose_processors_rest_after_a_fault_is_dropped_naming_them() -> None:
    assert _unplaceable(_request(0, "m"), gpu_rests_until=60.0) == [
        "its processors ['gpu'] are unhealthy after a fault"]
    assert _unplaceable(_request(0, "m"), gpu_rests_until=50.0)[0].startswith("left unplaced")   # rested


def test_a_request_with_a_busy_processor_waits_and_the_next_is_still_looked_at() -> None:
    # "m" can wait for the busy gpu; "x" after it is still dropped
    assert _unplaceable(_request(0, "m"), _request(1, "x"), busy=True) == [
        "no processor of this runtime can run model 'x'"]


def test_the_fastest_time_for_a_model_nothing_has_estimated_is_zero() -> None:
    d = _dispatcher({"m": {"gpu": 4.0, "cpu0": 9.0}}, ("gpu", "gpu", 1), ("cpu0", "cpu", 1))
    assert d.fastest_ms("m") == 4.0
    assert d.fastest_ms("x") == 0.0


# -- a fault on an accelerator --

def _faulted(attempts: int = 0, deadline_ms: float = 100.0, cpu_runs_it: bool = True,
             kind: str = "gpu") -> tuple[Dispatcher, Worker, Request]:
    seed = {"m": {"gpu": 4.0, **({"cpu0": 9.0} if cpu_runs_it else {})}}
    d = _dispatcher(seed, ("gpu", kind, 1), ("cpu0", "cpu", 1))
    req = _request(7, "m", start_ms=40.0, deadline_ms=deadline_ms)
    req.attempts = attempts
    req.worker = d.workers[0]
    return d, d.workers[0], req


@pytest.mark.parametrize("attempts", [0, 1])
def test_a_faulted_request_is_placed_again_and_the_accelerator_rests(attempts: int) -> None:
    d, gpu, req = _faulted(attempts)
    assert d._replace_locked(gpu, req, 50.0) is True
    assert gpu.unhealthy_until_ms == 50.0 + REPROBE_MS
    assert (req.attempts, req.worker, d.decider.pending) == (attempts + 1, None, {7: req})


@pytest.mark.parametrize(("attempts", "deadline_ms", "cpu_runs_it", "kind"), [
    (2, 100.0, True, "gpu"),     # twice already
    (0, 50.0, True, "gpu"),      # its deadline is now
    (0, 100.0, False, "gpu"),    # no other processor runs it
    (0, 100.0, True, "cpu"),     # a CPU fault is the model's, not the processor's
], ids=["attempts", "deadline", "nowhere-else", "cpu"])
def test_a_faulted_request_fails_instead(attempts: int, deadline_ms: float, cpu_runs_it: bool, kind: str) -> None:
    d, w, req = _faulted(attempts, deadline_ms, cpu_runs_it, kind)
    assert d._replace_locked(w, req, 50.0) is False
    assert (w.unhealthy_until_ms, req.attempts, req.worker, d.decider.pending) == (-math.inf, attempts, w, {})


def test_a_faulted_accelerator_gives_back_what_was_queued_on_it_ahead() -> None:
    d, gpu, req = _faulted()
    ahead = _request(8, "m")
    ahead.worker = gpu
    gpu.queue.append(ahead)
    assert d._replace_locked(gpu, req, 50.0) is True
    assert (list(gpu.queue), ahead.worker, sorted(d.decider.pending)) == ([], None, [7, 8])


# -- queued ahead: a busy worker shown to the policy as free --

class RecordsViews:
    """Test double policy: starts the pending requests, in order, on the processors it sees free; keeps
    every snapshot it was asked about."""

    name = "records_views"

    def __init__(self) -> None:
        self.views: list = []

    def decide(self, view, now_ms):   # noqa: ANN001
        from scheduler.types import Assignment
        self.views.append(view)
        free = [p.name for p in view.processors if p.busy_until_ms <= now_ms and p.n_queued == 0]
        return [Assignment(r.id, name) for r, name in zip(view.pending, free)]


def _backlog(n: int, workers: int = 1) -> tuple[Dispatcher, Worker, RecordsViews]:
    """``n`` requests pending, ``workers`` CPU workers each running one; the first worker."""
    pol = RecordsViews()
    names = [f"cpu{i}" for i in range(workers)]
    d = Dispatcher(pol, LatencyEstimator(seed={"m": dict.fromkeys(names, 5.0)}))
    d.workers = [Worker(name, "cpu", [], d.lock, 1) for name in names]
    d.decider.adopt(d.workers)
    d.ends.stats["m"] = ModelStats()
    for i, v in enumerate(d.workers):
        v.running = [_request(100 + i, "m", start_ms=d.now_ms())]
    for i in range(n):
        r = _request(i, "m", deadline_ms=math.inf)
        d.decider.pending[i] = r
    assert AHEAD_PENDING > 1
    return d, d.workers[0], pol


def test_with_a_burst_pending_a_running_worker_gets_its_next_request_queued_ahead() -> None:
    d, w, pol = _backlog(AHEAD_PENDING)
    d._resolve_and_decide(Handed([], decide_for=w))
    assert pol.views[-1].processors[0].busy_until_ms == 0.0   # shown free while it runs
    assert [r.id for r in w.queue] == [0] and w.queue[0].worker is w and 0 not in d.decider.pending


def test_below_a_burst_a_running_worker_is_shown_busy_and_nothing_is_queued_ahead() -> None:
    d, w, pol = _backlog(AHEAD_PENDING - 1)
    d._resolve_and_decide(Handed([], decide_for=w))
    assert pol.views[-1].processors[0].busy_until_ms > 0.0 and not w.queue


def test_in_a_burst_a_completion_decides_once_no_worker_holds_a_request_queued_ahead() -> None:
    d, a, pol = _backlog(AHEAD_PENDING + 1, workers=2)
    b = d.workers[1]
    held = d.decider.pending.pop(0)
    held.worker = b
    b.queue.append(held)   # b still holds its next request, queued ahead: no decision yet
    with d.lock:
        d._decide_freed_locked()
    assert pol.views == [] and not a.queue
    b.start_next(d.now_ms())   # b took it: every worker runs with nothing queued, and one decision serves both
    with d.lock:
        d._decide_freed_locked()
    assert len(pol.views) == 1 and [r.id for r in a.queue] == [1] and [r.id for r in b.queue] == [2]


class CountsNotifies(threading.Condition):
    """Test double: a worker's condition that counts its notifies."""

    def __init__(self, lock: threading.Lock) -> None:
        super().__init__(lock)
        self.notified = 0

    def notify(self, n: int = 1) -> None:
        self.notified += 1
        super().notify(n)


def test_a_worker_is_notified_only_while_one_of_its_threads_waits_for_work() -> None:
    lock = threading.Lock()
    w = Worker("cpu0", "cpu", [], lock)
    w.cond = cond = CountsNotifies(lock)
    with lock:
        w.notify()   # its thread runs: no one to wake
    assert cond.notified == 0
    woke = threading.Event()

    def wait() -> None:
        with lock:
            w.wait_for_work()
        woke.set()

    t = threading.Thread(target=wait)
    t.start()
    for _ in range(500):   # until the thread waits (it counts itself under the lock)
        with lock:
            if w.waiting:
                w.notify()
                break
        threading.Event().wait(0.01)
    t.join(timeout=5)
    assert woke.is_set() and cond.notified == 1 and w.waiting == 0


# -- the timeline --

def test_the_timeline_has_a_track_for_every_processor_even_one_that_ran_nothing(tmp_path) -> None:
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=2, records=True) as rt:
        rt.write_timeline(tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert {e["args"]["name"] for e in events if e.get("name") == "thread_name"} == {"cpu0", "cpu1"}


def test_worker_state_helpers_count_slots() -> None:
    w = Worker("cloud", "cloud", [], threading.Lock(), capacity=2)
    w.running = [_request(0, "a")]
    assert w.has_free_slot() and w.idle_view == ProcessorView("cloud", "cloud", 0.0, 0.0, 0, True, 2, 2)


# -- a bug of ours while running --

class SessionWithABug:
    """Test double session: running raises something no backend error maps to (a bug of ours)."""

    def run(self, feeds):   # noqa: ANN001
        raise RuntimeError("boom")


@pytest.mark.bug_log_expected
def test_a_bug_while_running_fails_the_request_with_it_chained_and_logged(caplog) -> None:
    d = _dispatcher({"m": {"cpu0": 1.0}}, ("cpu0", "cpu", 1))
    w = d.workers[0]
    w.sessions["m"] = (None, SessionWithABug())   # type: ignore[assignment]  # (no delegate needed)
    req = _request(5, "m", start_ms=d.now_ms(), deadline_ms=math.inf)
    req.worker = w
    d.ends.stats["m"], d.ends.inflight = ModelStats(), 1
    w.running.append(req)
    with caplog.at_level(logging.ERROR, logger="edgert.bug"):
        d._run(w, req)
    res = req.result
    assert res is not None and (res.status, res.processor, res.outputs) == ("failed", "cpu0", None)
    assert type(res.error) is edgert.EdgeRTError and isinstance(res.error.__cause__, RuntimeError)
    assert str(res.error) == "cpu0 raised RuntimeError('boom') running 'm' (a bug: see the edgert.bug log)"
    (rec,) = [r for r in caplog.records if r.name == "edgert.bug"]
    assert rec.getMessage() == "cpu0 raised running 'm' (request 5)"
    assert rec.exc_info is not None and rec.exc_info[1] is res.error.__cause__
    assert w.running == [] and d.ends.inflight == 0


# -- the driver contract's outcomes, live (scheduler.contract) --

class PlacesOn:
    """Test double policy: every pending request on ``processor`` (or dropped without a reason when None)."""

    name = "places_on"

    def __init__(self, processor: str | None) -> None:
        self.processor = processor

    def decide(self, view, now_ms):   # noqa: ANN001
        from scheduler.types import Assignment

        return [Assignment(r.id, self.processor) for r in view.pending] + [Assignment(999, "gpu")]   # 999: not pending


@pytest.mark.parametrize(("processor", "reason"), [
    ("npu", "scheduler 'places_on' placed it on 'npu', which does not exist"),
    ("cpu0", "scheduler 'places_on' placed it on 'cpu0', which cannot run it"),
    (None, "dropped by scheduler 'places_on'"),
])
def test_a_misplaced_or_reasonless_drop_ends_dropped_in_the_contracts_words(processor, reason) -> None:   # noqa: ANN001
    d = Dispatcher(PlacesOn(processor), LatencyEstimator(seed={"m": {"gpu": 4.0}}))
    d.workers = [Worker("gpu", "gpu", [], d.lock), Worker("cpu0", "cpu", [], d.lock)]
    d.decider.adopt(d.workers)
    d.ends.stats["m"] = ModelStats()
    req = _request(0, "m")
    d.decider.pending[0] = req
    d.ends.inflight = 1
    with d.lock:
        d.decider.decide(1.0)
        done = d.ends.take()
    assert [(r.status, str(r.error)) for _, r in done] == [("dropped", f"request for model 'm' was dropped: {reason}")]
