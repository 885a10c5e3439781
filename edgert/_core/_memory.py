"""Memory: the process's resident and peak resident size, and what each loaded model keeps resident.

Figures are MB (10^6 bytes). The process's peak is the kernel's high-water mark of its resident
set (``VmHWM`` in ``/proc/self/status``; ``getrusage`` where there is no ``/proc``). A model's
resident share is measured when it is loaded: the growth of the process's resident set while its
sessions were opened and warmed up (neither LiteRT nor ONNX Runtime reports a session's memory
through its Python API), so it is what that model added, on this host, at that time. With several
loads in parallel threads the shares blur; the process's figures stay exact.
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgert._core._model import LoadedModel
    from edgert._core._run import Worker

_MB = 1e6


def _status_kb(key: str) -> int | None:
    """A ``kB`` field of /proc/self/status (``VmRSS``, ``VmHWM``), or None where there is none."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_rss_mb() -> float:
    """This process's peak resident set so far, MB (VmHWM, or getrusage's ru_maxrss)."""
    kb = _status_kb("VmHWM")
    if kb is not None:
        return kb * 1024 / _MB
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / _MB if sys.platform == "darwin" else maxrss * 1024 / _MB   # bytes on macOS, kB elsewhere


def rss_mb() -> float | None:
    """This process's resident set now, MB (None where /proc is missing)."""
    kb = _status_kb("VmRSS")
    return None if kb is None else kb * 1024 / _MB


def host_memory_mb() -> dict[str, float]:
    """The host's ``total`` and ``available`` memory, MB (empty where /proc/meminfo is missing)."""
    out: dict[str, float] = {}
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "MemAvailable"):
                    out["total" if key == "MemTotal" else "available"] = int(rest.split()[0]) * 1024 / _MB
    except (OSError, ValueError, IndexError):
        return {}
    return out


class ResidentGrowth:
    """How much the resident set grew since :meth:`start`, MB: ``with ResidentGrowth() as g: …`` then
    ``g.mb``, or ``g = ResidentGrowth().start(); …; g.read()``. None where it cannot be read. A new
    peak counts too: memory touched and given back meanwhile is part of what was needed."""

    def __init__(self) -> None:
        self.mb: float | None = None
        self._rss0: float | None = None
        self._hwm0 = 0.0

    def start(self) -> ResidentGrowth:
        """Take the starting point (now)."""
        self._rss0 = rss_mb()
        self._hwm0 = peak_rss_mb()
        return self

    def read(self) -> float | None:
        """Growth since :meth:`start`, MB (>= 0), or None where the resident set cannot be read."""
        rss1 = rss_mb()
        if self._rss0 is None or rss1 is None:
            return None
        grew = rss1 - self._rss0
        hwm = peak_rss_mb()
        if hwm > self._hwm0:   # a new peak meanwhile: what was needed at its height
            grew = max(grew, hwm - self._rss0)
        return max(0.0, grew)

    def __enter__(self) -> ResidentGrowth:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.mb = self.read()


def give_back_freed() -> None:
    """Ask the C allocator to return freed memory to the system (glibc's ``malloc_trim``; a no-op
    elsewhere), so the next :class:`ResidentGrowth` sees what is really new rather than reused."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes  # noqa: PLC0415

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return


def process_memory() -> dict[str, Any]:
    """The process's ``peak_rss_mb`` and ``rss_mb``, and the host's ``host_total_mb`` / ``host_available_mb``."""
    host = host_memory_mb()
    rss = rss_mb()
    return {"peak_rss_mb": round(peak_rss_mb(), 1),
            **({} if rss is None else {"rss_mb": round(rss, 1)}),
            **({"host_total_mb": round(host["total"], 1)} if "total" in host else {}),
            **({"host_available_mb": round(host["available"], 1)} if "available" in host else {})}


def pid_summary() -> str:
    """One line: this process's peak and current resident memory, and the host's."""
    m = process_memory()
    now = f", {m['rss_mb']:.0f} MB now" if "rss_mb" in m else ""
    host = (f"; host {m['host_available_mb']:.0f} of {m['host_total_mb']:.0f} MB available"
            if "host_total_mb" in m and "host_available_mb" in m else "")
    return f"memory: this process peaked at {m['peak_rss_mb']:.0f} MB resident{now}{host}"


def runtime_memory(models: Iterable[LoadedModel], workers: Iterable[Worker]) -> dict[str, Any]:
    """The process's memory and, per model, ``resident_mb`` (its load's growth) and ``copies``: the
    sessions (interpreters) it has open over every worker — 1 per processor while its runs never
    overlapped, however many CPU workers share it (:mod:`delegates.sharing`)."""
    from delegates.sharing import SessionPool  # noqa: PLC0415

    workers = list(workers)
    per_model: dict[str, Any] = {}
    for lm in models:
        seen: dict[int, Any] = {}
        for w in workers:
            entry = w.sessions.get(lm.name)
            if entry is not None:
                seen.setdefault(id(entry[1]), entry[1])
        copies = sum(s.size if isinstance(s, SessionPool) else 1 for s in seen.values())
        per_model[lm.name] = {"resident_mb": None if lm.resident_mb is None else round(lm.resident_mb, 1),
                              "copies": copies}
    return {**process_memory(), "per_model": per_model}


__all__ = ["ResidentGrowth", "give_back_freed", "host_memory_mb", "peak_rss_mb", "pid_summary", "process_memory", "rss_mb",
           "runtime_memory"]
