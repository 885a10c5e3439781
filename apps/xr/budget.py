"""Pricing a frame's work by its deadline: frame-level jobs, optional stages and model variants.

The runtime prices one request at a time; a cascade priced that way can lose its second half
after its first has used the CPU, and a stage that is nice to have (the palm detector's search
for a second hand while one is tracked) competes with stages a frame cannot do without. This
module prices in the app's pipeline layer, over the runtime's public figures
(``rt.estimator.expected_ms``, ``rt.now_ms``, the frame's absolute deadline):

* :class:`Ledger` (one per runtime, shared by every :class:`apps.xr.Pipelines` on it): the
  expected ms and deadline of each request submitted and not yet finished (the backlog), and the
  service ms the runtime's workers spent on them over the last :data:`WINDOW_MS` (how busy the
  host is).
* :class:`FrameBudget` (one per ``Pipelines.process`` call with a deadline): whether a chain of
  stages fits what is left of the frame (``fits``), which variant of a model to run
  (``pick``: the most accurate that fits, else the cheapest), and whether an optional stage may
  run (``optional``: it must fit *and* leave the workers the room required work needs).

The finish estimate of ``cost_ms`` submitted now with deadline ``d`` is
``now + ahead / workers + cost_ms``, where ``ahead`` is the work that runs before it: the backlog
due by ``d`` (the runtime's policy runs the earliest deadline first), plus, for work due later
that may already hold a worker (a run is not preempted), :data:`BLOCKING_SHARE` of the
``workers`` oldest such requests. With priorities, "due by" compares deadlines less each level's
lead (``scheduler.priority.LEAD_MS``), as the runtime's policy orders them. Counting all the backlog shed short frames (a face mesh due in
33 ms) behind long work due after them that they would in fact run ahead of. It is an estimate, so
a frame admitted may still finish late; the runtime's own policy still decides every request.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future

import edgert
from scheduler.priority import LEAD_MS, URGENT_LEVELS

#: Window (ms) over which the workers' recent busy share is measured.
WINDOW_MS = 500.0
#: Optional work runs only while the workers were busy less than this share of the window, so
#: that the work it adds cannot push required work of the next frames past their deadlines.
OPTIONAL_BUSY_MAX = 0.55
#: Fraction of what is left of a frame that a chain's estimate may fill (estimates are means).
SLACK = 0.9
#: While the workers were busy more than this share of the last WINDOW_MS, the frame jobs admitted over
#: the last frame span may claim this share of the workers' time; a job that
#: would take the admitted work past it is shed whole, unless it costs no more than the mean job priced lately
#: (so the costliest frames are shed first, which keeps the most frames): the frames kept then finish
#: instead of every frame finishing late (the pipelines' own Python work and the workers' contention
#: use the rest).
ADMIT_UTIL_MAX = 0.75
#: Expected ms of a model not yet measured (before its first run on any worker).
UNKNOWN_MS = 10.0
#: Share of a request due later than a new one that counts as ahead of it, for the ``workers`` oldest such
#: requests (those that may be running: a run is not preempted; on average half of it is left).
BLOCKING_SHARE = 0.5

_LEDGERS: weakref.WeakKeyDictionary[edgert.Runtime, Ledger] = weakref.WeakKeyDictionary()


class Ledger:
    """One runtime's outstanding and recent work, as the XR pipelines submitted it (thread-safe)."""

    def __init__(self, rt: edgert.Runtime) -> None:
        self.rt = rt
        lanes = set(rt.urgent_processors)   # they run critical and high work only: not capacity to plan on
        self.workers = max(1, sum(p != "cloud" and p not in lanes for p in rt.processors))
        self.lanes = len(lanes)
        self._lock = threading.Lock()
        #: submission no. -> (expected ms, deadline less its lead, whether an urgent lane may run it)
        self._open: dict[int, tuple[float, float, bool]] = {}
        self._seq = 0
        self._done: deque[tuple[float, float]] = deque()   # (end ms, service ms)
        self._admitted: deque[tuple[float, float]] = deque()   # (admission ms, expected work ms)
        self._offered: deque[tuple[float, float]] = deque()    # the same for every job priced, shed or not

    @staticmethod
    def of(rt: edgert.Runtime) -> Ledger:
        """The runtime's ledger (made on first use)."""
        led = _LEDGERS.get(rt)
        if led is None:
            led = _LEDGERS.setdefault(rt, Ledger(rt))
        return led

    def cost_ms(self, model: str) -> float:
        """Expected ms of one request of ``model`` on its fastest worker (:data:`UNKNOWN_MS` if unmeasured)."""
        exp = self.rt.estimator.expected_ms
        vals = [v for p in self.rt.processors if (v := exp(model, p)) is not None]
        return min(vals) if vals else UNKNOWN_MS

    def track(self, fut: Future[edgert.Result], model: str, deadline_ms: float = float("inf"),
              priority: str = "normal") -> None:
        """Count ``fut``'s expected ms (due by ``deadline_ms``, absolute, at ``priority``) in the backlog until it
        finishes, then its service ms as recent work."""
        cost = self.cost_ms(model)
        with self._lock:
            self._seq += 1
            key = self._seq
            self._open[key] = (cost, deadline_ms - LEAD_MS.get(priority, 0.0), priority in URGENT_LEVELS)

        def finished(f: Future[edgert.Result]) -> None:
            res = f.result()
            now = self.rt.now_ms()
            service = max(0.0, res.latency_ms - res.queued_ms) if res.status in ("ok", "late") else 0.0
            with self._lock:
                self._open.pop(key, None)
                self._done.append((now, service))
                self._forget_before(now - WINDOW_MS)
        fut.add_done_callback(finished)

    def ahead_ms(self, deadline_ms: float, priority: str = "normal") -> float:
        """Expected ms of the backlog that runs before a request due by ``deadline_ms`` at ``priority`` (see the
        module doc)."""
        deadline_ms -= LEAD_MS.get(priority, 0.0)
        with self._lock:
            entries = list(self._open.values())   # submission order
        if self.lanes and priority in URGENT_LEVELS:   # an urgent lane takes it: only urgent work runs before it
            return sum(cost for cost, due, urgent in entries if urgent and due <= deadline_ms)
        ahead = 0.0
        later: list[float] = []   # the oldest requests due after it, at most ``workers``
        for cost, due, _ in entries:
            if due <= deadline_ms:
                ahead += cost
            elif len(later) < self.workers:
                later.append(cost)
        return ahead + BLOCKING_SHARE * sum(later)

    def busy_share(self) -> float:
        """Share of the workers' time (0‥1+) spent on this runtime's XR requests over the last WINDOW_MS."""
        now = self.rt.now_ms()
        with self._lock:
            while self._done and self._done[0][0] < now - WINDOW_MS:
                self._done.popleft()
            total = sum(s for _, s in self._done)
        return total / (WINDOW_MS * self.workers)

    def admitted_ms(self, span_ms: float) -> tuple[float, float]:
        """Expected work (ms) of the frame jobs admitted over the last ``span_ms``, and the mean work of those
        priced over the last WINDOW_MS (admitted or shed; 0 when none)."""
        now = self.rt.now_ms()
        with self._lock:
            self._forget_before(now - WINDOW_MS)
            have = sum(w for t, w in self._admitted if t >= now - span_ms)
            mean = sum(w for _, w in self._offered) / len(self._offered) if self._offered else 0.0
        return have, mean

    def offer(self, work_ms: float) -> None:
        """Record a frame job of ``work_ms`` expected work priced now (admitted or not)."""
        now = self.rt.now_ms()
        with self._lock:
            self._offered.append((now, work_ms))
            self._forget_before(now - WINDOW_MS)

    def admit(self, work_ms: float) -> None:
        """Record a frame job of ``work_ms`` expected work admitted now."""
        now = self.rt.now_ms()
        with self._lock:
            self._admitted.append((now, work_ms))
            self._forget_before(now - WINDOW_MS)

    def _forget_before(self, t_ms: float) -> None:
        """Drop the work that ended, was admitted or was priced before ``t_ms``: nothing older is ever read,
        and the readers (:meth:`admitted_ms` only while the workers are busy, :meth:`busy_share` only for a
        frame with a deadline) may not run for hours, so the recording side prunes too (lock held)."""
        for q in (self._done, self._admitted, self._offered):
            while q and q[0][0] < t_ms:
                q.popleft()

    def finish_ms(self, chain_ms: float, deadline_ms: float = float("inf"), priority: str = "normal") -> float:
        """When a chain of ``chain_ms`` (its critical path) due by ``deadline_ms`` at ``priority``, submitted now,
        is expected to finish (runtime ms): after the backlog that runs before it (:meth:`ahead_ms`), spread
        over the workers."""
        lanes = self.lanes if priority in URGENT_LEVELS else 0
        return self.rt.now_ms() + self.ahead_ms(deadline_ms, priority) / (self.workers + lanes) + chain_ms


