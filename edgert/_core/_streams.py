"""Streams in the live runtime: ``rt.stream(...)``, its frames, and the dispatcher's side of the overload controller.

The decisions are :mod:`scheduler.streams`' (one controller per runtime, pure, on the runtime clock); this
module is its live driver:

* :meth:`Stream.frame` offers a frame: under the runtime's one lock it snapshots the dispatcher's own
  pending, queued and running requests (:meth:`edgert._core._run.Dispatcher.backlog_locked`) and asks the
  controller, which answers with a :class:`scheduler.streams.Decision`.
* Inside ``with s.frame() as f:`` every request submitted (and every cascade stage submitted ``after=`` one
  of them) belongs to the frame: it inherits the frame's deadline, priority and stream, and is watched by
  the frame's :class:`FrameWatch`. A submit in a frame not taken ends ``dropped`` with the frame's reason.
* The frame ends when its block has exited and every request of it has ended; the watch then tells the
  controller how it went (:class:`scheduler.streams.FrameEnd`: ok or not, its work and its longest cascade,
  measured), which is how a stream learns its chain: the app declares none of it.
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from edgert._core._frame import Frame, current_frame
from edgert._core._result import LATE, OK
from edgert.errors import ConfigError
from scheduler.priority import check as check_priority
from scheduler.streams import REASONS, Decision, FrameEnd, StreamController

if TYPE_CHECKING:
    from edgert._core._run import Dispatcher, Request

__all__ = ["REASONS", "Stream", "StreamFrame", "Streams"]


class Streams:
    """A runtime's open streams and their controller (every call under the dispatcher's lock).

    Args:
        dispatcher: the runtime's dispatcher (its lock, clock, queues and estimator).
    """

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.controller = StreamController()
        self.open: dict[str, Stream] = {}
        self.view: Mapping[str, Stream] = types.MappingProxyType(self.open)

    def add(self, name: str, fps: float, priority: str, rates: Sequence[float] | None, offload: bool | None,
            max_in_flight: int) -> Stream:
        """Open a stream (its arguments checked here).

        Raises:
            ConfigError: a bad argument, or a stream of that name already open.
        """
        fps, ladder = _check_rates(name, fps, rates)
        priority = check_priority(priority, f"priority of stream {name!r}")
        if not (isinstance(max_in_flight, int) and not isinstance(max_in_flight, bool) and max_in_flight >= 1):
            raise ConfigError(f"stream {name!r}: max_in_flight must be an int >= 1, got {max_in_flight!r}")
        if offload not in (None, True, False):
            raise ConfigError(f"stream {name!r}: offload must be None (the runtime's), True or False, got {offload!r}")
        d = self.dispatcher
        with d.lock:
            if name in self.open:
                raise ConfigError(f"a stream named {name!r} is open already; close it or pass another name")
            cloud = any(w.kind == "cloud" for w in d.workers)
            st = self.controller.add(name, fps, priority, ladder, cloud if offload is None else offload and cloud,
                                     max_in_flight)
            if d.trace is not None:
                d.trace.stream(name, fps, priority, st.rates, st.offload, max_in_flight)
            s = self.open[name] = Stream(self, name, fps, priority)
        return s

    def close(self, s: Stream) -> None:
        """Close ``s``: its frames in flight still end, and count for nothing."""
        with self.dispatcher.lock:
            if self.open.get(s.name) is s:
                del self.open[s.name]
                self.controller.remove(s.name)
                if not self.open:   # no stream left to say when the lanes are needed: they are the urgent levels'
                    self.dispatcher.lanes_open = False


class Stream:
    """A periodic source of frames (a camera, a microphone) whose every frame runs a chain of requests.

    Made by :meth:`edgert.Runtime.stream`; the runtime decides frame by frame whether a frame is taken, at which
    rate the stream runs and where its work goes (:mod:`scheduler.streams`). Use it as a context manager, or
    call :meth:`close`.
    """

    def __init__(self, hub: Streams, name: str, fps: float, priority: str) -> None:
        self._hub = hub
        self.name = name
        #: its nominal rate (fps)
        self.fps = fps
        #: its level (``critical``, ``high``, ``normal``, ``low``)
        self.priority = priority
        self.closed = False
        self._last_stats: dict[str, Any] = {}   # its figures when it was closed

    def frame(self, at_ms: float | None = None) -> StreamFrame:
        """Offer one frame, captured at ``at_ms`` on :meth:`edgert.Runtime.now_ms`'s clock (None: now).

        Use it as ``with s.frame() as f:``; ``f.taken`` (or ``bool(f)``) says whether it runs, ``f.reason`` why
        not (a code of :data:`REASONS`), ``f.deadline_ms`` its absolute deadline. The frame ends when the block
        has exited and every request submitted in it has ended.

        Raises:
            ConfigError: ``at_ms`` is not a number.
        """
        d = self._hub.dispatcher
        if at_ms is not None and (isinstance(at_ms, bool) or not isinstance(at_ms, (int, float))
                                  or math.isnan(at_ms)):
            raise ConfigError(f"stream {self.name!r}: frame(at_ms=) takes ms on rt.now_ms()'s clock, got {at_ms!r}")
        with d.lock:
            now = d.now_ms()
            at = now if at_ms is None else float(at_ms)
            if self.closed:
                decision = Decision(False, "closed", f"stream {self.name!r} is closed", at, 0.0)
            else:
                decision = self._hub.controller.offer(self.name, at, d.backlog_locked(now))
                d.lanes_open = not self._hub.controller.urgent(now)
            f = d.new_frame_locked(at, decision.deadline_ms)
            if d.trace is not None:   # every frame offered, taken or not: a replay offers it again
                d.trace.frame(self.name, f.index, at, now, decision.taken, decision.reason, decision.deadline_ms)
        return StreamFrame(self, decision, f)

    @property
    def rung_fps(self) -> float:
        """The rate it runs at now (fps): a rung of its ladder."""
        with self._hub.dispatcher.lock:
            s = self._hub.controller.streams.get(self.name)
            return s.fps_now if s is not None else 0.0

    def stats(self) -> dict[str, Any]:
        """``frames`` (offered), ``taken``, ``on_time``, ``late``, ``failed``, ``frames_shed`` (with
        ``frames_shed_by`` reason), ``rate_fps`` (on-time results per second), ``rung_fps``, ``priority``,
        ``offloaded``, ``chain_ms`` (its chain as learned) and ``steps``: its latest steps
        (``{"at_ms", "from_fps", "to_fps", "why"}``, bounded). ``frames = taken + frames_shed``."""
        with self._hub.dispatcher.lock:
            s = self._hub.controller.streams.get(self.name)
            return s.stats() if s is not None else dict(self._last_stats)

    def close(self) -> None:
        """End the stream: it leaves :attr:`edgert.Runtime.streams`; its frames still running end as usual."""
        with self._hub.dispatcher.lock:
            s = self._hub.controller.streams.get(self.name)
            if s is not None:
                self._last_stats = s.stats()
        self._hub.close(self)
        self.closed = True

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<edgert.Stream {self.name!r} {self.fps:g} fps {self.priority}>"


class StreamFrame:
    """One frame offered to a stream: taken or not, and why; a context manager for the requests it runs."""

    def __init__(self, stream: Stream, decision: Decision, frame: Frame) -> None:
        self.stream = stream
        self.decision = decision
        self._frame = frame
        self._token: Any = None
        self._nice: Any = None
        d = stream._hub.dispatcher
        frame.priority = decision.priority   # its declared level while it acts, else normal (scheduler.streams)
        frame.allowed = ("cloud",) if decision.cloud else None
        frame.watch = FrameWatch(self, d)

    @property
    def taken(self) -> bool:
        """Whether the frame runs (False: not taken, :attr:`reason` says why)."""
        return self.decision.taken

    def __bool__(self) -> bool:
        return self.decision.taken

    @property
    def reason(self) -> str:
        """Why it was not taken: a code of :data:`REASONS` ("" when taken)."""
        return self.decision.reason

    @property
    def detail(self) -> str:
        """The reason in words, with the figures that decided it ("" when taken)."""
        return self.decision.detail

    @property
    def deadline_ms(self) -> float:
        """Its absolute deadline on the runtime clock: its capture time plus the period at the stream's rung."""
        return self.decision.deadline_ms

    @property
    def lean(self) -> bool:
        """A probe after many skips: run required work only."""
        return self.decision.lean

    @property
    def cloud(self) -> bool:
        """Its requests run on the cloud worker only (the ladder's last rung)."""
        return self.decision.cloud

    def expected_ms(self, models: Sequence[str]) -> float:
        """Expected ms of running ``models`` one after the other, each on its fastest processor (an unmeasured
        model counts 10 ms)."""
        d = self.stream._hub.dispatcher
        with d.lock:
            return sum(d.fastest_ms(m, unknown_ms=10.0) for m in models)

    def fits(self, chain_ms: float) -> bool:
        """Whether ``chain_ms`` more, started now, is expected to end well within the frame's deadline."""
        d = self.stream._hub.dispatcher
        with d.lock:
            return self.stream._hub.controller.fits(self.stream.name, self.decision, chain_ms,
                                                    d.backlog_locked(d.now_ms()))

    def spare(self, chain_ms: float) -> str:
        """Why optional work of ``chain_ms`` (a detector's search for one more hand) may not run in this frame
        now, "" when it may: it must fit the frame, and the workers must have time no stream needs."""
        d = self.stream._hub.dispatcher
        with d.lock:
            if self.stream.name not in self.stream._hub.controller.streams:
                return "the stream is closed"
            return self.stream._hub.controller.spare(self.stream.name, self.decision, chain_ms,
                                                     d.backlog_locked(d.now_ms()))

    def __enter__(self) -> StreamFrame:
        self._token = current_frame.set(self._frame)
        if self.decision.taken:
            self._nice = self.stream._hub.dispatcher.thread_priority.caller_at(self.decision.priority)
            self._nice.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._nice is not None:
                self._nice.__exit__(None, None, None)
        finally:
            current_frame.reset(self._token)
            watch = self._frame.watch
            assert watch is not None
            watch.exit_block()

    def __repr__(self) -> str:
        state = "taken" if self.taken else f"not taken: {self.reason}"
        return f"<edgert.StreamFrame {self.stream.name!r} {state} deadline={self.deadline_ms:.1f}ms>"


