"""Stream rates for edgert's overload plan: each periodic stream's rate from its latest arrivals.

A policy sees requests, not streams' declared rates; XR streams are periodic,
so each stream's rate is ``(arrivals - 1) / (last - first arrival)`` over its
latest arrivals. :meth:`Streams.due` answers in O(1) whether the demand may
have moved (a stream started, stopped or changed its rate), which is what lets
the plan skip its check on almost every decision. Times are ms on the
driver's clock; nothing here reads a clock.

A rate is never extrapolated past what was seen: a stream's demand counts at
most its arrivals so far spread over one budget (arrival to effective deadline),
``min(rate, arrivals / budget)``. Sixty requests submitted in one loop a few
microseconds apart, with a minute to finish, read as 60 per minute (the work
that must fit within their deadlines), not as thousands per second. A stream
whose rate that bound still cuts is not :meth:`Streams.established`: it has
not shown its rate over one budget yet, and the plan does not shed it (edgert's
policy drops one of its requests on arrival only when it cannot finish in time
behind the work queued ahead). A periodic stream is established from its
second arrival when its budget is at most one period (XR frame deadlines),
after ``load`` arrivals when it runs ``load`` times per budget.
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
        #: stream -> [model, latest arrival times, has downstream stages, rate at the last rates(), expiry ms,
        #:            arrivals since it started, its latest budget ms]
        self._s: dict[str, list] = {}
        self._expiry: list[tuple[float, str]] = []   # heap of (expiry ms, stream), stale entries skipped

    def see(self, req: RequestView) -> None:
        """Count one newly seen request of its stream."""
        _, model, t, deadline, stream, _, down, _, _ = req   # one unpack: cheaper than five field reads, per request
        key = stream or model
        s = self._s.get(key)
        if s is None:
            s = self._s[key] = [model, deque(maxlen=self.keep), False, 0.0, 0.0, 0, 0.0]
        times = s[1]
        if times and t <= times[-1]:
            return   # seen out of arrival order (after a window): it adds nothing to the rate
        times.append(t)
        s[5] += 1
        s[6] = deadline - down - t
        while len(times) > 2 and t - times[0] > _SPAN_MS:
            times.popleft()
        s[0] = model
        s[2] = down > 0.0
        n = len(times)
        if n < 2:
            s[4] = t + _LONE_MS
        else:
            gap = (t - times[0]) / (n - 1)
            ref = s[3]
            if abs(_bounded(1.0 / gap, s) - ref) > self.rel * ref:
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
            rate = s[3] = _bounded((len(times) - 1) / (times[-1] - times[0]), s)
            out[model] = out.get(model, 0.0) + rate
            head[model] = head.get(model, False) or down
        for key in gone:
            del self._s[key]
        self.dirty = False
        return out, head

    def established(self, req: RequestView) -> bool:
        """Whether ``req``'s stream has shown its rate over one budget (the bound of the module doc does
        not cut it); a stream seen once is, since it has no rate to extrapolate."""
        s = self._s.get(req.stream or req.model)
        if s is None or len(s[1]) < 2:
            return True
        times = s[1]
        rate = (len(times) - 1) / (times[-1] - times[0])
        return _bounded(rate, s) == rate


def _bounded(rate: float, s: list) -> float:
    """``rate`` (per ms) cut to the stream's arrivals so far over its budget, when that is less (see the
    module doc); a stream without a positive budget keeps its rate."""
    budget = s[6]
    if budget > 0.0 and s[5] < rate * budget * (1.0 - 1e-9):
        return s[5] / budget
    return rate
