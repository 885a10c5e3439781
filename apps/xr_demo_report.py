"""What ``edgert run xr-demo`` prints and writes: the summary, its two tables, failure reasons, the cloud.

Plain text from :func:`edgert.tables.render`, so the same tables fit an
80-column terminal, a wide one and a pipe (names wrap at ``_``, figures are
never cut). Times are in ms throughout.

* :func:`summarize`: per model (fps, deadline-met %, p50/p99 ms, placement) and per stream.
* :func:`failure_reasons`: ``{model: {reason: n}}`` over the failed and dropped requests.
* :func:`cloud_report`: how many requests ran on the cloud and, when none did, why.
* :func:`model_table` / :func:`stream_table`: the tables, a footer of reasons under the first.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from edgert.tables import Column, render
from scheduler.timeline import RequestRecord

#: Statuses whose record carries a reason worth counting.
REASON_STATUSES = ("failed", "dropped")
#: The model table's figure columns, before one column per processor (or kind).
_FIGURES = ("fps", "req", "met%", "late", "drop", "fail", "p50", "p99")


class _SessionLike(Protocol):
    stats: dict[str, Any]
    pipes: dict[str, Any]


def summarize(stats: dict[str, dict[str, Any]], seconds: float, session: _SessionLike) -> dict[str, Any]:
    """Per model (fps, deadline-met %, p50/p99 ms, placement) and per stream (``frames`` taken, ``on_time``,
    ``late``: processed but after its deadline, ``dropped``: a stage dropped, ``rate_fps``: on-time results per
    second, ``fps_now``: its rate on the ladder at the end, ``ladder``: its steps with their reasons,
    ``priority``, ``finish_error_ms``: the admission's finish-time prediction error, ``found_mean``:
    instances found per processed frame; in frames, ``detector_ran``, ``tracked`` and ``detector_skipped``
    (:meth:`apps.xr.Pipelines.counts`); and what the frames' budgets decided: ``frames_shed``,
    ``optional_skipped`` by reason, ``variants``: requests per model variant)."""
    per_model = {}
    for name, s in stats.items():
        done = s["ok"] + s["late"]
        per_model[name] = {**s, "fps": done / seconds if seconds else 0.0,
                           "deadline_met_pct": 100.0 * (s["slo_met_rate"] or 0.0)}
    per_stream = {}
    for name, st in session.stats.items():
        pipe = session.pipes[name]
        counts: dict[str, Any] = next(iter(pipe.counts().values()), {})
        if hasattr(pipe, "elastic_counts"):
            counts.update(pipe.elastic_counts())
        lat = np.asarray(st.latencies_ms) if st.latencies_ms else np.zeros(1)
        per_stream[name] = {"frames": st.frames, "on_time": st.on_time,
                            "on_time_pct": 100.0 * st.on_time / st.frames if st.frames else 0.0,
                            "late": getattr(st, "late", 0), "dropped": getattr(st, "dropped", 0),
                            "rate_skipped": getattr(st, "rate_skipped", 0),
                            "rate_fps": st.on_time / seconds if seconds else 0.0,
                            "fps_now": pipe.rung_fps() if hasattr(pipe, "rung_fps") else None,
                            "ladder": pipe.steps() if hasattr(pipe, "steps") else [],
                            "found_mean": found_mean(st),
                            "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
                            "failed": getattr(st, "failed", 0), "first_failure": getattr(st, "first_failure", ""),
                            **counts}
    return {"seconds": seconds, "per_model": per_model, "per_stream": per_stream}


def found_mean(st: Any) -> float:
    """Instances found (hands, faces, poses; 1 per mask) per processed frame: a frame shed whole by its
    budget was not processed (as a frame a latest-frame loop skips), and counts in ``frames_shed``."""
    processed = st.frames - getattr(st, "shed", 0)
    return getattr(st, "found", 0) / processed if processed > 0 else 0.0


_DROPPED_PREFIX = re.compile(r"^request for model '[^']*' was dropped: ")


def reason_class(reason: str) -> str:
    """The part of a reason to count by: the text before the first ``": "`` once the
    ``request for model 'm' was dropped:`` preamble is gone (``"cloud timeout"``,
    ``"cannot meet its deadline"``), figures as ``N``, so that reasons differing only
    in their numbers count together.

    >>> reason_class("cloud timeout: no reply after 20.4 ms")
    'cloud timeout'
    >>> reason_class("request for model 'pose' was dropped: cannot meet its deadline: finish 2.5 ms > 2.1 ms")
    'cannot meet its deadline'
    """
    head = _DROPPED_PREFIX.sub("", reason.strip()).split(": ", 1)[0].strip()
    return re.sub(r"\d+\.\d+", "N", head) or "no reason given"


def failure_reasons(records: Sequence[RequestRecord]) -> dict[str, dict[str, int]]:
    """``{model: {reason: n}}`` over the failed and dropped requests (reasons as :func:`reason_class`)."""
    out: dict[str, Counter[str]] = {}
    for r in records:
        if r.status in REASON_STATUSES:
            out.setdefault(r.model, Counter())[reason_class(r.reason)] += 1
    return {m: dict(c.most_common()) for m, c in sorted(out.items())}


def reason_examples(records: Sequence[RequestRecord]) -> dict[str, str]:
    """One full reason text per reason of :func:`failure_reasons` (the last seen)."""
    return {reason_class(r.reason): r.reason for r in records if r.status in REASON_STATUSES and r.reason}


class _Estimator(Protocol):
    def expected_ms(self, model: str, processor: str) -> float | None: ...


def cloud_report(records: Sequence[RequestRecord], processors: Sequence[str],
                 estimator: _Estimator) -> dict[str, Any] | None:
    """How many requests ran on the cloud (ok, late, failed there) and, when none did, why not.

    The why compares, per model that had requests, the cloud's expected latency (ms) with the
    deadline and with the fastest local processor. None when the runtime has no cloud.
    """
    if "cloud" not in processors:
        return None
    on_cloud = [r for r in records if r.processor == "cloud"]
    report: dict[str, Any] = {"requests": len(on_cloud), "of": len(records), "expected_ms": {}, "why_none": None,
                              "failed": sum(r.status == "failed" for r in on_cloud)}
    budget: dict[str, float] = {}
    for r in records:
        if math.isfinite(r.deadline_ms) and math.isfinite(r.arrival_ms):
            budget[r.model] = r.deadline_ms - r.arrival_ms
    why = []
    for model, ms in sorted(budget.items()):
        cloud = estimator.expected_ms(model, "cloud")
        local = [v for p in processors if p != "cloud" and (v := estimator.expected_ms(model, p)) is not None]
        report["expected_ms"][model] = {"cloud": cloud, "local": min(local) if local else None, "deadline": ms}
        if cloud is None:
            why.append(f"{model}: the cloud does not serve it")
        elif cloud > ms:
            why.append(f"{model}: cloud {cloud:.1f} ms expected > {ms:.1f} ms deadline")
        elif local and min(local) <= cloud:
            why.append(f"{model}: local {min(local):.1f} ms beats cloud {cloud:.1f} ms (deadline {ms:.1f} ms)")
        else:
            why.append(f"{model}: cloud {cloud:.1f} ms fits the {ms:.1f} ms deadline, but was never needed")
    if not on_cloud:
        report["why_none"] = "; ".join(why) or "no request had a deadline to compare with"
    return report


def cloud_line(report: dict[str, Any] | None) -> str:
    """One sentence on the cloud (empty without one)."""
    if report is None:
        return ""
    line = f"cloud: {report['requests']} of {report['of']} requests ran there"
    if report["failed"]:
        line += f" ({report['failed']} failed)"
    if report["why_none"]:
        line += f"; none because {report['why_none']}"
    return line


def placement_groups(processors: Sequence[str]) -> dict[str, list[str]]:
    """Processors by kind: ``cpu0``, ``cpu1`` → ``cpu``; ``cloud`` stays ``cloud``."""
    kinds: dict[str, list[str]] = {}
    for p in processors:
        kinds.setdefault(re.sub(r"\d+$", "", p) or p, []).append(p)
    return kinds


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def model_table(summary: dict[str, Any], processors: Sequence[str], title: str, total: int,
                footer: Sequence[str] = ()) -> str:
    """One row per model: fps, requests, deadline met %, late/dropped/failed, p50/p99 (ms), placement.

    Placement is one column per processor, or per kind (``cpu``) when that wraps fewer names.
    """
    each = {p: [p] for p in processors}
    kinds = placement_groups(processors)
    texts = [_model_table(summary, g, title, total, footer) for g in ((each, kinds) if kinds != each else (each,))]
    return min(texts, key=lambda t: t.count("\n"))


def _model_table(summary: dict[str, Any], groups: dict[str, list[str]], title: str, total: int,
                 footer: Sequence[str]) -> str:
    cols = [Column("model", "<", wrap=True), *(Column(h) for h in _FIGURES), *(Column(g) for g in groups)]
    rows = []
    for name, m in summary["per_model"].items():
        by = m["by_processor"]
        rows.append([name, f"{m['fps']:.1f}", str(m["requests"]), f"{m['deadline_met_pct']:.1f}", str(m["late"]),
                     str(m["dropped"]), str(m["failed"]), _ms(m["p50_ms"]), _ms(m["p99_ms"]),
                     *(str(sum(by.get(p, 0) for p in ps)) for ps in groups.values())])
    return render(cols, rows, title=title, total=total, footer=footer)


def stream_table(summary: dict[str, Any], total: int) -> str:
    """One row per stream: frames, whole cascade on time %, p50/p99 (ms), then in frames: the detector ran,
    an instance was tracked from the frame before, the detector skipped (``-`` for a stream without one)."""
    cols = [Column("stream", "<", wrap=True), Column("prio", "<"), Column("frames"), Column("met%"), Column("late"),
            Column("shed"), Column("fps"), Column("p99"), Column("ran"), Column("tracked"),
            Column("skip")]
    rows = [[name, str(s.get("priority", "normal")), str(s["frames"]), f"{s['on_time_pct']:.1f}", str(s.get("late", 0)),
             str(s.get("frames_shed", 0)), f"{s.get('rate_fps', 0.0):.1f}", f"{s['p99_ms']:.1f}",
             str(s.get("detector_ran", "-")), str(s.get("tracked", "-")), str(s.get("detector_skipped", "-"))]
            for name, s in summary["per_stream"].items()]
    return render(cols, rows, title="streams: met% = frames whose whole cascade met its deadline; late = processed, "
                                    "result after its deadline; shed = skipped whole by its budget; fps = on-time "
                                    "results per second; p99 in ms (p50 in --json); ran / skip = frames on which the detector "
                                    "ran / did not run; tracked = frames that kept an instance from the frame before",
                  total=total)


def reason_footer(summary: dict[str, Any]) -> list[str]:
    """Lines under the model table: each model's failed/dropped requests by reason, then an example of each."""
    lines = [f"{model}: " + ", ".join(f"{k} x{n}" for k, n in counts.items())
             for model, counts in summary.get("reasons", {}).items()]
    examples = summary.get("reason_examples", {})
    lines += [f"e.g. {examples[k]}" for k in sorted(examples) if examples[k] != k]
    return ["failed or dropped, by reason:", *lines] if lines else []


