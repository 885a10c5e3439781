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
from typing import NamedTuple
from dataclasses import dataclass

import numpy as np

from scheduler.errors import ConfigError, did_you_mean
from scheduler.sim.columns import Request, Workload

__all__ = ["SCENARIOS", "Burst", "Request", "Stream", "Workload", "apply_scaling", "build_scenario",
           "scenario_names"]


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


def build_scenario(name: str, duration_s: float, load: float = 1.0, burst: Burst | None = None,
                   seed: int = 0) -> Workload:
    """The requests of scenario ``name`` over ``[0, duration_s)``, scaled by ``load`` and ``burst``.

    Cascade probabilities are drawn from ``numpy.random.default_rng([seed, 1])``. Built in bulk
    with numpy: one block of frames per stream and copy, then one stable sort by (time, copy, stream).

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
    model_names = list(dict.fromkeys(s.model for s in streams))
    model_code = {m: i for i, m in enumerate(model_names)}
    stream_names: list[str] = []
    blocks: list[_Block] = []
    made = 0                                    # requests created so far (creation index of the next one)
    for ci, (suffix, phase, q, w0, w1) in enumerate(_copies(burst, duration_s * 1000.0)):
        by_model: dict[str, _Frames] = {}       # stream model -> its frames in this copy's window
        for si, s in enumerate(streams):
            rate = s.fps * load   # requests per second
            period = 1000.0 / rate
            first = max(math.ceil((w0 - phase * period) / period - 1e-9), 0)
            nf = max(0, math.ceil((w1 - phase * period) / period - 1e-9) - first)   # up to the window's end, exclusive
            # a copy with q < 1 draws one number per frame of every stream, cascade stages included
            # (their own draws decide); the fixed draw order keeps each seed's workload
            drawn = rng.random(nf) < q if q < 1.0 else None
            tags = (1000.0 / s.fps, model_code[s.model], len(stream_names), ci * 1000 + si)
            stream_names.append(s.model + suffix)
            if s.after is None:
                block, by_model[s.model] = _root_block(first, nf, drawn, phase, rate, made, tags)
            else:
                block, by_model[s.model] = _cascade_block(by_model[s.after], s.p, made, tags, blocks, rng)
            blocks.append(block)
            made += block.t.size
    return _assemble(name, model_names, stream_names, blocks)


#: one stream's requests in one copy, as columns: (t, slo, model, stream, frame, parent (creation index),
#: fires, p, order)
class _Block(NamedTuple):
    """One stream's (or cascade stage's) requests as columns, before the workload is assembled."""

    t: np.ndarray
    slo: np.ndarray
    model: np.ndarray
    stream: np.ndarray
    frame: np.ndarray
    parent: np.ndarray
    fires: np.ndarray
    p: np.ndarray
    order: np.ndarray
#: per frame of a stream in a copy's window: creation index of its request (-1 where the frame has none),
#: frame time (ms), whether it fires
_Frames = tuple[np.ndarray, np.ndarray, np.ndarray]


def _copies(burst: Burst | None, end_ms: float) -> list[tuple[str, float, float, float, float]]:
    """``(stream key suffix, phase fraction, fire probability, window start ms, window end ms)`` per copy of
    the scenario's streams: the scenario itself, then the burst's extra copies over the burst window."""
    copies: list[tuple[str, float, float, float, float]] = [("", 0.0, 1.0, 0.0, end_ms)]
    if burst is not None:
        n = len(burst.copies())
        w0 = burst.start_s * 1000.0
        w1 = min(end_ms, w0 + burst.duration_s * 1000.0)
        copies += [(f"#b{k}", k / (n + 1), q, w0, w1) for k, q in burst.copies()]
    return copies


def _root_block(first: int, nf: int, drawn: np.ndarray | None, phase: float, rate: float, made: int,
                tags: tuple[float, int, int, int]) -> tuple[_Block, _Frames]:
    """A stream's own frames ``first .. first + nf - 1`` (those ``drawn``, all when None): its block and frames.
    ``tags``: (slo ms, model code, stream code, order)."""
    slo, code, sc, order = tags
    exists = drawn if drawn is not None else np.ones(nf, bool)
    f = np.arange(first, first + nf, dtype=np.int64)
    t = (f + phase) * 1000.0 / rate if phase else f * 1000.0 / rate   # exact on frame grids
    k = int(exists.sum())
    idx = np.full(nf, -1, np.int64)
    idx[exists] = np.arange(made, made + k)
    f, t = f[exists], t[exists]
    block = _Block(t, np.full(k, slo), np.full(k, code, np.int32), np.full(k, sc, np.int32), f,
                   np.full(k, -1, np.int64), np.ones(k, bool), np.full(k, 1.0), np.full(k, order, np.int64))
    return block, (idx, _expand(t, exists), exists)


def _cascade_block(upstream: _Frames, p: float, made: int, tags: tuple[float, int, int, int],
                   blocks: list[_Block], rng: np.random.Generator) -> tuple[_Block, _Frames]:
    """A cascade stage: one request per request of its upstream stream (at its time, with its frame), which
    fires with probability ``p`` when the upstream one fires. ``blocks``: the blocks so far."""
    slo, code, sc, order = tags
    pidx, pt, pfires = upstream
    draws = rng.random(len(pidx)) < p
    exists = pidx >= 0
    k = int(exists.sum())
    idx = np.full(len(pidx), -1, np.int64)
    idx[exists] = np.arange(made, made + k)
    par = pidx[exists]
    block = _Block(pt[exists], np.full(k, slo), np.full(k, code, np.int32), np.full(k, sc, np.int32),
                   _frames_of(blocks, par), par, draws[exists] & pfires[exists], np.full(k, float(p)),
                   np.full(k, order, np.int64))
    return block, (idx, pt, draws & pfires)


def _assemble(name: str, model_names: list[str], stream_names: list[str], blocks: list[_Block]) -> Workload:
    """The workload of the blocks, in one stable sort by (time, copy, stream); parents renumbered."""
    cols = _Block(*(np.concatenate(column) for column in zip(*blocks)))
    perm = np.lexsort((cols.order, cols.t))   # by time, then copy and stream order; stable
    new_id = np.empty_like(perm)
    new_id[perm] = np.arange(perm.size)
    parent = cols.parent[perm]
    parent = np.where(parent >= 0, new_id[np.maximum(parent, 0)], -1)
    origin = f"scenario {name}"
    return Workload(f"scenario {name}", model_names, stream_names, cols.t[perm], cols.slo[perm], cols.model[perm],
                    cols.stream[perm], cols.frame[perm], parent, cols.fires[perm], cols.p[perm],
                    {m: origin for m in model_names})


def _expand(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``values`` (one per True of ``mask``) spread over ``mask``'s positions (0 elsewhere)."""
    out = np.zeros(mask.size, values.dtype)
    out[mask] = values
    return out


