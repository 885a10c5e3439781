"""A workload as numpy columns (what the driver reads), and its requests as objects (what parsers build).

:class:`Workload` holds one column per field, indexed by request id, ids in
time order; :class:`Request` is one request as an object, linked to its
``parent`` and ``children``, which the trace parser, :func:`~scheduler.sim.workload.apply_scaling`
and the tests work with (:attr:`Workload.all`, :meth:`Workload.from_requests`).
:func:`root_arrivals` and :func:`downstream_ms` are what the driver derives
from the columns before a run; :func:`arrival_groups` is the same arrivals by
instant (a list per instant, for engines that schedule an instant at a time:
the SimPy models of ``benchmarks/sim_speed.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from scheduler.errors import TraceError

if TYPE_CHECKING:
    from scheduler.sim.streams import StreamSpec


class Request:
    """One request of a workload as an object: what a trace line or a scenario frame says.

    The parser's and the tests' view of a workload (:attr:`Workload.all`); the
    driver itself reads the :class:`Workload` columns. Times in ms. ``t_ms`` is
    the frame time (a cascade stage becomes ready later, when ``parent``
    completes); the deadline is ``t_ms + slo_ms``. ``fires`` is False for a
    cascade stage whose probability draw said it does not fire (it is then not
    a request at all).
    """

    __slots__ = ("id", "_key", "t_ms", "model", "slo_ms", "parent", "p", "stream", "frame", "fires",
                 "children", "deadline_ms", "origin")

    def __init__(self, id: int, key: str | None, t_ms: float, model: str, slo_ms: float, stream: str,
                 frame: int = -1, parent: Request | None = None, p: float = 1.0, fires: bool = True,
                 origin: str = "") -> None:
        self.id = id
        self._key = key
        self.t_ms = t_ms
        self.model = model
        self.slo_ms = slo_ms
        self.stream = stream
        self.frame = frame
        self.parent = parent
        self.p = p
        self.fires = fires
        self.children: list[Request] | None = None
        self.deadline_ms = t_ms + slo_ms
        self.origin = origin

    @property
    def key(self) -> str:
        """The request's id string (a trace line's ``id``; ``stream/frame`` for a scenario)."""
        return self._key if self._key is not None else f"{self.stream}/{self.frame}"

    def __repr__(self) -> str:
        return f"Request({self.key!r}, {self.model!r}, t={self.t_ms:.3f} ms)"


@dataclass(slots=True, eq=False)
class Workload:
    """Requests ready to simulate, one numpy column per field, indexed by request id (ids in time order).

    Attributes:
        name: e.g. ``"scenario ar_assistant"`` or ``"trace <file>"``.
        models: model names; ``model`` holds indices into it.
        streams: stream names; ``stream`` holds indices into it.
        t_ms: frame time (ms, float64); a root request arrives then, a cascade stage is
            ready when its parent completes. Sorted ascending.
        slo_ms: the request's SLO (ms; ``inf`` for none); its deadline is ``t_ms + slo_ms``.
        model, stream: int32 codes. frame: int64 (``-1`` when not framed).
        parent: int64 id of the upstream request (``-1`` for a root).
        fires: bool; False for a cascade stage whose draw said it does not fire.
        p: float64 fire probability (as given).
        origin: where each model was first named (``file:line`` or the scenario), for errors.
        keys: the trace's id strings, or None (then a request's key is ``stream/frame``).
        priorities: the level of each stream that declares one other than ``normal`` (a trace line's
            ``priority``); the policy sees it as ``RequestView.priority``.
        stream_specs: a live trace's streams (``rt.stream``), by name ({} for a scenario, or a trace without).
        stream_frames: the frames those streams offered, taken or not: ``(stream, frame number, capture ms)``
            each, in order; a request of one carries its frame number in ``frame``.
    """

    name: str
    models: list[str]
    streams: list[str]
    t_ms: np.ndarray
    slo_ms: np.ndarray
    model: np.ndarray
    stream: np.ndarray
    frame: np.ndarray
    parent: np.ndarray
    fires: np.ndarray
    p: np.ndarray
    origin: dict[str, str]
    keys: list[str] | None = None
    priorities: dict[str, str] = field(default_factory=dict)
    stream_specs: dict[str, StreamSpec] = field(default_factory=dict)
    stream_frames: list[tuple[str, int, float]] = field(default_factory=list)
    _objects: list[Request] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.t_ms)

    @property
    def deadline_ms(self) -> np.ndarray:
        """Absolute deadlines (ms): ``t_ms + slo_ms``."""
        return self.t_ms + self.slo_ms

    def key(self, rid: int) -> str:
        """Request ``rid``'s id string (a trace line's ``id``; ``stream/frame`` for a scenario)."""
        if self.keys is not None:
            return self.keys[rid]
        return f"{self.streams[self.stream[rid]]}/{int(self.frame[rid])}"

    @property
    def all(self) -> list[Request]:
        """Every request as a :class:`Request` (linked ``parent``/``children``), by id; built on first use."""
        if self._objects is None:
            keys = self.keys
            models, streams = self.models, self.streams
            origin = self.origin
            objs: list[Request] = []
            for i, (t, slo, m, st, fr, pa, fi, p) in enumerate(zip(
                    self.t_ms.tolist(), self.slo_ms.tolist(), self.model.tolist(), self.stream.tolist(),
                    self.frame.tolist(), self.parent.tolist(), self.fires.tolist(), self.p.tolist())):
                par = objs[pa] if 0 <= pa < i else None
                r = Request(i, keys[i] if keys is not None else None, t, models[m], slo, streams[st], fr,
                            parent=par, p=p, fires=fi, origin=origin.get(models[m], ""))
                objs.append(r)
            for i, pa in enumerate(self.parent.tolist()):   # links to parents later in id order (traces)
                if pa >= 0:
                    r = objs[i]
                    r.parent = par = objs[pa]
                    if par.children is None:
                        par.children = []
                    par.children.append(r)
            self._objects = objs
        return self._objects

    @property
    def roots(self) -> list[Request]:
        """The requests with no parent, in time order (as :class:`Request` objects)."""
        return [r for r in self.all if r.parent is None]

    @classmethod
    def from_requests(cls, name: str, requests: list[Request], origin: dict[str, str],
                      keep_keys: bool = True) -> Workload:
        """Columns of ``requests``, which must be sorted by ``t_ms`` with ``id`` = position."""
        models: dict[str, int] = {}
        streams: dict[str, int] = {}
        n = len(requests)
        wl = cls(
            name=name,
            models=[], streams=[],
            t_ms=np.fromiter((r.t_ms for r in requests), np.float64, n),
            slo_ms=np.fromiter((r.slo_ms for r in requests), np.float64, n),
            model=np.fromiter((models.setdefault(r.model, len(models)) for r in requests), np.int32, n),
            stream=np.fromiter((streams.setdefault(r.stream, len(streams)) for r in requests), np.int32, n),
            frame=np.fromiter((r.frame for r in requests), np.int64, n),
            parent=np.fromiter((-1 if r.parent is None else r.parent.id for r in requests), np.int64, n),
            fires=np.fromiter((r.fires for r in requests), bool, n),
            p=np.fromiter((r.p for r in requests), np.float64, n),
            origin=origin,
            keys=[r.key for r in requests] if keep_keys else None,
        )
        wl.models = list(models)
        wl.streams = list(streams)
        return wl


def root_arrivals(wl: Workload) -> tuple[list[float], list[int]]:
    """The root requests that fire, in arrival order: each one's arrival time (ms), followed by ``inf``, and id."""
    roots = np.flatnonzero((wl.parent < 0) & wl.fires)
    t = wl.t_ms[roots].tolist()
    t.append(math.inf)
    return t, roots.tolist()


