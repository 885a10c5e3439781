"""``run_simulation``: one configured run of the simulator, and its result.

>>> from scheduler.sim import SimConfig, run_simulation
>>> res = run_simulation(SimConfig(scenario="ar_gaming", profile="galaxy-s23", duration_s=1.0))
>>> res.summary()["requests"]
90
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from scheduler.errors import ConfigError
from scheduler.profile import DeviceProfile
from scheduler.registry import make_policy
from scheduler.sim.columns import Workload
from scheduler.sim.driver import Simulation
from scheduler.sim.heat import energy_summary
from scheduler.sim.metrics import Outcome, summarize
from scheduler.sim.profiles import load_profile
from scheduler.sim.streams import StreamPlan, scenario_plan, trace_plan
from scheduler.sim.trace import read_trace
from scheduler.sim.workload import SCENARIOS, Burst, apply_scaling, build_scenario
from scheduler.timeline import RequestRecord
from scheduler.types import Policy

_V = TypeVar("_V")   # a per-request figure's type
_M = TypeVar("_M")   # what stands where the trace gives none

#: Simulated seconds of a scenario when ``duration_s`` is None.
DEFAULT_DURATION_S = 10.0


@dataclass(slots=True)
class SimConfig:
    """What to simulate. Exactly one of ``scenario`` (a built-in name) or ``trace`` (a JSONL path).

    Attributes:
        profile: shipped profile name, JSON path, or a :class:`DeviceProfile`.
        scheduler: policy name (None = the default policy) or a policy object.
        load: request-rate multiplier (SLOs unchanged).
        duration_s: simulated seconds of arrivals; None = 10 s for a scenario, the whole trace.
        seed: seeds cascade draws and latency noise; one seed → one result.
        run_seed: seeds the run-time and hand-off draws apart from the workload (None: ``seed``): the
            same requests with their runs drawn again, to see how far a figure moves by chance alone.
        burst: extra streams for a window, or None.
        noise: log-normal sigma of the per-run latency factor (mean 1) when the profile has no p90.
        cloud_noise: the same for the cloud's round trip + server time (network jitter).
        offload: give the policy the profile's cloud (when it has one) as a processor.
        cloud_slots: parallel requests the cloud serves.
        dispatch_ms: hand-off delay between placing a request on a free processor and its start (ms):
            one number, or samples of a measured hand-off that each request draws from (seeded).
        stage_gap_ms: by trace id, how long after its upstream request ends a cascade stage becomes
            ready (ms): the app's own work before it submitted the stage, measured live; None: at once.
        run_ms: by trace id, the processor kind a request ran on live and how long it ran there (ms): a replay
            on the profile of the host that ran it runs the request that long when it places it on a processor
            of that kind (a request without one, a frame copied for one skipped live, or one placed on another
            kind draws its time from the profile); None: every run time drawn.
        thermal: model the profile's heat and throttling (when it has a ``thermal`` section).
        objective: the policy's objective (``"deadlines"``, ``"balanced"``, ``"energy"``) for a policy
            that has one (edgert's); None = its default. The policy gets the profile's energy figures.
        streams: offer every frame to the overload controller, closed-loop (:mod:`scheduler.sim.streams`): a
            scenario's root streams with their cascades, or a live trace's streams (its ``frame`` records).
            None: on when ``priorities`` are given or the trace has streams. With streams, a scenario's
            ``load`` X is X users: every stream has ``ceil(X)`` copies, phase-shifted, the last one offering
            a share ``X - floor(X)`` of its frames when X is fractional (each frame keeps its period as deadline).
        priorities: stream name -> level (``critical``, ``high``, ``normal``, ``low``); a name sets every
            user's copy of that stream. Turns streams on.
    """

    scenario: str | None = None
    trace: str | Path | None = None
    profile: str | Path | DeviceProfile = "galaxy-s23"
    scheduler: str | Policy | None = None
    load: float = 1.0
    duration_s: float | None = None
    seed: int = 0
    burst: Burst | None = None
    noise: float = 0.1
    cloud_noise: float = 0.2
    offload: bool = True
    cloud_slots: int = 4
    dispatch_ms: float | tuple[float, ...] = 0.0
    stage_gap_ms: Mapping[str, float] | None = None
    run_ms: Mapping[str, tuple[str, float]] | None = None
    thermal: bool = True
    objective: str | None = None
    run_seed: int | None = None
    streams: bool | None = None
    priorities: Mapping[str, str] | None = None

    @property
    def streamed(self) -> bool | None:
        """Whether frames go through the stream controller (None: a trace's own say, when it has streams)."""
        if self.streams is not None:
            return self.streams
        return True if self.priorities else None


@dataclass(slots=True)
class SimResult:
    """A finished run: ``summary()`` figures, ``records`` per request, the inputs it ran on.

    ``outcome`` holds every request's terminal state as numpy columns (what ``summary`` and
    ``records`` are computed from); ``processors`` is ``(name, kind, slots, busy_ms, runs)`` each.
    """

    config: SimConfig
    profile: DeviceProfile
    policy_name: str
    workload_name: str
    processors: list[tuple[str, str, int, float, int]]
    outcome: Outcome
    span_ms: float
    decisions: int
    events: int
    wall_s: float
    #: the device's heat over the run (``Heat.to_json``); None without a thermal model
    heat: dict[str, Any] | None = None
    #: (model, processor) placements refused for want of memory, each ``Refusal.to_json()``
    memory_refused: list[dict[str, Any]] = field(default_factory=list)
    #: each stream's figures (the keys of the live ``s.stats()``); {} without streams
    per_stream: dict[str, dict[str, Any]] = field(default_factory=dict)
    _summary: dict[str, Any] | None = field(default=None, repr=False)

    def summary(self) -> dict[str, Any]:
        """DESIGN.md §5 figures + ``realtime_score``; wall-clock figures only under ``wall`` keys."""
        if self._summary is None:
            s: dict[str, Any] = {
                "workload": self.workload_name,
                "device": self.profile.name,
                "scheduler": self.policy_name,
                "seed": self.config.seed,
                **({} if self.config.run_seed is None else {"run_seed": self.config.run_seed}),
                "load": self.config.load,
                "sim_span_ms": round(self.span_ms, 4),
                "decisions": self.decisions,
                "events": self.events,
            }
            s.update(summarize(self.outcome, self.processors, self.span_ms))
            s.update(energy_summary(self.outcome, self.profile, self.processors, self.span_ms))
            if self.heat is not None:
                s["thermal"] = self.heat
            if self.memory_refused:
                s["memory_refused"] = self.memory_refused
            if self.per_stream:
                s["per_stream"] = self.per_stream
            s["wall_s"] = round(self.wall_s, 4)
            s["wall_requests_per_s"] = round(len(self.outcome) / self.wall_s, 1) if self.wall_s > 0 else None
            self._summary = s
        return dict(self._summary)

    @property
    def records(self) -> list[RequestRecord]:
        """One :class:`RequestRecord` per request, in the order they reached a terminal status."""
        return self.outcome.records()

    @property
    def processor_names(self) -> list[str]:
        """Processor names in profile order (one timeline track each)."""
        return [p[0] for p in self.processors]


def run_simulation(config: SimConfig, progress: Callable[[float], None] | None = None) -> SimResult:
    """Build the workload, check it against the profile, run it to the end, return the result.

    ``progress(fraction)`` (if given) is called now and then with the share of
    arrivals simulated so far (0 … 1).

    Raises:
        ConfigError: neither or both of scenario/trace, unknown scenario/profile/scheduler names,
            bad load/duration/burst.
        TraceError: a malformed trace (file:line), a cycle in ``after``, a model the profile lacks
            or no processor supports — all before the run starts.
    """
    if (config.scenario is None) == (config.trace is None):
        raise ConfigError("give exactly one of a scenario (e.g. scenario='ar_assistant') or a trace (a JSONL path)")
    profile = load_profile(config.profile)
    policy = config.scheduler if config.scheduler is not None and not isinstance(config.scheduler, str) \
        else make_policy(config.scheduler, profile=profile, objective=config.objective)
    wl = _workload(config)
    run_seed = config.seed if config.run_seed is None else config.run_seed
    sim = Simulation(wl, profile, policy, seed=run_seed, noise=config.noise,
                     cloud_noise=config.cloud_noise, offload=config.offload, cloud_slots=config.cloud_slots,
                     dispatch_ms=config.dispatch_ms, thermal=config.thermal,
                     stage_gap_ms=_by_request(wl, config.stage_gap_ms, 0.0), streams=_plan(config, wl),
                     measured_ms=_by_request(wl, config.run_ms, None))
    last_t = float(wl.t_ms[-1]) if len(wl) else 0.0
    tick = None
    if progress is not None:
        def tick(now_ms: float) -> None:
            progress(min(1.0, now_ms / last_t) if last_t > 0 else 1.0)
        progress(0.0)
    t0 = time.perf_counter()
    sim.run(on_tick=tick)
    wall = time.perf_counter() - t0
    span = max(sim.now_ms, (config.duration_s or 0.0) * 1000.0 if config.scenario else 0.0)
    if sim.heat is not None:
        sim.heat.close(span)
    result = SimResult(
        config=config, profile=profile, policy_name=getattr(policy, "name", type(policy).__name__),
        workload_name=wl.name,
        processors=[(p.name, p.kind, p.slots, p.busy_ms, p.n_runs) for p in sim.processors],
        outcome=sim.outcome(), span_ms=span, decisions=sim.decisions, events=sim.events, wall_s=wall,
        heat=None if sim.heat is None else sim.heat.to_json(),
        memory_refused=[r.to_json() for r in sim.refused], per_stream=sim.stream_stats(),
    )
    # Free the run's per-request lists (a dozen of ~n entries each) now: where the caller turned the collector
    # off for the run (the CLI, a sweep's worker), its first pass once back on would walk every entry of them
    # (0.05 s an hour of AR Assistant, 6 % of the run) only to find them freed by reference counting.
    del sim, wl
    if progress is not None:
        progress(1.0)
    return result


def _workload(config: SimConfig) -> Workload:
    """The requests ``config`` names: its scenario's, or its trace's, scaled by its load, duration and burst."""
    if config.scenario is not None:
        duration = DEFAULT_DURATION_S if config.duration_s is None else config.duration_s
        if config.streamed:   # load X is X users: copies of every stream over the whole run
            if config.burst is not None:
                raise ConfigError("--burst does not combine with streams (a scenario's load is its users there); "
                                  "give --load X for X users, or drop --priority / --streams")
            users = Burst(0.0, duration, config.load) if config.load > 1.0 else None
            if config.load < 1.0:
                raise ConfigError(f"with streams, --load is the number of users (>= 1), got {config.load:g}")
            return build_scenario(config.scenario, duration, 1.0, users, config.seed)
        return build_scenario(config.scenario, duration, config.load, config.burst, config.seed)
    assert config.trace is not None   # SimConfig: exactly one of scenario or trace
    return apply_scaling(read_trace(config.trace, config.seed), config.load, config.duration_s,
                         config.burst, config.seed)


def _plan(config: SimConfig, wl: Workload) -> StreamPlan | None:
    """The stream frames of ``wl`` when ``config`` runs streams (None: open-loop), with its priorities.

    Raises:
        ConfigError: streams asked of a trace that has none, a burst over a trace's streams, or a priority
            naming no stream.
    """
    if config.streamed is False:
        return None
    if config.scenario is not None:
        if not config.streamed:
            return None
        fps = {s.model: s.fps for s in SCENARIOS[config.scenario] if s.after is None}
        plan: StreamPlan | None = scenario_plan(wl, fps)
    else:
        plan = trace_plan(wl)
        if plan is None:
            if config.streamed:
                raise ConfigError(f"trace {config.trace} has no stream frames (it was written without rt.stream, or "
                                  "before traces recorded them); replay it without --priority / --streams")
            return None
        if config.burst is not None:
            raise ConfigError("--burst does not combine with a trace's streams; replay it without --burst")
    assert plan is not None
    return plan.with_priorities(config.priorities) if config.priorities else plan


def _by_request(wl: Workload, by_key: Mapping[str, _V] | None, missing: _M) -> list[_V | _M] | None:
    """A trace's per-request figure (``stage_gap_ms``, ``run_ms``: by trace id) by request id of ``wl``,
    ``missing`` where the trace gives none; None when it gives none at all."""
    if not by_key or wl.keys is None:
        return None
    return [by_key.get(k, missing) for k in wl.keys]
