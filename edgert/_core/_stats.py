"""Per-model counters and latency percentiles for ``rt.stats()``."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgert._core._result import DROPPED, FAILED, LATE, OK

#: Latencies kept per model for percentiles (the most recent ones).
WINDOW = 50_000


@dataclass(slots=True)
class ModelStats:
    """Running counts and recent latencies (ms) of one model."""

    requests: int = 0
    #: status -> requests (every terminal status from the start: plain dicts, a Counter's += costs 2.5x)
    counts: dict[str, int] = field(default_factory=lambda: {OK: 0, LATE: 0, DROPPED: 0, FAILED: 0})
    by_processor: dict[str, int] = field(default_factory=dict)
    latencies_ms: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    #: Paths the model's accuracy tolerance excluded at load: delegate name -> reason.
    excluded: dict[str, str] = field(default_factory=dict)
    #: The load's accuracy check, when it compared a path: tolerance, errors per path, check_ms.
    accuracy: dict[str, Any] | None = None

    def add(self, status: str, processor: str, latency_ms: float) -> None:
        """Count one finished request."""
        self.requests += 1
        self.counts[status] += 1
        if processor:
            by = self.by_processor
            by[processor] = by.get(processor, 0) + 1
        if status in (OK, LATE):
            self.latencies_ms.append(latency_ms)

    def summary(self) -> dict[str, Any]:
        """requests, ok, late, dropped, failed, p50_ms, p99_ms, slo_met_rate, by_processor, and
        ``excluded`` (delegate -> reason) when the model's tolerance excluded a path, and ``accuracy``
        (tolerance, error per checked path as a share of the output range, check_ms) when a path was checked."""
        lat = np.fromiter(self.latencies_ms, float) if self.latencies_ms else None
        return {
            "requests": self.requests,
            OK: self.counts[OK], LATE: self.counts[LATE],
            DROPPED: self.counts[DROPPED], FAILED: self.counts[FAILED],
            "p50_ms": float(np.percentile(lat, 50)) if lat is not None else None,
            "p99_ms": float(np.percentile(lat, 99)) if lat is not None else None,
            "slo_met_rate": self.counts[OK] / self.requests if self.requests else None,
            "by_processor": dict(self.by_processor),
            **({"excluded": dict(self.excluded)} if self.excluded else {}),
            **({"accuracy": dict(self.accuracy)} if self.accuracy else {}),
        }