class FrameWatch:
    """The requests of one stream frame, counted as they are admitted and end (under the dispatcher's lock), and
    the frame's end reported to the controller once its block has exited and none is open."""

    __slots__ = ("_owner", "_d", "open", "exited", "ended", "ok", "work_ms", "path_ms", "cloud_ms",
                 "_paths", "_clouds", "end_ms", "exit_ms", "runs")

    def __init__(self, owner: StreamFrame, d: Dispatcher) -> None:
        self._owner = owner
        self._d = d
        self.open = 0
        self.exited = False
        self.ended = False
        self.ok = True
        self.runs = 0
        self.work_ms = 0.0
        self.path_ms = 0.0
        self.cloud_ms: float | None = 0.0
        self._paths: dict[int, float] = {}    # request id -> run ms along its cascade, up to its end
        self._clouds: dict[int, float | None] = {}
        self.end_ms = -math.inf   # when its last request ended
        self.exit_ms = -math.inf  # when its block exited

    @property
    def taken(self) -> bool:
        """Whether its frame was taken (a request of a frame not taken is dropped at once)."""
        return self._owner.decision.taken

    @property
    def drop_reason(self) -> str:
        """What a request of a frame not taken ends ``dropped`` with."""
        dec = self._owner.decision
        return f"its stream {self._owner.stream.name!r} did not take the frame: {dec.reason} ({dec.detail})"

    def opened(self, req: Request, parent_id: int | None) -> None:
        """A request of the frame was admitted (lock held); ``parent_id``: its cascade parent's id, if any."""
        self.open += 1
        self.runs += 1
        req.watch = self
        req.parent_id = parent_id

    def request_ended(self, req: Request, status: str, end_ms: float) -> None:
        """One of its requests ended (lock held): fold its run into the frame's work and longest cascade."""
        self.open -= 1
        self.end_ms = max(self.end_ms, end_ms)
        ran = end_ms - req.start_ms if not math.isnan(req.start_ms) else 0.0
        parent = req.parent_id
        path = ran + (self._paths.get(parent, 0.0) if parent is not None else 0.0)
        self._paths[req.id] = path
        cloud = self._d.estimator.expected_ms(req.model.name, "cloud")
        before = self._clouds.get(parent, 0.0) if parent is not None else 0.0
        self._clouds[req.id] = None if cloud is None or before is None else before + cloud
        if path >= self.path_ms:
            self.path_ms = path
            self.cloud_ms = self._clouds[req.id]
        self.work_ms += ran
        self.ok = self.ok and status in (OK, LATE)   # it ran to its end (late or not: the frame's end says)
        if self.open == 0 and self.exited:
            self._end()

    def exit_block(self) -> None:
        """The frame's block exited: the frame ends now when nothing of it is open."""
        with self._d.lock:
            self.exited = True
            self.exit_ms = self._d.now_ms()
            if self.open == 0:
                if self.end_ms == -math.inf:   # nothing was submitted in it
                    self.end_ms = self.exit_ms
                self._end()

    def _end(self) -> None:
        if self.ended or not self._owner.decision.taken:
            return
        self.ended = True
        hub = self._owner.stream._hub
        end = FrameEnd(self.end_ms, self.ok, self.work_ms, self.path_ms, self.cloud_ms if self.runs else None,
                       self._d.busy_share_locked(self._d.now_ms()), self.exit_ms)
        hub.controller.ended(self._owner.stream.name, self._owner.decision, end)


def _check_rates(name: str, fps: object, rates: Sequence[float] | None) -> tuple[float, tuple[float, ...] | None]:
    """``fps`` and ``rates`` checked: a rate > 0; rungs > 0, falling, the first being ``fps``.

    Raises:
        ConfigError: naming the stream, what was given and what to pass.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a stream needs a name (a non-empty string), got {name!r}")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0 or math.isinf(fps):
        raise ConfigError(f"stream {name!r}: fps must be a number of frames per second > 0, got {fps!r}")
    if rates is None:
        return float(fps), None
    try:
        ladder = tuple(float(r) for r in rates)
    except (TypeError, ValueError):
        raise ConfigError(f"stream {name!r}: rates must be rungs in fps, nominal first, e.g. "
                          f"rates=[{fps:g}, {fps / 2:g}], got {rates!r}") from None
    if not ladder or ladder[0] != float(fps) or any(not r > 0 for r in ladder) or \
            any(b >= a for a, b in zip(ladder, ladder[1:])):
        raise ConfigError(f"stream {name!r}: rates must start at fps={fps:g} and fall, each > 0, e.g. "
                          f"rates=[{fps:g}, {fps / 2:g}], got {list(ladder)}")
    return float(fps), ladder

