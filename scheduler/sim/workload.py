"""Simulated requests and the seven XRBench usage scenarios (DESIGN.md §5, §7).

A scenario is a set of periodic *streams*: a model at a target fps whose
request arrives every ``1000 / fps`` ms with its deadline at the next frame
boundary (``slo_ms = 1000 / fps``). A cascade stage (``after``) is a stream
tied to a parent stream: for each parent frame it fires with probability
``p`` (drawn once per frame from the seed) and becomes ready when the
parent's request completes; its deadline is its frame's time + its SLO, as
for a trace line (DESIGN.md §6). XRBench specifies arrival jitter of at most
0.01 ms; the simulator uses exact frame times (no jitter).

Scaling, the same for scenarios and traces:

* ``load`` X multiplies every stream's request rate by X (arrival times are
  divided by X); each request keeps its SLO in ms.
* a :class:`Burst` adds extra streams for a window of time: with factor F,
  ``ceil(F - 1)`` extra copies of every stream, copy k phase-shifted by
  ``k / (copies + 1)`` of the period, and the last copy's frames firing with
  probability ``F - 1 - (copies - 1)`` when F is fractional, so the expected
  load inside the window is F times the base load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scheduler.errors import ConfigError, did_you_mean


@dataclass(frozen=True, slots=True)
class Burst:
    """Extra streams between ``start_s`` and ``start_s + duration_s`` (seconds), ``factor`` × the base load."""

    start_s: float
    duration_s: float
    factor: float

    def __post_init__(self) -> None:
        if not (self.start_s >= 0 and self.duration_s > 0 and self.factor >= 1.0):
            raise ConfigError(
                f"bad burst {self.start_s}:{self.duration_s}:{self.factor}; "
                "want START:DUR:FACTOR with START >= 0 s, DUR > 0 s, FACTOR >= 1 (e.g. 4:2:3)")

    @classmethod
    def parse(cls, text: str) -> Burst:
        """Parse ``START:DUR:FACTOR`` (seconds, seconds, multiplier), e.g. ``"4:2:3"``.

        Raises:
            ConfigError: not three numbers, or out of range.
        """
        parts = text.split(":")
        try:
            if len(parts) != 3:
                raise ValueError
            start, dur, factor = (float(x) for x in parts)
        except ValueError:
            raise ConfigError(f"bad --burst {text!r}; want START:DUR:FACTOR, e.g. --burst 4:2:3") from None
        return cls(start, dur, factor)

    def copies(self) -> list[tuple[int, float]]:
        """``(k, probability)`` of each extra copy, k = 1 … ceil(factor − 1)."""
        extra = self.factor - 1.0
        n = math.ceil(extra - 1e-12)
        return [(k, min(1.0, extra - (k - 1))) for k in range(1, n + 1)]


@dataclass(frozen=True, slots=True)
class Stream:
    """A periodic stream of one model; ``after`` names the parent stream of a cascade stage."""

    model: str
    fps: float
    after: str | None = None
    p: float = 1.0


#: XRBench (MLSys'23) usage scenarios: models at target fps, cascades with probability p.
SCENARIOS: dict[str, tuple[Stream, ...]] = {
    "social_a": (
        Stream("eye_segmentation", 60), Stream("gaze_estimation", 60, after="eye_segmentation"),
        Stream("depth_refinement", 30), Stream("hand_tracking", 30),
    ),
    "social_b": (
        Stream("eye_segmentation", 60), Stream("gaze_estimation", 60, after="eye_segmentation"),
        Stream("action_segmentation", 30),
    ),
    "outdoor_a": (
        Stream("keyword_detection", 3), Stream("speech_recognition", 3, after="keyword_detection", p=0.2),
        Stream("semantic_segmentation", 10), Stream("object_detection", 30),
    ),
    "outdoor_b": (
        Stream("keyword_detection", 3), Stream("speech_recognition", 3, after="keyword_detection", p=0.2),
        Stream("object_detection", 30),
    ),
    "ar_assistant": (
        Stream("keyword_detection", 3), Stream("speech_recognition", 3, after="keyword_detection", p=0.5),
        Stream("semantic_segmentation", 10), Stream("depth_estimation", 30),
        Stream("plane_detection", 15), Stream("object_detection", 10),
    ),
    "ar_gaming": (
        Stream("hand_tracking", 45), Stream("depth_estimation", 30), Stream("plane_detection", 15),
    ),
    "vr_gaming": (
        Stream("eye_segmentation", 60), Stream("gaze_estimation", 60, after="eye_segmentation", p=1.0),
        Stream("hand_tracking", 45),
    ),
}


def scenario_names() -> list[str]:
    """The built-in scenario names (DESIGN.md §5)."""
    return list(SCENARIOS)


class Request:
    """One simulated request: what the workload says plus the driver's run-time state.

    Times in ms of virtual time. ``t_ms`` is the frame time (a cascade stage
    becomes ready later, when ``parent`` completes); the deadline is
    ``t_ms + slo_ms``. ``fires`` is False for a cascade stage whose
    probability draw said it does not fire (it is then not a request at all).
    """

    __slots__ = ("id", "_key", "t_ms", "model", "slo_ms", "parent", "p", "stream", "frame", "fires",
                 "children", "deadline_ms", "downstream_ms", "z", "view", "ready_ms", "start_ms", "exp_ms",
                 "origin", "status", "processor", "end_ms", "reason", "proc")

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
        self.downstream_ms = 0.0
        self.z = 0.0
        self.view = None
        self.ready_ms = math.nan
        self.start_ms = math.nan
        self.exp_ms = 0.0
        self.origin = origin
        self.status = ""
        self.processor = ""
        self.end_ms = math.nan
        self.reason = ""
        self.proc = None   # the simulated processor running it

    @property
    def key(self) -> str:
        """The request's id string (a trace line's ``id``; ``stream/frame`` for a scenario)."""
        return self._key if self._key is not None else f"{self.stream}/{self.frame}"

    def __repr__(self) -> str:
        return f"Request({self.key!r}, {self.model!r}, t={self.t_ms:.3f} ms)"


@dataclass(slots=True)
class Workload:
    """Requests ready to simulate: ``roots`` sorted by time (no parent), every request in ``all``.

    ``origin[model]`` says where a model was first named (``file:line`` or
    the scenario), for error messages.
    """

    name: str
    roots: list[Request]
    all: list[Request]
    origin: dict[str, str]

    @property
    def n_firing(self) -> int:
        """How many requests will exist (cascade stages whose draw fired, whose parents fire)."""
        return sum(1 for r in self.all if r.fires)


def build_scenario(name: str, duration_s: float, load: float = 1.0, burst: Burst | None = None,
                   seed: int = 0) -> Workload:
    """The requests of scenario ``name`` over ``[0, duration_s)``, scaled by ``load`` and ``burst``.

    Cascade probabilities are drawn from ``numpy.random.default_rng([seed, 1])``.

    Raises:
        ConfigError: unknown scenario (with "did you mean"), or a bad load/duration.
    """
    if name not in SCENARIOS:
        raise did_you_mean("scenario", name, SCENARIOS)
    if not load > 0:
        raise ConfigError(f"--load must be > 0, got {load}")
    if not duration_s > 0:
        raise ConfigError(f"--duration must be > 0 s, got {duration_s}")
    streams = SCENARIOS[name]
    rng = np.random.default_rng([seed, 1])
    end_ms = duration_s * 1000.0
    # (stream key suffix, phase fraction, fire probability, window) per copy
    copies: list[tuple[str, float, float, float, float]] = [("", 0.0, 1.0, 0.0, end_ms)]
    if burst is not None:
        n = len(burst.copies())
        w0 = burst.start_s * 1000.0
        w1 = min(end_ms, w0 + burst.duration_s * 1000.0)
        copies += [(f"#b{k}", k / (n + 1), q, w0, w1) for k, q in burst.copies()]
    origin = f"scenario {name}"
    ts: list[float] = []        # sort keys: time, then copy and stream order
    order: list[int] = []
    reqs: list[Request] = []
    ids = 0
    for ci, (suffix, phase, q, w0, w1) in enumerate(copies):
        made: dict[str, list[Request | None]] = {}
        for si, s in enumerate(streams):
            rate = s.fps * load   # requests per second
            period = 1000.0 / rate
            slo = 1000.0 / s.fps
            key = s.model + suffix
            first = math.ceil((w0 - phase * period) / period - 1e-9)
            last = math.ceil((w1 - phase * period) / period - 1e-9)   # exclusive
            first = max(first, 0)
            nf = max(0, last - first)
            fire_q = (rng.random(nf) < q).tolist() if q < 1.0 else None
            if s.after is None:
                out: list[Request | None] = []
                for j in range(nf):
                    f = first + j
                    t = (f + phase) * 1000.0 / rate if phase else f * 1000.0 / rate   # exact on frame grids
                    if fire_q is not None and not fire_q[j]:
                        out.append(None)
                        continue
                    r = Request(ids, None, t, s.model, slo, key, f, origin=origin)
                    ids += 1
                    out.append(r)
                    ts.append(t)
                    order.append(ci * 1000 + si)
                    reqs.append(r)
                made[s.model] = out
            else:
                parents = made[s.after]
                draws = (rng.random(len(parents)) < s.p).tolist()
                kids: list[Request | None] = []
                for j, par in enumerate(parents):
                    if par is None:
                        kids.append(None)
                        continue
                    r = Request(ids, None, par.t_ms, s.model, slo, key, par.frame, parent=par,
                                p=s.p, fires=draws[j], origin=origin)
                    ids += 1
                    if par.children is None:
                        par.children = []
                    par.children.append(r)
                    kids.append(r)
                    ts.append(r.t_ms)
                    order.append(ci * 1000 + si)
                    reqs.append(r)
                made[s.model] = kids
    every = [reqs[i] for i in np.lexsort((np.array(order), np.array(ts))).tolist()]
    for i, r in enumerate(every):   # ids in time order, so ids are deterministic and readable
        r.id = i
    roots = [r for r in every if r.parent is None]
    return Workload(f"scenario {name}", roots, every, {s.model: origin for s in streams})


def apply_scaling(wl: Workload, load: float = 1.0, duration_s: float | None = None,
                  burst: Burst | None = None, seed: int = 0) -> Workload:
    """Scale a trace's workload: ``load`` divides arrival times, ``duration_s`` cuts it, ``burst`` copies
    the requests inside the window (copies arrive at the same time, draws from ``default_rng([seed, 2])``).

    Raises:
        ConfigError: bad load or duration.
    """
    if not load > 0:
        raise ConfigError(f"--load must be > 0, got {load}")
    if duration_s is not None and not duration_s > 0:
        raise ConfigError(f"--duration must be > 0 s, got {duration_s}")
    for r in wl.all:
        r.t_ms = r.t_ms / load
        r.deadline_ms = r.t_ms + r.slo_ms
    keep = wl.all
    if duration_s is not None:
        end = duration_s * 1000.0
        keep = [r for r in wl.all if _root(r).t_ms < end]
    if burst is not None:
        rng = np.random.default_rng([seed, 2])
        w0, w1 = burst.start_s * 1000.0, (burst.start_s + burst.duration_s) * 1000.0
        extra: list[Request] = []
        for k, q in burst.copies():
            clones: dict[int, Request] = {}
            for r in sorted(keep, key=_depth):   # parents before their cascade stages
                root = _root(r)
                if not (w0 <= root.t_ms < w1):
                    continue
                if r.parent is None and q < 1.0 and not rng.random() < q:
                    continue
                par = None
                if r.parent is not None:
                    par = clones.get(r.parent.id)
                    if par is None:
                        continue
                c = Request(0, f"{r.key}#b{k}", r.t_ms, r.model, r.slo_ms, f"{r.stream}#b{k}", r.frame,
                            parent=par, p=r.p, fires=r.fires, origin=r.origin)
                if par is not None:
                    par.children = (par.children or []) + [c]
                clones[r.id] = c
                extra.append(c)
        keep = keep + extra
    keep = sorted(keep, key=lambda r: r.t_ms)   # stable: keeps the trace's line order at one time
    for i, r in enumerate(keep):
        r.id = i
    roots = [r for r in keep if r.parent is None]
    return Workload(wl.name, roots, keep, wl.origin)


def _depth(r: Request) -> int:
    d = 0
    while r.parent is not None:
        r, d = r.parent, d + 1
    return d


def _root(r: Request) -> Request:
    while r.parent is not None:
        r = r.parent
    return r
