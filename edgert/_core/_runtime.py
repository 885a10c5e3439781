"""The live runtime's public API and model loading: one worker per processor, one policy deciding who runs what.

A request's life is the dispatcher's (:mod:`edgert._core._run`), which the runtime holds.

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

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from edgert._core import _validate
from edgert._core._run import Dispatcher
from edgert._core._frame import Frame, current_frame
from edgert._core._accuracy import AccuracyCheck, accuracy_check
from edgert._core._loader import (
    check_delegate_names,
    cpu_slots,
    Opened,
    name_software_workers,
    open_on_workers,
    profiled_ms,
    resolve_delegates,
)
from edgert._core._model import LoadedModel, Model, artifacts_of
from edgert._core._records import RecordBuffer, records_capacity
from edgert._power import PowerCounters, power_counters
from edgert._core._stats import ModelStats
from edgert._core._streams import Stream, Streams
from edgert._core._thread_priority import ThreadPriority
from edgert._core._trace import TraceWriter
from edgert._core._run import make_workers
from edgert.errors import ConfigError, EdgeRTError, did_you_mean
from scheduler.estimator import LatencyEstimator
from scheduler.priority import check as check_priority
from scheduler.profile import DeviceProfile
from scheduler.registry import make_policy
from scheduler.timeline import RequestRecord, write_chrome_trace
from scheduler.types import Policy


class Runtime:
    """Runs many models concurrently on this host's processors, each request placed by a policy.

    Args:
        delegates: ``"auto"`` (every delegate available here) or a list of names from
            ``edgert devices`` (a :class:`delegates.Delegate` object may stand in a list too:
            the extension point for a backend of your own).
        scheduler: a policy name (``edgert``, Band's baselines …), a policy object with
            ``decide(view, now_ms)``, or None for the default.
        offload: None / ``"off"``, ``"auto"`` (embedded broker + local cloud worker) or
            ``"mqtt://host:port"`` (``mqtts://user:pw@host:port?ca=…`` for TLS and auth), or an
            Open Inference Protocol server (KServe v2 / Triton / MLServer): ``"kserve://host:port"``
            (gRPC; ``kserves://`` with TLS) or ``"kserve+http://host:port"`` (REST), options in the
            query (``model.NAME=SERVER[:VERSION]``, ``header=Name:Value``, ``ca=…``); with
            ``cpu_workers=0`` every request runs on the server.
        trace: path of a JSONL file recording every request (DESIGN §6), written as they end.
        cpu_workers: CPU workers (single-threaded runs; they share one copy of each model); None = one per core.
        warmup_runs: timed warm-up runs per model and delegate that seed the estimator.
        profile: a device profile (a shipped name such as ``"galaxy-s23"``, a JSON path, or a
            DeviceProfile, e.g. from ``edgert profile``); where it has a model, its latencies
            seed the estimator instead of the warm-up's.
        alpha: the estimator's moving-average weight of a new measurement.
        records: keep finished requests for :meth:`records` / :meth:`write_timeline`: False (the
            default) keeps none, True the latest ``RECORDS_DEFAULT`` (200,000; about 13 MB), a number N
            the latest N, in columns allocated once at the start (:mod:`edgert._core._records`), so
            memory stays flat however long the runtime runs. ``stats()`` needs none.
        thread_priority: run each request on its worker thread at its level's OS niceness (``critical`` 10
            below the process, ``high`` 5; :mod:`edgert._core._thread_priority`), so work an app declared
            critical is not time-sliced with other processes; False keeps every worker at the process's.
            Where the OS refuses (no ``CAP_SYS_NICE`` / ``RLIMIT_NICE``), it turns itself off:
            :attr:`thread_priority` says which.
        urgent_workers: CPU workers beyond ``cpu_workers`` that run only ``critical`` and ``high`` requests
            (``cpu-urgent``; :attr:`urgent_processors`). The runtime never preempts a run, so with one worker
            per core a critical request that arrives while every core runs a long normal one waits for it to
            end; an urgent lane starts it at once and the OS, with the lane at the critical level's
            niceness, gives it a core ahead of the normal run. Idle otherwise. Default 0.

    Raises:
        ConfigError: unknown scheduler or delegate name, or bad option (each argument is checked
            before anything starts: :mod:`edgert._core._validate`).
        TraceError: the profile file is malformed.
        DelegateUnavailable: a delegate named explicitly cannot run here.
    """

    def __init__(self, delegates: str | Sequence[str] = "auto", scheduler: str | Policy | None = None,
                 offload: str | None = None, trace: str | Path | None = None,
                 cpu_workers: int | None = None, *, warmup_runs: int = 3, alpha: float = 0.1,
                 profile: str | Path | DeviceProfile | None = None, records: bool | int = False,
                 thread_priority: bool = True, urgent_workers: int = 0) -> None:
        _validate.runtime_args(delegates, scheduler, offload, trace, cpu_workers, warmup_runs, alpha, urgent_workers)
        keep = records_capacity(records)
        policy = make_policy(scheduler) if scheduler is None or isinstance(scheduler, str) else scheduler
        self._warmup_runs = warmup_runs
        self._profile = _profile_of(profile)
        self._delegates = resolve_delegates(delegates)
        d = self._dispatcher = Dispatcher(policy, LatencyEstimator(alpha), TraceWriter(trace) if trace is not None else None)
        d.ends.kept = RecordBuffer(keep) if keep else None
        d.thread_priority = ThreadPriority(thread_priority)
        workers = make_workers(self._delegates, cpu_slots(self._delegates, cpu_workers), d.lock, urgent_workers)
        name_software_workers(workers)   # a software adapter's worker is gpu-sw, never gpu
        if offload not in (None, "off"):
            from edgert.offload._factory import make_cloud_worker  # noqa: PLC0415 - optional path

            workers.append(make_cloud_worker(offload, d.lock, d))
        if not workers:
            why = (f"cpu_workers=0 and delegates={delegates!r} has no accelerator here" if cpu_workers == 0
                   else f"delegates={delegates!r} left no available delegate")
            raise ConfigError(f"no processor to run on: {why} (see `edgert devices`)")
        d.start(workers)
        self._streams = Streams(d)
        power_counters()   # says once per process whether this host has a power counter, and why not

    # -- public API --------------------------------------------------------------------
    @property
    def processors(self) -> list[str]:
        """Worker names, e.g. ``['cpu0', 'cpu1', 'gpu']``; a software adapter named explicitly (lavapipe)
        is ``gpu-sw`` and takes one core's CPU worker by default (it computes on those cores)."""
        return self._dispatcher.processors

    @property
    def urgent_processors(self) -> list[str]:
        """The urgent lanes among :attr:`processors` (``Runtime(urgent_workers=)``): they run only critical and
        high requests, so capacity planning counts the others."""
        return [w.name for w in self._dispatcher.workers if w.urgent]

    @property
    def thread_priority(self) -> str:
        """Whether worker threads run critical and high requests at a higher OS priority: ``"on: …"``, or
        ``"off…"`` with the reason (turned off, or the OS refused)."""
        return self._dispatcher.thread_priority.state

    @property
    def scheduler(self) -> str:
        """The policy's name."""
        return self._dispatcher.decider.policy_name

    @property
    def estimator(self) -> LatencyEstimator:
        """The latency estimator the policy reads and every completed run updates (ms)."""
        return self._dispatcher.estimator

    def now_ms(self) -> float:
        """The runtime clock: ms since the runtime started (monotonic)."""
        return self._dispatcher.now_ms()

    @property
    def power_counters(self) -> PowerCounters:
        """Where this host's power could be read from (``source``), or why it cannot (``reason``)."""
        return power_counters()

    def load(self, source: Any, name: str | None = None, slo_ms: float | None = None, *,
             format: str | None = None, delegates: Sequence[str] | None = None,
             then: Sequence[str] = (), tolerance: float | None = None, sample: Any = None,
             check_accuracy: bool = True, priority: str = "normal") -> Model:
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
            tolerance: largest error accepted from a path, as a share of each output's range: each
                candidate path is checked once against the fp32 CPU answer on ``sample`` (default: a
                deterministic one), and one beyond it is not used for this model
                (``rt.stats()[name]["excluded"]`` says why; see :mod:`edgert._core._accuracy`).
                Without it, every path below fp32 is checked at 0.01 of the range (the default check).
            sample: the input the accuracy check runs on (as for a call).
            check_accuracy: False turns the accuracy check off (every candidate path is used unchecked).
            priority: its requests' importance, ``critical``, ``high``, ``normal`` (default) or ``low``
                (:mod:`scheduler.priority`): under overload the lowest gives way first. A request issued
                inside ``rt.frame(priority=…)`` takes the frame's.

        Raises:
            ModelLoadError: missing or corrupt file, or no delegate here can run it.
            ConfigError: duplicate name, unknown delegate name, a bad argument (``slo_ms`` not a
                number of ms > 0 …), or the runtime is closed.
            DelegateUnavailable: a named delegate cannot run on this host.
        """
        d = self._dispatcher
        if d.ends.closing:
            raise EdgeRTError("the runtime is closed; create a new edgert.Runtime")
        name, slo_ms = _validate.name(name), _validate.slo_ms(slo_ms, name)
        then = _validate.names(then, "then")
        priority = check_priority(priority, f"priority of model {name!r}" if name else "priority")
        delegates = None if delegates is None else _validate.names(
            [delegates] if isinstance(delegates, str) else delegates, "delegates")
        arts = artifacts_of(source, _validate.model_format(format))
        if name is None:
            if arts[0].path is None:
                raise ConfigError("rt.load(bytes) needs name=")
            name = arts[0].path.stem
        if name in d.models:
            raise ConfigError(f"a model named {name!r} is already loaded; pass another name=")
        allowed_d = check_delegate_names(delegates, self._delegates)
        lm = LoadedModel(name, arts, (), (), slo_ms)
        lm.then, lm.priority = tuple(then), priority
        check = accuracy_check(lm, tolerance, sample, check_accuracy)
        excluded: dict[str, str] = {}
        opened = open_on_workers(lm, d.workers, allowed_d, self._delegates, self._warmup_runs, check, excluded)
        self._publish(lm, opened, allowed_d, excluded, check)
        return Model(d, lm)

    def _publish(self, lm: LoadedModel, opened: list[Opened], allowed_d: tuple[str, ...] | None,
                 excluded: dict[str, str], check: AccuracyCheck | None) -> None:
        """Hand each opened session to its worker, seed the estimator (profiled ms first) and publish
        the model and its stats (with the paths excluded and the accuracy check's summary)."""
        d = self._dispatcher
        profiled = profiled_ms(self._profile, lm.name, d.workers)
        with d.lock:
            for w, delegate, session, ms in opened:
                w.sessions[lm.name] = (delegate, session)
                ms = profiled.get(w.name, ms)
                d.estimator.seed(lm.name, w.name, ms if ms is not None else 1.0)
                if ms is None:
                    d.unmeasured.add((lm.name, w.name))
            if allowed_d is not None:
                lm.allowed = tuple(w.name for w, *_ in opened)
            d.models[lm.name] = lm
            d.ends.stats[lm.name] = ModelStats(excluded=excluded, accuracy=check.summary() if check else None)

    @contextmanager
    def frame(self, budget_ms: float | None = None, *, deadline_ms: float | None = None,
              priority: str | None = None, processors: Sequence[str] | None = None) -> Iterator[Frame]:
        """Requests issued inside share one absolute deadline: now + the frame's budget (ms).

        ``budget_ms`` is a time span from now; every other ``deadline_ms`` of edgert (``Result``,
        ``Frame``, ``RequestView``) is an absolute time on the runtime clock. ``deadline_ms=`` is the
        name DESIGN.md gives this argument, kept: ``rt.frame(deadline_ms=33.3)`` is the same budget
        as ``rt.frame(33.3)`` or ``rt.frame(budget_ms=33.3)``; give one of them. ``priority=`` (``critical``,
        ``high``, ``normal``, ``low``) is the importance of every request issued inside (default: each
        model's own, ``rt.load(priority=)``); a critical or high frame's block also runs the calling thread
        at that level's OS priority (see ``Runtime(thread_priority=)``; in asyncio code that is the event loop's
        thread, for the block). ``processors=`` restricts those requests to some of
        :attr:`processors` (e.g. ``["cloud"]``: an XR stream offloaded as its rate ladder's last rung).

        Raises:
            ConfigError: neither or both given, a budget that is not a number of ms > 0, an unknown priority
                or processor.
        """
        if (budget_ms is None) == (deadline_ms is None):
            raise ConfigError("rt.frame() takes one budget in ms: rt.frame(33.3), rt.frame(budget_ms=33.3) or "
                              f"rt.frame(deadline_ms=33.3); got budget_ms={budget_ms!r}, deadline_ms={deadline_ms!r}")
        name, budget = ("budget_ms", budget_ms) if deadline_ms is None else ("deadline_ms", deadline_ms)
        assert budget is not None   # (one of the two, checked above)
        if not budget > 0:
            raise ConfigError(f"frame {name} must be > 0, got {budget}")
        level = None if priority is None else check_priority(priority, "frame priority")
        where = None if processors is None else _validate.names(processors, "processors")
        for p in where or ():
            if p not in self.processors:
                raise did_you_mean("processor", p, self.processors)
        f = self._dispatcher.new_frame(budget)
        f.priority, f.allowed = level, where
        tok = current_frame.set(f)
        try:
            with self._dispatcher.thread_priority.caller_at(level):
                yield f
        finally:
            current_frame.reset(tok)

    def stream(self, name: str, fps: float, *, priority: str = "normal", rates: Sequence[float] | None = None,
               offload: bool | None = None, max_in_flight: int = 1) -> Stream:
        """Open a stream: a periodic source of frames (a camera, a microphone) whose every frame runs a chain of
        requests, under the runtime's overload controller (:mod:`scheduler.streams`; ``docs/streams.md``).

        ``with s.frame() as f:`` offers a frame; the runtime decides whether it is taken (``f.taken``, ``f.reason``),
        at which rate the stream runs (``s.rung_fps``) and where its work goes. Requests submitted inside a frame
        inherit its deadline (``f.deadline_ms``: its capture time plus the period at the stream's rung), priority
        and stream. The stream learns its chain's cost from its own frames.

        Args:
            name: unique among the open streams (:attr:`streams`).
            fps: its nominal rate (frames per second).
            priority: ``critical``, ``high``, ``normal`` (default) or ``low``: under overload the lowest gives way
                first; a critical stream keeps its rate while a lower one can still yield.
            rates: the ladder's rungs in fps, nominal first and falling (None: ``fps`` × 1, 2/3, 1/2, 1/3).
            offload: None: the cloud worker, when the runtime has one, is the ladder's last rung; False: never.
            max_in_flight: frames of this stream running at once (MediaPipe's FlowLimiter); one offered while
                that many run is not taken (reason ``in_flight``).

        Raises:
            ConfigError: a bad argument (naming it and what to pass), or a stream of that name already open.
        """
        return self._streams.add(name, fps, priority, rates, offload, max_in_flight)

    @property
    def streams(self) -> Mapping[str, Stream]:
        """The open streams by name (read-only)."""
        return self._streams.view

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per model: requests, ok, late, dropped, failed, p50_ms, p99_ms, slo_met_rate, by_processor."""
        d = self._dispatcher
        with d.lock:
            d.ends.fold()
            return {name: s.summary() for name, s in d.ends.stats.items()}

    def memory(self) -> dict[str, Any]:
        """The process's ``peak_rss_mb`` / ``rss_mb`` (MB) and, in ``per_model``, each model's ``resident_mb``
        (what loading it added) and ``copies`` (sessions open over all workers): :mod:`edgert._core._memory`."""
        from edgert._core._memory import runtime_memory  # noqa: PLC0415

        d = self._dispatcher
        with d.lock:   # the workers' sessions change under it (a load)
            return runtime_memory(list(d.models.values()), d.workers)

    def records(self) -> list[RequestRecord]:
        """The latest finished requests (as many as ``Runtime(records=)`` keeps), oldest first; times in
        runtime ms.

        Raises:
            ConfigError: the runtime keeps no records (``records=False``, the default).
        """
        ends = self._dispatcher.ends
        if ends.kept is None:
            raise ConfigError("this runtime keeps no per-request records (records=False, the default, so memory "
                              "stays flat); create it with edgert.Runtime(records=True) or records=N to keep "
                              "the latest N")
        with self._dispatcher.lock:
            ends.fold()
            held = ends.kept.held()
        return held.records()   # the rows are built after the lock is released

    def write_timeline(self, path: str | Path) -> None:
        """Chrome trace-event JSON of the finished requests, one track per processor (Perfetto).

        Raises:
            ConfigError: the runtime keeps no records (create it with ``records=True``).
        """
        write_chrome_trace(path, self.records(), self.processors)

    def close(self, timeout_s: float = 30.0) -> None:
        """Finish in-flight requests (up to ``timeout_s``), drop what is left, stop the workers."""
        self._dispatcher.close(timeout_s)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _profile_of(profile: str | Path | DeviceProfile | None) -> DeviceProfile | None:
    """``Runtime(profile=)``: a shipped name, a JSON path, or a DeviceProfile (as ``edgert simulate`` takes)."""
    if profile is None or isinstance(profile, DeviceProfile):
        return profile
    if not isinstance(profile, (str, Path)):
        raise ConfigError(f"profile must be a shipped name, a JSON path or a DeviceProfile, "
                          f"got {_validate.show(profile)}")
    from scheduler.sim.profiles import load_profile  # noqa: PLC0415 - only with a profile

    return load_profile(profile)
