"""Native log lines into Python logging: recognise a line LiteRT or ONNX Runtime logged from C++, and route it.

LiteRT and ONNX Runtime log to the process's stderr, not through Python. :func:`native_level` tells
such a line (and its level) from anything else; :class:`NativeLogRouter` (started by the command
line) sends every one to ``logging.getLogger("edgert.native")``, so the command line is quiet
unless ``-v``; :func:`route_native` does the same for text captured around a probe or a load
(:mod:`delegates._native_capture`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading

# A library's logger: without a handler of its own, Python's last-resort handler would print the native
# WARNING lines (ORT's "No registered plugin EP device found", LiteRT's NPU registry) on stderr. With
# it, they show only where the application configures logging (``edgert -v`` does).
logging.getLogger("edgert.native").addHandler(logging.NullHandler())

#: A line a native library logged: TFLite / LiteRT minimal logging (``INFO: …``), absl / glog
#: (``I0101 12:00:00.000000 123 file.cc:1] …``) and ONNX Runtime (``… [W:onnxruntime:…]``).
NATIVE_LINE = re.compile(
    r"^(?:(?P<tfl>VERBOSE|DEBUG|INFO|WARNING|ERROR): |(?P<absl>[IWEF])\d{4} [\d:.]+\s+\d+ \S+:\d+\] |"
    r".*\[(?P<ort>[VIWEF]):onnxruntime:)")
_LEVELS = {"VERBOSE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING,
           "ERROR": logging.ERROR, "V": logging.DEBUG, "I": logging.INFO, "W": logging.WARNING,
           "E": logging.ERROR, "F": logging.CRITICAL}


def native_level(line: str) -> int | None:
    """The logging level of a native library's log line, or None when ``line`` is not one.

    >>> native_level("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.") == logging.INFO
    True
    >>> native_level("Traceback (most recent call last):") is None
    True
    """
    m = NATIVE_LINE.match(_ANSI.sub("", line))
    if m is None:
        return None
    return _LEVELS[m.group("tfl") or m.group("absl") or m.group("ort")]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\d[ T][\d:.]+\s*")


def clean_line(line: str) -> str:
    """A log line without colour codes and leading timestamp."""
    return _STAMP.sub("", _ANSI.sub("", line).strip()).strip()


def route_native(text: str, log: logging.Logger) -> str:
    """Send the native log lines of ``text`` to ``log`` at INFO (the line keeps its own level word);
    return the other lines.

    INFO, not their own level: what a probe or a load captures is chatter the caller has already
    turned into a reason or an exception ("No adapters found" is the probe's reason, "not
    accelerated" the load error), so it shows only when asked for (``edgert -v``)."""
    rest: list[str] = []
    for line in text.splitlines(keepends=True):
        if native_level(line.rstrip("\n")) is None:
            rest.append(line)
        elif log.isEnabledFor(logging.INFO):
            log.info("%s", clean_line(line))
    return "".join(rest)


class NativeLogRouter:
    """Routes what native libraries print on fd 2 into Python logging (``edgert.native``).

    LiteRT and ONNX Runtime log from C++ straight to the process's stderr (an
    INFO line per XNNPACK delegate, per accelerator destroyed …); no
    environment variable or API of ``ai_edge_litert`` turns that off
    (``TF_CPP_MIN_LOG_LEVEL`` was measured to change nothing). So while the
    router runs, fd 2 is a pipe: a reader thread sends every native log line to
    ``logging.getLogger("edgert.native")`` at the line's own level (INFO lines
    are then hidden unless the logger is set to INFO, e.g. by ``edgert -v``) and
    copies everything else — Python's own stderr, tracebacks, progress — to the
    real stderr unchanged. Process-wide: start it once, from the command line.
    """

    def __init__(self, logger: logging.Logger | None = None, hold_s: float = 0.05) -> None:
        self.log = logger or logging.getLogger("edgert.native")
        self._hold_s = hold_s   # how long a partial line waits for its end before it is copied (s)
        self._saved: int | None = None
        self._thread: threading.Thread | None = None
        self._read_fd = -1
        #: The real stderr while the router runs (give it to logging handlers), else ``sys.stderr``.
        self.stream = sys.stderr

    def start(self) -> NativeLogRouter:
        """Point fd 2 at the pipe and start the reader (idempotent)."""
        if self._saved is not None:
            return self
        sys.stderr.flush()
        self._saved = os.dup(2)
        r, w = os.pipe()
        os.dup2(w, 2)
        os.close(w)
        self._read_fd = r
        self.stream = os.fdopen(os.dup(self._saved), "w", buffering=1, errors="replace")
        self._thread = threading.Thread(target=self._pump, name="edgert-native-log", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Give fd 2 back (the pipe closes, the reader drains it and ends)."""
        if self._saved is None:
            return
        sys.stderr.flush()
        os.dup2(self._saved, 2)   # the pipe's last write end closes: the reader sees EOF
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        os.close(self._saved)
        os.close(self._read_fd)
        self._saved = None
        with contextlib.suppress(OSError):
            self.stream.close()
        self.stream = sys.stderr

    def __enter__(self) -> NativeLogRouter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _pump(self) -> None:
        import select  # noqa: PLC0415

        buf = b""
        while True:
            ready, _, _ = select.select([self._read_fd], [], [], self._hold_s if buf else None)
            if not ready:          # a partial line (a progress bar's \r update): copy it now
                self._copy(buf)
                buf = b""
                continue
            chunk = os.read(self._read_fd, 65536)
            if not chunk:
                self._route(buf)
                return
            *lines, buf = (buf + chunk).split(b"\n")
            for ln in lines:
                self._route(ln + b"\n")

    def _route(self, raw: bytes) -> None:
        if not raw:
            return
        text = raw.decode("utf-8", "replace").rstrip("\n")
        level = native_level(text)
        if level is None:
            self._copy(raw)
        elif self.log.isEnabledFor(level):
            self.log.log(level, "%s", clean_line(text))

    def _copy(self, raw: bytes) -> None:
        if raw and self._saved is not None:
            with contextlib.suppress(OSError):
                os.write(self._saved, raw)
