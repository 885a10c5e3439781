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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.timeline import STATUSES, RequestRecord

_OK, _LATE, _DROPPED = 0, 1, 2   # codes into scheduler.timeline.STATUSES

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


@dataclass(frozen=True, slots=True, eq=False)
class Outcome:
    """Every request's terminal state, one numpy column each, in the order they reached it.

    Attributes:
        id: request ids (int64).
        model: codes into ``models`` (int32). frame: frame numbers (int64).
        status: codes into :data:`~scheduler.timeline.STATUSES` (int8: ok, late, dropped, failed).
        ready_ms: when it became ready (arrival; a cascade stage: its upstream's end). For a request
            dropped before it was ready (its upstream was dropped): the drop time.
        start_ms, end_ms: NaN for a request that never ran.
        deadline_ms: absolute deadline (``inf`` for none).
        processor: index into ``processors`` (int32; -1 for none).
        reasons: drop reason by request id (dropped requests only).
    """

    models: list[str]
    processors: list[str]
    id: np.ndarray
    model: np.ndarray
    frame: np.ndarray
    status: np.ndarray
    ready_ms: np.ndarray
    start_ms: np.ndarray
    end_ms: np.ndarray
    deadline_ms: np.ndarray
    processor: np.ndarray
    reasons: dict[int, str]

    def __len__(self) -> int:
        return len(self.id)

    def records(self) -> list[RequestRecord]:
        """One :class:`RequestRecord` per request, in this order.

        A time that is not a number is the one ``math.nan`` object, so records of two runs compare equal.
        """
        models, procs, reasons = self.models, self.processors + [""], self.reasons
        nan = math.nan
        return [
            RequestRecord(i, models[m], STATUSES[st], rd, dl, procs[p], sm if sm == sm else nan,  # noqa: PLR0124
                          em if em == em else nan, fr, reasons.get(i, ""))  # noqa: PLR0124
            for i, m, st, rd, dl, p, sm, em, fr in zip(
                self.id.tolist(), self.model.tolist(), self.status.tolist(), self.ready_ms.tolist(),
                self.deadline_ms.tolist(), self.processor.tolist(), self.start_ms.tolist(),
                self.end_ms.tolist(), self.frame.tolist())
        ]


def outcome_of(wl: Any, processors: list[str], done: Sequence[int], dropped: bytearray, ready: Sequence[float],
               start_ms: np.ndarray, end_ms: np.ndarray, where: np.ndarray, reasons: dict[int, str],
               deadline_ms: Sequence[float] | None = None) -> Outcome:
    """A simulated run's :class:`Outcome` from the driver's columns: requests in the order they ended
    (``done``), each run's start and end (ms) and processor index (-1: none) by request id; ``deadline_ms`` by
    request id where the run set them (stream frames: their period at the stream's rung), else the workload's."""
    order = np.fromiter(done, np.int64, len(done))
    deadline = (wl.t_ms + wl.slo_ms if deadline_ms is None
                else np.fromiter(deadline_ms, np.float64, len(deadline_ms)))[order]
    end = end_ms[order]
    is_dropped = np.frombuffer(dropped, np.uint8)[order].astype(bool)
    status = np.where(is_dropped, _DROPPED, np.where(end <= deadline, _OK, _LATE)).astype(np.int8)
    return Outcome(
        models=list(wl.models), processors=processors, id=order, model=wl.model[order], frame=wl.frame[order],
        status=status, ready_ms=np.fromiter(ready, np.float64, len(ready))[order], start_ms=start_ms[order],
        end_ms=end, deadline_ms=deadline, processor=where[order].astype(np.int32), reasons=reasons)


def realtime_scores(end_ms: np.ndarray, deadline_ms: np.ndarray) -> np.ndarray:
    """:func:`realtime_score` of many requests at once (0 where ``end_ms`` is NaN)."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = _RT_K * (end_ms - deadline_ms)
        out = 1.0 / (1.0 + np.exp(np.minimum(x, 700.0)))
    out[x > 700.0] = 0.0
    out[np.isinf(deadline_ms)] = 1.0
    out[np.isnan(end_ms)] = 0.0
    return out


def _block(status: np.ndarray, latency: np.ndarray, score: np.ndarray, cloud: np.ndarray) -> dict[str, Any]:
    """Figures for the requests of one block (columns already cut to it)."""
    n = int(status.size)
    counts = np.bincount(status, minlength=4) if n else np.zeros(4, np.int64)
    ran = status <= 1
    lat = latency[ran]
    ok = int(counts[0])
    return {
        "requests": n,
        "ok": ok,
        "late": int(counts[1]),
        "dropped": int(counts[2]),
        "failed": int(counts[3]),
        "slo_met_rate": round(ok / n, 6) if n else 0.0,
        "p50_ms": round(float(np.percentile(lat, 50)), 4) if lat.size else None,
        "p99_ms": round(float(np.percentile(lat, 99)), 4) if lat.size else None,
        "offloaded": int(cloud.sum()),
        "realtime_score": round(float(score.sum()) / n, 6) if n else 0.0,
    }


def summarize(out: Outcome, processors: Sequence[tuple[str, str, int, float, int]],
              span_ms: float) -> dict[str, Any]:
    """Summary of a run's :class:`Outcome`.

    Args:
        out: every request's terminal state.
        processors: ``(name, kind, slots, busy_ms, runs)`` per processor, in ``out.processors`` order.
        span_ms: the run's span in virtual ms (for utilization).
    """
    status = out.status.astype(np.int64)
    latency = out.end_ms - out.ready_ms
    score = realtime_scores(out.end_ms, out.deadline_ms)
    kinds = np.array([p[1] == "cloud" for p in processors] + [False], bool)
    cloud = kinds[out.processor]          # -1 picks the trailing False
    res = _block(status, latency, score, cloud)
    reasons: dict[str, int] = {}
    for rid in out.id[status == 2].tolist():
        kind = reason_kind(out.reasons.get(rid, ""))
        reasons[kind] = reasons.get(kind, 0) + 1
    res["drop_reasons"] = dict(sorted(reasons.items()))
    per: dict[str, dict[str, Any]] = {}
    for code in np.unique(out.model).tolist():
        m = out.model == code
        per[out.models[code]] = _block(status[m], latency[m], score[m], cloud[m])
    res["per_model"] = dict(sorted(per.items()))
    res["per_processor"] = {
        name: {
            "kind": kind,
            "requests": runs,
            "busy_ms": round(busy, 4),
            "utilization": round(busy / (slots * span_ms), 6) if span_ms > 0 else 0.0,
        }
        for name, kind, slots, busy, runs in processors
    }
    return res
