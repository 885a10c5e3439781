"""Capture what native libraries print while a block runs (a probe, a load, a close).

Probing is how every accelerator path learns whether it can run here (never
assumed). Native libraries report their failures on the process's stderr
(and some chatter on stdout), not through Python exceptions, so a probe
captures fds 1 and 2 while it tries the path and keeps the
``ERROR``/``WARNING`` lines as the concrete reason. Their log lines go to
Python logging as well (:mod:`delegates._native_log`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from delegates._native_log import clean_line, route_native

# Re-entrant: a quiet load may probe its delegate, which captures too (the redirections nest).
_fd_lock = threading.RLock()


@dataclass(slots=True)
class Captured:
    """Text a native library wrote to stderr while captured (filled in on exit)."""

    text: str = ""
    lines: list[str] = field(default_factory=list)
    #: What was written that is not a native log line (those went to logging as well).
    rest: str = ""

    def errors(self, limit: int = 3, prefer: str = "", ignore: str = r"compiler_plugin") -> str:
        """The most telling ERROR/WARNING lines (at most ``limit``), joined; '' when there were none.

        Lines matching regex ``prefer`` come first, then ERROR lines, then
        WARNING lines; lines matching ``ignore`` (known noise) are skipped.
        """
        found = [ln for ln in self.lines if re.search(r"\b(ERROR|Error|error|WARNING|FAIL|failed)\b", ln)
                 and not (ignore and re.search(ignore, ln))]
        def rank(ln: str) -> int:
            if prefer and re.search(prefer, ln, re.IGNORECASE):
                return 0
            return 1 if re.search(r"ERROR|FAIL|failed", ln) else 2
        picked = sorted(dict.fromkeys(found), key=rank)[:limit]
        return " | ".join(picked)


@contextlib.contextmanager
def capture_native_stderr() -> Iterator[Captured]:
    """Redirect fds 1 and 2 to a temp file while the block runs; the text lands in the yielded object,
    and its native log lines also go to ``logging.getLogger("edgert.native")`` (shown with ``edgert -v``).

    Native libraries print to both (the QNN libraries print a banner on
    stdout, which would corrupt ``edgert devices --json``). Process-wide:
    other threads' output during the block is captured too, so use it only
    around short probes. Python's ``sys.stdout``/``sys.stderr`` are flushed first.
    """
    out = Captured()
    with _fd_lock, tempfile.TemporaryFile(mode="w+b") as tmp:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = (os.dup(1), os.dup(2))
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            yield out
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, keep in zip((1, 2), saved):
                os.dup2(keep, fd)
                os.close(keep)
            tmp.seek(0)
            out.text = tmp.read().decode("utf-8", "replace")
            out.lines = [clean for ln in out.text.splitlines() if (clean := clean_line(ln))]
            out.rest = route_native(out.text, logging.getLogger("edgert.native"))


@contextlib.contextmanager
def native_quiet() -> Iterator[None]:
    """Run a block in which native libraries log (a model load, a session's close): each native log
    line goes to ``logging.getLogger("edgert.native")`` at INFO (hidden unless the logger is set to
    show it, e.g. ``edgert -v``), anything else written meanwhile is copied back to stderr.

    LiteRT logs "Created TensorFlow Lite XNNPACK delegate", "Creating LiteRT environment" and
    "DestroyAccelerator" at INFO from C++, ONNX Runtime "No registered plugin EP device found" at
    WARNING; neither has an API to turn that off. Process-wide for the block's duration, like
    :func:`capture_native_stderr`: use it around loads and closes, never around runs.
    """
    cap = Captured()
    try:
        with capture_native_stderr() as cap:
            yield
    finally:
        if cap.rest:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(cap.rest)
                sys.stderr.flush()
