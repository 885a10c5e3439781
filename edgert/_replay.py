"""A live run's trace read back: what happened to each request, and what the simulator takes from it.

:class:`edgert._core._trace.TraceWriter` records every request of a live run as one JSONL line with
its outcome. :func:`read_outcomes` reads those outcomes back; from them, :func:`host_profile` makes
this host's device profile (``edgert profile --from-trace``), :func:`handoff_samples` and
:func:`stage_gaps` give the replay its hand-off delays and the app's own gaps, and
:func:`live_figures` the per-model figures ``edgert simulate --trace`` compares its replay with.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgert.errors import TraceError

if TYPE_CHECKING:
    from scheduler.profile import DeviceProfile


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


#: how the runtime names its urgent lanes (``cpu-urgent``, ``cpu-urgent1`` …: ``Runtime(urgent_workers=)``)
LANE_PREFIX = "cpu-urgent"


def _kind(processor: str) -> str:
    """``cpu1`` -> ``cpu``: the workers whose service times are pooled, from a worker's name (an urgent lane,
    ``cpu-urgent``, is pooled apart: it runs at another thread priority)."""
    return processor.rstrip("0123456789") or processor


def _spec_kind(processor: str) -> str:
    """A worker's processor kind in a profile (an urgent lane is a CPU)."""
    return "cpu" if processor.startswith(LANE_PREFIX) else _kind(processor)


def host_profile(outcomes: list[Outcome], name: str = "this-host", source: str = "a live run",
                 cores: int | None = None) -> DeviceProfile:
    """This host's device profile from a live run: per model and processor, p50 and p90 service time.

    Service time is start to end (ms) of the requests that ran (``ok`` / ``late``), pooled over the
    workers of one kind (``cpu0`` and ``cpu1`` are one CPU; the urgent lanes apart). Cloud round trips are
    left out (a profile's cloud has its own section). An urgent lane (``cpu-urgent``) is a processor with
    ``urgent`` set, so that the simulator keeps it for critical and high requests as the runtime does.
    With more CPU workers than ``cores`` (default: this host's), each CPU run's time is divided by its share
    of the cores at its start (:func:`_core_shares`) and the profile says ``cpu_cores``, so that the
    simulator stretches a run where the contention is rather than every run by its average; but only where the
    trace shows that contention (:func:`_sharing_explains`): a host whose runs took no longer beside more runs
    than cores (threads at other priorities, runs that overlap briefly) keeps its times as measured.

    Raises:
        TraceError: no request of the trace ran on a local processor.
    """
    from scheduler.profile import DeviceProfile, ProcessorSpec  # noqa: PLC0415

    ran = _ran_here(outcomes)
    if not ran:
        raise TraceError("the trace has no request that ran on this host's processors (was it written by "
                         "a live run? lines need status, processor and latency_ms)")
    procs = sorted({o.processor for o in ran})
    cores = (os.cpu_count() or 1) if cores is None else cores
    share = _shares(ran, cores)
    shared = share is not None
    svc: dict[tuple[str, str], list[float]] = {}
    for i, o in enumerate(ran):
        ms = o.latency_ms - o.wait_ms
        if share is not None and _spec_kind(o.processor) == "cpu":
            ms /= share[i]
        svc.setdefault((o.model, _kind(o.processor)), []).append(ms)
    p50: dict[str, dict[str, float]] = {}
    p90: dict[str, dict[str, float]] = {}
    for (model, kind), xs in sorted(svc.items()):
        for p in procs:
            if _kind(p) == kind:
                p50.setdefault(model, {})[p] = round(float(np.percentile(xs, 50)), 4)
                p90.setdefault(model, {})[p] = round(float(np.percentile(xs, 90)), 4)
    return DeviceProfile(
        name=name, processors=[ProcessorSpec(p, _spec_kind(p), urgent=p.startswith(LANE_PREFIX)) for p in procs],
        latency_ms=p50, latency_p90_ms=p90, cpu_cores=cores if shared else None,
        description=f"service times measured on this host during {source}",
        sources={"latency_ms/*": f"measured on this host: p50 start-to-end time of the requests of {source}, "
                                 "pooled over the workers of one kind",
                 "latency_p90_ms/*": "measured on this host: p90 of the same"})


def _ran_here(outcomes: list[Outcome]) -> list[Outcome]:
    """The requests of ``outcomes`` that ran on this host's processors (``ok`` / ``late``, not the cloud)."""
    return [o for o in outcomes if o.status in ("ok", "late") and o.processor and o.processor != "cloud"]