def budget_lines(name: str, s: dict[str, Any], total: int) -> list[str]:
    """What the frames' budgets decided for one stream: instances found per frame, how often each model
    variant ran, optional detector runs skipped (by reason) and frames shed whole (wrapped to ``total``)."""
    bits = [f"found/frame {s.get('found_mean', 0.0):.2f}"]
    variants = s.get("variants") or {}
    if len(variants) > 1 or any(v.endswith("_lite") for v in variants):
        bits.append("ran " + ", ".join(f"{k} x{n}" for k, n in sorted(variants.items())))
    skipped = s.get("optional_skipped") or {}
    if skipped:
        bits.append("optional search skipped: " + ", ".join(f"{k} x{n}" for k, n in skipped.items()))
    if s.get("frames_shed"):
        by = s.get("frames_shed_by") or {}
        bits.append(f"skipped whole x{s['frames_shed']}" + (" (" + ", ".join(f"{k} x{n}" for k, n in by.items()) + ")"
                                                            if by else ""))
    err = s.get("finish_error_ms") or {}
    if err.get("n"):
        bits.append(f"finish predicted within {err['mean_abs']:.1f} ms on average (p90 late by {err['p90']:.1f} ms)")
    return textwrap.wrap(f"{name}: " + "; ".join(bits), total, initial_indent="  ", subsequent_indent="    ")


