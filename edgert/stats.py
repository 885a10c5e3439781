"""Fixed-memory history, as the runtime keeps it for ``rt.stats()``, for apps that keep their own.

:class:`LatencyRing` holds the latest N latencies (ms) in one preallocated array: its memory does not grow
with the number of requests, so a per-stream history of an app that runs for hours stays flat.
"""

from edgert._core._stats import LatencyRing

__all__ = ["LatencyRing"]
