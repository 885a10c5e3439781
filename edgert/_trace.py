"""Trace recording: every request as one JSONL line (docs/design.md §6), replayable by the simulator.

``{"t_ms": 12.5, "model": "hand", "slo_ms": 22.0, "id": "f7/hand", "after": "f7/palm", "p": 1.0}``

``t_ms`` is ms since the runtime started; the deadline is ``t_ms + slo_ms``.
A cascade stage carries its frame's time and the id of the request it waited
for (``after``). A request with no deadline gets no ``slo_ms`` key.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import IO


class TraceWriter:
    """Appends request lines to a JSONL file; thread-safe, flushed on close."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._f: IO[str] | None = self.path.open("w", buffering=1 << 16)
        self._lock = threading.Lock()

    def request(self, t_ms: float, model: str, deadline_ms: float, rid: str, after: str | None) -> None:
        """Record one request that became known at ``t_ms`` (ms) with absolute ``deadline_ms``."""
        rec: dict[str, object] = {"t_ms": round(t_ms, 3), "model": model}
        if not math.isinf(deadline_ms):
            rec["slo_ms"] = round(deadline_ms - t_ms, 3)
        rec["id"] = rid
        if after is not None:
            rec["after"] = after
        rec["p"] = 1.0
        line = json.dumps(rec) + "\n"
        with self._lock:
            if self._f is not None:
                self._f.write(line)

    def close(self) -> None:
        """Flush and close (idempotent)."""
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None