def skip_reason(span_ms: float, chain_ms: float, predicted_ms: float, margin_ms: float,
                capacity_why: str = "") -> tuple[str, str]:
    """Whether a frame job is skipped whole rather than started: ``(kind, why)``, ``("", "")`` when it may start.

    Args:
        span_ms: its deadline, from now (ms).
        chain_ms: its chain's expected run alone (ms).
        predicted_ms: its predicted finish from now, behind the work running and queued beside it (ms).
        margin_ms: the stream's recent prediction error to allow for (ms).
        capacity_why: why the workers have no room for it (:meth:`FrameBudget.over_capacity`), or "".

    Kinds: ``over capacity``; ``chain too long`` (longer than its deadline even alone); ``predicted late``
    (a frame expected to finish after its deadline is not started: a late result is wasted work).
    """
    if capacity_why:
        return "over capacity", capacity_why
    if chain_ms > span_ms:
        return "chain too long", f"its chain needs {chain_ms:.1f} ms, longer than its {span_ms:.1f} ms period"
    if predicted_ms + margin_ms > span_ms:
        return "predicted late", (f"predicted to finish in {predicted_ms:.1f} ms (+{margin_ms:.1f} ms error margin), "
                                  f"after its {span_ms:.1f} ms deadline")
    return "", ""