def ladder_lines(summary: dict[str, Any], total: int) -> list[str]:
    """The rate ladder's steps (time in s from the first, stream, from → to fps, why), or nothing."""
    steps = sorted((st for s in summary["per_stream"].values() for st in s.get("ladder", [])), key=lambda st: st["t_ms"])
    if not steps:
        return []
    t0 = steps[0]["t_ms"]
    out = ["rate ladder steps:"]
    for st in steps:
        out += textwrap.wrap(f"+{(st['t_ms'] - t0) / 1e3:5.2f} s {st['stream']}: {st['from_fps']:g} -> "
                             f"{st['to_fps']:g} fps: {st['reason']}", total, initial_indent="  ",
                             subsequent_indent="    ")
    return out


def report_text(summary: dict[str, Any], processors: Sequence[str], title: str, total: int) -> str:
    """The model table (reasons under it), the stream table, each stream's frames on time, the cloud."""
    parts = [model_table(summary, processors, title, total, footer=reason_footer(summary)), "",
             stream_table(summary, total)]
    parts += [f"  {name:<13} frames whose whole cascade met its deadline: "
              f"{s['on_time']}/{s['frames']} ({s['on_time_pct']:.1f}%)" for name, s in summary["per_stream"].items()]
    parts += [line for name, s in summary["per_stream"].items() if s.get("failed")
              for line in textwrap.wrap(f"  {name}: {s['failed']} frame(s) failed, code raised; first: "
                                        f"{s['first_failure']}", total, subsequent_indent="    ")]
    parts += [line for name, m in summary["per_model"].items() for d, why in m.get("excluded", {}).items()
              for line in textwrap.wrap(f"  {name}: {d} excluded by the model's tolerance: {why}", total,
                                        subsequent_indent="    ")]
    parts += [x for name, s in summary["per_stream"].items() for x in budget_lines(name, s, total)]
    parts += ladder_lines(summary, total)
    line = cloud_line(summary.get("cloud"))
    if line:
        parts += ["", *textwrap.wrap(line, total, subsequent_indent="  ")]
    line = memory_line(summary.get("memory"))
    if line:
        parts += ["", *textwrap.wrap(line, total, subsequent_indent="  ")]
    return "\n".join(parts)


def memory_line(memory: dict[str, Any] | None) -> str:
    """The process's resident memory at the start of the run (models loaded) and at its end, its peak, and
    what each model added when it loaded (MB, largest first), with its copies where a model has more than
    one session (runs that overlapped)."""
    if not memory:
        return ""
    models = sorted(((name, m) for name, m in memory.get("per_model", {}).items() if m.get("resident_mb") is not None),
                    key=lambda kv: -kv[1]["resident_mb"])
    shares = ", ".join(f"{name} {m['resident_mb']:.0f}" + (f" ({m['copies']} copies)" if m.get("copies", 1) > 1 else "")
                       for name, m in models)
    start, end = memory.get("rss_start_mb"), memory.get("rss_end_mb")
    span = f"{start:.0f} MB resident at the start, {end:.0f} MB at the end; " if start and end else ""
    return (f"memory: {span}peak {memory['peak_rss_mb']:.0f} MB resident (VmHWM)"
            + (f"; loading added, MB: {shares}" if shares else ""))
