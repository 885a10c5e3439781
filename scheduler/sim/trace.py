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

Every problem is a :class:`~scheduler.errors.TraceError` naming the file and
line: bad JSON or text that is not UTF-8, a missing, mistyped or out-of-range
field (``t_ms`` and ``slo_ms`` are finite, at most :data:`MAX_MS`), a duplicate
``id``, an ``after`` naming no line, and a cycle of ``after`` links (named in full).

The file is streamed: parsing is one pass, linear in lines and ``after`` links,
and keeps only the parsed columns (no line text, no per-request objects).
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from scheduler.errors import TraceError, open_input
from scheduler.priority import DEFAULT_PRIORITY, PRIORITIES, RANK
from scheduler.sim.workload import Request, Workload

#: Largest ``t_ms`` / ``slo_ms`` a trace may give (ms): 1e10 ms, about 116 days.
MAX_MS = 1e10
#: Longest line read (bytes); a longer one is an error, not a memory spike.
MAX_LINE_BYTES = 1 << 20
#: Largest ``frame`` number (the column is int64).
MAX_FRAME = (1 << 62) - 1
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
    for lineno, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        where = f"{name}:{lineno}"
        cols.add(_fields(_json_object(s, where), where, lineno), lineno, where)
    if not cols.keys:
        raise TraceError(f"{name}: the trace has no requests")
    cols.check_links()
    rng = np.random.default_rng([seed, 3])
    fires = _fires(cols, rng.random(len(cols.keys)))
    return cols.workload(fires)


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


def _fields(obj: dict[str, Any], where: str, lineno: int) -> tuple[Any, ...]:
    """One line's fields validated: (t_ms, model, slo_ms, p, key, stream, frame, after, priority)."""
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
    return t, model, slo, prob, key, stream, frame, after, level


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

    def add(self, fields: tuple[Any, ...], lineno: int, where: str) -> None:
        """Append one validated line; link it to its parent and its waiting children."""
        t, model, slo, prob, key, stream, frame, after, level = fields
        if self.priorities.setdefault(stream, level) != level:
            raise TraceError(f"{where}: stream {stream!r} is {level!r} here but {self.priorities[stream]!r} on an "
                             "earlier line; a stream has one priority")
        first = self._index.get(key)
        if first >= 0:
            raise TraceError(f"{where}: duplicate id {key!r} (first on line {self.line[first]})")
        i = len(self.keys)
        self.keys.append(key)
        self._index.add(key, i)
        self.t.append(t)
        self.slo.append(slo)
        self.p.append(prob)
        self.model.append(self.models.setdefault(model, len(self.models)))
        self.stream.append(self.streams.setdefault(stream, len(self.streams)))
        self.frame.append(frame)
        self.line.append(lineno)
        self.origin.setdefault(model, where)
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
        cols: list[Any] = [t, np.frombuffer(self.slo, np.float64), np.frombuffer(self.model, np.int32),
                np.frombuffer(self.stream, np.int32), np.frombuffer(self.frame, np.int64), fires,
                np.frombuffer(self.p, np.float64)]
        keys = self.keys
        self.line = array("i")
        if n > 1 and not bool((t[1:] >= t[:-1]).all()):
            order = np.argsort(t, kind="stable")
            new_id = np.empty(n, np.int64)
            new_id[order] = np.arange(n)
            parent = parent[order]
            parent = np.where(parent >= 0, new_id[np.maximum(parent, 0)], -1)
            for k in range(len(cols)):   # one column at a time: one extra column at the peak
                cols[k] = cols[k][order]
            by_id = np.empty(n, object)
            by_id[:] = keys
            keys = by_id[order].tolist()
        t, slo, model, stream, frame, fires, p = cols
        return Workload(name=f"trace {self.name}", models=list(self.models), streams=list(self.streams),
                        t_ms=t, slo_ms=slo, model=model, stream=stream, frame=frame, parent=parent,
                        fires=fires, p=p, origin=self.origin, keys=keys,
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
        h, mask, hashes, slots, keys = hash(key), self._mask, self._hash, self._slot, self._keys
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
