"""Helpers for probing native accelerator libraries: find a ``.so``, capture native logs, spot a Jetson.

Probing is how every accelerator path learns whether it can run here (never
assumed). Native libraries report their failures on the process's stderr
(and some chatter on stdout), not through Python exceptions, so a probe
captures fds 1 and 2 while it tries the path and keeps the
``ERROR``/``WARNING`` lines as the concrete reason.
"""

from __future__ import annotations

import contextlib
import ctypes.util
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

_fd_lock = threading.Lock()


@dataclass(slots=True)
class Captured:
    """Text a native library wrote to stderr while captured (filled in on exit)."""

    text: str = ""
    lines: list[str] = field(default_factory=list)

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
    """Redirect fds 1 and 2 to a temp file while the block runs; the text lands in the yielded object.

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
