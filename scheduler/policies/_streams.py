"""Stream rates for edgert's overload plan: each periodic stream's rate from its latest arrivals.

A policy sees requests, not streams' declared rates; XR streams are periodic,
so each stream's rate is ``(arrivals - 1) / (last - first arrival)`` over its
latest arrivals. :meth:`Streams.due` answers in O(1) whether the demand may
have moved (a stream started, stopped or changed its rate), which is what lets
the plan skip its check on almost every decision. Times are ms on the
driver's clock; nothing here reads a clock.
"""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush

from scheduler.types import RequestView

#: a stream's rate is measured over at most this much of its recent history (ms)
_SPAN_MS = 1000.0
#: a stream seen once and not again within this many ms is not counted (ms)
_LONE_MS = 1000.0


class Streams:
    """Each stream's rate from its last ``keep`` arrivals; a stream silent for ``timeout`` mean gaps has stopped.

    The rate of a stream is ``(arrivals - 1) / (last - first arrival)`` over the arrivals kept:
    exact for a periodic stream whatever the phase, and only the two end points' jitter for a
    cascade stage (its arrivals are its parent's completions). :meth:`due` says in O(1) whether
    anything moved since the last :meth:`rates`: a stream started, stopped (a heap of expiry times)
    or changed its rate by more than ``rel``; so the plan's periodic check costs nothing while the
    demand holds still.
    """

    __slots__ = ("_expiry", "_s", "dirty", "keep", "rel", "timeout")

    def __init__(self, keep: int, timeout: float, rel: float) -> None:
        self.keep = keep
        self.timeout = timeout
        self.rel = rel
        #: a stream started or changed its rate since the last rates()
        self.dirty = False
        #: stream -> [model, latest arrival times, has downstream stages, rate at the last rates(), expiry ms]
        self._s: dict[str, list] = {}
        self._expiry: list[tuple[float, str]] = []   # heap of (expiry ms, stream), stale entries skipped

    def see(self, req: RequestView) -> None:
        """Count one newly seen request of its stream."""
        key = req.stream or req.model
        s = self._s.get(key)
        if s is None:
            s = self._s[key] = [req.model, deque(maxlen=self.keep), False, 0.0, 0.0]
        times = s[1]
        t = req.arrival_ms
        if times and t <= times[-1]:
            return   # seen out of arrival order (after a window): it adds nothing to the rate
        times.append(t)
        while len(times) > 2 and t - times[0] > _SPAN_MS:
            times.popleft()
        s[0] = req.model
        s[2] = req.downstream_ms > 0.0
        n = len(times)
        if n < 2:
            s[4] = t + _LONE_MS
        else:
            gap = (t - times[0]) / (n - 1)
            ref = s[3]
            if abs(1.0 / gap - ref) > self.rel * ref:
                self.dirty = True
            s[4] = t + self.timeout * gap
        heappush(self._expiry, (s[4], key))

    def due(self, now_ms: float) -> bool:
        """Whether a stream started, stopped or changed its rate since the last :meth:`rates`."""
        if self.dirty:
            return True
        heap, streams = self._expiry, self._s
        while heap:
            at, key = heap[0]
            s = streams.get(key)
            if s is None or s[4] != at:
                heappop(heap)    # stale: the stream saw a newer request, or is gone
                continue
            return at < now_ms
        return False

    def rates(self, now_ms: float) -> tuple[dict[str, float], dict[str, bool]]:
        """``({model: requests per ms}, {model: has downstream stages})`` of the streams still running."""
        out: dict[str, float] = {}
        head: dict[str, bool] = {}
        gone = []
        for key in sorted(self._s):
            s = self._s[key]
            model, times, down = s[0], s[1], s[2]
            if now_ms > s[4]:
                gone.append(key)  # silent for its timeout (or one request long ago and never another)
                continue
            if len(times) < 2:
                continue
            rate = (len(times) - 1) / (times[-1] - times[0])
            s[3] = rate
            out[model] = out.get(model, 0.0) + rate
            head[model] = head.get(model, False) or down
        for key in gone:
            del self._s[key]
        self.dirty = False
        return out, head