def _frames_of(blocks: list[_Block], creation_idx: np.ndarray) -> np.ndarray:
    """Frame numbers of already created requests, by creation index."""
    frames = np.concatenate([b.frame for b in blocks]) if blocks else np.zeros(0, np.int64)
    return frames[creation_idx]


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
    if load == 1.0 and duration_s is None and burst is None:
        return wl   # nothing to scale: keep the parsed columns (no request objects)
    reqs = wl.all
    roots, depths = _roots_and_depths(reqs)
    for r in reqs:
        r.t_ms = r.t_ms / load
        r.deadline_ms = r.t_ms + r.slo_ms
    keep = reqs
    if duration_s is not None:
        end = duration_s * 1000.0
        keep = [r for r in reqs if roots[id(r)].t_ms < end]
    if burst is not None:
        rng = np.random.default_rng([seed, 2])
        w0, w1 = burst.start_s * 1000.0, (burst.start_s + burst.duration_s) * 1000.0
        extra: list[Request] = []
        for k, q in burst.copies():
            clones: dict[int, Request] = {}
            for r in sorted(keep, key=lambda r: depths[id(r)]):   # parents before their cascade stages
                root = roots[id(r)]
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
    kept = {id(r) for r in keep}
    for r in keep:   # a cascade stage cut off with its root, or a clone's children, are not in `keep`
        if r.children:
            r.children = [c for c in r.children if id(c) in kept]
    for i, r in enumerate(keep):
        r.id = i
    out = Workload.from_requests(wl.name, keep, wl.origin)
    out._objects = keep
    _carry_streams(wl, out, load, duration_s)
    return out


def _carry_streams(wl: Workload, out: Workload, load: float, duration_s: float | None) -> None:
    """``out`` (``wl`` scaled) keeps ``wl``'s stream levels, streams and the frames they offered, scaled alike."""
    out.priorities = dict(wl.priorities)
    out.stream_specs = dict(wl.stream_specs)
    end_ms = math.inf if duration_s is None else duration_s * 1000.0
    out.stream_frames = [(st, n, t / load) for st, n, t in wl.stream_frames if t / load < end_ms]


def _roots_and_depths(reqs: list[Request]) -> tuple[dict[int, Request], dict[int, int]]:
    """Each request's root (by ``id()``) and its depth below it, in one memoised walk: linear in the
    requests however deep the cascades chain (a walk per request was quadratic on long chains)."""
    roots: dict[int, Request] = {}
    depths: dict[int, int] = {}
    for r in reqs:
        path: list[Request] = []
        q = r
        while q.parent is not None and id(q) not in depths:
            path.append(q)
            q = q.parent
        if id(q) not in depths:   # q is a root
            roots[id(q)], depths[id(q)] = q, 0
        root, d = roots[id(q)], depths[id(q)]
        for node in reversed(path):
            d += 1
            roots[id(node)], depths[id(node)] = root, d
    return roots, depths
