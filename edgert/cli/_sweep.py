"""``edgert sweep``: every combination of a grid as a simulator cell, on every core or a Dask cluster.

::

    edgert sweep GRID.toml -o results.csv [--jobs N] [--cluster tcp://HOST:PORT] [--per-model] [--plot F.png]

The grid is checked whole before a cell runs (one line naming what is wrong, exit 2). Cells
then run on ``--jobs`` processes (default: one per core) or as tasks on a Dask scheduler; the
output is rewritten as they finish. Ctrl-C keeps the finished cells (exit 130); the same command
again resumes. A cell that raises is recorded with its error, the others go on, and the exit
status is 1. docs/sweep.md is the user's page.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from edgert.cli import _args

#: Most cells whose failures are listed one by one at the end.
SHOW_FAILED = 5


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``sweep`` sub-command to an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "sweep", help="run a grid of simulator cells (policy x scenario x device x load x seed) to CSV/Parquet",
        description="Simulate every combination of a grid (TOML lists under `edgert simulate`'s names) on "
                    "every core or a Dask cluster; one row per cell with simulate --json's figures.")
    p.add_argument("grid", metavar="GRID.toml", help="the grid: lists under scenario|trace, device, scheduler, "
                   "objective, load, seed, burst, streams, priority; duration a number (see docs/sweep.md)")
    p.add_argument("-o", "--output", required=True, type=_args.output_path(".csv", ".parquet"), metavar="F",
                   help="results.csv or results.parquet; an existing one of the same grid is resumed")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=_args.integer(1, 1024), default=None, metavar="N",
                       help="worker processes (default: one per core)")
    where.add_argument("--cluster", default=None, metavar="tcp://HOST:PORT",
                       help="run the cells on this Dask scheduler (pip install 'edgert[cluster]')")
    p.add_argument("--per-model", action="store_true", help="add one row per cell and model")
    p.add_argument("--plot", type=_args.output_path(*_args.PLOT_SUFFIXES), default=None, metavar="F.png",
                   help="write met %% per policy x scenario as a heatmap, one panel per device and load")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Run the command: 0 every cell ran, 1 some cell failed, 2 bad input, 130 interrupted."""
    from edgert.extras import require  # noqa: PLC0415
    from edgert.sweep import default_jobs, load_grid, run_sweep  # noqa: PLC0415

    grid = load_grid(args.grid)   # the whole grid checked before anything runs
    if args.plot:
        require("matplotlib", "--plot")
    from edgert.cli._progress import Progress  # noqa: PLC0415

    where = f"cluster {args.cluster}" if args.cluster else f"{args.jobs or default_jobs()} process(es)"
    with Progress("sweep", eta=True, steps=10) as bar:
        def step(done: int, total: int) -> None:
            if total:   # nothing to run (all resumed): no bar
                bar.update(done / total, f"{done}/{total} cells")

        res = run_sweep(grid, args.output, jobs=args.jobs, cluster=args.cluster, per_model=args.per_model,
                        on_progress=step)
    _print_best(res.rows)
    print(f"{len(grid.cells)} cells: {res.ran} ran on {where}, {res.resumed} resumed from {args.output}"
          + (f", {len(res.failed)} failed" if res.failed else "") + f"; {res.wall_s:.1f} s wall")
    print(f"wrote {args.output}")
    if args.plot and res.rows:
        from edgert.sweep import plot_heatmap  # noqa: PLC0415

        plot_heatmap(res.rows, args.plot)
        print(f"wrote plot: {args.plot}")
    if res.interrupted:
        print(f"edgert sweep: interrupted; {res.missing} of {len(grid.cells)} cells left, the finished ones are "
              f"in {args.output}: run the same command again to resume", file=sys.stderr)
        return 130
    if res.failed:
        for cell, error in res.failed[:SHOW_FAILED]:
            print(f"edgert sweep: cell {cell.label()} failed: {error}", file=sys.stderr)
        more = len(res.failed) - SHOW_FAILED
        print(f"edgert sweep: {len(res.failed)} of {len(grid.cells)} cells failed"
              + (f" ({more} more not shown)" if more > 0 else "")
              + f"; their error is in the error column of {args.output}; a rerun retries them", file=sys.stderr)
        return 1
    return 0


def _print_best(rows: list[dict[str, Any]]) -> None:
    """The best policy per workload and device (met %, then XRBench score)."""
    from edgert.tables import Column, render  # noqa: PLC0415
    from edgert.sweep import best_policies  # noqa: PLC0415

    best = best_policies(rows)
    if not best:
        return

    def pct(v: float) -> str:
        return "-" if math.isnan(v) else f"{100 * v:.1f}%"

    cols = [Column("workload", "<", wrap=True), Column("device", "<", wrap=True), Column("best policy", "<"),
            Column("met"), Column("XRBench"), Column("runner-up", "<"), Column("met")]
    table = [(b.workload, b.device, b.policy, pct(b.met), "-" if math.isnan(b.xrbench) else f"{b.xrbench:.1f}",
              b.runner_up or "-", pct(b.runner_up_met)) for b in best]
    print(render(cols, table, title="best policy per workload and device",
                 footer=["met: deadline met over the cells (loads, seeds, … summed); XRBench: mean score; "
                         "ties on met go to the higher XRBench score"]))
