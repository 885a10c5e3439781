"""One PNG of a run: Gantt strip per processor, latency CDF per model, deadline-met % over time.

Generic over :class:`scheduler.timeline.RequestRecord`, so the simulator and
the live XR demo draw the same picture. Uses matplotlib's Agg backend (no
display needed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from scheduler.timeline import RequestRecord

#: A Gantt strip with more invocations than this shows only a window of the run (the first GANTT_WINDOW_MS).
GANTT_MAX_BARS = 4000
GANTT_WINDOW_MS = 2000.0


def plot_records(records: Sequence[RequestRecord], path: str | Path, title: str = "edgert run",
                 processors: Sequence[str] | None = None, bins: int = 50) -> Path:
    """Draw ``records`` into a PNG at ``path`` and return the path.

    Args:
        records: finished requests (times in ms on one clock).
        path: PNG to write.
        title: figure title.
        processors: lane order for the Gantt strip (default: processors in order of first use).
        bins: time bins for the deadline-met curve.

    Raises:
        ValueError: no records.
        MissingExtra: matplotlib is not installed (``pip install 'edgert[plot]'``).
    """
    from edgert._extras import require  # noqa: PLC0415

    matplotlib = require("matplotlib", "--plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    if not records:
        raise ValueError("no requests to plot")
    ran = [r for r in records if r.processor and not math.isnan(r.start_ms)]
    models = sorted({r.model for r in records})
    cmap = plt.get_cmap("tab10" if len(models) <= 10 else "tab20")
    color = {m: cmap(i % cmap.N) for i, m in enumerate(models)}
    lanes = list(processors) if processors else []
    for r in ran:
        if r.processor not in lanes:
            lanes.append(r.processor)
    arrivals = [r.arrival_ms for r in records if not math.isnan(r.arrival_ms)]
    t0 = min(arrivals) if arrivals else 0.0

    fig, (ax_g, ax_c, ax_d) = plt.subplots(3, 1, figsize=(12, 11), gridspec_kw={"height_ratios": [1.2, 1, 1]})
    fig.suptitle(title)

    # 1. Gantt strip, one lane per processor (+ dropped markers)
    window = ran
    note = ""
    if len(ran) > GANTT_MAX_BARS:
        start = min(r.start_ms for r in ran)
        window = [r for r in ran if r.start_ms < start + GANTT_WINDOW_MS]
        note = f" (first {GANTT_WINDOW_MS / 1000:.0f} s of {len(ran)} runs)"
    for li, lane in enumerate(lanes):
        for m in models:
            bars = [((r.start_ms - t0), max(r.end_ms - r.start_ms, 1e-3)) for r in window
                    if r.processor == lane and r.model == m]
            if bars:
                ax_g.broken_barh(bars, (li - 0.4, 0.8), facecolors=color[m], edgecolors="none")
    late = [r for r in window if r.status == "late"]
    if late:
        ax_g.plot([r.end_ms - t0 for r in late], [lanes.index(r.processor) + 0.45 for r in late], "v",
                  color="red", ms=3, label="late")
    drops = [r for r in records if r.status == "dropped"]
    if window:
        lo, hi = min(r.start_ms for r in window), max(r.end_ms for r in window)
        drops = [r for r in drops if lo <= r.arrival_ms <= hi]
    if drops:
        ax_g.plot([r.arrival_ms - t0 for r in drops], [len(lanes)] * len(drops), "x", color="black", ms=4)
    ax_g.set_yticks(range(len(lanes) + (1 if drops else 0)), lanes + (["dropped"] if drops else []))
    ax_g.set_xlabel("time (ms)")
    ax_g.set_title("placement" + note, pad=28)
    handles = [plt.Rectangle((0, 0), 1, 1, color=color[m]) for m in models]
    ax_g.legend(handles, models, loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=7,
                ncol=min(6, len(models)), frameon=False)

    # 2. latency CDF per model (requests that ran; dropped ones count as never finishing)
    for m in models:
        rows = [r for r in records if r.model == m]
        lat = np.sort([r.end_ms - r.arrival_ms for r in rows if not math.isnan(r.end_ms)])
        if lat.size:
            y = np.arange(1, lat.size + 1) / len(rows)
            ax_c.step(lat, y, where="post", color=color[m], label=f"{m} (n={len(rows)})")
    ax_c.set_xscale("log")
    ax_c.set_xlabel("latency (ms, log)")
    ax_c.set_ylabel("fraction of requests")
    ax_c.set_ylim(0, 1.02)
    ax_c.set_title("latency CDF per model (dropped requests never reach 1)")
    ax_c.legend(fontsize=7, loc="lower right")
    ax_c.grid(alpha=0.3)

    # 3. deadline-met % over time, by arrival time
    timed = [r for r in records if not math.isnan(r.arrival_ms)]
    arr = np.array([r.arrival_ms - t0 for r in timed])
    met = np.array([r.status == "ok" for r in timed], dtype=float)
    span = float(arr.max()) if arr.size else 0.0
    edges = np.linspace(0.0, span if span > 0 else 1.0, bins + 1)
    idx = np.clip(np.searchsorted(edges, arr, side="right") - 1, 0, bins - 1)
    n = np.bincount(idx, minlength=bins)
    ok = np.bincount(idx, weights=met, minlength=bins)
    centers = (edges[:-1] + edges[1:]) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(n > 0, 100.0 * ok / np.maximum(n, 1), np.nan)
    ax_d.plot(centers / 1000.0, pct, "-o", ms=3)
    ax_d.set_ylim(-2, 102)
    ax_d.set_xlabel("arrival time (s)")
    ax_d.set_ylabel("deadline met (%)")
    total = 100.0 * met.mean() if met.size else 0.0
    ax_d.set_title(f"deadline-met % over time (overall {total:.1f}%)")
    ax_d.grid(alpha=0.3)

    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
