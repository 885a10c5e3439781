"""Native libraries: find a ``.so``, capture or route their logs, spot a Jetson.

Probing is how every accelerator path learns whether it can run here (never
assumed). Native libraries report their failures on the process's stderr
(and some chatter on stdout), not through Python exceptions, so a probe
captures fds 1 and 2 while it tries the path and keeps the
``ERROR``/``WARNING`` lines as the concrete reason. Outside probes,
:class:`NativeLogRouter` sends their log lines into Python logging, so the
command line is quiet unless ``-v``.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import logging
import os
import platform
import re
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: Where device images keep vendor libraries (Android, Jetson, plain Linux).
LIBRARY_DIRS: tuple[str, ...] = (
    "/vendor/lib64", "/system/vendor/lib64", "/system/lib64", "/odm/lib64", "/data/local/tmp",
    "/usr/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu/tegra", "/usr/lib/x86_64-linux-gnu",
    "/usr/local/lib", "/usr/lib",
)

# A library's logger: without a handler of its own, Python's last-resort handler would print the native
# WARNING lines (ORT's "No registered plugin EP device found", LiteRT's NPU registry) on stderr. With
# it, they show only where the application configures logging (``edgert -v`` does).
logging.getLogger("edgert.native").addHandler(logging.NullHandler())

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
            out.lines = [clean for ln in out.text.splitlines() if (clean := _clean(ln))]
            out.rest = _route_native(out.text, logging.getLogger("edgert.native"))


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


def _route_native(text: str, log: logging.Logger) -> str:
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
            log.info("%s", _clean(line))
    return "".join(rest)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\d[ T][\d:.]+\s*")


def _clean(line: str) -> str:
    """A log line without colour codes and leading timestamp."""
    return _STAMP.sub("", _ANSI.sub("", line).strip()).strip()


def find_library(name: str, extra_dirs: Iterable[str | Path] = ()) -> str | None:
    """Full path of shared library ``name`` (e.g. ``libQnnTFLiteDelegate.so``), or None.

    Looks in ``extra_dirs``, ``$LD_LIBRARY_PATH``, :data:`LIBRARY_DIRS`, then
    asks the dynamic linker (``ctypes.util.find_library``). A ``name`` that is
    already a path is returned when the file exists.
    """
    if os.sep in name:
        return name if Path(name).is_file() else None
    env = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    for d in [*map(str, extra_dirs), *env, *LIBRARY_DIRS]:
        p = Path(d) / name
        if p.is_file():
            return str(p)
    stem = re.sub(r"^lib|\.so.*$", "", name)
    return ctypes.util.find_library(stem)


def searched_dirs(extra_dirs: Iterable[str | Path] = ()) -> str:
    """A short account of where :func:`find_library` looked, for error messages."""
    extra = ", ".join(map(str, extra_dirs))
    return ((extra + ", " if extra else "") + "$LD_LIBRARY_PATH, /vendor/lib64, /system/lib64, /data/local/tmp, "
            "/usr/lib/<arch>[/tegra], /usr/local/lib and the linker cache")


def jetson_model() -> str | None:
    """The Jetson board name when this host is an NVIDIA Jetson (Tegra), else None."""
    for p in ("/proc/device-tree/model", "/sys/firmware/devicetree/base/model"):
        with contextlib.suppress(OSError):
            text = Path(p).read_text(errors="replace").strip("\x00 \n")
            if "jetson" in text.lower() or "tegra" in text.lower():
                return text
    if Path("/etc/nv_tegra_release").exists():
        return "NVIDIA Tegra (/etc/nv_tegra_release)"
    return None


def host_summary() -> str:
    """``Linux 6.1 x86_64, AMD EPYC …, 2 logical CPUs, Python 3.11.7`` for profile sources."""
    cpu = platform.processor() or ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware")):
                cpu = line.split(":", 1)[1].strip()
                break
    board = jetson_model()
    parts = [f"{platform.system()} {platform.release()} {platform.machine()}", cpu or "unknown CPU",
             f"{os.cpu_count()} logical CPUs", f"Python {platform.python_version()}"]
    if board:
        parts.insert(1, board)
    return ", ".join(parts)


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
            self.log.log(level, "%s", _clean(text))

    def _copy(self, raw: bytes) -> None:
        if raw and self._saved is not None:
            with contextlib.suppress(OSError):
                os.write(self._saved, raw)
