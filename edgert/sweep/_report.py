"""What a user looks at first: the best policy per workload and device, and a heatmap of met %.

Both read a sweep's cell rows (``model`` ``all`` or no ``model`` column; failed cells left out),
from this run or resumed from a CSV (where every value is text). A policy is a scheduler, with
its objective when the grid has one (``edgert/balanced``). Deadline-met % is summed over the
cells it covers (``ok`` / ``requests`` over loads, seeds, bursts …); XRBench is their mean score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Best:
    """The best policy of one workload on one device, and the runner-up (None with one policy)."""

    workload: str
    device: str
    policy: str
    met: float            # deadline-met share, 0..1
    xrbench: float        # mean XRBench score (NaN without energy figures)
    runner_up: str | None
    runner_up_met: float


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _blank(v: Any) -> bool:
    """None, "" or NaN (an empty field, as written here, read by csv, or read by pandas)."""
    return v is None or v == "" or (isinstance(v, float) and math.isnan(v))


def _cell_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("model", "all") == "all" and _blank(r.get("error"))]


def policy_of(row: dict[str, Any]) -> str:
    """``scheduler`` (``edgert`` when the grid has none), ``/objective`` when the row has one."""
    name = "edgert" if _blank(row.get("scheduler")) else str(row["scheduler"])
    obj = row.get("objective")
    return name if _blank(obj) else f"{name}/{obj}"


def _tally(rows: Sequence[dict[str, Any]], key: Any) -> dict[Any, dict[str, list[float]]]:
    """By ``key(row)``, then by policy: ``[ok, requests, xrbench sum, xrbench count]``."""
    out: dict[Any, dict[str, list[float]]] = {}
    for r in _cell_rows(rows):
        t = out.setdefault(key(r), {}).setdefault(policy_of(r), [0.0, 0.0, 0.0, 0.0])
        t[0] += _num(r.get("ok"))
        t[1] += _num(r.get("requests"))
        xr = _num(r.get("xrbench.score"))
        if not math.isnan(xr):
            t[2] += xr
            t[3] += 1
    return out


def best_policies(rows: Sequence[dict[str, Any]]) -> list[Best]:
    """Per workload (scenario or trace) and device: policies ranked by met %, then XRBench score."""
    out = []
    for (wl, dev), by in _tally(rows, lambda r: (str(r.get("scenario") or r.get("trace")),
                                                 str(r.get("device")))).items():
        ranked = sorted(by.items(), key=lambda kv: (-_share(kv[1]), -(kv[1][2] / kv[1][3] if kv[1][3] else 0.0),
                                                    kv[0]))
        (name, t), second = ranked[0], ranked[1] if len(ranked) > 1 else None
        out.append(Best(wl, dev, name, _share(t), t[2] / t[3] if t[3] else math.nan,
                        None if second is None else second[0], math.nan if second is None else _share(second[1])))
    return out


def _share(t: list[float]) -> float:
    return t[0] / t[1] if t[1] else math.nan


def plot_heatmap(rows: Sequence[dict[str, Any]], path: str | Path) -> None:
    """Met % per policy (rows) x workload (columns), one panel per device and load, to ``path``.

    Raises:
        MissingExtra: without matplotlib (``pip install 'edgert[plot]'``).
    """
    from edgert.extras import require  # noqa: PLC0415

    require("matplotlib", "--plot")
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    by = _tally(rows, lambda r: (str(r.get("device")), _num(r.get("load", 1.0)),
                                 str(r.get("scenario") or r.get("trace"))))
    panels = sorted({k[:2] for k in by})
    policies = sorted({p for t in by.values() for p in t})
    workloads = sorted({k[2] for k in by})
    cols = min(3, max(1, len(panels)))
    nrows = max(1, math.ceil(len(panels) / cols))
    fig, axes = plt.subplots(nrows, cols, squeeze=False, sharex=True, sharey=True, layout="constrained",
                             figsize=(2.0 + 0.9 * len(workloads) * cols, 1.2 + 0.45 * len(policies) * nrows))
    im = None
    for ax, (dev, load) in zip(axes.flat, panels):
        grid = [[100 * _share(by[(dev, load, w)][p]) if p in by.get((dev, load, w), {}) else math.nan
                 for w in workloads] for p in policies]
        im = ax.imshow(grid, vmin=0, vmax=100, cmap="RdYlGn", aspect="auto")
        ax.set_title(f"{dev}, load {load:g}", fontsize=9)
        ax.set_xticks(range(len(workloads)), workloads, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(len(policies)), policies, fontsize=8)
        ax.label_outer()   # policy names on the left column, workloads under the bottom row only
        for i, line in enumerate(grid):
            for j, v in enumerate(line):
                if not math.isnan(v):
                    ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=7)
    for k, ax in enumerate(axes.flat):
        if k >= len(panels):
            ax.axis("off")
        elif k + cols >= len(panels):   # nothing drawn below it: its own workload names
            ax.tick_params(labelbottom=True)
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), label="deadline met %")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
