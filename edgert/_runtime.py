"""The live runtime: one worker per processor, one policy deciding who runs what.

Request lifecycle (every request ends with exactly one terminal status)::

    submit ──▶ pending ──policy──▶ worker queue ──▶ running ──▶ ok | late | failed
                  │                                    │
                  └──policy / unplaceable──▶ dropped   └─ accelerator fault ──▶ pending again

All scheduling state lives under one lock. The policy is called with a
frozen snapshot and ``now_ms`` on every arrival and every completion — the
same contract the simulator follows (``scheduler.types``). Futures are
resolved outside the lock, so callbacks may submit further requests (cascades).
A sync call whose request is placed on an idle local worker runs it on the
caller's own thread, skipping two thread hand-offs.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from edgert import _validate
from edgert._dispatch import Dispatcher
from edgert._frame import Frame, current_frame
from edgert._loader import (
    check_delegate_names,
    open_on_workers,
    profiled_ms,
    resolve_delegates,
)
from edgert._model import LoadedModel, Model, artifacts_of
from edgert._power import PowerCounters, power_counters
from edgert._result import Result
from edgert._stats import ModelStats
from edgert._trace import TraceWriter
from edgert._worker import Request, Worker, make_workers
from edgert.errors import (
    ConfigError,
    EdgeRTError,
    did_you_mean,
)
from scheduler.estimator import LatencyEstimator
from scheduler.profile import DeviceProfile
from scheduler.registry import make_policy
from scheduler.timeline import RequestRecord, write_chrome_trace
from scheduler.types import (
    Policy,
    RequestView,
)

#: The most a ``submit`` that woke an idle worker waits for that worker to start its request (ms), and
#: the naps it takes meanwhile (s): each releases the GIL and the core; see ``Runtime._submit``.
HANDOFF_WAIT_MS = 1.0
HANDOFF_NAP_S = 1e-5


class Runtime(Dispatcher):
    """Runs many models concurrently on this host's processors, each request placed by a policy.

    Args:
        delegates: ``"auto"`` (every delegate available here) or a list of names from
            ``edgert devices`` (a :class:`delegates.Delegate` object may stand in a list too:
            the extension point for a backend of your own).
        scheduler: a policy name (``edgert``, Band's baselines …), a policy object with
            ``decide(view, now_ms)``, or None for the default.
        offload: None / ``"off"``, ``"auto"`` (embedded broker + local cloud worker) or
            ``"mqtt://host:port"`` (``mqtts://user:pw@host:port?ca=…`` for TLS and auth).
        trace: path of a JSONL file recording every request (DESIGN §6).
        cpu_workers: CPU workers (one single-threaded session each); None = one per core.
        warmup_runs: timed warm-up runs per model and delegate that seed the estimator.
        profile: a device profile (a shipped name such as ``"galaxy-s23"``, a JSON path, or a
            DeviceProfile, e.g. from ``edgert profile``); where it has a model, its latencies
            seed the estimator instead of the warm-up's.
        alpha: the estimator's moving-average weight of a new measurement.

    Raises:
        ConfigError: unknown scheduler or delegate name, or bad option (each argument is checked
            before anything starts: :mod:`edgert._validate`).
        TraceError: the profile file is malformed.
        DelegateUnavailable: a delegate named explicitly cannot run here.
    """

    def __init__(self, delegates: str | Sequence[str] = "auto", scheduler: str | Policy | None = None,
                 offload: str | None = None, trace: str | Path | None = None,
                 cpu_workers: int | None = None, *, warmup_runs: int = 3, alpha: float = 0.1,
                 profile: str | Path | DeviceProfile | None = None) -> None:
        _validate.runtime_args(delegates, scheduler, offload, trace, cpu_workers, warmup_runs, alpha)
        policy = make_policy(scheduler) if scheduler is None or isinstance(scheduler, str) else scheduler
        super().__init__(policy, LatencyEstimator(alpha))
        self._warmup_runs = warmup_runs
        self._profile = _profile_of(profile)
        self._then_ok: set[str] = set()   # models whose then= names were all found loaded
        self._models: dict[str, LoadedModel] = {}
        self._frames: dict[int, Frame] = {}
        self._next_id = 0
        self._next_frame = 0
        self._closing = False
        self._trace = TraceWriter(trace) if trace is not None else None
        self._delegates = resolve_delegates(delegates)
        workers = make_workers(self._delegates, cpu_workers, self._lock)
        if offload not in (None, "off"):
            from edgert.offload._worker import make_cloud_worker  # noqa: PLC0415 - optional path

            workers.append(make_cloud_worker(offload, self._lock, self))
        if not workers:
            why = (f"cpu_workers=0 and delegates={delegates!r} has no accelerator here" if cpu_workers == 0
                   else f"delegates={delegates!r} left no available delegate")
            raise ConfigError(f"no processor to run on: {why} (see `edgert devices`)")
        self._start_workers(workers)
        power_counters()   # says once per process whether this host has a power counter, and why not

    # -- public API --------------------------------------------------------------------
    @property
    def processors(self) -> list[str]:
        """Worker names, e.g. ``['cpu0', 'cpu1', 'gpu']``."""
        return [w.name for w in self._workers]

    @property
    def power_counters(self) -> PowerCounters:
        """Where this host's power could be read from (``source``), or why it cannot (``reason``)."""
        return power_counters()

    def load(self, source: Any, name: str | None = None, slo_ms: float | None = None, *,
             format: str | None = None, delegates: Sequence[str] | None = None,
             then: Sequence[str] = ()) -> Model:
        """Load a model on every processor that can run it, warm it up and seed the estimator.

        Args:
            source: a ``.tflite`` / ``.onnx`` path, model bytes, or a list of paths of one
                network in several formats (each delegate takes the one it supports).
            name: the model's name (default: the file stem).
            slo_ms: per-request latency objective; a request's deadline is arrival + slo_ms
                unless it belongs to a frame.
            format: ``"onnx"`` or ``"tflite"`` for bytes or an unusual suffix.
            delegates: restrict the model to these delegate names.
            then: models that run after this one in a cascade; its requests aim to leave
                them time (``RequestView.downstream_ms``).

        Raises:
            ModelLoadError: missing or corrupt file, or no delegate here can run it.
            ConfigError: duplicate name, unknown delegate name, a bad argument (``slo_ms`` not a
                number of ms > 0 …), or the runtime is closed.
            DelegateUnavailable: a named delegate cannot run on this host.
        """
        if self._closing:
            raise EdgeRTError("the runtime is closed; create a new edgert.Runtime")
        name, slo_ms = _validate.name(name), _validate.slo_ms(slo_ms, name)
        then = _validate.names(then, "then")
        delegates = None if delegates is None else _validate.names(
            [delegates] if isinstance(delegates, str) else delegates, "delegates")
        arts = artifacts_of(source, _validate.model_format(format))
        if name is None:
            if arts[0].path is None:
                raise ConfigError("rt.load(bytes) needs name=")
            name = arts[0].path.stem
        if name in self._models:
            raise ConfigError(f"a model named {name!r} is already loaded; pass another name=")
        allowed_d = check_delegate_names(delegates, self._delegates)
        lm = LoadedModel(name, arts, (), (), slo_ms)
        lm.then = tuple(then)
        opened = open_on_workers(lm, self._workers, allowed_d, self._delegates, self._warmup_runs)
        profiled = profiled_ms(self._profile, name, self._workers)
        with self._lock:
            for w, d, s, ms in opened:
                w.sessions[name] = (d, s)
                ms = profiled.get(w.name, ms)
                self.estimator.seed(name, w.name, ms if ms is not None else 1.0)
                if ms is None:
                    self._unmeasured.add((name, w.name))
            if allowed_d is not None:
                lm.allowed = tuple(w.name for w, *_ in opened)
            lm.output_names = tuple(o.name for o in lm.outputs)
            self._models[name] = lm
            self._stats[name] = ModelStats()
        return Model(self, lm)

    @contextmanager
    def frame(self, budget_ms: float | None = None, *, deadline_ms: float | None = None) -> Iterator[Frame]:
        """Requests issued inside share one absolute deadline: now + the frame's budget (ms).

        ``budget_ms`` is a time span from now; every other ``deadline_ms`` of edgert (``Result``,
        ``Frame``, ``RequestView``) is an absolute time on the runtime clock. ``deadline_ms=`` is the
        name DESIGN.md gives this argument, kept: ``rt.frame(deadline_ms=33.3)`` is the same budget
        as ``rt.frame(33.3)`` or ``rt.frame(budget_ms=33.3)``; give one of them.

        Raises:
            ConfigError: neither or both given, or a budget that is not a number of ms > 0.
        """
        if (budget_ms is None) == (deadline_ms is None):
            raise ConfigError("rt.frame() takes one budget in ms: rt.frame(33.3), rt.frame(budget_ms=33.3) or "
                              f"rt.frame(deadline_ms=33.3); got budget_ms={budget_ms!r}, deadline_ms={deadline_ms!r}")
        name, budget = ("budget_ms", budget_ms) if deadline_ms is None else ("deadline_ms", deadline_ms)
        assert budget is not None   # (one of the two, checked above)
        if not budget > 0:
            raise ConfigError(f"frame {name} must be > 0, got {budget}")
        now = self.now_ms()
        with self._lock:
            f = Frame(self._next_frame, now, now + budget)
            self._next_frame += 1
            self._frames[f.index] = f
            self._frames.pop(f.index - 4096, None)
        tok = current_frame.set(f)
        try:
            yield f
        finally:
            current_frame.reset(tok)

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per model: requests, ok, late, dropped, failed, p50_ms, p99_ms, slo_met_rate, by_processor."""
        with self._lock:
            return {name: s.summary() for name, s in self._stats.items()}

    def records(self) -> list[RequestRecord]:
        """Finished requests (the most recent RECORDS_KEPT), oldest first; times in runtime ms."""
        with self._lock:
            kept = list(self._records)
        return [RequestRecord(*fields) for fields in kept]

    def write_timeline(self, path: str | Path) -> None:
        """Chrome trace-event JSON of the finished requests, one track per processor (Perfetto)."""
        write_chrome_trace(path, self.records(), self.processors)

    def close(self, timeout_s: float = 30.0) -> None:
        """Finish in-flight requests (up to ``timeout_s``), drop what is left, stop the workers."""
        with self._lock:
            if self._stopping:
                return
            self._closing = True
            deadline = time.monotonic() + timeout_s
            while self._inflight and time.monotonic() < deadline:
                self._idle.wait(timeout=max(0.0, deadline - time.monotonic()))
            done: list[tuple[Request, Result]] = []
            now = self.now_ms()
            for req in list(self._pending.values()):
                self._drop_locked(req, "the runtime closed before it ran", now, done)
            self._pending.clear()
            for w in self._workers:
                while w.queue:
                    self._drop_locked(w.queue.popleft(), "the runtime closed before it ran", now, done)
            self._stopping = True
            for w in self._workers:
                w.cond.notify_all()
        self._resolve(done)
        for w in self._workers:
            for t in w.threads:
                t.join(timeout=5.0)
            w.close()
        if self._trace is not None:
            self._trace.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- submission (hot path) ---------------------------------------------------------
    def _check_then(self, m: LoadedModel) -> None:
        """At a model's first request, every name in its ``then=`` must be a loaded model."""
        for n in m.then:
            if n not in self._models:
                err = did_you_mean("model", n, self._models)
                raise ConfigError(f"then= of model {m.name!r}: {err} (load it before submitting)")
        self._then_ok.add(m.name)

    def _call(self, m: LoadedModel, inputs: Any) -> Result:
        feeds = m.feeds(inputs)
        if m.name not in self._then_ok:
            self._check_then(m)
        done: list[tuple[Request, Result]] = []
        wake: list[Worker] = []
        with self._lock:
            now = self.now_ms()
            req = self._new_locked(m, feeds, None, now)
            self._schedule_locked(now, done, wake)
            w = req.worker
            inline = (w is not None and w.inline_ok and w.queue and w.queue[0] is req
                      and w.has_free_slot())
            if inline:
                assert w is not None
                w.queue.popleft()
                w.running.append(req)
                req.start_ms = now
            elif req.result is None:
                req.future = Future()
            for v in wake:
                if v.queue:
                    v.cond.notify()
        if done:
            self._resolve(done)
        if inline:
            self._run(w, req)  # type: ignore[arg-type]
        return req.result if req.result is not None else req.future.result()  # type: ignore[union-attr]

    def _submit(self, m: LoadedModel, feeds: list[np.ndarray], after: Any) -> Future[Result]:
        parent = _validate.after(after)
        if m.name not in self._then_ok:
            self._check_then(m)
        done: list[tuple[Request, Result]] = []
        with self._lock:
            now = self.now_ms()
            req = self._new_locked(m, feeds, parent, now)
            fut = req.future = Future()
            if self._stopping:   # a cascade stage submitted by a callback while closing: dropped, not raised
                del self._pending[req.id]
                self._drop_locked(req, "the runtime closed before it ran", now, done)
            else:
                self._schedule_locked(now, done)
            w = req.worker   # handed to a thread waiting for work (not this worker's own next stage)?
            handed = bool(w is not None and w.queue and w.queue[0] is req and w.has_free_slot()
                          and threading.current_thread() not in w.threads)
        if done:
            self._resolve(done)
        if handed:
            # Hand the GIL to the woken worker until it has started: the caller usually goes on running
            # Python (the next submit, its own frame work), and the worker would otherwise wait for the
            # caller to block or for CPython's switch interval (5 ms), its processor idle with work
            # queued (benchmarks/handoff.py). Typically ~0.1 ms; a worker slow to get a core costs the
            # caller at most HANDOFF_WAIT_MS.
            give_up = time.perf_counter() + HANDOFF_WAIT_MS / 1000.0
            time.sleep(0)
            while req.start_ms != req.start_ms and time.perf_counter() < give_up:   # NaN: not started
                time.sleep(HANDOFF_NAP_S)   # a real nap: the worker may need this core, not only the GIL
        return fut

    def _new_locked(self, m: LoadedModel, feeds: list[np.ndarray], parent: Result | None,
                    now: float) -> Request:
        if self._closing and parent is None:
            # while draining, cascade stages of in-flight frames are still accepted; once stopped,
            # _submit drops them (a completion callback must not raise into concurrent.futures)
            raise EdgeRTError("the runtime is closed; create a new edgert.Runtime")
        rid = self._next_id
        self._next_id += 1
        f = current_frame.get()
        after_key = None
        if f is None and parent is not None:
            f = self._frames.get(parent.frame)
            after_key = parent.key
        elif parent is not None:
            after_key = parent.key
        stream = m.name
        if f is not None:
            deadline, key, t_trace, stream = f.deadline_ms, f.key(m.name), f.t_ms, f.stream(m.name)
        else:
            if parent is not None:
                deadline = parent.deadline_ms
                t_trace = parent.arrival_ms
            else:
                deadline = now + m.slo_ms if m.slo_ms is not None else math.inf
                t_trace = now
            key = f"r{rid}/{m.name}"
        downstream = sum(self._fastest_ms(n) for n in m.then) if m.then else 0.0
        view = RequestView(rid, m.name, now, deadline, stream, f.index if f is not None else -1,
                           downstream, m.allowed)
        req = Request(rid, m, feeds, now, deadline, view, key, t_trace, f.index if f is not None else -1)
        self._pending[rid] = req
        self._inflight += 1
        if self._trace is not None:
            self._trace.request(t_trace, m.name, deadline, key, after_key)
        return req

    def _fastest_ms(self, model: str) -> float:
        exp = self.estimator.expected_ms
        vals = [v for w in self._workers if (v := exp(model, w.name)) is not None]
        return min(vals) if vals else 0.0


def _profile_of(profile: str | Path | DeviceProfile | None) -> DeviceProfile | None:
    """``Runtime(profile=)``: a shipped name, a JSON path, or a DeviceProfile (as ``edgert simulate`` takes)."""
    if profile is None or isinstance(profile, DeviceProfile):
        return profile
    if not isinstance(profile, (str, Path)):
        raise ConfigError(f"profile must be a shipped name, a JSON path or a DeviceProfile, "
                          f"got {_validate.show(profile)}")
    from scheduler.sim.profiles import load_profile  # noqa: PLC0415 - only with a profile

    return load_profile(profile)
