"""Rate ladders: under sustained overload a stream steps its frame rate down (30 → 20 → 15 → 10 fps), lowest
priority first, and back up with hysteresis when there is room.

WebRTC's ``OveruseFrameDetector`` steps a sender's frame rate down when encoding overruns the frame
interval and back up only after a quiet spell; adaptive-bitrate players pick the rung the measured
throughput sustains. Here every stream of a runtime is on one :class:`RateLadder` (shared by its
:class:`apps.xr.Pipelines`, as the frame ledger is):

* A stream runs at its nominal rate divided by its rung's divisor (:data:`RUNGS`: 1, 1.5, 2, 3); a frame
  that is not its turn at that rate is not taken (:meth:`RateLadder.take`), and a frame taken has
  the period at that rate as its deadline.
* **Down**: when a stream *missed* (a frame skipped by its budget, late, or with a stage the
  runtime dropped) at least :data:`DOWN_MISS` of its frames over the last :data:`WINDOW_MS`, one
  stream steps down one rung, at most once per :data:`DOWN_HOLD_MS`. Which: the missing stream
  itself when its own chain does not fit its period (no other stream's rate can help it; a
  critical one only once no lower stream can yield), else the least important stream, no more
  important than the missing one, that can still step and whose step pays (``low`` before
  ``normal`` before ``high`` before ``critical``; of equals, the one whose frames cost the most
  time per second). A step pays (:meth:`RateLadder._pays`) for another stream when its steps down
  to its bottom rung would free at least :data:`MIN_RELIEF` of the work the missing one misses,
  and for the missing stream itself when it would serve more frames on time at the lower rate (it
  misses at least a third of its frames at 30 fps). A critical stream keeps its full rate while any lower stream can still yield.
* **Cloud, the last rung**: when the stream to step is already at the bottom and the runtime has a
  cloud worker (``--offload``) whose measured latency for the stream's chain fits its period, the
  stream goes to the cloud (its frames run there only, ``rt.frame(processors=["cloud"])``) instead
  of collapsing; it comes back first when there is room again.
* **Up**: when no stream missed more than :data:`UP_MISS` over the window, the workers' busy share
  plus what the faster rate adds stays under :data:`UP_BUSY_MAX`, the stream's chain fits the
  faster period, and the stream has held its rung for its hold time, the most important stream
  below its nominal rate steps up one rung (at most once per :data:`UP_GAP_MS`). The hold starts
  at :data:`UP_HOLD_MS` and doubles (to :data:`MAX_HOLD_MS`) each time a stream must step down
  again soon after stepping up, so a rate that does not hold is not retried at once (hysteresis).

Pure logic: every method takes ``now_ms`` (the runtime's clock, ms); nothing here reads a clock, so
a test drives it on virtual time. Thread-safe (the streams' threads share one ladder).
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from scheduler.priority import RANK

#: rate divisors, nominal first: 30 fps steps to 20, 15 then 10 (a 15 fps stream to 10, 7.5 then 5). A first step
#: to two thirds of the rate keeps a stream that only just misses at two frames in three, not one in two.
RUNGS: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0)
#: how early (a share of the nominal period) a frame may come before its due time below the nominal rate and be
#: taken: camera jitter, while at 20 of 30 fps the frame half a period early is not taken
TAKE_EARLY = 0.4
#: span (ms) over which a stream's misses are counted
WINDOW_MS = 1000.0
#: a stream that missed this share of its frames over the window makes one stream step down
DOWN_MISS = 0.2
#: a stream yields for a missing one only when its steps down to its bottom rung would free at least this share of
#: the work (ms/s) the missing one misses (:meth:`RateLadder._pays`)
MIN_RELIEF = 0.5
#: fewest frames in the window before its miss share counts (fewer for a stream slower than that per window)
MIN_FRAMES = 6
#: misses in the first WARMUP_MS after the ladder's first frame do not count (first runs, estimates settling)
WARMUP_MS = 1000.0
#: least time after any step before a step down (ms): each step's effect is seen before the next
DOWN_HOLD_MS = 700.0
#: every stream missed at most this share over the window for a step up
UP_MISS = 0.05
#: the workers' busy share, plus what the faster rate would add, must stay under this for a step up
UP_BUSY_MAX = 0.8
#: a stream holds a rung at least this long (ms) before stepping up; doubled after a failed step up
UP_HOLD_MS = 2000.0
#: the longest such hold (ms)
MAX_HOLD_MS = 16000.0
#: least time between two steps up (ms)
UP_GAP_MS = 1000.0
#: chains (expected ms of a frame's cascade) kept per stream; its chain is their median
CHAINS_KEPT = 15
#: a stream's chain fits a period when it takes at most this share of it
FIT_SHARE = 0.8


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a ladder: ``stream`` went from ``from_fps`` to ``to_fps`` at ``t_ms`` (runtime ms), and why."""

    t_ms: float
    stream: str
    from_fps: float
    to_fps: float
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """The step as JSON-ready data."""
        return {"t_ms": round(self.t_ms, 1), "stream": self.stream, "from_fps": round(self.from_fps, 2),
                "to_fps": round(self.to_fps, 2), "reason": self.reason}