def arrival_groups(wl: Workload) -> tuple[list[float], list[list[int]]]:
    """The root requests that fire, grouped by arrival instant: the instants (ms) and each one's ids."""
    roots = np.flatnonzero((wl.parent < 0) & wl.fires)
    if not roots.size:
        return [], []
    rt = wl.t_ms[roots]
    cut = (np.flatnonzero(np.diff(rt)) + 1).tolist()
    ids = roots.tolist()
    bounds = [0, *cut, len(ids)]
    return rt[bounds[:-1]].tolist(), [ids[a:b] for a, b in pairwise(bounds)]


#: Pointer-jumping rounds (one per cascade level) before depths are found by one walk instead:
#: XR cascades are a few stages deep; a replayed trace may chain thousands.
_JUMP_ROUNDS = 64


def downstream_ms(wl: Workload, best_ms: np.ndarray) -> list[float]:
    """``downstream_ms`` of each request: the longest chain of best-case latencies of its cascade stages.

    Linear in the requests for shallow cascades (a vector pass per level) and O(n log n) for deep
    chains (one memoised walk, then the levels in one sort)."""
    n = len(wl)
    down = np.zeros(n)
    parent = wl.parent
    has = np.flatnonzero(parent >= 0)
    if has.size:
        depth = _depths(parent, has, wl.name)
        top = int(depth.max())
        if top <= _JUMP_ROUNDS:
            levels = (np.flatnonzero(depth == d) for d in range(top, 0, -1))
        else:
            order = np.argsort(-depth, kind="stable")
            cuts = np.flatnonzero(np.diff(depth[order])) + 1
            levels = (c for c in np.split(order, cuts) if depth[c[0]] > 0)
        for c in levels:   # deepest stages first, each into its parent
            np.maximum.at(down, parent[c], best_ms[wl.model[c]] + down[c])
    return down.tolist()


def _depths(parent: np.ndarray, has: np.ndarray, name: str) -> np.ndarray:
    """Each request's number of ancestors. Raises TraceError on a cycle of ``after`` links."""
    depth = np.zeros(len(parent), np.int64)
    cur = parent.copy()
    active = has
    for _ in range(_JUMP_ROUNDS):
        if not active.size:
            return depth
        depth[active] += 1
        cur[active] = parent[cur[active]]
        active = active[cur[active] >= 0]
    return depth if not active.size else _depths_by_walk(parent.tolist(), name)


def _depths_by_walk(parent: list[int], name: str) -> np.ndarray:
    """Depths in one pass: each request walks up only to the first ancestor already known."""
    depth = [-1] * len(parent)
    for i in range(len(parent)):
        path = []
        j = i
        while j >= 0 and depth[j] < 0:
            depth[j] = -2                      # on the current path
            path.append(j)
            j = parent[j]
            if j >= 0 and depth[j] == -2:
                raise TraceError(f"{name}: cycle in 'after'")
        d = depth[j] if j >= 0 else -1
        for k in reversed(path):
            d += 1
            depth[k] = d
    return np.array(depth, np.int64)
