"""The host this process runs on, as the runtime, the sweep and the apps count it: the CPU cores it may use."""

from __future__ import annotations

import os


def cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one, else the logical CPUs; >= 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux (macOS)
        return max(1, os.cpu_count() or 1)