@dataclass(slots=True)
class StreamRate:
    """One stream on the ladder: its level, nominal rate, rung and recent outcomes."""

    name: str
    priority: str
    fps: float
    rung: int = 0
    chain_ms: float = 0.0
    #: when its next frame is due at its rate (ms; a frame this much early, less TAKE_EARLY of a nominal period, waits)
    next_due_ms: float = float("-inf")
    last_step_ms: float = float("-inf")
    last_up_ms: float = float("-inf")
    hold_ms: float = UP_HOLD_MS
    #: its chain's expected ms on the cloud worker (None: no cloud, or not measured)
    cloud_ms: float | None = None
    #: its frames run on the cloud worker (the ladder's last rung)
    offloaded: bool = False
    outcomes: deque[tuple[float, bool]] = field(default_factory=deque)   # (ms, missed)
    #: its latest chains' expected ms (``chain_ms`` is their median)
    chains: deque[float] = field(default_factory=lambda: deque(maxlen=CHAINS_KEPT))

    @property
    def fps_now(self) -> float:
        """Its rate at its rung (fps)."""
        return self.fps / RUNGS[self.rung]

    @property
    def period_ms(self) -> float:
        """Its period at its rung, which is also its frames' deadline (ms)."""
        return 1000.0 / self.fps_now

    def miss_share(self, now_ms: float) -> tuple[float, int]:
        """(Share of its frames over the window that missed, frames in the window)."""
        q = self.outcomes
        while q and q[0][0] < now_ms - WINDOW_MS:
            q.popleft()
        n = len(q)
        return (sum(m for _, m in q) / n if n else 0.0), n

    def fits(self, rung: int, cloud: bool = False) -> bool:
        """Its chain (on the cloud worker with ``cloud``) fits its period at ``rung``."""
        chain = self.chain_ms if not cloud else self.cloud_ms if self.cloud_ms is not None else float("inf")
        return chain <= FIT_SHARE * 1000.0 * RUNGS[rung] / self.fps


