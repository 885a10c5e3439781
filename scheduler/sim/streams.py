"""Streams in the simulator: :mod:`scheduler.streams`' controller driven on simulated time, closed-loop.

A stream is a periodic source of frames whose every frame runs a chain of requests (docs/design.md §11). In
the simulator a workload's frames are planned ahead (:class:`StreamPlan`: which requests make each frame, of
which stream, captured when), and the :class:`scheduler.streams.StreamController` the live runtime uses
decides each one when it is offered, on the simulated clock, from the simulated queues (:class:`SimStreams`,
the simulator's driver of it, as ``edgert._core._streams`` is the live one):

* a frame is offered when its first requests arrive: the controller sees a :class:`scheduler.streams.Backlog`
  built from the simulation's own pending, queued and running requests (each with its expected run left, by
  the estimator the policy reads), the local processors and their busy share over the last
  :data:`scheduler.streams.WINDOW_MS`;
* a frame taken runs with the decision's deadline (its capture time plus the period at the stream's rung),
  level and, on the cloud rung, the cloud worker only (a lean frame, a probe, runs its requests as planned:
  a planned frame has no optional work to leave out); a frame not taken is dropped whole, saying why
  (so XRBench's score counts it as a dropped frame);
* when every request of a taken frame has ended, the controller is told how it went
  (:class:`scheduler.streams.FrameEnd`: ok or not, its work, its longest cascade and that cascade's expected
  time on the cloud), which is how it learns each stream's chain, as live.

So the loop is closed: what the controller takes now loads the queues that the next offer sees, and the
ladder's steps change which later frames are taken. Where the workload comes from:

* a scenario (:func:`scenario_plan`): each root stream of an XRBench scenario with its cascade stages is one
  stream, its frames offered at its nominal rate (the ladder skips by ``rate``); with ``users`` > 1 every
  stream has a copy per user, phase-shifted (``hand_tracking#b1``, as :class:`~scheduler.sim.workload.Burst`
  names them);
* a trace written by a live run with streams (:func:`trace_plan`): every frame the live run offered, taken
  or not (the parser gives a frame not taken live the requests of its stream's nearest taken frame).
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scheduler.errors import ConfigError
from scheduler.priority import RANK
from scheduler.streams import WINDOW_MS, Backlog, Decision, FrameEnd, StreamController, Work

if TYPE_CHECKING:
    from scheduler.sim.columns import Workload
    from scheduler.sim.driver import Simulation

__all__ = ["SimStreams", "StreamPlan", "StreamSpec", "parse_priorities", "scenario_plan", "trace_plan"]


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """One stream as ``rt.stream(...)`` opens it (docs/design.md §11).

    Attributes:
        name: its name.
        fps: its nominal rate (fps).
        priority: its level (``critical``, ``high``, ``normal``, ``low``).
        rates: its ladder's rungs (fps, nominal first); None: the default ladder.
        offload: the cloud worker (if any) is its last rung.
        max_in_flight: frames of it running at once.
        waits: its app offers a frame only once the one before it has ended (a thread per stream that waits for
            its frame's results, as ``with s.frame(): ... .result()``): a replay offers a frame that comes while
            the one before it still runs when that one ends, where live the app could not have offered it
            sooner. A live trace's stream waits when none of its frames was skipped ``in_flight``; a
            scenario's streams (cameras at their rate) do not.
    """

    name: str
    fps: float
    priority: str = "normal"
    rates: tuple[float, ...] | None = None
    offload: bool = True
    max_in_flight: int = 1
    waits: bool = False


@dataclass(slots=True)
class StreamPlan:
    """The frames a workload offers, and their streams.

    Attributes:
        streams: the streams, in order.
        frame_of: by request id, the index of its frame (-1: the request is in no stream's frame).
        frame_stream: by frame, the index of its stream.
        frame_at: by frame, its capture time (ms; the frame's deadline is this plus the period at its rung).
    """

    streams: list[StreamSpec]
    frame_of: list[int]
    frame_stream: list[int]
    frame_at: list[float]

    def with_priorities(self, levels: Mapping[str, str]) -> StreamPlan:
        """The plan with the levels of ``levels`` (stream name -> level; a name also sets every user's copy of it,
        ``hands`` sets ``hands#b1``).

        Raises:
            ConfigError: a name that is no stream of the plan (with the streams there are).
        """
        names = {s.name for s in self.streams}
        bases = {_base(n) for n in names}
        for n in levels:
            if n not in names and n not in bases:
                raise ConfigError(f"--priority names stream {n!r}, which the workload does not have; its streams: "
                                  f"{', '.join(sorted(bases))}")
        out = []
        for s in self.streams:
            level = levels.get(s.name, levels.get(_base(s.name), s.priority))
            out.append(dataclasses.replace(s, priority=level))
        return StreamPlan(out, self.frame_of, self.frame_stream, self.frame_at)


def _base(name: str) -> str:
    """A stream's name without its user suffix (``hands#b1`` -> ``hands``)."""
    return name.split("#", 1)[0]


def parse_priorities(text: str | None) -> dict[str, str]:
    """``--priority NAME=LEVEL,...`` as a dict.

    Raises:
        ConfigError: not NAME=LEVEL pairs, or an unknown level.
    """
    if not text:
        return {}
    out: dict[str, str] = {}
    for part in text.split(","):
        name, sep, level = part.strip().partition("=")
        if not sep or not name or level not in RANK:
            raise ConfigError(f"bad --priority {text!r}: want STREAM=LEVEL[,...] with LEVEL one of "
                              f"{', '.join(RANK)}, e.g. --priority hand_tracking=critical,depth_estimation=low")
        out[name] = level
    return out


def _frame_roots(wl: Workload) -> list[int]:
    """By request id: its root's id when it and every request upstream of it fire, else -1 (it never runs)."""
    parent = wl.parent.tolist()
    fires = wl.fires.tolist()
    root = [-2] * len(parent)   # -2: not known yet
    for i in range(len(parent)):
        path = []
        j = i
        while j >= 0 and root[j] == -2:
            path.append(j)
            j = parent[j]
        r = root[j] if j >= 0 else -2   # -2 here: the top of the path is a root
        for k in reversed(path):
            if r == -2:
                r = k if fires[k] else -1
            elif r >= 0 and not fires[k]:
                r = -1
            root[k] = r
    return root


def scenario_plan(wl: Workload, fps: Mapping[str, float]) -> StreamPlan:
    """The frames of a scenario's workload: every root request that fires is one frame of the stream named as
    its workload stream (``hand_tracking``, ``hand_tracking#b1``), with its cascade stages in it.

    Args:
        fps: nominal rate by root stream name without the user suffix (the scenario's streams).
    """
    root = _frame_roots(wl)
    streams: dict[str, int] = {}
    specs: list[StreamSpec] = []
    frame_of = [-1] * len(root)
    frame_stream: list[int] = []
    frame_at: list[float] = []
    by_root: dict[int, int] = {}
    names = wl.streams
    codes = wl.stream.tolist()
    t = wl.t_ms.tolist()
    for i, r in enumerate(root):
        if r < 0:
            continue
        f = by_root.get(r)
        if f is None:
            name = names[codes[r]]
            si = streams.get(name)
            if si is None:
                si = streams[name] = len(specs)
                specs.append(StreamSpec(name, fps[_base(name)], wl.priorities.get(name, "normal")))
            f = by_root[r] = len(frame_stream)
            frame_stream.append(si)
            frame_at.append(t[r])
        frame_of[i] = f
    return StreamPlan(specs, frame_of, frame_stream, frame_at)


def trace_plan(wl: Workload) -> StreamPlan | None:
    """The frames a live trace recorded (its ``frame`` records, :mod:`scheduler.sim.trace`), None when it has
    none (a trace written without streams, or before the format had them): then it replays open-loop."""
    frames = wl.stream_frames
    if not frames:
        return None
    specs = list(wl.stream_specs.values())
    index = {s.name: i for i, s in enumerate(specs)}
    pos: dict[int, int] = {}
    frame_stream: list[int] = []
    frame_at: list[float] = []
    for stream, number, at in frames:
        pos[number] = len(frame_stream)
        frame_stream.append(index[stream])
        frame_at.append(at)
    root = _frame_roots(wl)
    frame_of = [pos.get(f, -1) if r >= 0 else -1 for f, r in zip(wl.frame.tolist(), root)]
    return StreamPlan(specs, frame_of, frame_stream, frame_at)


class SimStreams:
    """The simulator's driver of one :class:`StreamController`: offers each planned frame as it arrives, applies
    the decision to the frame's requests, and reports each taken frame's end (see the module doc).

    Args:
        plan: the frames and streams.
        sim: the simulation whose queues the controller reads (its request columns are set here for a frame
            taken: deadline, level, and the cloud rung).
    """

    def __init__(self, plan: StreamPlan, sim: Simulation) -> None:
        self.plan = plan
        self.sim = sim
        self.controller = StreamController()
        procs = sim.processors
        self._local = [p for p in procs if p.kind != "cloud"]
        self._lanes = sum(p.urgent for p in self._local)   # urgent lanes among them
        self._cloud = next((p.name for p in procs if p.kind == "cloud"), None)
        for s in plan.streams:
            self.controller.add(s.name, s.fps, s.priority, s.rates, s.offload and self._cloud is not None,
                                s.max_in_flight)
        n_frames = len(plan.frame_stream)
        #: by frame: the decision (None: not offered yet)
        self.decisions: list[Decision | None] = [None] * n_frames
        self._left = [0] * n_frames          # requests of a taken frame not yet ended
        self._members: list[list[int]] = [[] for _ in range(n_frames)]
        for rid, f in enumerate(plan.frame_of):
            if f >= 0:
                self._members[f].append(rid)
        self._ok = [True] * n_frames
        self._end = [-math.inf] * n_frames
        self._work = [0.0] * n_frames
        self._path = [0.0] * n_frames
        self._path_cloud: list[float | None] = [0.0] * n_frames
        self._req_path: dict[int, tuple[float, float | None]] = {}   # request id -> (run ms, cloud ms) up to its end
        self._runs: deque[tuple[float, float]] = deque()   # (end ms, run ms) of local runs
        self._parent = sim.workload.parent.tolist()
        #: by stream that waits for its frames: the root requests of the frames that came while one still ran
        self._waiting: dict[str, list[int]] = {}

    # -- the Backlog ---------------------------------------------------------------------------------
    def busy_share(self, now: float) -> float:
        """The local processors' busy share over the last :data:`~scheduler.streams.WINDOW_MS`: run ms ended in
        that window over the window times the processors that take any work (the urgent lanes too while they are
        open), as the live dispatcher counts it (more than 1 when the lanes helped)."""
        runs = self._runs
        while runs and runs[0][0] < now - WINDOW_MS:
            runs.popleft()
        return sum(ms for _, ms in runs) / (WINDOW_MS * max(1, len(self._local) - self._closed_lanes()))

    def _closed_lanes(self) -> int:
        """The urgent lanes kept for critical and high work now (0 while the streams open them to any work)."""
        return 0 if self.sim.lanes_open else self._lanes

    def backlog(self, now: float) -> Backlog:
        """The simulation's work at ``now`` as the controller reads it: every request pending (its fastest expected
        run), queued on a local processor (its expected run there) or running there (its expected run left); the
        processors that take any work and the urgent lanes kept for urgent work (an open lane is capacity like the
        rest), as the live dispatcher's ``backlog_locked``."""
        sim = self.sim
        cols = sim.request_columns
        exp = sim.estimator.expected_ms
        work = [Work(self._fastest_ms(v.id), v.deadline_ms, v.priority, False) for v in sim.pending_views()]
        start = sim.start_ms
        for p in self._local:
            for rid in p.queue:
                ms = exp(cols.model[rid], p.name)
                work.append(Work(ms if ms is not None else self._fastest_ms(rid), cols.deadline_ms[rid],
                                 cols.priority[rid], False))
            for rid in p.running:
                left = (exp(cols.model[rid], p.name) or 0.0) - (now - start[rid])
                work.append(Work(max(0.0, left), cols.deadline_ms[rid], cols.priority[rid], True))
        lanes = self._closed_lanes()
        return Backlog(now, max(1, len(self._local) - lanes), lanes, self.busy_share(now), tuple(work),
                       self._cloud is not None)

    def _fastest_ms(self, rid: int) -> float:
        exp = self.sim.estimator.expected_ms
        model = self.sim.request_columns.model[rid]
        vals = [v for p in self.sim.candidates_of(rid) if (v := exp(model, p.name)) is not None]
        return min(vals) if vals else 0.0

    # -- offers --------------------------------------------------------------------------------------
    def arrive(self, rids: Sequence[int], now: float) -> None:
        """Root requests ``rids`` arrive at ``now``: each one in no frame becomes ready; a frame's first arrival
        offers the frame, which is then made ready (taken) or dropped whole (not taken). A frame of a stream that
        :attr:`~StreamSpec.waits` comes while the stream runs as many frames as it may: it is offered when the
        one before it ends."""
        sim, frame_of, plan = self.sim, self.plan.frame_of, self.plan
        for rid in rids:
            f = frame_of[rid]
            if f < 0:
                sim.ready_now((rid,), now)
                continue
            d = self.decisions[f]
            if d is None:
                spec = plan.streams[plan.frame_stream[f]]
                name = spec.name
                if spec.waits and self._busy(name):   # its app still waits for the frame before it
                    self._waiting.setdefault(name, []).append(rid)
                    continue
                d = self.decisions[f] = self.controller.offer(name, plan.frame_at[f], self.backlog(now))
                sim.lanes_open = not self.controller.urgent(now)   # as the live stream's offer sets it
                if d.taken:
                    self._apply(f, d)
            if d.taken:
                sim.ready_now((rid,), now)
            else:
                sim.drop_request(rid, f"its stream did not take the frame: {d.reason}", now)

    def _busy(self, name: str) -> bool:
        """Whether stream ``name`` runs as many frames as it may (its next one would be skipped ``in_flight``)."""
        st = self.controller.streams[name]
        return st.in_flight >= st.max_in_flight

    def _apply(self, f: int, d: Decision) -> None:
        """A taken frame's requests run with its deadline, its level and, on the cloud rung, the cloud only."""
        cols = self.sim.request_columns
        allowed = (self._cloud,) if d.cloud and self._cloud is not None else None
        members = self._members[f]
        for rid in members:
            cols.deadline_ms[rid] = d.deadline_ms
            cols.priority[rid] = d.priority
            cols.allowed[rid] = allowed
        self._left[f] = len(members)

    # -- ends ----------------------------------------------------------------------------------------
    def ran(self, rid: int, processor: Any, start: float, end: float) -> None:
        """Request ``rid`` ran on ``processor`` from ``start`` to ``end`` (ms)."""
        ms = end - start
        if processor.kind != "cloud":
            self._runs.append((end, ms))
        f = self.plan.frame_of[rid]
        if f < 0 or self._left[f] <= 0:
            return
        cols = self.sim.request_columns
        pa = self._parent[rid]
        before, before_cloud = self._req_path.get(pa, (0.0, 0.0)) if pa >= 0 else (0.0, 0.0)
        cloud = self.sim.estimator.expected_ms(cols.model[rid], self._cloud) if self._cloud is not None else None
        path = before + ms
        path_cloud = None if cloud is None or before_cloud is None else before_cloud + cloud
        self._req_path[rid] = (path, path_cloud)
        if path >= self._path[f]:
            self._path[f], self._path_cloud[f] = path, path_cloud
        self._work[f] += ms
        self._ended(f, end)

    def dropped(self, rid: int, now: float) -> None:
        """Request ``rid`` of a taken frame was dropped (by the policy, or with its upstream) at ``now``."""
        f = self.plan.frame_of[rid]
        if f < 0 or self._left[f] <= 0:
            return
        self._ok[f] = False
        self._ended(f, now)

    def _ended(self, f: int, end: float) -> None:
        self._end[f] = max(self._end[f], end)
        self._left[f] -= 1
        if self._left[f]:
            return
        for rid in self._members[f]:
            self._req_path.pop(rid, None)
        d = self.decisions[f]
        assert d is not None
        name = self.plan.streams[self.plan.frame_stream[f]].name
        cloud = self._path_cloud[f] if self._work[f] > 0 else None
        self.controller.ended(name, d, FrameEnd(self._end[f], self._ok[f], self._work[f], self._path[f], cloud,
                                                self.busy_share(end)))
        waiting = self._waiting.pop(name, None)
        if waiting:   # the frames its app offers now that it has this one's results (the next may wait again)
            self.arrive(waiting, end)

    def stats(self) -> dict[str, dict[str, Any]]:
        """Every stream's figures, with the keys of the live ``s.stats()`` (docs/design.md §11)."""
        return {s.name: self.controller.stats(s.name) for s in self.plan.streams}
