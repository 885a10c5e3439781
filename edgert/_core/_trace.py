"""Trace recording: every request as one JSONL line (docs/design.md §6), replayable by the simulator.

What the simulator replays::

    {"t_ms": 12.5, "model": "hand", "slo_ms": 22.0, "id": "f7/hand", "after": "f7/palm", "p": 1.0,

and what happened live, which ``edgert simulate --trace`` compares its replay with
and ``edgert profile --from-trace`` turns into this host's profile (both read it back
through :mod:`edgert._replay`)::

     "status": "ok", "processor": "cpu1", "arrival_ms": 14.1, "wait_ms": 0.2, "latency_ms": 4.6,
     "precision": "fp32"}

``t_ms`` is ms since the runtime started (a cascade stage carries its frame's
time); the deadline is ``t_ms + slo_ms`` (no ``slo_ms`` key: no deadline).
``arrival_ms`` is when the request was submitted (a cascade stage: when its
parent finished), ``wait_ms`` from then to its start, ``latency_ms`` from then
to its end (ms); ``precision`` is the arithmetic of the path that ran it; ``reason`` says why
a ``dropped`` or ``failed`` one ended so.
Lines come in submission order (a parent before its stages), each written
once its request and every one submitted before it have ended; requests
still open at close are written without an outcome.

Records other than requests carry a ``type`` (a request line has none, so traces written before
these records load as they did); the first line names the format and its version::

    {"type": "header", "format": "edgert-trace", "version": 2}
    {"type": "stream", "stream": "hands", "fps": 30.0, "priority": "critical", "rates": [30.0, 20.0, 15.0, 10.0],
     "offload": false, "max_in_flight": 1}
    {"type": "frame", "stream": "hands", "frame": 7, "t_ms": 233.3, "offered_ms": 234.1, "taken": false,
     "reason": "predicted_late", "deadline_ms": 266.7}

A ``stream`` record is written when ``rt.stream(...)`` opens one; a ``frame`` record for every frame it
offered, taken or not (``reason``: a code of ``scheduler.streams.REASONS``, "" when taken), before the
requests submitted in it, which carry its number in ``frame``. So a replay offers the same frames again.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from edgert._core._result import Result

#: Requests held open at most; past this the oldest are written without an outcome (bounded memory).
MAX_OPEN = 100_000
#: The trace format's name and version (the header record): 2 added the stream and frame records.
FORMAT, VERSION = "edgert-trace", 2


class TraceWriter:
    """Writes one JSONL line per request, in submission order, once it has ended; thread-safe.

    A finished request waits in a reorder buffer until every request submitted before it has
    ended too, so the file lists requests as the runtime received them (the order the simulator
    breaks ties of equal ``t_ms`` by) while each line still carries its outcome.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._f: IO[str] | None = self.path.open("w", buffering=1 << 16)
        self._lock = threading.Lock()
        self._open: OrderedDict[str, list[object]] = OrderedDict()   # id -> [record, ended?]
        self._records = 0
        self._write({"type": "header", "format": FORMAT, "version": VERSION})

    def stream(self, name: str, fps: float, priority: str, rates: tuple[float, ...], offload: bool,
               max_in_flight: int) -> None:
        """Record a stream opened (``rt.stream``): its nominal rate (fps), level, ladder (fps) and options."""
        self._record(f"stream:{name}", {"type": "stream", "stream": name, "fps": fps,
                                                    "priority": priority, "rates": list(rates),
                                                    "offload": offload, "max_in_flight": max_in_flight})

    def frame(self, stream: str, index: int, t_ms: float, offered_ms: float, taken: bool, reason: str,
              deadline_ms: float) -> None:
        """Record a frame ``stream`` offered, taken or not (``reason``: why not), captured at ``t_ms`` and offered
        at ``offered_ms`` (ms on the runtime clock); its requests carry ``index`` in ``frame``."""
        self._record(f"frame:{index}", {"type": "frame", "stream": stream, "frame": index, "t_ms": round(t_ms, 3),
                                        "offered_ms": round(offered_ms, 3), "taken": taken, "reason": reason,
                                        "deadline_ms": round(deadline_ms, 3)})

    def _record(self, key: str, rec: dict[str, object]) -> None:
        """A record that is complete now, written in its place among the requests."""
        with self._lock:
            self._records += 1
            self._open[f"{key}#{self._records}"] = [rec, True]
            self._flush_ended()

    def request(self, t_ms: float, model: str, deadline_ms: float, rid: str, after: str | None,
                priority: str = "normal", frame: int = -1) -> None:
        """Record one request that became known at ``t_ms`` (ms) with absolute ``deadline_ms`` (ms) (and its
        ``priority`` when it is not ``normal``, its ``frame`` number when it is in one)."""
        rec: dict[str, object] = {"t_ms": round(t_ms, 3), "model": model}
        if not math.isinf(deadline_ms):
            rec["slo_ms"] = round(deadline_ms - t_ms, 3)
        rec["id"] = rid
        if after is not None:
            rec["after"] = after
        rec["p"] = 1.0
        if priority != "normal":
            rec["priority"] = priority
        if frame >= 0:
            rec["frame"] = frame
        with self._lock:
            self._open[rid] = [rec, False]
            if len(self._open) > MAX_OPEN:   # one never ends: give up waiting for it
                self._write(self._open.popitem(last=False)[1][0])   # type: ignore[arg-type]
                self._flush_ended()

    def finish(self, res: Result) -> None:
        """Add ``res``'s outcome to its request's line (once; later calls are ignored)."""
        with self._lock:
            entry = self._open.get(res.key)
            if entry is None or entry[1]:
                return
            rec: dict[str, object] = entry[0]   # type: ignore[assignment]
            rec["status"] = res.status
            rec["processor"] = res.processor
            rec["arrival_ms"] = round(res.arrival_ms, 3)
            rec["wait_ms"] = round(res.queued_ms, 3)
            rec["latency_ms"] = round(res.latency_ms, 3)
            if res.precision:
                rec["precision"] = res.precision
            if res.error is not None:
                rec["reason"] = str(getattr(res.error, "reason", None) or res.error)
            entry[1] = True
            self._flush_ended()

    def _flush_ended(self) -> None:
        while self._open:
            rec, ended = next(iter(self._open.values()))
            if not ended:
                return
            self._write(rec)   # type: ignore[arg-type]
            self._open.popitem(last=False)

    def _write(self, rec: dict[str, object]) -> None:
        if self._f is not None:
            self._f.write(json.dumps(rec) + "\n")

    def close(self) -> None:
        """Write what is left in submission order (requests that never ended: no outcome); close."""
        with self._lock:
            for rec, _ in self._open.values():
                self._write(rec)   # type: ignore[arg-type]
            self._open.clear()
            if self._f is not None:
                self._f.close()
                self._f = None
