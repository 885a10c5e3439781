"""Trace recording: every request as one JSONL line (docs/design.md §6), replayable by the simulator.

What the simulator replays::

    {"t_ms": 12.5, "model": "hand", "slo_ms": 22.0, "id": "f7/hand", "after": "f7/palm", "p": 1.0,

and what happened live, which ``edgert simulate --trace`` compares its replay with
and ``edgert profile --from-trace`` turns into this host's profile::

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
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np

from edgert.errors import TraceError

if TYPE_CHECKING:
    from edgert._core._result import Result
    from scheduler.profile import DeviceProfile

#: Requests held open at most; past this the oldest are written without an outcome (bounded memory).
MAX_OPEN = 100_000


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

    def request(self, t_ms: float, model: str, deadline_ms: float, rid: str, after: str | None,
                priority: str = "normal") -> None:
        """Record one request that became known at ``t_ms`` (ms) with absolute ``deadline_ms`` (ms) (and its
        ``priority`` when it is not ``normal``)."""
        rec: dict[str, object] = {"t_ms": round(t_ms, 3), "model": model}
        if not math.isinf(deadline_ms):
            rec["slo_ms"] = round(deadline_ms - t_ms, 3)
        rec["id"] = rid
        if after is not None:
            rec["after"] = after
        rec["p"] = 1.0
        if priority != "normal":
            rec["priority"] = priority
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


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one traced request live (times in ms on the runtime clock)."""

    model: str
    status: str
    processor: str
    arrival_ms: float
    wait_ms: float
    latency_ms: float
    reason: str = ""
    key: str = ""      #: the trace line's ``id``
    after: str = ""    #: the ``id`` of the request it waited for ("" for a first stage)

    @property
    def start_ms(self) -> float:
        """When it started running (ms)."""
        return self.arrival_ms + self.wait_ms

    @property
    def end_ms(self) -> float:
        """When it ended (ms)."""
        return self.arrival_ms + self.latency_ms


def read_outcomes(path: str | Path) -> list[Outcome]:
    """The live outcomes a trace carries (lines without one are skipped; none: an empty list).

    Raises:
        TraceError: the file cannot be read, or a line is not JSON (names file and line).
    """
    return list(_iter_outcomes(Path(path)))


