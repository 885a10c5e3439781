"""The discrete-event kernel: a virtual clock and one heap of events.

Modelled on SimPy's environment, minus the generators: the heap holds
``(time_ms, priority, seq, handler, arg)`` tuples; ``seq`` comes from
``itertools.count()``, so events at the same time and priority run in the
order they were scheduled (FIFO) and a replay is deterministic. Running an
event sets :attr:`EventLoop.now_ms` and calls ``handler(arg)``; a handler
schedules further events. Nothing here reads the wall clock.

An exception raised by a handler is never swallowed: it propagates out of
:meth:`EventLoop.run` with the event's time attached as a note.

The simulator's driver (:mod:`~scheduler.sim.driver`) keeps exactly this
order (time, then :data:`PRIO_FINISH` < :data:`PRIO_ARRIVAL` <
:data:`PRIO_DECIDE`, then FIFO) but fuses it into one loop over a heap of
completions and the workload's sorted arrivals: a handler call and a
5-tuple per event cost more than the rest of a request's bookkeeping
(``benchmarks/sim_speed.py``). :class:`EventLoop` is the general form, for
models with other kinds of events.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from typing import Any

#: Priorities for events at one instant: lower runs first.
PRIO_FINISH = 0   #: a processor completes an invocation (frees it before arrivals at that instant)
PRIO_ARRIVAL = 1  #: a request arrives or a cascade stage becomes ready
PRIO_DECIDE = 2   #: the policy decides, after every finish and arrival of that instant
PRIO_LOW = 3      #: bookkeeping (progress, end of a window)

Handler = Callable[[Any], None]


class EventLoop:
    """A virtual clock (ms) and a heap of ``(time_ms, priority, seq, handler, arg)``.

    >>> loop = EventLoop(); seen = []
    >>> loop.schedule(5.0, PRIO_ARRIVAL, seen.append, "b")
    >>> loop.schedule(5.0, PRIO_FINISH, seen.append, "a")
    >>> loop.run(); seen, loop.now_ms
    (['a', 'b'], 5.0)
    """

    __slots__ = ("now_ms", "heap", "_seq", "events_run")

    def __init__(self, start_ms: float = 0.0) -> None:
        self.now_ms: float = start_ms
        self.heap: list[tuple[float, int, int, Handler, Any]] = []
        self._seq = itertools.count()
        self.events_run = 0

    def schedule(self, time_ms: float, priority: int, handler: Handler, arg: Any = None) -> None:
        """Run ``handler(arg)`` at virtual time ``time_ms`` (never before now).

        Raises:
            ValueError: ``time_ms`` is in the past or not a finite number.
        """
        if not time_ms >= self.now_ms or math.isinf(time_ms):
            raise ValueError(f"cannot schedule an event at {time_ms} ms: the clock is at {self.now_ms} ms")
        heapq.heappush(self.heap, (time_ms, priority, next(self._seq), handler, arg))

    def push(self, time_ms: float, priority: int, handler: Handler, arg: Any = None) -> None:
        """:meth:`schedule` without the argument check, for hot loops that already know ``time_ms >= now``."""
        heapq.heappush(self.heap, (time_ms, priority, next(self._seq), handler, arg))

    def peek_ms(self) -> float:
        """Time of the next event (``math.inf`` when the heap is empty)."""
        return self.heap[0][0] if self.heap else math.inf

    def step(self) -> None:
        """Run the next event. Raises IndexError when there is none."""
        t, _, _, handler, arg = heapq.heappop(self.heap)
        self.now_ms = t
        self.events_run += 1
        handler(arg)

    def run(self, until_ms: float = math.inf, on_tick: Callable[[float], None] | None = None,
            tick_every: int = 20_000) -> None:
        """Run events in order until the heap is empty or the next one is after ``until_ms``.

        ``on_tick(now_ms)`` (if given) is called every ``tick_every`` events,
        e.g. to drive a progress bar.
        """
        heap = self.heap
        pop = heapq.heappop
        n = 0
        try:
            if on_tick is None and until_ms == math.inf:
                while heap:
                    t, _, _, handler, arg = pop(heap)
                    self.now_ms = t
                    handler(arg)
                    n += 1
            while heap and heap[0][0] <= until_ms:
                t, _, _, handler, arg = pop(heap)
                self.now_ms = t
                handler(arg)
                n += 1
                if on_tick is not None and n % tick_every == 0:
                    on_tick(t)
        except Exception as exc:
            exc.add_note(f"raised by a simulated event at t = {self.now_ms:.3f} ms")
            raise
        finally:
            self.events_run += n
