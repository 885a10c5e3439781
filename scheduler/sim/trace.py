"""Reading and writing request traces (JSONL, DESIGN.md §6).

One request a line::

    {"t_ms": 12.5, "model": "hand", "slo_ms": 22.0, "id": "f7/hand", "after": "f7/palm", "p": 1.0}

``t_ms`` and ``model`` are required. ``slo_ms`` (default: none, an infinite
deadline), ``id`` (default: ``line<N>``), ``after``, ``p`` (default 1),
``stream`` (default: the model), ``frame`` and ``priority`` (``critical``,
``high``, ``normal``: the default, ``low``; one per stream: the policy sees
it as ``RequestView.priority``) are optional; other keys (a
live run also writes ``status``, ``processor``, ``latency_ms`` …) are
ignored, so a live run's ``trace=`` file replays as is. Lines may come in
any order (a live run writes them as requests finish); ``after`` may name a
line further down. Blank lines and lines starting with ``#`` are skipped.

A line with a ``type`` is not a request (a trace written before those records had
none, and loads as it did): ``header`` names the format and its version (at most
:data:`VERSION`), ``stream`` a stream a live run opened (``rt.stream``: name,
``fps``, ``priority``, ``rates``, ``offload``, ``max_in_flight``), ``frame`` a frame
it offered, taken or not (``stream``, ``frame`` number, ``t_ms`` of capture,
``taken``, ``reason``); the requests of a frame carry its number in ``frame``. A
frame not taken live has no requests of its own: it is given those of the
nearest frame of its stream that was taken (ids ``f<N>/<model>``, times shifted
to its own), so a replay offers every frame again and the controller decides
anew (:mod:`scheduler.sim.streams`).

Every problem is a :class:`~scheduler.errors.TraceError` naming the file and
line: bad JSON or text that is not UTF-8, a missing, mistyped or out-of-range
field (``t_ms`` and ``slo_ms`` are finite, at most :data:`MAX_MS`), a duplicate
``id``, an ``after`` naming no line, and a cycle of ``after`` links (named in full).

The file is streamed: parsing is one pass, linear in lines and ``after`` links,
and keeps only the parsed columns (no line text, no per-request objects).
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

import numpy as np

from scheduler.errors import TraceError, open_input
from scheduler.priority import DEFAULT_PRIORITY, PRIORITIES, RANK
from scheduler.sim.streams import StreamSpec
from scheduler.sim.workload import Request, Workload

#: Largest ``t_ms`` / ``slo_ms`` a trace may give (ms): 1e10 ms, about 116 days.
MAX_MS = 1e10
#: Longest line read (bytes); a longer one is an error, not a memory spike.
MAX_LINE_BYTES = 1 << 20
#: Largest ``frame`` number (the column is int64).
MAX_FRAME = (1 << 62) - 1
#: The newest trace format this parser reads (``edgert._core._trace``'s header record).
VERSION = 2
#: The keys of a live request line that say what happened to it (not copied to a frame given its requests).
_OUTCOME_KEYS = ("status", "processor", "wait_ms", "latency_ms", "precision", "reason")
_EXAMPLE = '{"t_ms": 12.5, "model": "hand", "slo_ms": 22.0}'


def read_trace(path: str | Path, seed: int = 0) -> Workload:
    """Parse a JSONL trace into a :class:`Workload`, streaming it line by line; ``p`` draws use
    ``default_rng([seed, 3])``.

    Raises:
        TraceError: ``"<file>:<line>: <what is wrong>"``; a missing, unreadable or empty trace.
    """
    p = Path(path)
    f = open_input(p, "trace file", ".jsonl")
    with f:
        try:
            return parse_trace(_text_lines(f, str(p)), str(p), seed=seed)
        except OSError as exc:
            raise TraceError(f"cannot read trace file {str(p)!r}: {exc.strerror or exc}") from None


def _text_lines(f: IO[bytes], name: str) -> Iterator[str]:
    """The file's lines as text, one at a time: UTF-8, each at most MAX_LINE_BYTES."""
    lineno = 0
    while raw := f.readline(MAX_LINE_BYTES + 1):
        lineno += 1
        if len(raw) > MAX_LINE_BYTES or lineno >= 1 << 31:
            raise TraceError(f"{name}:{lineno}: line longer than {MAX_LINE_BYTES} bytes; one request a line")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceError(f"{name}:{lineno}: not UTF-8 text (byte {exc.start} of the line); "
                             "save the trace as UTF-8 JSONL") from None


