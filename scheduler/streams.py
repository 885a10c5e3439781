"""The overload controller for streams: which frame is taken, at which rate a stream runs, when it goes to the cloud.

A stream is a periodic source of frames (a camera, a microphone) whose every frame runs a chain of requests.
Under overload something must give; this module decides what, frame by frame, for every stream of one
runtime (or one simulated device) at once:

* **Take or skip** (:meth:`StreamController.offer`). A frame is skipped, never served late by choice, when its
  predicted finish (behind the work already pending, queued and running that runs before it, spread over the
  workers, then its own chain) plus a quantile of the stream's recent prediction errors (of frames whose requests
  all ran: one whose request the policy dropped ended when the drop came) is after its deadline;
  when its chain alone is longer than its period; when the workers are saturated and its work would take the
  admitted work past their capacity less the room critical streams need (a frame dearer than the mean of a stream
  taking more of the workers than the mean, by work per second; never a critical stream's while its level acts,
  nor one of a stream taking fewer frames than its bottom rung while that rung fits its fair share of the
  workers; the share of their capacity they sustain is learned: it rises while the frames taken end on time and
  falls when one comes late or is dropped); when it is not its turn at the stream's rate; or when
  ``max_in_flight`` of its frames still run. Each reason is one code of :data:`REASONS`. After
  :data:`MAX_SHED_STREAK` skips in a row a frame is taken *lean* (a probe), so that the stream's estimates stay
  measured. A stream's first :data:`MIN_CHAINS` frames, and a critical stream's during the warm-up, are taken to
  learn from; a probe that ends on time where it was predicted to miss replaces what predicted the miss, the chain
  learned before or the errors behind the margin (a stale estimate, such as the cold first runs' or a stall's,
  would otherwise skip frames until it aged out).
* **The rate ladder** (WebRTC's ``OveruseFrameDetector``, adaptive-bitrate rungs). A stream runs at one rung of
  its rates; when a stream missed at least :data:`DOWN_MISS` of its frames over :data:`WINDOW_MS`, one stream
  steps down one rung: the missing one itself when its own chain does not fit its period and the lower rate would
  serve more of its frames (a critical one only once no lower stream can yield), else the least important stream,
  no more important than the missing one, whose steps would free at least :data:`MIN_RELIEF` of what the missing
  one misses and, unless the missing one is critical, whose frames cost at least the missing one's (so that a
  step frees a frame for each it costs). During the warm-up, where misses do not count, a stream (not critical)
  whose chain is longer than its period steps down once per frame it learns from. Back up, most important first,
  when no stream missed more than :data:`UP_MISS`, the workers have room for the faster rate, and the stream held
  its rung for its hold time (doubled after a step up that did not hold: hysteresis).
* **Levels only where needed.** A stream's declared level acts (its requests' order, the urgent lane and OS
  niceness, the room kept for critical frames) only while it missed a frame within :data:`GUARD_MS` (a critical
  stream's order and niceness also during the warm-up, when every stream starts at once); a ``low``
  stream gives way only while a more important one does. Otherwise its frames run as ``normal``
  (``Decision.priority``), so declared levels cost nothing where every stream is served; meanwhile the
  driver's urgent lanes take any work (:meth:`StreamController.urgent`).
* **The cloud, the last rung.** When the stream to step is at its bottom rung and a cloud worker's
  measured time for its chain fits its period, its frames go there (``Decision.cloud``) and come back first.

The controller learns each stream's chain (its critical path, and its work) from the stream's own frames
(:class:`FrameEnd`) that ran to their end; the app declares none of it. Until one has, a frame whose request was
dropped teaches it the work that ran (else a stream whose every frame fails, its later stage dropped each time,
would cost nothing: never shed for capacity, and any other stream's step would pay for its misses). It reads the
driver's own queues (:class:`Backlog`, built by the live dispatcher or the simulator from the work they hold), never
a shadow of them.

Pure: every call takes the clock (``now_ms``, ms on the driver's clock) or a snapshot that carries it;
nothing here reads a clock or keeps a lock. The live runtime (``edgert._core._streams``) calls it under its
lock; a simulator calls it on virtual time.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.priority import LEAD_MS, LEVELS, RANK, URGENT_LEVELS

#: Why a frame was not taken: the closed set of ``f.reason`` codes ("" when taken).
REASONS: dict[str, str] = {
    "rate": "not its turn at the stream's current rung (the ladder stepped its rate down)",
    "in_flight": "max_in_flight frames of the stream were still running (MediaPipe's FlowLimiter)",
    "predicted_late": "predicted to finish after its deadline behind the work ahead of it",
    "chain_too_long": "its chain alone takes longer than its period",
    "over_capacity": "the workers are saturated and its work would take the admitted work past their capacity",
    "closed": "the stream was closed",
}

# -- the ladder ------------------------------------------------------------------------------------------
#: default rungs as shares of the nominal rate: 30 fps steps to 20, 15 then 10. A first step to two thirds
#: keeps a stream that only just misses at two frames in three, not one in two.
RUNG_SHARES: tuple[float, ...] = (1.0, 2.0 / 3.0, 0.5, 1.0 / 3.0)
#: how early (a share of the nominal period) a frame may come before its due time below the nominal rate and
#: be taken (camera jitter); at 20 of 30 fps the frame half a period early is not taken
TAKE_EARLY = 0.4
#: span (ms) over which a stream's misses are counted
WINDOW_MS = 1000.0
#: a stream that missed this share of its frames over the window makes one stream step down
DOWN_MISS = 0.2
#: a stream yields for a missing one only when its steps to its bottom rung free at least this share of the
#: work (ms/s) the missing one misses
MIN_RELIEF = 0.5
#: fewest frames in the window before its miss share counts (fewer for a stream slower than that per window)
MIN_FRAMES = 6
#: misses in the first WARMUP_MS after the controller's first frame do not count (first runs, estimates settling)
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
#: a stream's chain fits a period when it takes at most this share of it
FIT_SHARE = 0.8
#: steps a stream keeps for ``stats()["steps"]``
STEPS_KEPT = 16
#: a declared level acts (orders its requests, takes an urgent lane and the OS niceness, keeps room) for this
#: long (ms) after its stream missed a frame (after the warm-up); otherwise its frames run as ``normal``: a level
#: moves capacity to a more important stream only once that stream misses frames. Long, so that a stream its level
#: serves does not fall back and miss again every few seconds (a 5 s guard halved a critical stream's frames
#: beside a busy process: it went normal, missed, and its error margin then skipped it while it recovered)
GUARD_MS = 60_000.0

# -- admission -------------------------------------------------------------------------------------------
#: frames learned per stream; its chain and work are their medians
CHAINS_KEPT = 15
#: frames a stream takes, whatever their prediction, before its learned chain may skip one: a median of three
#: is not the first frame's cold run (first invocations, every stream starting at once)
MIN_CHAINS = 3
#: skips in a row (predicted late, chain too long) before one frame is taken lean, as a probe
MAX_SHED_STREAK = 20
#: prediction errors kept per stream, and how long one counts (ms)
ERRORS_KEPT = 64
ERROR_TTL_MS = 2000.0
#: the share of a stream's admitted frames it aims to serve late: the margin's quantile starts at the level's
#: ``error_quantile`` and moves up QUANTILE_STEP after a late frame, down QUANTILE_STEP * LATE_TARGET /
#: (1 - LATE_TARGET) after one on time, so it settles where LATE_TARGET of the frames come late
LATE_TARGET = 0.02
QUANTILE_STEP = 0.05
#: past 1 the margin is the largest error times the quantile: where even the largest recent error does not cover
#: the next frame's (a busy process beside stretches a run now and then), the margin grows beyond it
QUANTILE_RANGE = (0.5, 2.0)
#: the busy share (0..1) of the workers over :data:`WINDOW_MS` below which no frame is shed for capacity, and the
#: share of their capacity the work admitted may fill: at first and at least (what a noisy shared host sustains);
#: :attr:`StreamController.admit_util` rises from it toward ADMIT_UTIL_TOP while the frames taken end on time
ADMIT_UTIL_MAX = 0.75
#: the most of that share: the workers' whole capacity
ADMIT_UTIL_TOP = 1.0
#: the share moves down ADMIT_UTIL_STEP after a frame taken that came late or was dropped, up ADMIT_UTIL_STEP *
#: LATE_TARGET / (1 - LATE_TARGET) after one on time: it settles where LATE_TARGET of the frames miss, as the
#: margins do
ADMIT_UTIL_STEP = 0.1
#: optional work (a detector's search for one more hand) runs only below this busy share
OPTIONAL_BUSY_MAX = 0.55
#: share of what is left of a frame an added chain may fill (estimates are means)
SLACK = 0.9


@dataclass(frozen=True, slots=True)
class Work:
    """One request the driver holds: pending, queued or running.

    Attributes:
        remaining_ms: its expected run left (ms; a running one's less what it has run).
        deadline_ms: its absolute deadline (ms on the driver's clock; inf: none).
        priority: its level.
        running: it holds a processor (a run is never preempted).
    """

    remaining_ms: float
    deadline_ms: float
    priority: str
    running: bool


@dataclass(frozen=True, slots=True)
class Backlog:
    """The driver's work and capacity at ``now_ms``: what a frame offered now would run behind.

    Attributes:
        now_ms: the driver's clock (ms).
        workers: local processors that run any level (not urgent lanes, not the cloud); at least 1.
        lanes: urgent lanes (they run critical and high requests only).
        busy_share: the workers' busy share over the last :data:`WINDOW_MS` (0..1, more when lanes helped).
        work: every request pending, queued or running.
        cloud: a cloud worker is there (the ladder's last rung).
    """

    now_ms: float
    workers: int = 1
    lanes: int = 0
    busy_share: float = 0.0
    work: tuple[Work, ...] = ()
    cloud: bool = False

    def ahead_ms(self, deadline_ms: float, priority: str) -> float:
        """Expected ms of the work that runs before a request due by ``deadline_ms`` at ``priority``: the rest of
        every run that already holds a processor, and the work waiting that is due by then (deadlines less each
        level's lead, as edgert's policy orders them) and can still make its own deadline, in that order, spread
        over the processors that may run it; a request that cannot is dropped by the policy, not run ahead. On an
        urgent lane only urgent work is ahead."""
        due = deadline_ms - LEAD_MS[priority]
        lane = self.lanes > 0 and priority in URGENT_LEVELS
        spread = max(1, self.workers + (self.lanes if lane else 0))
        ahead = 0.0
        waiting: list[tuple[float, float, float]] = []   # (due, deadline, ms) of the work waiting due by then
        for w in self.work:
            if lane and w.priority not in URGENT_LEVELS:
                continue
            if w.running:
                ahead += w.remaining_ms
            elif (w_due := w.deadline_ms - LEAD_MS.get(w.priority, 0.0)) <= due:
                waiting.append((w_due, w.deadline_ms, w.remaining_ms))
        waiting.sort()
        for _, w_deadline, ms in waiting:
            if self.now_ms + (ahead + ms) / spread <= w_deadline:
                ahead += ms
        return ahead

    def finish_ms(self, chain_ms: float, deadline_ms: float, priority: str) -> float:
        """When a chain of ``chain_ms`` due by ``deadline_ms`` at ``priority``, started now, is expected to end
        (ms on the driver's clock): after the work ahead of it, spread over the processors that may run it."""
        spread = self.workers + (self.lanes if priority in URGENT_LEVELS else 0)
        return self.now_ms + self.ahead_ms(deadline_ms, priority) / max(1, spread) + chain_ms


@dataclass(frozen=True, slots=True)
class Decision:
    """The controller's answer for one frame offered.

    Attributes:
        taken: the frame runs.
        reason: a code of :data:`REASONS` when not taken, "" when taken.
        detail: the reason in words, with the figures that decided it ("" when taken).
        deadline_ms: absolute: the frame's capture time plus the period at the stream's rung.
        period_ms: the period at the stream's rung (ms).
        lean: a probe after many skips: required work only.
        cloud: its requests run on the cloud worker only (the ladder's last rung).
        predicted_ms: its predicted finish (absolute ms; nan without a prediction yet).
        priority: the level its requests run at: the stream's declared level while it acts (see the module
            doc), else ``normal``.
    """

    taken: bool
    reason: str
    detail: str
    deadline_ms: float
    period_ms: float
    lean: bool = False
    cloud: bool = False
    predicted_ms: float = math.nan
    priority: str = "normal"


@dataclass(frozen=True, slots=True)
class FrameEnd:
    """How a taken frame ended, as the driver saw it.

    Attributes:
        end_ms: when its last request ended (ms on the driver's clock).
        ok: every request it submitted ran to its end, in time or late (none dropped or failed).
        work_ms: the run time of its requests, summed (ms); 0 when none ran.
        path_ms: the run time along its longest cascade (ms).
        cloud_ms: the cloud worker's expected ms for that cascade (None: no cloud, or not measured).
        busy_share: the workers' busy share over the last :data:`WINDOW_MS` (None: the driver does not know; the
            streams' own demand stands in).
        done_ms: when the frame was done, its app's own work on it included (the block's exit, when later than
            ``end_ms``); what its finish was predicted against. None: ``end_ms``.
    """

    end_ms: float
    ok: bool
    work_ms: float = 0.0
    path_ms: float = 0.0
    cloud_ms: float | None = None
    busy_share: float | None = None
    done_ms: float | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the ladder: ``stream`` went from ``from_fps`` to ``to_fps`` at ``at_ms``, and why."""

    at_ms: float
    stream: str
    from_fps: float
    to_fps: float
    why: str

    def as_dict(self) -> dict[str, Any]:
        """The step as JSON-ready data (the keys of ``s.stats()["steps"]``)."""
        return {"at_ms": round(self.at_ms, 1), "from_fps": round(self.from_fps, 2), "to_fps": round(self.to_fps, 2),
                "why": self.why}


@dataclass(slots=True)
class StreamState:
    """One stream as the controller sees it: its ladder, what it learned of its chain, its counts."""

    name: str
    priority: str
    rates: tuple[float, ...]
    offload: bool = True
    max_in_flight: int = 1
    rung: int = 0
    #: its chain (critical path with the rest of its work spread over the workers) and work, learned (ms)
    chain_ms: float = 0.0
    work_ms: float = 0.0
    chains: deque[float] = field(default_factory=lambda: deque(maxlen=CHAINS_KEPT))
    works: deque[float] = field(default_factory=lambda: deque(maxlen=CHAINS_KEPT))
    #: its chain's expected ms on the cloud worker (None: no cloud, or not measured)
    cloud_ms: float | None = None
    offloaded: bool = False
    next_due_ms: float = -math.inf
    last_step_ms: float = -math.inf
    last_up_ms: float = -math.inf
    hold_ms: float = UP_HOLD_MS
    in_flight: int = 0
    shed_streak: int = 0
    #: until when (ms) its declared level acts: :data:`GUARD_MS` after its latest miss
    guard_until_ms: float = -math.inf
    quantile: float = 0.9
    errors: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=ERRORS_KEPT))
    outcomes: deque[tuple[float, bool]] = field(default_factory=deque)   # (ms, missed)
    takes: deque[float] = field(default_factory=deque)   # when its frames were taken (ms), over the window
    steps: deque[Step] = field(default_factory=lambda: deque(maxlen=STEPS_KEPT))
    first_ms: float | None = None
    last_ms: float = 0.0
    # counts over the stream's life
    frames: int = 0
    taken: int = 0
    on_time: int = 0
    late: int = 0
    failed: int = 0
    shed_by: dict[str, int] = field(default_factory=dict)

    @property
    def fps(self) -> float:
        """Its nominal rate (fps): the first rung."""
        return self.rates[0]

    @property
    def fps_now(self) -> float:
        """Its rate at its rung (fps)."""
        return self.rates[self.rung]

    @property
    def period_ms(self) -> float:
        """Its period at its rung, which is also its frames' deadline (ms)."""
        return 1000.0 / self.fps_now

    @property
    def bottom(self) -> bool:
        """It is at its lowest rung."""
        return self.rung == len(self.rates) - 1

    def fits(self, rung: int, cloud: bool = False) -> bool:
        """Its chain (on the cloud worker with ``cloud``) fits its period at ``rung``."""
        chain = self.chain_ms if not cloud else self.cloud_ms if self.cloud_ms is not None else math.inf
        return chain <= FIT_SHARE * 1000.0 / self.rates[rung]

    def starved(self, now_ms: float) -> bool:
        """It took fewer frames over the last :data:`WINDOW_MS` than its bottom rung would (a frame less, for
        the window's edges)."""
        q = self.takes
        while q and q[0] < now_ms - WINDOW_MS:
            q.popleft()
        return len(q) < self.rates[-1] * WINDOW_MS / 1000.0 - 1.0

    def guarded(self, now_ms: float) -> bool:
        """It missed a frame within the last :data:`GUARD_MS`."""
        return now_ms < self.guard_until_ms

    def miss_share(self, now_ms: float) -> tuple[float, int]:
        """(Share of its frames over the window that missed, frames in the window)."""
        q = self.outcomes
        while q and q[0][0] < now_ms - WINDOW_MS:
            q.popleft()
        n = len(q)
        return (sum(m for _, m in q) / n if n else 0.0), n

    def margin_ms(self, now_ms: float) -> float:
        """A quantile (:attr:`quantile`) of its prediction errors of the last :data:`ERROR_TTL_MS` (ms; 0 with fewer
        than 4 of them). Below 0 when even that quantile of its frames ended earlier than predicted: a prediction
        that runs pessimistic (work ahead that ends sooner, or is dropped, on faster processors than the mean) is
        corrected as one that runs optimistic is, and a frame it would skip as late is taken; a frame that then
        comes late moves the quantile up (:data:`QUANTILE_STEP`)."""
        q = self.errors
        while q and q[0][0] < now_ms - ERROR_TTL_MS:
            q.popleft()
        if len(q) < 4:
            return 0.0
        error = _quantile(sorted(e for _, e in q), min(1.0, self.quantile))
        return error * max(1.0, self.quantile) if error > 0.0 else error

    def forget_stale(self, by_chain: bool) -> None:
        """A probe ended on time where its frame was predicted to miss: forget what predicted the miss, the chain
        learned before (``by_chain``: the chain alone had it late, as a cold first run's does) or else the errors
        the margin is drawn from (its quantile, how much of them it covers, stays). Otherwise a stall's large error,
        which a few late frames made the margin's whole width, skips every frame until it ages out
        (:data:`ERROR_TTL_MS`): skipped frames teach the margin nothing."""
        if by_chain:
            self.chains.clear()
            self.works.clear()
        else:
            self.errors.clear()

    def stats(self) -> dict[str, Any]:
        """Its figures, with the keys of ``s.stats()`` (docs/design.md §11)."""
        span_s = (self.last_ms - self.first_ms) / 1000.0 if self.first_ms is not None else 0.0
        return {"frames": self.frames, "taken": self.taken, "on_time": self.on_time, "late": self.late,
                "failed": self.failed, "frames_shed": sum(self.shed_by.values()),
                "frames_shed_by": dict(self.shed_by),
                "rate_fps": round(self.on_time / span_s, 2) if span_s > 0 else 0.0,
                "rung_fps": round(self.fps_now, 3), "priority": self.priority, "offloaded": self.offloaded,
                "chain_ms": round(self.chain_ms, 2), "steps": [s.as_dict() for s in self.steps]}


def default_rates(fps: float) -> tuple[float, ...]:
    """The default ladder of a stream of nominal ``fps``: ``fps`` × 1, 2/3, 1/2, 1/3."""
    return tuple(fps * s for s in RUNG_SHARES)


def toward_late_target(value: float, late: bool, step: float, bounds: tuple[float, float]) -> float:
    """``value`` moved by one frame's outcome so that it settles where :data:`LATE_TARGET` of the frames are late:
    by ``step`` (signed) after a late one, by ``-step * LATE_TARGET / (1 - LATE_TARGET)`` after one on time, kept
    within ``bounds`` (low, high). The margin's quantile and the capacity share the workers may fill both learn so."""
    move = step if late else -step * LATE_TARGET / (1.0 - LATE_TARGET)
    return min(bounds[1], max(bounds[0], value + move))


class StreamController:
    """Every stream's take / skip, rung and cloud rung on one runtime or simulated device (see the module doc).

    Args:
        warmup_ms: misses in this long (ms) after the first frame do not count toward a step.
    """

    def __init__(self, warmup_ms: float = WARMUP_MS) -> None:
        self.warmup_ms = warmup_ms
        self.streams: dict[str, StreamState] = {}
        self._first_ms: float | None = None
        self._workers = 1   # the local workers of the latest backlog seen
        self._cloud = False  # and whether it had a cloud worker (the ladder's last rung needs one)
        self._last_down = -math.inf
        self._last_up = -math.inf
        #: the share of the workers' capacity the work admitted may fill (see :data:`ADMIT_UTIL_MAX`)
        self.admit_util = ADMIT_UTIL_MAX
        self._admitted: deque[tuple[float, float]] = deque()   # (ms, work ms) of frames taken
        # (ms, its work ms, its stream's work per second at its rung) of every frame priced
        self._offered: deque[tuple[float, float, float]] = deque()

    # -- streams -------------------------------------------------------------------------
    def add(self, name: str, fps: float, priority: str = "normal", rates: Sequence[float] | None = None,
            offload: bool = True, max_in_flight: int = 1) -> StreamState:
        """Put a stream on the controller (its arguments are checked by the caller).

        Raises:
            ValueError: a stream of that name is there already.
        """
        if name in self.streams:
            raise ValueError(f"a stream named {name!r} is open already")
        ladder = tuple(rates) if rates is not None else default_rates(fps)
        s = StreamState(name, priority, ladder, offload, max_in_flight, quantile=LEVELS[priority].error_quantile)
        self.streams[name] = s
        return s

    def remove(self, name: str) -> None:
        """Take a stream off (its frames no longer count for anyone's step)."""
        self.streams.pop(name, None)

    # -- one frame -----------------------------------------------------------------------
    def offer(self, name: str, at_ms: float, backlog: Backlog) -> Decision:
        """Whether a frame of ``name`` captured at ``at_ms`` is taken, behind ``backlog`` (see the module doc).

        A frame taken counts as in flight until :meth:`ended` is called for it."""
        s = self.streams[name]
        now = backlog.now_ms
        self._workers = backlog.workers
        self._cloud = backlog.cloud
        if self._first_ms is None:
            self._first_ms = now
        s.first_ms = now if s.first_ms is None else s.first_ms
        s.last_ms = max(s.last_ms, now)
        s.frames += 1
        if not self._turn(s, at_ms):
            return self._skip(s, "rate", f"runs at {s.fps_now:g} of its {s.fps:g} fps", at_ms, counts=False)
        if s.in_flight >= s.max_in_flight:
            return self._skip(s, "in_flight", f"{s.in_flight} of its frames still running (max_in_flight="
                              f"{s.max_in_flight})", at_ms, now_ms=now)
        deadline = at_ms + s.period_ms
        if s.offloaded:
            return self._offer_cloud(s, at_ms, now)
        if len(s.chains) < MIN_CHAINS or (s.priority == "critical" and self.warming(now)):
            # too little learned yet, or a critical stream's first frames, which set up what its later frames
            # build on (a tracker's first detection; skipped, its frames would stay the costlier kind): taken
            return self._take(s, at_ms, math.nan, lean=False, now_ms=now)
        span = deadline - now
        level = self.level(name, now)
        # (on the workers as the backlog holds them: a slowdown for the critical streams' frames still to come, spread
        # over every worker, ran 10x pessimistic where the policy places the lower streams elsewhere)
        predicted = backlog.finish_ms(s.chain_ms, deadline, level)
        margin = s.margin_ms(now)
        reserved = 0.0 if s.priority == "critical" else self._critical_room_ms(s, span, now)
        reason, detail = self._verdict(s, backlog, span, predicted - now, margin, reserved)
        self._offered.append((now, s.work_ms, s.work_ms * s.fps_now))
        self._forget_before(now - WINDOW_MS)
        if reason and (s.shed_streak < MAX_SHED_STREAK or reason == "over_capacity"):
            s.shed_streak += 1
            return self._skip(s, reason, detail, at_ms, now_ms=now, busy_share=backlog.busy_share)
        probe = bool(reason)
        s.shed_streak = 0
        self._admitted.append((now, s.work_ms))
        return self._take(s, at_ms, predicted, lean=probe, now_ms=now)

    def ended(self, name: str, decision: Decision, end: FrameEnd) -> Step | None:
        """A frame :meth:`offer` took has ended as ``end`` says: count it, learn its chain, move the margin,
        and step the ladder when that is due; the step taken, if any. A stream already removed is ignored."""
        s = self.streams.get(name)
        if s is None:
            return None
        s.in_flight = max(0, s.in_flight - 1)
        s.last_ms = max(s.last_ms, end.end_ms)
        on_time = end.ok and end.end_ms <= decision.deadline_ms
        late = end.ok and not on_time
        s.on_time += on_time
        s.late += late
        s.failed += not end.ok
        if end.work_ms > 0.0 and (end.ok or not s.chains):
            if decision.lean and on_time:   # a probe that beat its predicted miss: what skipped it is stale
                s.forget_stale(by_chain=decision.predicted_ms > decision.deadline_ms)
            s.chains.append(end.path_ms)
            s.works.append(end.work_ms)
            s.chain_ms = float(statistics.median(s.chains))
            s.work_ms = float(statistics.median(s.works))
        if end.cloud_ms is not None or not s.offloaded:
            s.cloud_ms = end.cloud_ms
        done = end.end_ms if end.done_ms is None else max(end.end_ms, end.done_ms)
        if not math.isnan(decision.predicted_ms) and not self.warming(done):
            late_done = done > decision.deadline_ms   # (the app's own work on the frame counts here)
            if end.ok:
                # A frame whose request the policy dropped says nothing of the prediction: it ends when the drop
                # came, at its arrival or after a wait in a queue, not when its chain would have. Counted, one such
                # end 40 ms past the deadline was the largest error of the window; with the quantile past 1 the
                # margin became it, and every frame was skipped until a probe cleared it.
                s.errors.append((done, done - decision.predicted_ms))
                s.quantile = toward_late_target(s.quantile, late_done, QUANTILE_STEP, QUANTILE_RANGE)
            self._learn_capacity(late_done or not end.ok)   # (a frame the policy dropped did not fit either)
        moved = self._note(s, end.end_ms, not on_time, end.busy_share)
        if moved is None and end.ok and end.work_ms > 0.0 and self.warming(end.end_ms):
            moved = self._fit_while_warming(s, end.end_ms)
        return moved

    # -- what a frame's app may ask ---------------------------------------------------------
    def strained(self, now_ms: float) -> str:
        """Why the streams have no time to spare ("" when they have): a stream below its nominal rate, or one
        that missed more than :data:`UP_MISS` of its frames over the window. Optional work waits until it is ""."""
        for s in self.streams.values():
            if s.rung:
                return f"{s.name} runs at {s.fps_now:g} of its {s.fps:g} fps"
            m, n = s.miss_share(now_ms)
            if n and m > UP_MISS:
                return f"{s.name} missed {m:.0%} of its frames over the last {WINDOW_MS:.0f} ms"
        return ""

    def level(self, name: str, now_ms: float) -> str:
        """The level stream ``name``'s requests run at now: its declared one while it acts, else ``normal`` (a
        ``critical`` or ``high`` stream that missed a frame within :data:`GUARD_MS`; a ``low`` one while a more
        important stream did)."""
        s = self.streams[name]
        rank = RANK[s.priority]
        if rank < RANK["normal"]:
            acts = s.guarded(now_ms) or (s.priority == "critical" and self.warming(now_ms))
            return s.priority if acts else "normal"
        if rank > RANK["normal"]:
            missing = any(RANK[o.priority] < rank and o.guarded(now_ms) for o in self.streams.values())
            return s.priority if missing else "normal"
        return s.priority

    def urgent(self, now_ms: float) -> bool:
        """Whether a stream's frames run at an urgent level now (a critical or high stream missing frames): the
        driver's urgent lanes are then kept for them, and otherwise take any work."""
        return any(LEVELS[self.level(n, now_ms)].urgent for n in self.streams)

    def spare(self, name: str, decision: Decision, chain_ms: float, backlog: Backlog) -> str:
        """Why optional work of ``chain_ms`` in a frame of ``name`` may not run now ("" when it may): a lean
        frame, streams strained, workers busy over :data:`OPTIONAL_BUSY_MAX`, or no time left in the frame."""
        if decision.lean:
            return "lean frame: required work only"
        why = self.strained(backlog.now_ms)
        if why:
            return f"no spare capacity: {why}"
        if backlog.busy_share > OPTIONAL_BUSY_MAX:
            return (f"no spare capacity: workers {100 * backlog.busy_share:.0f}% busy > "
                    f"{100 * OPTIONAL_BUSY_MAX:.0f}%")
        if not self.fits(name, decision, chain_ms, backlog):
            left = SLACK * (decision.deadline_ms - backlog.now_ms)
            return f"no time: needs {chain_ms:.1f} ms, {max(0.0, left):.1f} ms left"
        return ""

    def fits(self, name: str, decision: Decision, chain_ms: float, backlog: Backlog) -> bool:
        """Whether ``chain_ms`` more, started now in a frame of ``name``, is expected to end within :data:`SLACK`
        of what is left of the frame."""
        s = self.streams[name]
        span = decision.deadline_ms - backlog.now_ms
        end = backlog.finish_ms(chain_ms, decision.deadline_ms, s.priority) - backlog.now_ms
        return end <= SLACK * span

    def warming(self, now_ms: float) -> bool:
        """Whether ``now_ms`` is within the warm-up after the first frame (or before it)."""
        return self._first_ms is None or now_ms - self._first_ms < self.warmup_ms

    def stats(self, name: str) -> dict[str, Any]:
        """The figures of stream ``name`` (see :meth:`StreamState.stats`)."""
        return self.streams[name].stats()

    # -- inside offer ----------------------------------------------------------------------
    def _turn(self, s: StreamState, at_ms: float) -> bool:
        """Whether a frame at ``at_ms`` is its turn at its rate: every frame at the nominal rate; below it, the
        first at most :data:`TAKE_EARLY` of a nominal period before its due time, due times a period apart."""
        if s.rung and at_ms < s.next_due_ms - TAKE_EARLY * 1000.0 / s.fps:
            return False
        nxt = s.next_due_ms + s.period_ms   # a period after this one's due time, or from now when that is past
        s.next_due_ms = nxt if nxt > at_ms else at_ms + s.period_ms
        return True

    def _verdict(self, s: StreamState, backlog: Backlog, span_ms: float, predicted_ms: float, margin_ms: float,
                 reserved_ms: float) -> tuple[str, str]:
        """Why a frame is skipped whole, ``("", "")`` when it may start (spans from now, ms)."""
        full = self._over_capacity(s, backlog, span_ms, reserved_ms)
        if full:
            return "over_capacity", full
        if s.chain_ms > span_ms:
            return "chain_too_long", f"its chain needs {s.chain_ms:.1f} ms, longer than its {span_ms:.1f} ms left"
        if predicted_ms + margin_ms > span_ms:
            return "predicted_late", (f"predicted to finish in {predicted_ms:.1f} ms ({margin_ms:+.1f} ms error "
                                      f"margin), after its {span_ms:.1f} ms deadline")
        return "", ""

    def _over_capacity(self, s: StreamState, backlog: Backlog, span_ms: float, reserved_ms: float) -> str:
        """Why admitting its work would take the work admitted over the last frame span past
        :attr:`admit_util` of the workers less ``reserved_ms`` ("" when it would not): only while the workers
        are that busy, and only for a stream capacity sheds first (:meth:`_sheds_first`)."""
        now = backlog.now_ms
        if backlog.busy_share <= self.admit_util or self._critical_acts(s, now):
            return ""
        if s.starved(now) and self._bottom_owed(s, now):   # no starvation: its bottom rung's frames go first
            return ""
        have = sum(w for t, w in self._admitted if t >= now - span_ms)
        cap = self.admit_util * backlog.workers * span_ms - reserved_ms
        if have + s.work_ms <= cap or not self._sheds_first(s):   # (room kept for critical frames or not)
            return ""
        return (f"workers {100 * backlog.busy_share:.0f}% busy and {have + s.work_ms:.0f} ms of work admitted "
                f"in {span_ms:.0f} ms > {cap:.0f} ms of capacity ({100 * self.admit_util:.0f}% of the workers)")

    def _learn_capacity(self, late: bool) -> None:
        """Move :attr:`admit_util` by a frame taken that ended ``late`` (or dropped) or on time (see
        :data:`ADMIT_UTIL_STEP`): the capacity the workers sustain is measured by whether the work admitted ends in
        time, not assumed. A device whose runs keep to their estimates fills its workers; a noisy shared host,
        whose frames come late at a busy share below its capacity, keeps the bound low."""
        self.admit_util = toward_late_target(self.admit_util, late, -ADMIT_UTIL_STEP, (ADMIT_UTIL_MAX, ADMIT_UTIL_TOP))

    def _sheds_first(self, s: StreamState) -> bool:
        """Whether saturated workers shed ``s``'s frame: it is dearer than the mean frame priced over the window, and
        its stream takes more of the workers than the mean, by work per second at its rung (both means over the frames
        priced). A dear frame of a slow stream (a 10 fps segmentation's 40 ms beside 30 fps detectors' 15 ms) passes,
        and so does a cheap frame of a fast stream (a 30 fps face tracker's 3.5 ms beside a pose chain's 20 ms)."""
        n = len(self._offered)
        if n == 0:
            return True
        frame = sum(w for _, w, _ in self._offered) / n
        rate = sum(r for _, _, r in self._offered) / n
        return s.work_ms > frame and s.work_ms * s.fps_now > rate

    @staticmethod
    def _critical_acts(s: StreamState, now_ms: float) -> bool:
        """A critical stream whose level acts (it missed a frame within :data:`GUARD_MS`): capacity is not what
        sheds its frames then (its requests run first; the streams below it give way)."""
        return s.priority == "critical" and s.guarded(now_ms)

    def _critical_room_ms(self, s: StreamState, span_ms: float, now_ms: float) -> float:
        """Work (ms) the other critical streams that are missing frames need over ``span_ms``: the room kept for
        them (Linux ``SCHED_DEADLINE``'s reservation: their chain per period)."""
        return sum(c.chain_ms * span_ms / c.period_ms for c in self.streams.values()
                   if c.priority == "critical" and c is not s and c.guarded(now_ms))

    def _offer_cloud(self, s: StreamState, at_ms: float, now_ms: float) -> Decision:
        """A frame of a stream on the cloud rung: taken unless its chain there, plus its error margin, misses."""
        chain = s.cloud_ms if s.cloud_ms is not None else math.inf
        span = at_ms + s.period_ms - now_ms
        if chain + s.margin_ms(now_ms) > span:
            return self._skip(s, "predicted_late", f"on the cloud its chain takes {chain:.1f} ms, after its "
                              f"{span:.1f} ms deadline", at_ms, now_ms=now_ms)
        return self._take(s, at_ms, now_ms + chain, lean=False, cloud=True, now_ms=now_ms)

    def _take(self, s: StreamState, at_ms: float, predicted_ms: float, lean: bool, cloud: bool = False,
              now_ms: float = -math.inf) -> Decision:
        s.taken += 1
        s.in_flight += 1
        s.takes.append(now_ms)
        return Decision(True, "", "", at_ms + s.period_ms, s.period_ms, lean, cloud, predicted_ms,
                        self.level(s.name, now_ms))

    def _skip(self, s: StreamState, reason: str, detail: str, at_ms: float, counts: bool = True,
              now_ms: float | None = None, busy_share: float | None = None) -> Decision:
        """A frame not taken; ``counts``: it is a miss for the ladder (a skip by rate is not)."""
        s.shed_by[reason] = s.shed_by.get(reason, 0) + 1
        if counts and now_ms is not None:
            self._note(s, now_ms, True, busy_share)
        return Decision(False, reason, detail, at_ms + s.period_ms, s.period_ms)

    # -- the ladder ------------------------------------------------------------------------
    def _note(self, s: StreamState, now_ms: float, missed: bool, busy_share: float | None = None) -> Step | None:
        """Count one outcome of ``s`` and step the ladder when due (``busy_share``: the workers', if known)."""
        if self.warming(now_ms):
            return None
        if missed:
            s.guard_until_ms = now_ms + GUARD_MS
        s.outcomes.append((now_ms, missed))
        return self._step_down(now_ms) or self._step_up(now_ms, busy_share)

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
        lower_can_yield = any(not s.bottom and RANK[s.priority] > RANK[worst.priority] and self._pays(s, worst, share)
                              for s in self.streams.values())
        critical_waits = worst.priority == "critical" and lower_can_yield   # (a lower stream's step that pays)
        if not worst.bottom and not worst.fits(worst.rung) and not critical_waits and self._pays(worst, worst, share):
            why = (f"its chain needs {worst.chain_ms:.1f} ms, more than {FIT_SHARE:.0%} of its "
                   f"{worst.period_ms:.1f} ms period")
            return self._move(worst, now_ms, +1, why)
        # who may yield: no stream more important than the one missing; a critical one only once no lower can
        able = [s for s in self.streams.values() if not s.bottom and RANK[s.priority] >= RANK[worst.priority]
                and not (s is worst and critical_waits)]
        why = f"{worst.name} ({worst.priority}) missed {share:.0%} of its frames over the last {WINDOW_MS:.0f} ms"
        if not able and worst.bottom and self._bottoms_fit():
            # no starvation: a stream at its bottom rung keeps that rate while every stream's bottom rung fits
            # together; a more important stream's rate above its own bottom is the optional work that yields,
            # when its step pays
            helping = [s for s in self.streams.values() if not s.bottom and not s.offloaded
                       and self._pays(s, worst, share)]
            if helping:
                victim = min(helping, key=lambda s: (-RANK[s.priority], -s.chain_ms * s.fps_now, s.name))
                return self._move(victim, now_ms, +1, why + ", at its bottom rung, and every stream's bottom rung "
                                  "fits the workers")
        if not able:
            return self._to_cloud(now_ms, why)
        paying = [s for s in able if self._pays(s, worst, share) and self._trades(s, worst)]
        if not paying:   # (a critical stream included: steps that free next to nothing would only cost their
            return None  # streams frames; its level, lane and niceness are what protect it then)
        victim = min(paying, key=lambda s: (-RANK[s.priority], -s.chain_ms * s.fps_now, s.name))
        return self._move(victim, now_ms, +1, why)

    def _fit_while_warming(self, s: StreamState, now_ms: float) -> Step | None:
        """During the warm-up, where misses do not count yet: a stream (not critical) whose chain as learned so far
        is longer than its period (no frame of it can end on time) steps down one rung, once per frame it learns
        from, rather than take its first frames late and skip the rest as too long until the warm-up ends (a
        critical stream's first frames set up what its later ones build on, and its first runs are the coldest: it
        steps by its misses only; a chain that only just fits is left to the misses too)."""
        if s.priority == "critical" or s.bottom or s.offloaded or s.chain_ms <= s.period_ms:
            return None
        return self._move(s, now_ms, +1, f"its chain needs {s.chain_ms:.1f} ms, longer than its {s.period_ms:.1f} ms "
                                         "period (warm-up)")

    @staticmethod
    def _pays(v: StreamState, worst: StreamState, share: float) -> bool:
        """Whether stepping ``v`` down one rung is worth it for ``worst``, which missed ``share`` of its frames:
        for ``worst`` itself, when the lower rate would serve more frames on time (it misses at least
        1 - next rate / this rate); for another stream, when its steps to its bottom rung would free at least
        :data:`MIN_RELIEF` of the work ``worst`` misses a second."""
        if v is worst:
            return share >= 1.0 - v.rates[v.rung + 1] / v.rates[v.rung]
        freed = v.work_ms * (v.fps_now - v.rates[-1])
        return freed >= MIN_RELIEF * share * worst.fps_now * worst.chain_ms

    @staticmethod
    def _trades(v: StreamState, worst: StreamState) -> bool:
        """Whether ``v``'s frames may pay for ``worst``'s: always for a critical ``worst`` (its frames are worth
        more than any other's) or for ``worst`` itself; otherwise only when a frame of ``v`` costs at least one of
        ``worst`` (a step of ``v`` then frees at least one of ``worst``'s frames for each of its own it costs:
        a cheap low stream stepping down for a costly normal one would lose more frames than it frees)."""
        return worst.priority == "critical" or v is worst or v.work_ms >= worst.work_ms

    def _to_cloud(self, now_ms: float, why: str) -> Step | None:
        """The last rung: the least important stream whose chain fits its period on the cloud worker goes
        there (None when none does)."""
        if not self._cloud:
            return None
        able = [s for s in self.streams.values() if s.offload and not s.offloaded and s.fits(s.rung, cloud=True)]
        if not able:
            return None
        s = min(able, key=lambda s: (-RANK[s.priority], -s.chain_ms * s.fps_now, s.name))
        s.offloaded, s.last_step_ms, self._last_down = True, now_ms, now_ms
        self._clear_outcomes()
        return self._record(s, Step(now_ms, s.name, s.fps_now, s.fps_now,
                                    f"to the cloud: {why}; its chain takes {s.cloud_ms:.1f} ms there, within its "
                                    f"{s.period_ms:.1f} ms period"))

    def _step_up(self, now_ms: float, busy_share: float | None) -> Step | None:
        if busy_share is None:
            busy_share = self._busy_estimate()
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
            return self._record(s, Step(now_ms, s.name, s.fps_now, s.fps_now, f"back from the cloud: workers "
                                        f"{busy_share:.0%} busy (+{added:.0%} with it)"))
        down = [s for s in self.streams.values() if s.rung > 0 and now_ms - s.last_step_ms >= s.hold_ms
                and s.fits(s.rung - 1)]
        if not down:
            return None
        s = min(down, key=lambda s: (RANK[s.priority], s.chain_ms * s.fps_now, s.name))
        added = s.chain_ms * (s.rates[s.rung - 1] - s.fps_now) / 1000.0   # core-seconds per second
        if busy_share + added > UP_BUSY_MAX:
            return None
        why = (f"no stream missed more than {UP_MISS:.0%} of its frames, workers {busy_share:.0%} busy "
               f"(+{added:.0%} at the faster rate)")
        return self._move(s, now_ms, -1, why)

    def _bottoms_fit(self) -> bool:
        """Whether every local stream at its bottom rung would fit the workers together (:data:`FIT_SHARE` of them),
        by their chains as learned."""
        demand = sum(s.work_ms * s.rates[-1] for s in self.streams.values() if not s.offloaded) / 1000.0
        return demand <= FIT_SHARE * self._workers

    def _acting_critical(self, now_ms: float) -> list[StreamState]:
        """The critical streams whose level acts and that run on the workers (not on the cloud rung)."""
        return [c for c in self.streams.values() if self._critical_acts(c, now_ms) and not c.offloaded]

    def _bottom_owed(self, s: StreamState, now_ms: float) -> bool:
        """Whether ``s``'s bottom rung fits its max-min fair share (water-filling) of the workers' :data:`FIT_SHARE`
        that critical streams whose level acts leave at their rates: every stream's bottom rung when they all fit,
        and the cheap ones' (a 10 fps detector's) when a costly one's cannot fit beside a critical stream."""
        acting = self._acting_critical(now_ms)
        left = FIT_SHARE * self._workers * 1000.0 - sum(c.work_ms * c.fps_now for c in acting)   # ms per second
        demands = sorted(o.work_ms * o.rates[-1] for o in self.streams.values() if o not in acting and not o.offloaded)
        mine = s.work_ms * s.rates[-1]
        for k, demand in enumerate(demands):   # the cheapest first, each at most an equal share of what is left
            if demand >= mine:
                return mine <= left / (len(demands) - k)
            left -= demand
        return False

    def _busy_estimate(self) -> float:
        """The streams' own demand as a busy share when the driver gave none: work per second over one worker."""
        return sum(s.work_ms * s.fps_now for s in self.streams.values() if not s.offloaded) / 1000.0

    def _move(self, s: StreamState, now_ms: float, by: int, why: str) -> Step:
        before = s.fps_now
        if by > 0:
            if now_ms - s.last_up_ms < 2 * s.hold_ms:   # a step up that did not hold: wait longer next time
                s.hold_ms = min(MAX_HOLD_MS, 2 * s.hold_ms)
            self._last_down = now_ms
        else:
            s.last_up_ms = self._last_up = now_ms
        s.rung += by
        s.last_step_ms = now_ms
        self._clear_outcomes()
        return self._record(s, Step(now_ms, s.name, before, s.fps_now, why))

    def _record(self, s: StreamState, step: Step) -> Step:
        s.steps.append(step)
        return step

    def _clear_outcomes(self) -> None:
        """The next decision sees the new rates' outcomes only."""
        for t in self.streams.values():
            t.outcomes.clear()

    def _forget_before(self, t_ms: float) -> None:
        while self._admitted and self._admitted[0][0] < t_ms:
            self._admitted.popleft()
        while self._offered and self._offered[0][0] < t_ms:
            self._offered.popleft()


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``sorted_values`` (non-empty), linear between neighbours (numpy's default)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)
