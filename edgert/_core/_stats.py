"""Per-model counters and latency percentiles for ``rt.stats()``, in memory that does not grow with the
number of requests served.

A model's percentiles come from a :class:`LatencyRing`: the latest :data:`WINDOW` latencies in one
preallocated numpy array, written in place. Its bytes are fixed when the model is loaded (the array is
filled at creation, so its pages are resident from the start): an app that runs for hours sees the same
memory after its first minute as after its last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgert._core._result import DROPPED, FAILED, LATE, OK

#: Latencies kept per model for percentiles (the most recent ones): 64 KB of float64 per model.
WINDOW = 8192


class LatencyRing:
    """The latest ``capacity`` latencies (ms), in a preallocated float64 array overwritten in place.

    ``len(ring)`` is how many it holds (at most ``capacity``); ``ring.count`` how many were ever added;
    ``np.asarray(ring)`` / :meth:`values` the held ones, oldest first.

    Raises:
        ValueError: ``capacity`` < 1.
    """

    __slots__ = ("_buf", "count")

    def __init__(self, capacity: int = WINDOW) -> None:
        if capacity < 1:
            raise ValueError(f"a LatencyRing holds at least 1 latency, got capacity={capacity}")
        # full(), not empty(): every page is written now, so the ring is resident from the start
        self._buf = np.full(capacity, np.nan)
        #: latencies ever added (the next one goes to slot ``count % capacity``)
        self.count = 0

    @property
    def capacity(self) -> int:
        """How many latencies it holds at most."""
        return len(self._buf)

    @property
    def nbytes(self) -> int:
        """Bytes of its array: fixed at creation, however many latencies were added."""
        return int(self._buf.nbytes)

    def append(self, ms: float) -> None:
        """Add one latency (ms), overwriting the oldest once full."""
        self._buf[self.count % len(self._buf)] = ms
        self.count += 1

    def __len__(self) -> int:
        return min(self.count, len(self._buf))

    def values(self) -> np.ndarray:
        """The held latencies (ms), oldest first (a copy)."""
        cap = len(self._buf)
        if self.count <= cap:
            return self._buf[:self.count].copy()
        head = self.count % cap
        return np.concatenate([self._buf[head:], self._buf[:head]])

    def last(self, n: int) -> np.ndarray:
        """The newest ``min(n, len(self))`` latencies (ms), oldest first."""
        n = max(0, min(n, len(self)))
        return self.values()[len(self) - n:]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        vals = self.values()
        return vals if dtype is None else vals.astype(dtype)

    def percentile(self, q: float) -> float | None:
        """The ``q``-th percentile (0..100) of the held latencies (ms), or None when it holds none."""
        return float(np.percentile(self._buf[:len(self)], q)) if self.count else None


@dataclass(slots=True)
class ModelStats:
    """Running counts and the recent latencies (ms) of one model, in fixed memory."""

    requests: int = 0
    #: status -> requests (every terminal status from the start: plain dicts, a Counter's += costs 2.5x)
    counts: dict[str, int] = field(default_factory=lambda: {OK: 0, LATE: 0, DROPPED: 0, FAILED: 0})
    by_processor: dict[str, int] = field(default_factory=dict)
    #: the latest :data:`WINDOW` latencies of its ok and late requests (ms)
    latencies_ms: LatencyRing = field(default_factory=LatencyRing)
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
        (tolerance, error per checked path as a share of the output range, check_ms) when a path was checked.
        p50_ms / p99_ms are over the model's latest :data:`WINDOW` ok or late requests."""
        return {
            "requests": self.requests,
            OK: self.counts[OK], LATE: self.counts[LATE],
            DROPPED: self.counts[DROPPED], FAILED: self.counts[FAILED],
            "p50_ms": self.latencies_ms.percentile(50),
            "p99_ms": self.latencies_ms.percentile(99),
            "slo_met_rate": self.counts[OK] / self.requests if self.requests else None,
            "by_processor": dict(self.by_processor),
            **({"excluded": dict(self.excluded)} if self.excluded else {}),
            **({"accuracy": dict(self.accuracy)} if self.accuracy else {}),
        }
