"""Small helpers shared by the benchmark scripts (not part of the product)."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable


def host_line() -> str:
    """One line describing the machine the numbers come from."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"host: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"python {platform.python_version()}, load avg {load:.2f}")


def markdown_doc(title: str, notes: list[str], columns: list[str], rows: list[str], numeric: range) -> str:
    """A results file: ``# title``, the notes (one paragraph each) and a table of ``rows`` (markdown lines)
    under ``columns``; the columns in ``numeric`` (indexes) are right-aligned."""
    align = ["---:" if i in numeric else "---" for i in range(len(columns))]
    head = [f"# {title}", ""] + [line for n in notes for line in (n, "")]
    head += ["| " + " | ".join(columns) + " |", "|" + "|".join(align) + "|"]
    return "\n".join(head + rows) + "\n"


def per_call_us(fn: Callable[[], object], n: int) -> float:
    """Mean µs per call of ``fn`` over ``n`` calls."""
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def median(xs: list[float]) -> float:
    """The median of ``xs``."""
    return statistics.median(xs)


class TimedPolicy:
    """Wraps a policy and adds up the wall time spent inside its ``decide`` (s) and the calls."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.spent_s = 0.0
        self.calls = 0

    def decide(self, view, now_ms):
        t = time.perf_counter()
        out = self.inner.decide(view, now_ms)
        self.spent_s += time.perf_counter() - t
        self.calls += 1
        return out
