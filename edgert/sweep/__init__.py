"""Design-space sweeps: a grid of simulator cells on every core, or on a Dask cluster (``edgert sweep``).

::

    from edgert.sweep import load_grid, run_sweep
    grid = load_grid("grid.toml")          # checked whole: one ConfigError naming what is wrong
    res = run_sweep(grid, "results.csv", jobs=2)              # or cluster="tcp://host:8786"
    res.rows                               # one dict per cell (grid order), as written to results.csv

Each cell is the run ``edgert simulate`` makes with the same options (:func:`sim_config` builds
both), so its figures are those of ``edgert simulate --json`` whatever runs it. Modules:
:mod:`~edgert.sweep._grid` (the grid file), :mod:`~edgert.sweep._cell` (a cell, run on a worker),
:mod:`~edgert.sweep._engine` (in-process, worker processes, Dask), :mod:`~edgert.sweep._output`
(CSV / Parquet, resuming), :mod:`~edgert.sweep._run` (:func:`run_sweep`),
:mod:`~edgert.sweep._report` (the best-policy table, the heatmap). docs/sweep.md is the user's page.
"""

from edgert.sweep._cell import FIGURES, MODEL_FIGURES, Task, TaskResult, make_task, run_task, sim_config
from edgert.sweep._engine import Done, default_jobs, run_tasks
from edgert.sweep._grid import KEYS, Cell, Grid, load_grid, parse_grid
from edgert.sweep._output import Output, header
from edgert.sweep._report import Best, best_policies, plot_heatmap, policy_of
from edgert.sweep._run import SweepResult, run_sweep

__all__ = [
    "FIGURES", "KEYS", "MODEL_FIGURES", "Best", "Cell", "Done", "Grid", "Output", "SweepResult", "Task", "TaskResult",
    "best_policies", "default_jobs", "header", "load_grid", "make_task", "parse_grid", "plot_heatmap", "policy_of", "run_sweep",
    "run_task", "run_tasks", "sim_config",
]