def _shares(ran: list[Outcome], cores: int) -> list[float] | None:
    """By run of ``ran`` (:func:`_ran_here`): its share of the cores (:func:`_core_shares`), where the CPU workers
    were more than ``cores`` and the trace shows the runs took longer for it (:func:`_sharing_explains`); None:
    each run's time as measured."""
    if sum(1 for p in {o.processor for o in ran} if _spec_kind(p) == "cpu") <= cores:
        return None
    share = _core_shares(ran, cores)
    return share if _sharing_explains(ran, share) else None


def run_times(outcomes: list[Outcome], cores: int | None = None) -> dict[str, tuple[str, float]]:
    """By trace id: the processor kind a request ran on live and its run time there (ms, start to end; with its
    share of the cores taken apart where :func:`host_profile` takes it apart, for the same ``cores``), for every
    request that ran on this host's processors: a replay on this host's profile may run each request as long
    as it ran live (``SimConfig.run_ms``) rather than drawing its time from the profile's p50 and p90."""
    ran = _ran_here(outcomes)
    share = _shares(ran, (os.cpu_count() or 1) if cores is None else cores)
    return {o.key: (_spec_kind(o.processor), (o.latency_ms - o.wait_ms) * (1.0 if share is None else 1.0 / share[i]))
            for i, o in enumerate(ran) if o.key}


def _core_shares(ran: list[Outcome], cores: int) -> list[float]:
    """By run of ``ran``: how much longer it took for sharing ``cores`` CPU cores with the CPU runs beside it, as
    the simulator stretches a run (``DeviceProfile.cpu_cores``): the runs in progress at its start, itself
    included, over the cores (at least 1.0)."""
    cpu = [o for o in ran if _spec_kind(o.processor) == "cpu"]
    starts = np.sort(np.array([o.start_ms for o in cpu]))
    ends = np.sort(np.array([o.end_ms for o in cpu]))
    out = []
    for o in ran:
        if _spec_kind(o.processor) != "cpu":
            out.append(1.0)
            continue
        t = o.start_ms   # runs started by t (itself included) less those ended by t
        running = int(np.searchsorted(starts, t, "right")) - int(np.searchsorted(ends, t, "right"))
        out.append(max(1.0, running / cores))
    return out


def _sharing_explains(ran: list[Outcome], share: list[float]) -> bool:
    """Whether the runs of ``ran`` took longer for sharing the cores as ``share`` (by run, :func:`_core_shares`)
    says: each model's times on one kind of processor, with their shares taken apart, spread less than as
    measured (the median absolute deviation of their logarithms, averaged over the runs). Where sharing is what
    made the times differ, taking it apart leaves each model's own time; where the runs did not share the cores
    so, it only adds the shares' spread to the times."""
    measured: dict[tuple[str, str], list[float]] = {}
    apart: dict[tuple[str, str], list[float]] = {}
    for o, sh in zip(ran, share):
        ms = o.latency_ms - o.wait_ms
        if ms > 0.0:
            key = (o.model, _kind(o.processor))
            measured.setdefault(key, []).append(math.log(ms))
            apart.setdefault(key, []).append(math.log(ms / sh))
    return _log_spread(apart) < _log_spread(measured)


def _log_spread(groups: dict[tuple[str, str], list[float]]) -> float:
    """The median absolute deviation of each group's values from its median, averaged over every value."""
    total = sum(len(xs) for xs in groups.values())
    spread = 0.0
    for xs in groups.values():
        a = np.asarray(xs)
        spread += len(xs) * float(np.median(np.abs(a - np.median(a))))
    return spread / total if total else 0.0


def never_ran(outcomes: list[Outcome]) -> dict[str, str]:
    """The models none of whose requests ran on this host's processors (every one dropped or failed, as a
    stream that was shed throughout an overload), each with one line saying so: nothing of its run time
    was measured, so :func:`host_profile` has no latency for it."""
    by: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by.setdefault(o.model, []).append(o)
    out: dict[str, str] = {}
    for model, os_ in sorted(by.items()):
        if any(o.status in ("ok", "late") and o.processor and o.processor != "cloud" for o in os_):
            continue
        counts = ", ".join(f"{sum(o.status == s for o in os_)} {s}" for s in sorted({o.status for o in os_}))
        reason = next((o.reason for o in os_ if o.reason), "")
        out[model] = (f"model {model!r}: none of its {len(os_)} live requests ran on this host ({counts}"
                      + (f"; first reason: {reason}" if reason else "") + "), so nothing of its run time was measured")
    return out


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
