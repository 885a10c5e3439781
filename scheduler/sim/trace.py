"""Reading and writing request traces (JSONL, DESIGN.md §6).

One request a line::

    {"t_ms": 12.5, "model": "hand", "slo_ms": 22.0, "id": "f7/hand", "after": "f7/palm", "p": 1.0}

``t_ms`` and ``model`` are required. ``slo_ms`` (default: none, an infinite
deadline), ``id`` (default: ``line<N>``), ``after``, ``p`` (default 1),
``stream`` (default: the model) and ``frame`` are optional; other keys (a
live run also writes ``status``, ``processor``, ``latency_ms`` …) are
ignored, so a live run's ``trace=`` file replays as is. Lines may come in
any order (a live run writes them as requests finish); ``after`` may name a
line further down. Blank lines and lines starting with ``#`` are skipped.

Every problem is a :class:`~scheduler.errors.TraceError` naming the file and
line: bad JSON, a missing or mistyped field, a duplicate ``id``, an
``after`` naming no line, and a cycle of ``after`` links (named in full).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from scheduler.errors import TraceError
from scheduler.sim.workload import Request, Workload


def read_trace(path: str | Path, seed: int = 0) -> Workload:
    """Parse a JSONL trace into a :class:`Workload`; ``p`` draws use ``default_rng([seed, 3])``.

    Raises:
        TraceError: ``"<file>:<line>: <what is wrong>"``; a missing file or an empty trace.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise TraceError(f"trace file {str(p)!r} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read trace file {str(p)!r}: {exc}") from exc
    return parse_trace(text.splitlines(), str(p), seed=seed)


def parse_trace(lines: Iterable[str], name: str = "<trace>", seed: int = 0) -> Workload:
    """Parse trace lines (see the module docstring); ``name`` is used in error messages."""
    reqs: list[Request] = []
    line_of: dict[int, int] = {}
    after_of: dict[int, tuple[str, int]] = {}
    by_key: dict[str, Request] = {}
    origin: dict[str, str] = {}
    for lineno, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        where = f"{name}:{lineno}"
        try:
            obj = json.loads(s)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise TraceError(f"{where}: a trace line is a JSON object like "
                             '{"t_ms": 12.5, "model": "hand", "slo_ms": 22.0}')
        t = _num(obj, "t_ms", where, required=True)
        if t < 0:
            raise TraceError(f"{where}: t_ms must be >= 0, got {t}")
        model = obj.get("model")
        if not isinstance(model, str) or not model:
            raise TraceError(f"{where}: missing or empty 'model' (a model name string)")
        slo = _num(obj, "slo_ms", where)
        if slo is None:
            slo = math.inf
        elif not slo > 0:
            raise TraceError(f"{where}: slo_ms must be > 0, got {slo}")
        prob = _num(obj, "p", where)
        prob = 1.0 if prob is None else prob
        if not 0.0 <= prob <= 1.0:
            raise TraceError(f"{where}: p must be in [0, 1], got {prob}")
        key = obj.get("id", f"line{lineno}")
        if not isinstance(key, (str, int)) or isinstance(key, bool):
            raise TraceError(f"{where}: id must be a string, got {key!r}")
        key = str(key)
        if key in by_key:
            raise TraceError(f"{where}: duplicate id {key!r} (first on line {line_of[by_key[key].id]})")
        stream = obj.get("stream", model)
        frame = obj.get("frame", -1)
        if not isinstance(frame, int) or isinstance(frame, bool):
            raise TraceError(f"{where}: frame must be an integer, got {frame!r}")
        r = Request(len(reqs), key, float(t), model, float(slo), str(stream), frame, p=float(prob),
                    origin=where)
        after = obj.get("after")
        if after is not None:
            if not isinstance(after, (str, int)) or isinstance(after, bool):
                raise TraceError(f"{where}: after must be the id of another line, got {after!r}")
            after_of[r.id] = (str(after), lineno)
        line_of[r.id] = lineno
        by_key[key] = r
        origin.setdefault(model, where)
        reqs.append(r)
    if not reqs:
        raise TraceError(f"{name}: the trace has no requests")
    for rid, (after, lineno) in after_of.items():
        par = by_key.get(after)
        if par is None:
            raise TraceError(f"{name}:{lineno}: 'after' names id {after!r}, which no line of the trace has")
        r = reqs[rid]
        r.parent = par
        if par.children is None:
            par.children = []
        par.children.append(r)
    _check_cycles(reqs, line_of, name)
    rng = np.random.default_rng([seed, 3])
    draws = rng.random(len(reqs))
    for r in reqs:
        r.fires = bool(r.p >= 1.0 or draws[r.id] < r.p)
    for r in reqs:   # a stage whose upstream does not fire cannot fire either
        a = r.parent
        while a is not None and r.fires:
            r.fires = a.fires
            a = a.parent
    order = sorted(reqs, key=lambda r: (r.t_ms, line_of[r.id]))
    for i, r in enumerate(order):
        r.id = i
    wl = Workload.from_requests(f"trace {name}", order, origin)
    wl._objects = order
    return wl


def _check_cycles(reqs: list[Request], line_of: dict[int, int], name: str) -> None:
    state: dict[int, int] = {}   # 1 = on the current path, 2 = done
    for start in reqs:
        path: list[Request] = []
        r: Request | None = start
        while r is not None and state.get(r.id) is None:
            state[r.id] = 1
            path.append(r)
            r = r.parent
        if r is not None and state[r.id] == 1:
            cyc = path[path.index(r):]
            chain = " -> ".join(f"{c.key!r} (line {line_of[c.id]})" for c in cyc + [r])
            raise TraceError(f"{name}: cycle in 'after': {chain}")
        for c in path:
            state[c.id] = 2


def _num(obj: dict, key: str, where: str, required: bool = False) -> float | None:
    v = obj.get(key)
    if v is None:
        if required:
            raise TraceError(f"{where}: missing {key!r} (a number of ms)" if key.endswith("_ms")
                             else f"{where}: missing {key!r}")
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        raise TraceError(f"{where}: {key} must be a number, got {v!r}")
    return float(v)


def write_trace(path: str | Path, requests: Iterable[Request]) -> int:
    """Write requests (e.g. a built-in scenario) as a JSONL trace; returns the number of lines.

    Only firing requests are written, each with ``p`` 1 (the draw already happened).
    """
    n = 0
    with open(path, "w") as f:
        for r in requests:
            if not r.fires:
                continue
            obj: dict = {"t_ms": r.t_ms, "model": r.model, "id": r.key}
            if not math.isinf(r.slo_ms):
                obj["slo_ms"] = r.slo_ms
            if r.parent is not None:
                obj["after"] = r.parent.key
            obj["stream"] = r.stream
            if r.frame >= 0:
                obj["frame"] = r.frame
            f.write(json.dumps(obj) + "\n")
            n += 1
    return n
