"""``run_sweep``: every cell of a grid not already in the output, run where asked, written as it finishes."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgert.sweep._cell import FIGURES, TaskResult, make_task, run_task
from edgert.sweep._engine import Done, run_tasks
from edgert.sweep._grid import Cell, Grid
from edgert.sweep._output import Output, header

#: Least time between two rewrites of the output while cells finish (s); the last one is always written.
WRITE_EVERY_S = 1.0


@dataclass(slots=True)
class SweepResult:
    """A sweep's outcome: ``rows`` in grid order (each cell's, then its models' with ``--per-model``).

    Attributes:
        ran: cells run this time; ``resumed``: cells taken from the output as it was.
        failed: ``(cell, error)`` for every cell that raised (recorded in the ``error`` column).
        interrupted: Ctrl-C stopped the sweep; ``rows`` holds the cells that finished.
        wall_s: wall-clock seconds of this run.
    """

    rows: list[dict[str, Any]]
    ran: int = 0
    resumed: int = 0
    missing: int = 0
    failed: list[tuple[Cell, str]] = field(default_factory=list)
    interrupted: bool = False
    wall_s: float = 0.0


#: ``on_progress(finished, to_run)``: cells finished in this run so far, and how many it has to run.
ProgressFn = Callable[[int, int], None]


def run_sweep(grid: Grid, output: str | Path, *, jobs: int | None = None, cluster: str | None = None,
              per_model: bool = False, on_progress: ProgressFn | None = None) -> SweepResult:
    """Run the cells of ``grid`` that ``output`` lacks, on ``jobs`` processes or a Dask ``cluster``.

    The output is rewritten (atomically) as cells finish, and once more at the end or on Ctrl-C, so
    finished cells are kept whatever stops the run; a rerun to the same output resumes.

    Raises:
        ConfigError: the output holds another sweep, or the cluster does not answer.
        MissingExtra: ``.parquet`` without pyarrow, ``cluster`` without distributed.
    """
    import edgert  # noqa: PLC0415

    t0 = time.perf_counter()
    out = Output(output, header(grid.keys, per_model))
    old = out.resumable()
    version = edgert.__version__
    digests: dict[Path, str] = {}
    keys = [c.key(version, _digests(c, digests)) for c in grid.cells]
    done: dict[int, list[dict[str, Any]]] = {i: old[k] for i, k in enumerate(keys) if k in old}
    todo = sorted((i for i in range(len(keys)) if i not in done), key=lambda i: -_cost(grid.cells[i]))
    res = SweepResult(rows=[], resumed=len(done))
    cache: dict[Path, bytes] = {}
    tasks = [make_task(grid.cells[i], per_model, cache) for i in todo]
    finished = run_tasks(run_task, tasks, jobs=jobs, cluster=cluster)   # a cluster that is not there: raises here,
    last_write = time.perf_counter()                                    # before the output is touched
    if on_progress is not None:
        on_progress(0, len(todo))
    try:
        for d in finished:
            i = todo[d.index]
            rows, error = _rows(grid.cells[i], d, version, keys[i], per_model)
            done[i] = rows
            res.ran += 1
            if error is not None:
                res.failed.append((grid.cells[i], error))
            if on_progress is not None:
                on_progress(res.ran, len(todo))
            if time.perf_counter() - last_write >= WRITE_EVERY_S:
                out.write([r for j in sorted(done) for r in done[j]])
                last_write = time.perf_counter()
    except KeyboardInterrupt:
        res.interrupted = True
    finally:
        res.rows = [r for j in sorted(done) for r in done[j]]
        out.write(res.rows)
    res.missing = len(grid.cells) - len(done)
    res.wall_s = time.perf_counter() - t0
    return res


def _digests(cell: Cell, memo: dict[Path, str]) -> dict[str, str]:
    """sha256 of the cell's input files (its trace, its JSON profile), so an edited file is a new cell."""
    out = {}
    for what, p in (("trace", cell.trace), ("device", cell.device_path)):
        if p is not None:
            if p not in memo:
                memo[p] = hashlib.sha256(p.read_bytes()).hexdigest()
            out[what] = memo[p]
    return out


def _cost(cell: Cell) -> float:
    """A cell's rough cost, to start the longest first (a long cell started last keeps one worker busy
    alone at the end): its arrivals, for a scenario; traces go first."""
    from scheduler.sim.run import DEFAULT_DURATION_S  # noqa: PLC0415
    from scheduler.sim.workload import SCENARIOS  # noqa: PLC0415

    if cell.scenario is None:
        return float("inf")
    dur = cell.duration_s if cell.duration_s is not None else DEFAULT_DURATION_S
    return sum(s.fps * s.p for s in SCENARIOS[cell.scenario]) * cell.load * dur


def _rows(cell: Cell, d: Done, version: str, key: str, per_model: bool) -> tuple[list[dict[str, Any]], str | None]:
    """The output rows of a finished task, and its error (None when it ran)."""
    params = {k: ("" if v is None else v) for k, v in cell.params}
    tail: dict[str, Any] = {"key": key}
    r: TaskResult | None = d.value if isinstance(d.value, TaskResult) else None
    error = r.error if r is not None else f"{type(d.error).__name__}: {d.error}"
    if r is not None and r.error is None and r.version != version:
        error = f"the worker runs edgert {r.version}, this sweep {version}: install the same version there"
    tail.update({"wall_s": None if r is None else round(r.wall_s, 4), "error": error,
                 "edgert_version": None if r is None else r.version})
    if error is not None or r is None:
        return [{**params, **({"model": "all"} if per_model else {}), **tail}], error
    rows = []
    for fig in r.rows:
        model = {"model": fig.get("model", "all")} if per_model else {}
        rows.append({**params, **model, **{k: fig.get(k) for k in FIGURES}, **tail})
    return rows, None
