"""``--plot``: the one-picture view of a run (edgert.bench.plot) reads without a key to decode it."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("matplotlib", reason="needs the [plot] extra")

from edgert.bench.plot import figure, plot_records  # noqa: E402
from scheduler.timeline import RequestRecord  # noqa: E402


def _records() -> list[RequestRecord]:
    """Two models on two processors over 1 s: ok runs of 1.5-40 ms, some late, two dropped."""
    out, k = [], 0
    for i in range(60):
        t = i * 16.7
        for model, proc, ms in (("palm_detection_full", "cpu0", 1.5 + i % 7), ("pose_detection", "cpu1", 12.0 + i % 30)):
            status = "late" if ms > 33.3 - 4 and proc == "cpu1" else "ok"
            out.append(RequestRecord(k, model, status, t, t + 33.3, proc, t + 0.5, t + 0.5 + ms))
            k += 1
    out += [RequestRecord(k + j, "pose_detection", "dropped", 200.0 * (j + 1), 200.0 * (j + 1) + 33.3,
                          reason="cannot meet its deadline") for j in range(2)]
    return out


def test_markers_have_a_legend_every_axis_is_in_ms_and_the_latency_ticks_read() -> None:
    import matplotlib.pyplot as plt

    recs = _records()
    fig = figure(recs, "edgert xr-demo — scheduler: edgert")
    try:
        gantt, cdf, met = fig.axes
        assert fig._suptitle.get_text() == "edgert xr-demo — scheduler: edgert"
        labels = [t.get_text() for t in gantt.get_legend().get_texts()]
        assert labels[:2] == ["palm_detection_full", "pose_detection"]
        n_late = sum(r.status == "late" for r in recs)
        assert f"late: finished after its deadline ({n_late})" in labels
        assert "dropped, at its arrival (2)" in labels
        for ax in (gantt, cdf, met):        # legends right of the plot, clear of each panel's title
            assert ax.get_legend().get_bbox_to_anchor().x0 >= ax.get_position().x1 * fig.bbox.width - 1
            assert "(ms" in ax.get_xlabel(), ax.get_xlabel()
        assert cdf.get_xscale() == "log"
        ticks = [t.get_text() for t in cdf.get_xticklabels()]
        assert {"2", "5", "10", "20"} <= set(ticks), ticks       # plain numbers, not 10^k
        assert all(round(float(t) / 10 ** math.floor(math.log10(float(t))), 6) in (1, 2, 5) for t in ticks), ticks
    finally:
        plt.close(fig)


def test_plot_records_writes_a_png(tmp_path) -> None:
    out = plot_records(_records(), tmp_path / "run.png", title="t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no requests"):
        plot_records([], tmp_path / "none.png")