class FrameBudget:
    """What is left of one frame: prices chains, picks variants, admits optional stages.

    Args:
        ledger: the runtime's :class:`Ledger`.
        deadline_ms: the frame's absolute deadline (runtime ms); ``inf``: no deadline (everything fits,
            the most accurate variant always runs, optional stages always run).
        lean: required work only: the cheapest variants, no optional stage (a rescued frame).
        priority: the frame's importance (its requests' place in the backlog's order).
    """

    def __init__(self, ledger: Ledger, deadline_ms: float, lean: bool = False, priority: str = "normal",
                 strained: str = "") -> None:
        self.ledger = ledger
        self.deadline_ms = deadline_ms
        self.lean = lean
        self.priority = priority
        #: why the streams have no time to spare (``RateLadder.strained``), "" when they have: optional work waits
        self.strained = strained
        self.start_ms = ledger.rt.now_ms()

    @property
    def timed(self) -> bool:
        """The frame has a deadline."""
        return self.deadline_ms != float("inf")

    def cost_ms(self, models: Sequence[str]) -> float:
        """Expected ms of running ``models`` one after the other."""
        return sum(self.ledger.cost_ms(m) for m in models)

    def left_ms(self, slack: float = SLACK) -> float:
        """Ms the estimate says would be left after the current backlog (negative: already over)."""
        span = self.deadline_ms - self.start_ms
        return slack * span - (self.ledger.finish_ms(0.0, self.deadline_ms, self.priority) - self.start_ms)

    def fits(self, chain_ms: float, slack: float = SLACK) -> bool:
        """A chain of ``chain_ms`` submitted now is expected to finish within ``slack`` of the frame."""
        if not self.timed:
            return True
        span = self.deadline_ms - self.start_ms
        return self.ledger.finish_ms(chain_ms, self.deadline_ms, self.priority) - self.start_ms <= slack * span

    def pick(self, variants: Sequence[str], downstream_ms: float = 0.0) -> str:
        """The first (most accurate) of ``variants`` that fits, else the cheapest.

        The last variant is the one the stage needs; running a more accurate one instead is an upgrade,
        priced as optional work: its cost plus ``downstream_ms`` must fit the frame and the workers must
        have spare capacity (so the upgrade never makes another stream's required work late)."""
        if not self.timed:
            return variants[0]
        spare = not self.lean and self.ledger.busy_share() <= OPTIONAL_BUSY_MAX
        for v in variants[:-1]:
            if spare and self.fits(self.ledger.cost_ms(v) + downstream_ms):
                return v
        return min(variants, key=self.ledger.cost_ms)

    def over_capacity(self, work_ms: float, reserved_ms: float = 0.0) -> str:
        """Why admitting a frame job of ``work_ms`` would take the work admitted over the last frame span past
        :data:`ADMIT_UTIL_MAX` of the workers less ``reserved_ms`` (room kept for critical streams) ("" when it
        would not, or without a deadline)."""
        if not self.timed:
            return ""
        busy = self.ledger.busy_share()
        if busy <= ADMIT_UTIL_MAX:
            return ""   # the workers keep up: estimates (means, inflated by contention) are no reason to shed
        span = self.deadline_ms - self.start_ms
        have, mean = self.ledger.admitted_ms(span)
        cap = ADMIT_UTIL_MAX * self.ledger.workers * span - reserved_ms
        if have + work_ms <= cap or work_ms <= mean and not reserved_ms:
            return ""   # fits, or no costlier than the mean job priced lately: the costliest frames go first
        return (f"workers {100 * busy:.0f}% busy and {have + work_ms:.0f} ms of work admitted in {span:.0f} ms "
                f"> {cap:.0f} ms of capacity")

    def optional(self, chain_ms: float) -> str | None:
        """None when an optional chain of ``chain_ms`` may run now, else why not (the skip's reason)."""
        if not self.timed:
            return None
        if self.lean:
            return "lean frame: required work only"
        if self.strained:
            return f"no spare capacity: {self.strained}"
        busy = self.ledger.busy_share()
        if busy > OPTIONAL_BUSY_MAX:
            return f"no spare capacity: workers {100 * busy:.0f}% busy > {100 * OPTIONAL_BUSY_MAX:.0f}%"
        if not self.fits(chain_ms):
            return f"no time: needs {chain_ms:.1f} ms, {max(0.0, self.left_ms()):.1f} ms left"
        return None
