"""The trace-replay simulator: a virtual clock and event heap driving the live runtime's policies.

Public names (re-exported here; the code lives in the submodules)::

    from scheduler.sim import SimConfig, Burst, run_simulation
    res = run_simulation(SimConfig(scenario="ar_assistant", profile="galaxy-s23",
                                   scheduler="edgert", load=1.0, duration_s=10.0, seed=0))
    res.summary()      # DESIGN.md §5 keys + realtime_score
    res.records        # list[scheduler.timeline.RequestRecord]

Modules: :mod:`~scheduler.sim.workload`
(XRBench scenarios, load, bursts), :mod:`~scheduler.sim.columns` (the workload's
numpy columns and its requests as objects), :mod:`~scheduler.sim.trace` (JSONL
traces), :mod:`~scheduler.sim.driver` (the event loop and policy driver),
:mod:`~scheduler.sim.latency` (processors, run times, hand-offs),
:mod:`~scheduler.sim.processor` (a simulated processor and its view),
:mod:`~scheduler.sim.metrics` (outcome columns, summary figures),
:mod:`~scheduler.sim.profiles` (shipped device profiles), :mod:`~scheduler.sim.run`
(``run_simulation``).
"""

from scheduler.contract import LEFT_UNPLACED, left_unplaced
from scheduler.sim.driver import Simulation
from scheduler.sim.metrics import realtime_score
from scheduler.sim.profiles import load_profile, profile_names
from scheduler.sim.run import DEFAULT_DURATION_S, SimConfig, SimResult, run_simulation
from scheduler.sim.trace import parse_trace, read_trace, write_trace
from scheduler.sim.workload import (
    SCENARIOS,
    Burst,
    Stream,
    Workload,
    build_scenario,
    scenario_names,
)

__all__ = [
    "DEFAULT_DURATION_S", "LEFT_UNPLACED", "SCENARIOS", "Burst", "SimConfig", "SimResult",
    "Simulation", "Stream", "Workload", "build_scenario", "left_unplaced", "load_profile", "parse_trace", "profile_names",
    "read_trace", "realtime_score", "run_simulation", "scenario_names", "write_trace",
]