def parse_trace(lines: Iterable[str], name: str = "<trace>", seed: int = 0) -> Workload:
    """Parse trace lines (see the module docstring); ``name`` is used in error messages.

    One pass over the lines, linear in lines and ``after`` links: each ``after`` is linked
    as soon as both ends have been read. Nothing but the parsed columns is kept.
    """
    cols = _Columns(name)
    frames = _StreamFrames(name)
    for lineno, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        where = f"{name}:{lineno}"
        obj = _json_object(s, where)
        if "type" in obj:
            frames.record(obj, where, lineno)
            continue
        if frames.owns(obj):   # its level is the controller's per frame: the replay's controller sets it again
            obj.pop("priority", None)
            frames.request(obj)
        cols.add(_fields(obj, where, lineno), lineno, where)
    frames.fill(cols)
    if not cols.keys:
        raise TraceError(f"{name}: the trace has no requests")
    cols.check_links()
    rng = np.random.default_rng([seed, 3])
    fires = _fires(cols, rng.random(len(cols.keys)))
    wl = cols.workload(fires)
    wl.stream_specs, wl.stream_frames = frames.streams(), frames.offered()
    return wl


class _StreamFrames:
    """A live trace's streams and the frames they offered (its typed records), and the request lines of the
    frames taken, which a frame not taken is given (see the module doc)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.specs: dict[str, StreamSpec] = {}
        self._frames: dict[int, tuple[str, float, bool, int]] = {}   # number -> (stream, t_ms, taken, line)
        self._lines: dict[int, list[dict[str, Any]]] = {}              # frame number -> its request lines
        self._overlapping: set[str] = set()   # streams a frame of which was skipped in_flight live

    def record(self, obj: dict[str, Any], where: str, lineno: int) -> None:
        """One typed line: a header, a stream or a frame."""
        kind = obj["type"]
        if kind == "header":
            v = obj.get("version")
            if not isinstance(v, int) or isinstance(v, bool) or v > VERSION:
                raise TraceError(f"{where}: trace format version {_show(v)}; this edgert reads versions up to "
                                 f"{VERSION}: update edgert to replay it")
        elif kind == "stream":
            name = _ident(obj.get("stream"), "a stream record needs its name under 'stream'", where)
            fps = _num(obj, "fps", where, required=True)
            level = obj.get("priority", DEFAULT_PRIORITY)
            rates = obj.get("rates")
            good_rates = rates is None or (isinstance(rates, list) and bool(rates) and all(
                isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0 for r in rates))
            if not (fps and fps > 0) or level not in RANK or not good_rates:
                raise TraceError(f"{where}: a stream record needs fps > 0, priority one of {', '.join(PRIORITIES)} "
                                 f"and rates a list of fps > 0, got {_show(obj)}")
            mif = obj.get("max_in_flight", 1)
            self.specs[name] = StreamSpec(name, float(fps), level, None if rates is None else
                                          tuple(float(r) for r in rates), bool(obj.get("offload", True)),
                                          mif if isinstance(mif, int) and mif >= 1 else 1)
        elif kind == "frame":
            stream = _ident(obj.get("stream"), "a frame record needs its stream under 'stream'", where)
            if stream not in self.specs:
                raise TraceError(f"{where}: frame of stream {stream!r}, which no stream record before it opened")
            number = obj.get("frame")
            if not isinstance(number, int) or isinstance(number, bool) or not 0 <= number <= MAX_FRAME:
                raise TraceError(f"{where}: a frame record needs its number (an integer >= 0) under 'frame'")
            t = _num(obj, "t_ms", where, required=True)
            assert t is not None
            self._frames[number] = (stream, t, bool(obj.get("taken")), lineno)
            if obj.get("reason") == "in_flight":   # its app offers a frame while the one before it runs
                self._overlapping.add(stream)
        else:
            raise TraceError(f"{where}: unknown record type {_show(kind)}; a typed line is a header, stream or "
                             "frame record (a request line has no type)")

    def owns(self, obj: dict[str, Any]) -> bool:
        """Whether a request line belongs to a stream frame recorded before it."""
        number = obj.get("frame")
        return isinstance(number, int) and not isinstance(number, bool) and number in self._frames

    def request(self, obj: dict[str, Any]) -> None:
        """A request line of a stream frame, kept: the frames not taken copy them."""
        self._lines.setdefault(obj["frame"], []).append(obj)

    def fill(self, cols: _Columns) -> None:
        """Give each frame that has no request lines (not taken live) the lines of its stream's nearest frame
        that has them, shifted to its own time and renamed to its own number."""
        by_stream: dict[str, list[tuple[float, int]]] = {}
        for number, (stream, t, _, _) in self._frames.items():
            if number in self._lines:
                by_stream.setdefault(stream, []).append((t, number))
        for got in by_stream.values():
            got.sort()
        for number, (stream, t, _, lineno) in sorted(self._frames.items()):
            if number in self._lines or not by_stream.get(stream):
                continue
            got = by_stream[stream]
            i = bisect.bisect_left(got, (t, -1))
            near = min(got[max(0, i - 1):i + 1], key=lambda e: abs(e[0] - t))
            where = f"{self.name}:{lineno} (frame {number}, given frame {near[1]}'s requests)"
            for obj in self._lines[near[1]]:
                c = {k: v for k, v in obj.items() if k not in _OUTCOME_KEYS}
                c["id"] = _renamed(obj.get("id"), number, where)
                if obj.get("after") is not None:
                    c["after"] = _renamed(obj["after"], number, where)
                shift = t - near[0]
                c["t_ms"] = obj["t_ms"] + shift
                if isinstance(obj.get("arrival_ms"), (int, float)):
                    c["arrival_ms"] = obj["arrival_ms"] + shift
                c["frame"] = number
                cols.add(_fields(c, where, lineno), lineno, where)

    def streams(self) -> dict[str, StreamSpec]:
        """The streams, each marked ``waits`` unless one of its frames was skipped ``in_flight`` live (its app
        waits for a frame's results before it offers the next: see :class:`StreamSpec`)."""
        return {n: dataclasses.replace(s, waits=n not in self._overlapping) for n, s in self.specs.items()}

    def offered(self) -> list[tuple[str, int, float]]:
        """Every frame offered, in capture order: ``(stream, number, t_ms)``."""
        return sorted(((st, n, t) for n, (st, t, _, _) in self._frames.items()), key=lambda e: (e[2], e[1]))


def _renamed(key: Any, number: int, where: str) -> str:
    """A frame's request id (``f7/hand``) as frame ``number``'s (``f9/hand``)."""
    text = _ident(key, "id must be a string", where)
    _, sep, rest = text.partition("/")
    if not sep:
        raise TraceError(f"{where}: a stream frame's request id is f<N>/<model>, got {text!r}")
    return f"f{number}/{rest}"


def _json_object(s: str, where: str) -> dict[str, Any]:
    try:
        obj = json.loads(s)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise TraceError(f"{where}: JSON nested too deeply; a trace line is a flat object like {_EXAMPLE}") from None
    if not isinstance(obj, dict):
        raise TraceError(f"{where}: a trace line is a JSON object like {_EXAMPLE}")
    return obj


class TraceLine(NamedTuple):
    """One request line of a trace, validated (times in ms)."""

    t_ms: float
    model: str
    slo_ms: float
    p: float
    key: str
    stream: str
    frame: int
    after: str | None
    priority: str


def _fields(obj: dict[str, Any], where: str, lineno: int) -> TraceLine:
    """One line's fields validated."""
    t = _num(obj, "t_ms", where, required=True)
    assert t is not None   # required=True raised otherwise
    if not 0 <= t <= MAX_MS:
        raise TraceError(f"{where}: t_ms must be >= 0 and <= {MAX_MS:g} ms, got {_show(obj['t_ms'])}")
    model = obj.get("model")
    if not isinstance(model, str) or not model:
        raise TraceError(f"{where}: missing or empty 'model' (a model name string)")
    slo = _num(obj, "slo_ms", where)
    if slo is None:
        slo = math.inf
    elif not 0 < slo <= MAX_MS:
        raise TraceError(f"{where}: slo_ms must be > 0 and <= {MAX_MS:g} ms, got {_show(obj['slo_ms'])}")
    prob = _num(obj, "p", where)
    prob = 1.0 if prob is None else prob
    if not 0.0 <= prob <= 1.0:
        raise TraceError(f"{where}: p must be in [0, 1], got {_show(obj['p'])}")
    key = _ident(obj.get("id", f"line{lineno}"), "id must be a string", where)
    stream = _ident(obj.get("stream", model), "stream must be a string", where)
    frame = obj.get("frame", -1)
    if not isinstance(frame, int) or isinstance(frame, bool) or not -1 <= frame <= MAX_FRAME:
        raise TraceError(f"{where}: frame must be an integer >= 0, got {_show(frame)}")
    after = obj.get("after")
    if after is not None:
        after = _ident(after, "after must be the id of another line", where)
    else:
        t, slo = _submitted(obj, t, slo, where)
    level = obj.get("priority", DEFAULT_PRIORITY)
    if level not in RANK:
        raise TraceError(f"{where}: priority must be one of {', '.join(PRIORITIES)}, got {_show(level)}")
    return TraceLine(t, model, slo, prob, key, stream, frame, after, level)


def _submitted(obj: dict[str, Any], t: float, slo: float, where: str) -> tuple[float, float]:
    """A live run's first stage arrives when the app submitted it (``arrival_ms``, after its own work on
    the frame), not at the frame's time; its absolute deadline stays ``t_ms + slo_ms``. Lines without
    ``arrival_ms`` (scenario traces) are unchanged. A cascade stage keeps ``t_ms``: it is ready when
    the request it waits for completes, in the replay as live."""
    arrival = _num(obj, "arrival_ms", where)
    if arrival is None or not t < arrival <= MAX_MS:
        return t, slo
    return arrival, max(slo - (arrival - t), 1e-9)   # submitted after its deadline: hopeless, as live


def _ident(v: Any, what: str, where: str) -> str:
    if not isinstance(v, (str, int)) or isinstance(v, bool):
        raise TraceError(f"{where}: {what}, got {_show(v)}")
    return str(v)


def _show(v: Any) -> str:
    """A value for a message, at most 40 characters (a 300-digit number is not echoed whole)."""
    text = repr(v)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _num(obj: dict, key: str, where: str, required: bool = False) -> float | None:
    v = obj.get(key)
    if v is None:
        if required:
            raise TraceError(f"{where}: missing {key!r} (a number of ms)" if key.endswith("_ms")
                             else f"{where}: missing {key!r}")
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TraceError(f"{where}: {key} must be a number, got {_show(v)}")
    try:
        f = float(v)
    except OverflowError:   # an integer of hundreds of digits
        f = math.inf
    if not math.isfinite(f):
        raise TraceError(f"{where}: {key} must be a finite number, got {_show(v)}")
    return f


class _Columns:
    """The trace's requests as growing columns, in line order, with their ``after`` links.

    A link whose parent is already read is resolved at once; one naming a line further
    down waits in ``_waiting`` until that line comes (or the end reports it).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.t, self.slo, self.p = array("d"), array("d"), array("d")
        self.model, self.stream = array("i"), array("i")
        self.frame = array("q")
        self.parent, self.line = array("i"), array("i")   # int32: a trace of 2**31 lines would be 200 GB
        self.keys: list[str] = []
        self.models: dict[str, int] = {}
        self.streams: dict[str, int] = {}
        self.origin: dict[str, str] = {}
        self.priorities: dict[str, str] = {}   # stream -> its level
        self._index = _KeyIndex(self.keys)
        self._waiting: dict[str, list[int]] = {}   # parent key -> children that named it first

    def add(self, line: TraceLine, lineno: int, where: str) -> None:
        """Append one validated line; link it to its parent and its waiting children."""
        key, stream, after = line.key, line.stream, line.after
        if self.priorities.setdefault(stream, line.priority) != line.priority:
            raise TraceError(f"{where}: stream {stream!r} is {line.priority!r} here but {self.priorities[stream]!r} "
                             "on an earlier line; a stream has one priority")
        first = self._index.get(key)
        if first >= 0:
            raise TraceError(f"{where}: duplicate id {key!r} (first on line {self.line[first]})")
        i = len(self.keys)
        self.keys.append(key)
        self._index.add(key, i)
        self.t.append(line.t_ms)
        self.slo.append(line.slo_ms)
        self.p.append(line.p)
        self.model.append(self.models.setdefault(line.model, len(self.models)))
        self.stream.append(self.streams.setdefault(stream, len(self.streams)))
        self.frame.append(line.frame)
        self.line.append(lineno)
        self.origin.setdefault(line.model, where)
        parent = -1 if after is None else self._index.get(after)
        if parent == -1 and after is not None:
            self._waiting.setdefault(after, []).append(i)
        self.parent.append(parent)
        for child in self._waiting.pop(key, ()):
            self.parent[child] = i

    def check_links(self) -> None:
        """Every ``after`` found its line; else the first line (in file order) whose did not."""
        if self._waiting:
            child, after = min((c, k) for k, cs in self._waiting.items() for c in cs)
            raise TraceError(f"{self.name}:{self.line[child]}: 'after' names id {after!r}, "
                             "which no line of the trace has")
        self._index = _KeyIndex(self.keys)   # the links are made: free the index

    def workload(self, fires: np.ndarray) -> Workload:
        """The columns sorted by (t_ms, line), ids renumbered in that order (no copy when already sorted)."""
        n = len(self.keys)
        t = np.frombuffer(self.t, np.float64)
        parent = np.frombuffer(self.parent, np.int32).astype(np.int64)
        cols: dict[str, Any] = {"t_ms": t, "slo_ms": np.frombuffer(self.slo, np.float64),
                                "model": np.frombuffer(self.model, np.int32),
                                "stream": np.frombuffer(self.stream, np.int32),
                                "frame": np.frombuffer(self.frame, np.int64), "fires": fires,
                                "p": np.frombuffer(self.p, np.float64)}
        keys = self.keys
        self.line = array("i")
        if n > 1 and not bool((t[1:] >= t[:-1]).all()):
            order = np.argsort(t, kind="stable")
            new_id = np.empty(n, np.int64)
            new_id[order] = np.arange(n)
            parent = parent[order]
            parent = np.where(parent >= 0, new_id[np.maximum(parent, 0)], -1)
            for k in cols:   # one column at a time: one extra column at the peak
                cols[k] = cols[k][order]
            by_id = np.empty(n, object)
            by_id[:] = keys
            keys = by_id[order].tolist()
        return Workload(name=f"trace {self.name}", models=list(self.models), streams=list(self.streams),
                        parent=parent, origin=self.origin, keys=keys, **cols,
                        priorities={s: v for s, v in self.priorities.items() if v != DEFAULT_PRIORITY})


class _KeyIndex:
    """Trace id -> line index: open addressing over two flat arrays (hash, index + 1).

    About 24 bytes a key at 1M keys, where a ``dict[str, int]`` costs ~60 (the table and an
    int object per value); the id strings themselves live once, in ``keys``.
    """

    def __init__(self, keys: list[str], capacity: int = 1024) -> None:
        self._keys = keys
        self._mask = capacity - 1
        self._hash = array("q", [0]) * capacity
        self._slot = array("i", [0]) * capacity   # index + 1; 0 = empty
        self._n = 0

    def get(self, key: str) -> int:
        """The index of ``key``, or -1."""
        h = hash(key)
        mask = self._mask
        hashes = self._hash
        slots = self._slot
        keys = self._keys
        j = h & mask
        while s := slots[j]:
            if hashes[j] == h and keys[s - 1] == key:
                return s - 1
            j = (j + 1) & mask
        return -1

    def add(self, key: str, i: int) -> None:
        """Record ``key`` (not present yet) at index ``i``; doubles the table at half full."""
        if 2 * (self._n + 1) > self._mask + 1:
            old_hash, old_slot = self._hash, self._slot
            self.__init__(self._keys, 2 * (self._mask + 1))   # type: ignore[misc]
            for h, s in zip(old_hash, old_slot):
                if s:
                    self._put(h, s)
        self._put(hash(key), i + 1)

    def _put(self, h: int, s: int) -> None:
        mask, slots = self._mask, self._slot
        j = h & mask
        while slots[j]:
            j = (j + 1) & mask
        self._hash[j] = h
        slots[j] = s
        self._n += 1


def _fires(cols: _Columns, draws: np.ndarray) -> np.ndarray:
    """Whether each request fires: its own draw, and (a stage whose upstream does not fire cannot)
    every ancestor's. Walks each ``after`` chain once, and names a cycle of them in full."""
    parent = cols.parent
    p = np.frombuffer(cols.p, np.float64)
    fires = bytearray(((p >= 1.0) | (draws < p)).view(np.uint8).tobytes())
    state = bytearray(len(fires))   # 0 unseen, 1 on the current path, 2 done
    for start in range(len(fires)):
        path: list[int] = []
        i = start
        while i >= 0 and not state[i]:
            state[i] = 1
            path.append(i)
            i = parent[i]
        if i >= 0 and state[i] == 1:
            cyc = path[path.index(i):] + [i]
            chain = " -> ".join(f"{cols.keys[c]!r} (line {cols.line[c]})" for c in cyc)
            raise TraceError(f"{cols.name}: cycle in 'after': {chain}")
        up = fires[i] if i >= 0 else 1
        for j in reversed(path):
            up = fires[j] = fires[j] & up
            state[j] = 2
    return np.frombuffer(fires, np.uint8).astype(bool)


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
