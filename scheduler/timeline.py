"""Per-request records and the Chrome trace-event timeline, shared by both drivers.

Both the live runtime and the simulator produce :class:`RequestRecord` rows;
:func:`chrome_trace` turns them into Chrome trace-event JSON (one track per
processor, one slice per invocation) that opens in Perfetto
(ui.perfetto.dev) or chrome://tracing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Terminal statuses; every request ends with exactly one.
STATUSES: tuple[str, ...] = ("ok", "late", "dropped", "failed")


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request (all times in ms on the driver's clock).

    ``start_ms``/``end_ms`` are NaN and ``processor`` is "" for a request that
    never ran (dropped before starting).
    """

    id: int
    model: str
    status: str
    arrival_ms: float
    deadline_ms: float
    processor: str = ""
    start_ms: float = math.nan
    end_ms: float = math.nan
    frame: int = -1
    reason: str = ""

    @property
    def latency_ms(self) -> float:
        """End-to-end latency (arrival → end); NaN if it never ran."""
        return self.end_ms - self.arrival_ms


def chrome_trace(records: Iterable[RequestRecord], processors: Iterable[str] = ()) -> dict[str, Any]:
    """Chrome trace-event JSON: a track (tid) per processor, a complete event per invocation.

    Dropped requests appear as instant events on a "dropped" track.
    """
    tids: dict[str, int] = {}
    for name in processors:
        tids.setdefault(name, len(tids) + 1)
    events: list[dict[str, Any]] = []
    for r in records:
        if r.processor and not math.isnan(r.start_ms):
            tid = tids.setdefault(r.processor, len(tids) + 1)
            events.append({
                "name": r.model, "cat": r.status, "ph": "X", "pid": 1, "tid": tid,
                "ts": r.start_ms * 1e3, "dur": max(0.0, r.end_ms - r.start_ms) * 1e3,
                "args": {"id": r.id, "status": r.status, "frame": r.frame,
                         "arrival_ms": r.arrival_ms,
                         "deadline_ms": None if math.isinf(r.deadline_ms) else r.deadline_ms},
            })
        elif r.status == "dropped":
            tid = tids.setdefault("dropped", len(tids) + 1)
            events.append({"name": f"{r.model} dropped", "ph": "i", "s": "t", "pid": 1, "tid": tid,
                           "ts": r.arrival_ms * 1e3, "args": {"id": r.id, "reason": r.reason}})
    meta = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "edgert"}}]
    meta += [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}
             for name, tid in tids.items()]
    return {"traceEvents": meta + events, "displayTimeUnit": "ms"}


def write_chrome_trace(path: str | Path, records: Iterable[RequestRecord], processors: Iterable[str] = ()) -> None:
    """Write :func:`chrome_trace` to ``path``."""
    Path(path).write_text(json.dumps(chrome_trace(records, processors)))
