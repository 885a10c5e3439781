"""One cell of a sweep, run where a worker is: the same simulation ``edgert simulate`` runs, as rows.

A :class:`Task` carries everything a cell needs, its input files' bytes included (a JSON device
profile, a trace), so a worker on another machine needs edgert installed and nothing else: no
shared file system. :func:`run_task` never raises for a cell's own failure: it returns the error
as text, so one bad cell does not stop a sweep.
"""

from __future__ import annotations

import gc
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from edgert.sweep._grid import Cell

#: The figures of a row, under ``edgert simulate --json``'s names (nested keys joined by ``.``, as
#: ``pandas.json_normalize`` names them).
FIGURES: tuple[str, ...] = (
    "requests", "ok", "late", "dropped", "failed", "slo_met_rate", "p50_ms", "p99_ms", "realtime_score",
    "offloaded", "energy_mj.total_mj", "energy_mj.inference_mj", "energy_mj.mean_power_w", "xrbench.score",
    "xrbench.score_profile_e_max", "thermal.peak_c",
)
#: The figures of a per-model row (``per_model.<name>`` of the summary).
MODEL_FIGURES: tuple[str, ...] = FIGURES[:10]


@dataclass(frozen=True, slots=True)
class Task:
    """A cell with the bytes of its input files (``(basename, content)`` for its trace, its JSON profile)."""

    cell: Cell
    trace_file: tuple[str, bytes] | None = None
    device_file: tuple[str, bytes] | None = None
    per_model: bool = False


@dataclass(frozen=True, slots=True)
class TaskResult:
    """What a worker sends back: rows of figures (the cell's, then one per model), or an error."""

    rows: tuple[dict[str, Any], ...]
    error: str | None
    wall_s: float
    version: str


def sim_config(*, scenario: str | None, trace: str | Path | None, device: str | Path, scheduler: str | None,
               objective: str | None, load: float, duration_s: float | None, seed: int, burst: str | None,
               live: Sequence[Any] = (), streams: bool | None = None, priority: str | None = None,
               measured: bool = False) -> Any:
    """The :class:`~scheduler.sim.SimConfig` of ``edgert simulate`` with these options (``burst`` as
    ``START:DUR:FACTOR``; ``live``: the trace's recorded outcomes, whose hand-off delays and stage gaps a
    replay draws from, and with ``measured`` each request's run time, for a replay on the profile of the host
    that ran it; ``streams`` and ``priority`` (``STREAM=LEVEL,...``) as ``edgert simulate``'s). ``edgert
    simulate`` and every sweep cell build their run here, so one set of options gives one result."""
    from edgert._replay import handoff_samples, run_times, stage_gaps  # noqa: PLC0415
    from scheduler.sim import Burst, SimConfig  # noqa: PLC0415
    from scheduler.sim.streams import parse_priorities  # noqa: PLC0415

    outcomes = list(live)
    return SimConfig(scenario=scenario, trace=trace, profile=device, scheduler=scheduler, load=load,
                     duration_s=duration_s, seed=seed, objective=objective,
                     burst=Burst.parse(burst) if burst else None,
                     dispatch_ms=handoff_samples(outcomes) or 0.0, stage_gap_ms=stage_gaps(outcomes) or None,
                     run_ms=(run_times(outcomes) or None) if measured else None,
                     streams=streams, priorities=parse_priorities(priority) or None)


def make_task(cell: Cell, per_model: bool = False, cache: dict[Path, bytes] | None = None) -> Task:
    """A :class:`Task` for ``cell``, its files read (once each, through ``cache``)."""
    cache = {} if cache is None else cache

    def ship(p: Path | None) -> tuple[str, bytes] | None:
        if p is None:
            return None
        if p not in cache:
            cache[p] = p.read_bytes()
        return p.name, cache[p]

    return Task(cell=cell, trace_file=ship(cell.trace), device_file=ship(cell.device_path), per_model=per_model)


def run_task(task: Task) -> TaskResult:
    """Run one cell (its files written to a scratch directory first); never raises for the cell's error."""
    import edgert  # noqa: PLC0415

    t0 = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="edgert-sweep-") as tmp:
            cell = _localize(task, Path(tmp))
            rows = _simulate(cell, task.per_model)
        return TaskResult(rows=rows, error=None, wall_s=time.perf_counter() - t0, version=edgert.__version__)
    except Exception as exc:  # noqa: BLE001 - a cell that raises is recorded with its error; the sweep goes on
        last = traceback.extract_tb(exc.__traceback__)[-1:]
        at = f" (at {Path(last[0].filename).name}:{last[0].lineno})" if last else ""
        return TaskResult(rows=(), error=f"{type(exc).__name__}: {' '.join(str(exc).split())}{at}",
                          wall_s=time.perf_counter() - t0, version=edgert.__version__)


def _localize(task: Task, tmp: Path) -> Cell:
    """The cell with its file inputs pointing at copies of the shipped bytes in ``tmp``."""
    cell = task.cell
    for what, shipped in (("trace", task.trace_file), ("device", task.device_file)):
        if shipped is None:
            continue
        d = tmp / what
        d.mkdir()
        p = d / shipped[0]   # the same base name: names derived from it come out the same
        p.write_bytes(shipped[1])
        cell = replace(cell, trace=p) if what == "trace" else replace(cell, device_path=p)
    return cell


def _simulate(cell: Cell, per_model: bool) -> tuple[dict[str, Any], ...]:
    from edgert._replay import read_outcomes  # noqa: PLC0415
    from scheduler.sim import run_simulation  # noqa: PLC0415

    live = read_outcomes(cell.trace) if cell.trace is not None else []
    cfg = sim_config(scenario=cell.scenario, trace=cell.trace,
                     device=cell.device_path if cell.device_path is not None else cell.device,
                     scheduler=cell.scheduler, objective=cell.objective, load=cell.load,
                     duration_s=cell.duration_s, seed=cell.seed, burst=cell.burst, live=live,
                     streams=cell.streams, priority=cell.priority)
    was_enabled = gc.isenabled()
    gc.disable()   # a worker owns its process: the collector off for the run, as the CLI does (collector_paused)
    try:
        summary = run_simulation(cfg).summary()
    finally:
        if was_enabled:
            gc.enable()
    rows = [figures(summary, FIGURES)]
    if per_model:
        rows += [{"model": name, **figures(m, MODEL_FIGURES)} for name, m in summary["per_model"].items()]
    return tuple(rows)


def figures(summary: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """``names`` (``a.b`` for ``summary["a"]["b"]``) from a summary; None where the run has no such figure."""
    out: dict[str, Any] = {}
    for name in names:
        v: Any = summary
        for part in name.split("."):
            v = v.get(part) if isinstance(v, Mapping) else None
        out[name] = v
    return out
