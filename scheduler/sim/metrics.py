"""Summary figures of a run (DESIGN.md §5 ``--json`` keys) and the XRBench real-time score.

Keys: ``requests``, ``ok``, ``late``, ``dropped``, ``failed``,
``slo_met_rate`` (ok / requests; a dropped request misses its SLO),
``p50_ms``/``p99_ms`` (latency from ready to finish of requests that ran),
``offloaded`` (requests run on a processor of kind cloud), ``realtime_score``
(mean over requests of XRBench's ``1 / (1 + e^(15 (finish − deadline)))``
with times in ms, 0 for a dropped request), ``drop_reasons`` (count per
reason, numbers in the reason replaced by ``#``), ``per_model``
(the same per model) and ``per_processor`` (``kind``, ``requests``,
``busy_ms``, ``utilization`` = busy time / (slots × span)). Nothing here
depends on the wall clock; callers add wall-clock figures under keys
containing ``wall``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

_RT_K = 15.0
_NUM = re.compile(r"-?\d+(?:\.\d+)?")


def reason_kind(reason: str) -> str:
    """A drop reason with its numbers replaced by ``#``, so reasons group into a few kinds."""
    return _NUM.sub("#", reason)


def realtime_score(end_ms: float, deadline_ms: float) -> float:
    """XRBench's per-request real-time score: ``1 / (1 + e^(15 (end − deadline)))``, times in ms."""
    if math.isnan(end_ms):
        return 0.0
    if math.isinf(deadline_ms):
        return 1.0
    x = _RT_K * (end_ms - deadline_ms)
    if x > 700.0:
        return 0.0
    return 1.0 / (1.0 + math.exp(x))


def _block(rows: Sequence[tuple[str, float, float, float, str]]) -> dict[str, Any]:
    """Figures for rows of (status, ready_ms, end_ms, deadline_ms, processor_kind)."""
    n = len(rows)
    ok = sum(1 for r in rows if r[0] == "ok")
    late = sum(1 for r in rows if r[0] == "late")
    dropped = sum(1 for r in rows if r[0] == "dropped")
    failed = sum(1 for r in rows if r[0] == "failed")
    lat = np.array([r[2] - r[1] for r in rows if r[0] in ("ok", "late")], dtype=float)
    score = sum(realtime_score(r[2], r[3]) for r in rows)
    return {
        "requests": n,
        "ok": ok,
        "late": late,
        "dropped": dropped,
        "failed": failed,
        "slo_met_rate": round(ok / n, 6) if n else 0.0,
        "p50_ms": round(float(np.percentile(lat, 50)), 4) if lat.size else None,
        "p99_ms": round(float(np.percentile(lat, 99)), 4) if lat.size else None,
        "offloaded": sum(1 for r in rows if r[4] == "cloud"),
        "realtime_score": round(score / n, 6) if n else 0.0,
    }


def summarize(done: Iterable[Any], processors: Sequence[tuple[str, str, int, float, int]],
              span_ms: float) -> dict[str, Any]:
    """Summary of finished requests.

    Args:
        done: objects with ``model``, ``status``, ``ready_ms``, ``end_ms``,
            ``deadline_ms``, ``processor`` and ``reason`` (simulated requests).
        processors: ``(name, kind, slots, busy_ms, runs)`` per processor.
        span_ms: the run's span in virtual ms (for utilization).
    """
    kind_of = {p[0]: p[1] for p in processors}
    rows: list[tuple[str, float, float, float, str]] = []
    per: dict[str, list[tuple[str, float, float, float, str]]] = {}
    reasons: dict[str, int] = {}
    for r in done:
        row = (r.status, r.ready_ms, r.end_ms, r.deadline_ms, kind_of.get(r.processor, ""))
        rows.append(row)
        per.setdefault(r.model, []).append(row)
        if r.status == "dropped":
            kind = reason_kind(r.reason)
            reasons[kind] = reasons.get(kind, 0) + 1
    out = _block(rows)
    out["drop_reasons"] = dict(sorted(reasons.items()))
    out["per_model"] = {m: _block(per[m]) for m in sorted(per)}
    out["per_processor"] = {
        name: {
            "kind": kind,
            "requests": runs,
            "busy_ms": round(busy, 4),
            "utilization": round(busy / (slots * span_ms), 6) if span_ms > 0 else 0.0,
        }
        for name, kind, slots, busy, runs in processors
    }
    return out
