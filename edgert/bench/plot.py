"""One PNG of a run: Gantt strip per processor, latency CDF per model, deadline-met % over time.

Generic over :class:`scheduler.timeline.RequestRecord`, so the simulator and
the live XR demo draw the same picture. Every axis of time is in ms, on the
run's clock from its first arrival. Uses matplotlib's Agg backend (no display
needed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.timeline import RequestRecord

#: A Gantt strip with more invocations than this shows only a window of the run (the first GANTT_WINDOW_MS).
GANTT_MAX_BARS = 4000
GANTT_WINDOW_MS = 2000.0
#: Tick values of the log latency axis within each decade (1, 2, 5, 10, 20, 50 ms, ...).
LOG_TICKS = (1.0, 2.0, 5.0)


@dataclass(frozen=True, slots=True)
class _Run:
    """What every panel shares: the records, models and their colours, processor lanes, time zero (ms)."""

    records: Sequence[RequestRecord]
    ran: list[RequestRecord]
    models: list[str]
    color: dict[str, Any]
    lanes: list[str]
    t0_ms: float


def plot_records(records: Sequence[RequestRecord], path: str | Path, title: str = "edgert run",
                 processors: Sequence[str] | None = None, bins: int = 50) -> Path:
    """Draw ``records`` into a PNG at ``path`` and return the path.

    Args:
        records: finished requests (times in ms on one clock).
        path: PNG to write.
        title: figure title (say what the run was, e.g. ``"edgert xr-demo — scheduler: edgert"``).
        processors: lane order for the Gantt strip (default: processors in order of first use).
        bins: time bins for the deadline-met curve.

    Raises:
        ValueError: no records.
        MissingExtra: matplotlib is not installed (``pip install 'edgert[plot]'``).
    """
    plt = _pyplot()
    fig = figure(records, title, processors, bins)
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def figure(records: Sequence[RequestRecord], title: str = "edgert run", processors: Sequence[str] | None = None,
           bins: int = 50) -> Any:
    """The matplotlib Figure :func:`plot_records` saves: placement, latency CDF, deadline met (axes in that order).

    Raises:
        ValueError: no records.
    """
    plt = _pyplot()
    if not records:
        raise ValueError("no requests to plot")
    run = _prepare(records, processors, plt)
    fig, (ax_g, ax_c, ax_d) = plt.subplots(3, 1, figsize=(12, 12), gridspec_kw={"height_ratios": [1.3, 1, 1]})
    fig.suptitle(title, fontsize=14)
    _gantt(ax_g, run, plt)
    _latency_cdf(ax_c, run)
    _deadline_met(ax_d, run, bins)
    fig.tight_layout()
    return fig


def _pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or MissingExtra naming ``edgert[plot]``."""
    from edgert.extras import require  # noqa: PLC0415

    matplotlib = require("matplotlib", "--plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def _prepare(records: Sequence[RequestRecord], processors: Sequence[str] | None, plt: Any) -> _Run:
    """Models and colours, lanes (``processors`` first, then in order of first use), time zero."""
    ran = [r for r in records if r.processor and not math.isnan(r.start_ms)]
    models = sorted({r.model for r in records})
    cmap = plt.get_cmap("tab10" if len(models) <= 10 else "tab20")
    lanes = list(processors) if processors else []
    for r in ran:
        if r.processor not in lanes:
            lanes.append(r.processor)
    arrivals = [r.arrival_ms for r in records if not math.isnan(r.arrival_ms)]
    return _Run(records, ran, models, {m: cmap(i % cmap.N) for i, m in enumerate(models)}, lanes,
                min(arrivals) if arrivals else 0.0)


def _gantt(ax: Any, run: _Run, plt: Any) -> None:
    """Placement: one lane per processor, a bar per invocation, markers for late and dropped requests.

    The legend (models, then the markers) sits right of the strip, clear of the panel's title.
    """
    window, note = run.ran, ""
    if len(run.ran) > GANTT_MAX_BARS:
        start = min(r.start_ms for r in run.ran)
        window = [r for r in run.ran if r.start_ms < start + GANTT_WINDOW_MS]
        note = f" (first {GANTT_WINDOW_MS:.0f} ms of {len(run.ran)} runs)"
    for li, lane in enumerate(run.lanes):
        for m in run.models:
            bars = [(r.start_ms - run.t0_ms, max(r.end_ms - r.start_ms, 1e-3)) for r in window
                    if r.processor == lane and r.model == m]
            if bars:
                ax.broken_barh(bars, (li - 0.4, 0.8), facecolors=run.color[m], edgecolors="none")
    handles = [plt.Rectangle((0, 0), 1, 1, color=run.color[m]) for m in run.models]
    labels = list(run.models)
    late = [r for r in window if r.status == "late"]
    if late:
        handles.append(ax.plot([r.end_ms - run.t0_ms for r in late],
                               [run.lanes.index(r.processor) + 0.45 for r in late], "v", color="red", ms=4)[0])
        labels.append(f"late: finished after its deadline ({len(late)})")
    drops = [r for r in run.records if r.status == "dropped"]
    if window:
        lo, hi = min(r.start_ms for r in window), max(r.end_ms for r in window)
        drops = [r for r in drops if lo <= r.arrival_ms <= hi]
    if drops:
        handles.append(ax.plot([r.arrival_ms - run.t0_ms for r in drops], [len(run.lanes)] * len(drops), "x",
                               color="black", ms=5)[0])
        labels.append(f"dropped, at its arrival ({len(drops)})")
    ax.set_yticks(range(len(run.lanes) + (1 if drops else 0)), run.lanes + (["dropped"] if drops else []))
    ax.set_xlabel("time (ms)")
    ax.set_title("placement: a bar per run on each processor" + note)
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def _log_ms_axis(ax: Any, lo_ms: float, hi_ms: float) -> None:
    """A log x axis labelled at 1, 2, 5 × 10^k ms across ``lo_ms``..``hi_ms`` (plain numbers, no 10^k)."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator  # noqa: PLC0415

    ax.set_xscale("log")
    lo, hi = max(lo_ms, 1e-3), max(hi_ms, lo_ms * 1.01, 1e-3)
    ticks = [m * 10.0 ** k for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
             for m in LOG_TICKS]
    ticks = [t for t in ticks if lo / 1.5 <= t <= hi * 1.5]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xlim(lo / 1.5, hi * 1.5)


def _latency_cdf(ax: Any, run: _Run) -> None:
    """Per model, the fraction of its requests finished within x ms of arrival (dropped ones never finish)."""
    lows, highs = [], []
    for m in run.models:
        rows = [r for r in run.records if r.model == m]
        lat = np.sort([r.end_ms - r.arrival_ms for r in rows if not math.isnan(r.end_ms)])
        if lat.size:
            ax.step(lat, np.arange(1, lat.size + 1) / len(rows), where="post", color=run.color[m],
                    label=f"{m} (n={len(rows)})")
            lows.append(float(lat[0]))
            highs.append(float(lat[-1]))
    if lows:
        _log_ms_axis(ax, min(lows), max(highs))
    ax.set_xlabel("latency, arrival to end (ms, log scale)")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.02)
    ax.set_title("latency CDF per model (dropped requests keep a curve below 1)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(alpha=0.3)


def _deadline_met(ax: Any, run: _Run, bins: int) -> None:
    """Deadline-met % of the requests arriving in each of ``bins`` time bins (ms since the first arrival)."""
    timed = [r for r in run.records if not math.isnan(r.arrival_ms)]
    arr = np.array([r.arrival_ms - run.t0_ms for r in timed])
    met = np.array([r.status == "ok" for r in timed], dtype=float)
    span = float(arr.max()) if arr.size else 0.0
    edges = np.linspace(0.0, span if span > 0 else 1.0, bins + 1)
    idx = np.clip(np.searchsorted(edges, arr, side="right") - 1, 0, bins - 1)
    n = np.bincount(idx, minlength=bins)
    ok = np.bincount(idx, weights=met, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(n > 0, 100.0 * ok / np.maximum(n, 1), np.nan)
    ax.plot((edges[:-1] + edges[1:]) / 2, pct, "-o", ms=3, label=f"per {span / bins:.0f} ms of arrivals")
    ax.set_ylim(-2, 102)
    ax.set_xlabel("arrival time (ms)")
    ax.set_ylabel("deadline met (%)")
    total = 100.0 * met.mean() if met.size else 0.0
    ax.set_title(f"deadline met over time (overall {total:.1f}%)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(alpha=0.3)