class RateLadder:
    """Every stream's rung on one runtime, stepped by misses (see the module doc).

    Args:
        warmup_ms: misses in this long (ms) after the ladder's first frame do not count.
    """

    def __init__(self, warmup_ms: float = WARMUP_MS) -> None:
        self.warmup_ms = warmup_ms
        self._lock = threading.Lock()
        self.streams: dict[str, StreamRate] = {}
        self.steps: list[Step] = []
        self._names: set[str] = set()
        self._last_down = float("-inf")
        self._last_up = float("-inf")
        self._first_ms: float | None = None

    def add(self, name: str, priority: str, fps: float) -> StreamRate:
        """Put stream ``name`` on the ladder at its nominal ``fps`` (again: its level and rate are updated)."""
        with self._lock:
            s = self.streams.get(name)
            if s is None:
                s = self.streams[name] = StreamRate(name, priority, fps)
            s.priority, s.fps = priority, fps
            return s

    def name(self, base: str) -> str:
        """A stream name not yet on the ladder: ``base``, else ``base@2``, ``base@3`` … (it is then reserved)."""
        with self._lock:
            name, k = base, 1
            while name in self.streams or name in self._names:
                k += 1
                name = f"{base}@{k}"
            self._names.add(name)
            return name

    def take(self, name: str, now_ms: float) -> bool:
        """Whether a frame of ``name`` arriving at ``now_ms`` is its turn at its rate (it is then taken): every
        frame at the nominal rate; below it, the first frame at most :data:`TAKE_EARLY` of a nominal period before
        the next due time, due times a period apart (at 20 of 30 fps: two frames in three)."""
        with self._lock:
            s = self.streams[name]
            nominal_ms = 1000.0 / s.fps
            if s.rung and now_ms < s.next_due_ms - TAKE_EARLY * nominal_ms:
                return False
            # the next one a period after this one's due time, or a period from now when that is past (the first
            # frame, or a stream that fell a period behind)
            nxt = s.next_due_ms + s.period_ms
            s.next_due_ms = nxt if nxt > now_ms else now_ms + s.period_ms
            return True

    def note(self, name: str, now_ms: float, missed: bool, chain_ms: float | None = None,
             busy_share: float = 0.0, cloud_ms: float | None = None) -> Step | None:
        """Count a frame of ``name`` taken (``missed``: skipped by its budget, late or a stage dropped), its
        chain's expected ms when known (locally; ``cloud_ms`` on the cloud worker, None without one), and the
        workers' busy share (0‥1); the step this made, if any."""
        with self._lock:
            s = self.streams[name]
            self._first_ms = now_ms if self._first_ms is None else self._first_ms
            if chain_ms is not None:   # the median of its recent chains: a frame that needs its detector too
                s.chains.append(chain_ms)   # (the pose detector's 15 ms) is not the stream's usual chain
                s.chain_ms = float(statistics.median(s.chains))
            s.cloud_ms = cloud_ms
            if now_ms - self._first_ms < self.warmup_ms:
                return None
            s.outcomes.append((now_ms, missed))
            step = self._step_down(now_ms) or self._step_up(now_ms, busy_share)
            if step is not None:
                self.steps.append(step)
            return step

    def _step_down(self, now_ms: float) -> Step | None:
        if now_ms - max(self._last_down, self._last_up) < DOWN_HOLD_MS:
            return None
        worst, share = None, 0.0
        for s in self.streams.values():
            m, n = s.miss_share(now_ms)
            if n >= min(MIN_FRAMES, 0.8 * s.fps_now * WINDOW_MS / 1000.0) and m >= DOWN_MISS and m > share:
                worst, share = s, m
        if worst is None:
            return None
        last = len(RUNGS) - 1
        lower_can_yield = any(s.rung < last and RANK[s.priority] > RANK[worst.priority] for s in self.streams.values())
        if worst.rung < last and not worst.fits(worst.rung) and not (worst.priority == "critical" and lower_can_yield):
            victim = worst
            why = (f"its chain needs {worst.chain_ms:.1f} ms, more than {FIT_SHARE:.0%} of its "
                   f"{worst.period_ms:.1f} ms period")
            return self._move(victim, now_ms, +1, why)
        # who may yield: no stream more important than the one missing; a critical one only once no lower can
        able = [s for s in self.streams.values() if s.rung < last and RANK[s.priority] >= RANK[worst.priority]
                and not (s is worst and s.priority == "critical" and lower_can_yield)]
        why = f"{worst.name} ({worst.priority}) missed {share:.0%} of its frames over the last {WINDOW_MS:.0f} ms"
        if not able:
            return self._offload(worst, now_ms, why)
        paying = [s for s in able if self._pays(s, worst, share)]
        if not paying and worst.priority == "critical":
            paying = able   # the critical stream's rate comes first, even at a small relief
        if not paying:
            return None
        victim = min(paying, key=lambda s: (-RANK[s.priority], -s.chain_ms * s.fps_now, s.name))
        return self._move(victim, now_ms, +1, why)

    @staticmethod
    def _pays(v: StreamRate, worst: StreamRate, share: float) -> bool:
        """Whether stepping ``v`` down one rung is worth it for ``worst``, which missed ``share`` of its frames.

        ``worst`` itself: when it would serve more frames on time at the lower rate than it does now (its
        miss share at least 1 - this rung's divisor / the next one's: a third from 30 to 20 fps). Another
        stream: when stepping it down to its bottom rung would free at least :data:`MIN_RELIEF` of the work
        ``worst`` misses a second: a stream whose whole ladder cannot help is not stepped (segmentation's 15 -> 5
        fps frees 36 ms a second where pose misses 100 or more)."""
        if v is worst:
            return share >= 1.0 - RUNGS[v.rung] / RUNGS[v.rung + 1]
        freed = v.chain_ms * (v.fps_now - v.fps / RUNGS[-1])
        return freed >= MIN_RELIEF * share * worst.fps_now * worst.chain_ms

    def _offload(self, worst: StreamRate, now_ms: float, why: str) -> Step | None:
        """The last rung: the least important stream at the bottom whose chain fits its period on the cloud
        worker goes there (None when none does)."""
        able = [s for s in self.streams.values() if not s.offloaded and s.fits(s.rung, cloud=True)]
        if not able:
            return None
        s = min(able, key=lambda s: (-RANK[s.priority], -s.chain_ms * s.fps_now, s.name))
        s.offloaded, s.last_step_ms, self._last_down = True, now_ms, now_ms
        for t in self.streams.values():
            t.outcomes.clear()
        return Step(now_ms, s.name, s.fps_now, s.fps_now,
                    f"to the cloud: {why}; its chain takes {s.cloud_ms:.1f} ms there, within its {s.period_ms:.1f} ms period")

    def _step_up(self, now_ms: float, busy_share: float) -> Step | None:
        if now_ms - self._last_up < UP_GAP_MS or now_ms - self._last_down < UP_GAP_MS:
            return None
        for s in self.streams.values():
            m, n = s.miss_share(now_ms)
            if n and m > UP_MISS:
                return None
        back = [s for s in self.streams.values() if s.offloaded and now_ms - s.last_step_ms >= s.hold_ms]
        if back:   # from the cloud first, the most important first
            s = min(back, key=lambda s: (RANK[s.priority], s.name))
            added = s.chain_ms * s.fps_now / 1000.0
            if busy_share + added > UP_BUSY_MAX or not s.fits(s.rung):
                return None
            s.offloaded, s.last_step_ms, self._last_up = False, now_ms, now_ms
            return Step(now_ms, s.name, s.fps_now, s.fps_now, f"back from the cloud: workers {busy_share:.0%} busy "
                                                              f"(+{added:.0%} with it)")
        down = [s for s in self.streams.values() if s.rung > 0 and now_ms - s.last_step_ms >= s.hold_ms
                and s.fits(s.rung - 1)]
        if not down:
            return None
        s = min(down, key=lambda s: (RANK[s.priority], s.chain_ms * s.fps_now, s.name))
        added = s.chain_ms * (s.fps / RUNGS[s.rung - 1] - s.fps_now) / 1000.0   # core-seconds per second
        if busy_share + added > UP_BUSY_MAX:
            return None
        why = (f"no stream missed more than {UP_MISS:.0%} of its frames, workers {busy_share:.0%} busy "
               f"(+{added:.0%} at the faster rate)")
        return self._move(s, now_ms, -1, why)

    def _move(self, s: StreamRate, now_ms: float, by: int, why: str) -> Step:
        before = s.fps_now
        if by > 0:
            if now_ms - s.last_up_ms < 2 * s.hold_ms:   # a step up that did not hold: wait longer next time
                s.hold_ms = min(MAX_HOLD_MS, 2 * s.hold_ms)
            self._last_down = now_ms
        else:
            s.last_up_ms = self._last_up = now_ms
        s.rung += by
        s.last_step_ms = now_ms
        for t in self.streams.values():   # the next decision sees the new rates' outcomes only
            t.outcomes.clear()
        return Step(now_ms, s.name, before, s.fps_now, why)

    def warming(self, now_ms: float) -> bool:
        """Whether ``now_ms`` is within :data:`WARMUP_MS` of the ladder's first frame (or before it): the first runs,
        every stream starting at once, estimates settling."""
        with self._lock:
            return self._first_ms is None or now_ms - self._first_ms < self.warmup_ms

    def strained(self, now_ms: float) -> str:
        """Why the streams have no time to spare ("" when they do): a stream below its nominal rate, or one that
        missed more than :data:`UP_MISS` of its frames over the window. Optional work (a detector's search for one
        more hand) waits until it is "": it would take the time a stepped-down or missing stream needs."""
        with self._lock:
            for s in self.streams.values():
                if s.rung:
                    return f"{s.name} runs at {s.fps_now:g} of its {s.fps:g} fps"
                m, n = s.miss_share(now_ms)
                if n and m > UP_MISS:
                    return f"{s.name} missed {m:.0%} of its frames over the last {WINDOW_MS:.0f} ms"
            return ""

    def offloaded(self, name: str) -> bool:
        """Whether stream ``name`` runs on the cloud worker (the ladder's last rung)."""
        with self._lock:
            s = self.streams.get(name)
            return s is not None and s.offloaded

    def rates(self) -> dict[str, float]:
        """Each stream's rate now (fps)."""
        with self._lock:
            return {n: s.fps_now for n, s in self.streams.items()}

    def steps_of(self, name: str) -> list[Step]:
        """The steps stream ``name`` took."""
        with self._lock:
            return [s for s in self.steps if s.stream == name]