def _iter_outcomes(p: Path) -> Iterator[Outcome]:
    try:
        f = p.open()
    except FileNotFoundError:
        raise TraceError(f"trace file {str(p)!r} not found") from None
    except OSError as exc:
        raise TraceError(f"cannot read trace file {str(p)!r}: {exc}") from exc
    n = 0
    try:
        with f:
            for n, line in enumerate(f, 1):
                s = line.strip()
                if not s or s.startswith("#"):
                    continue
                o = json.loads(s)
                if isinstance(o, dict) and "status" in o and "latency_ms" in o:
                    arrival = o["arrival_ms"] if "arrival_ms" in o else o.get("t_ms", 0.0)
                    yield Outcome(str(o["model"]), str(o["status"]), str(o.get("processor", "")),
                                  float(arrival), float(o.get("wait_ms", 0.0)),
                                  float(o["latency_ms"]), str(o.get("reason", "")), str(o.get("id", "")),
                                  str(o.get("after") or ""))
    except json.JSONDecodeError as exc:
        raise TraceError(f"{p}:{n}: not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError:
        raise TraceError(f"{p}:{n + 1}: not UTF-8 text; save the trace as UTF-8 JSONL") from None
    except RecursionError:
        raise TraceError(f"{p}:{n}: JSON nested too deeply") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceError(f"{p}:{n}: a line with a live outcome needs model, status and numeric "
                         f"latency_ms ({type(exc).__name__}: {exc})") from None


def _kind(processor: str) -> str:
    """``cpu1`` -> ``cpu``: a worker's processor kind from its name."""
    return processor.rstrip("0123456789") or processor


def host_profile(outcomes: list[Outcome], name: str = "this-host", source: str = "a live run") -> DeviceProfile:
    """This host's device profile from a live run: per model and processor, p50 and p90 service time.

    Service time is start to end (ms) of the requests that ran (``ok`` / ``late``), pooled over the
    workers of one kind (``cpu0`` and ``cpu1`` are one CPU). Cloud round trips are left out (a
    profile's cloud has its own section).

    Raises:
        TraceError: no request of the trace ran on a local processor.
    """
    from scheduler.profile import DeviceProfile, ProcessorSpec  # noqa: PLC0415

    ran = [o for o in outcomes if o.status in ("ok", "late") and o.processor and o.processor != "cloud"]
    if not ran:
        raise TraceError("the trace has no request that ran on this host's processors (was it written by "
                         "a live run? lines need status, processor and latency_ms)")
    procs = sorted({o.processor for o in ran})
    svc: dict[tuple[str, str], list[float]] = {}
    for o in ran:
        svc.setdefault((o.model, _kind(o.processor)), []).append(o.latency_ms - o.wait_ms)
    p50: dict[str, dict[str, float]] = {}
    p90: dict[str, dict[str, float]] = {}
    for (model, kind), xs in sorted(svc.items()):
        for p in procs:
            if _kind(p) == kind:
                p50.setdefault(model, {})[p] = round(float(np.percentile(xs, 50)), 4)
                p90.setdefault(model, {})[p] = round(float(np.percentile(xs, 90)), 4)
    return DeviceProfile(
        name=name, processors=[ProcessorSpec(p, _kind(p)) for p in procs], latency_ms=p50, latency_p90_ms=p90,
        description=f"service times measured on this host during {source}",
        sources={"latency_ms/*": f"measured on this host: p50 start-to-end time of the requests of {source}, "
                                 "pooled over the workers of one kind",
                 "latency_p90_ms/*": "measured on this host: p90 of the same"})


def handoff_samples(outcomes: list[Outcome]) -> tuple[float, ...]:
    """Hand-off delays of a live run (ms): start minus arrival of each request that found its processor
    free (its previous run had ended), i.e. thread wake-up and the GIL with no queueing in it; the
    simulator draws each request's delay from these (``SimConfig.dispatch_ms``)."""
    last: dict[str, float] = {}
    out: list[float] = []
    for o in sorted((o for o in outcomes if o.processor and o.status in ("ok", "late")), key=lambda o: o.start_ms):
        if last.get(o.processor, -math.inf) <= o.arrival_ms:
            out.append(round(o.wait_ms, 4))
        last[o.processor] = o.end_ms
    return tuple(out)


def stage_gaps(outcomes: list[Outcome]) -> dict[str, float]:
    """By trace id: how long after the request it waited for ended a cascade stage was submitted (ms) —
    the app's own work between the two (a callback, a crop); the simulator makes the stage ready that
    long after its upstream request ends (``SimConfig.stage_gap_ms``)."""
    ends = {o.key: o.end_ms for o in outcomes if o.key}
    out: dict[str, float] = {}
    for o in outcomes:
        if o.after and o.after in ends and (gap := o.arrival_ms - ends[o.after]) > 0:
            out[o.key] = round(gap, 4)
    return out


def live_figures(outcomes: list[Outcome]) -> dict[str, tuple[int, float, float | None]]:
    """Per model: (requests, deadline-met share, p50 latency ms of the requests that ran) of a live run."""
    by: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by.setdefault(o.model, []).append(o)
    out: dict[str, tuple[int, float, float | None]] = {}
    for m, os_ in sorted(by.items()):
        lat = [o.latency_ms for o in os_ if o.status in ("ok", "late")]
        met = sum(o.status == "ok" for o in os_) / len(os_)
        out[m] = (len(os_), met, float(np.percentile(lat, 50)) if lat else None)
    return out
