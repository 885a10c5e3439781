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

import math
from collections import deque
from heapq import heappop, heappush

from scheduler.types import RequestView

#: a stream's rate is measured over at most this much of its recent history (ms)
_SPAN_MS = 1000.0
#: a stream seen once and not again within this many ms is not counted (ms)
_LONE_MS = 1000.0


class _Stream:
    """One stream as :class:`Streams` tracks it."""

    __slots__ = ("budget_ms", "downstream", "expiry_ms", "heaped_ms", "model", "rate", "seen", "times")

    def __init__(self, model: str, keep: int) -> None:
        self.model = model
        #: its latest arrival times (ms)
        self.times: deque[float] = deque(maxlen=keep)
        #: it has later cascade stages (a head stage)
        self.downstream = False
        #: its rate at the last :meth:`Streams.rates` (requests per ms)
        self.rate = 0.0
        #: when it counts as stopped unless another request comes (ms)
        self.expiry_ms = 0.0
        #: its earliest entry in the expiry heap is at most this (ms; inf: none), and never after :attr:`expiry_ms`
        self.heaped_ms = math.inf
        #: arrivals since it started
        self.seen = 0
        #: its latest budget: arrival to effective deadline (ms)
        self.budget_ms = 0.0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Stream) and all(getattr(self, a) == getattr(other, a) for a in self.__slots__)


class Streams:
    """Each stream's rate from its last ``keep`` arrivals; a stream silent for ``timeout`` mean gaps has stopped.

    The rate of a stream is ``(arrivals - 1) / (last - first arrival)`` over the arrivals kept:
    exact for a periodic stream whatever the phase, and only the two end points' jitter for a
    cascade stage (its arrivals are its parent's completions). :meth:`due` says in O(1) whether
    anything moved since the last :meth:`rates`: a stream started, stopped (a heap of expiry times)
    or changed its rate by more than ``rel``; so the plan's periodic check costs nothing while the
    demand holds still. Each stream keeps an entry in the heap no later than its expiry: a request that
    moves its expiry later pushes nothing, and :meth:`due` moves an entry found earlier than its
    stream's expiry up to it (a push per few arrivals, not one per request).
    """

    __slots__ = ("_expiry", "_s", "dirty", "keep", "rel", "timeout")

    def __init__(self, keep: int, timeout: float, rel: float) -> None:
        self.keep = keep
        self.timeout = timeout
        self.rel = rel
        #: a stream started or changed its rate since the last rates()
        self.dirty = False
        #: stream key -> what is tracked of it
        self._s: dict[str, _Stream] = {}
        self._expiry: list[tuple[float, str]] = []   # heap of (expiry ms, stream), stale entries skipped

    def see(self, req: RequestView) -> None:
        """Count one newly seen request of its stream."""
        model, t = req.model, req.arrival_ms
        key = req.stream or model
        s = self._s.get(key)
        if s is None:
            s = self._s[key] = _Stream(model, self.keep)
        times = s.times
        if times and t <= times[-1]:
            return   # seen out of arrival order (after a window): it adds nothing to the rate
        times.append(t)
        s.seen += 1
        down = req.downstream_ms
        s.budget_ms = req.deadline_ms - down - t
        while len(times) > 2 and t - times[0] > _SPAN_MS:
            times.popleft()
        s.model = model
        s.downstream = down > 0.0
        n = len(times)
        if n < 2:
            s.expiry_ms = t + _LONE_MS
        else:
            gap = (t - times[0]) / (n - 1)
            ref = s.rate
            if abs(_bounded(1.0 / gap, s) - ref) > self.rel * ref:
                self.dirty = True
            s.expiry_ms = t + self.timeout * gap
        if s.expiry_ms < s.heaped_ms:   # (else an entry no later than its expiry is in the heap already)
            s.heaped_ms = s.expiry_ms
            heappush(self._expiry, (s.expiry_ms, key))

    def due(self, now_ms: float) -> bool:
        """Whether a stream started, stopped or changed its rate since the last :meth:`rates`."""
        if self.dirty:
            return True
        heap, streams = self._expiry, self._s
        while heap:   # every stream has an entry no later than its expiry, so none expires before the first entry
            at, key = heap[0]
            if at >= now_ms:
                return False
            s = streams.get(key)
            if s is None or s.expiry_ms != at:
                heappop(heap)    # stale: the stream is gone, or saw newer requests (its entry moves up to its expiry)
                if s is not None and at < s.expiry_ms:
                    s.heaped_ms = s.expiry_ms
                    heappush(heap, (s.expiry_ms, key))
                continue
            return True
        return False

    def rates(self, now_ms: float) -> tuple[dict[str, float], dict[str, bool]]:
        """``({model: requests per ms}, {model: has downstream stages})`` of the streams still running."""
        out: dict[str, float] = {}
        head: dict[str, bool] = {}
        gone = []
        for key in sorted(self._s):
            s = self._s[key]
            times = s.times
            if now_ms > s.expiry_ms:
                gone.append(key)  # silent for its timeout (or one request long ago and never another)
                continue
            if len(times) < 2:
                continue
            rate = s.rate = _bounded((len(times) - 1) / (times[-1] - times[0]), s)
            out[s.model] = out.get(s.model, 0.0) + rate
            head[s.model] = head.get(s.model, False) or s.downstream
        for key in gone:
            del self._s[key]
        self.dirty = False
        return out, head

    def established(self, req: RequestView) -> bool:
        """Whether ``req``'s stream has shown its rate over one budget (the bound of the module doc does
        not cut it); a stream seen once is, since it has no rate to extrapolate."""
        s = self._s.get(req.stream or req.model)
        if s is None or len(s.times) < 2:
            return True
        times = s.times
        rate = (len(times) - 1) / (times[-1] - times[0])
        return _bounded(rate, s) == rate


def _bounded(rate: float, s: _Stream) -> float:
    """``rate`` (per ms) cut to the stream's arrivals so far over its budget, when that is less (see the
    module doc); a stream without a positive budget keeps its rate."""
    budget = s.budget_ms
    if budget > 0.0 and s.seen < rate * budget * (1.0 - 1e-9):
        return s.seen / budget
    return rate
