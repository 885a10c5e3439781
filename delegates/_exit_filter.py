"""At interpreter exit, native log lines off stderr and everything else on it.

LiteRT logs "DestroyAccelerator" from a C++ static destructor after Python has finished, when no
Python code can route it. :func:`filter_stderr_at_exit` (an ``atexit`` handler) points fd 2 at a
pipe read by a child process (``python -m delegates._exit_filter``) that writes each line to the
original stderr unless it is a native library's log line (:func:`delegates._native.native_level`).
The application's own writes, from its ``atexit`` handlers included (those registered before
edgert's run after it), and Python's final notes pass through unchanged and in order. The child ends
when every write end of the pipe has closed, that is when this process has exited; a caller that
waits for the process's stderr to close (``subprocess.run``) waits for it too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from pathlib import Path


def filter_stderr_at_exit() -> None:
    """Start the filter and point fd 2 at it; nothing when ``edgert.native`` shows INFO (``-v``), or
    when the filter cannot start (stderr is then left as it is, lines and all)."""
    if logging.getLogger("edgert.native").isEnabledFor(logging.INFO):
        return
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    try:
        r, w = os.pipe()
        child = subprocess.Popen([sys.executable, "-m", "delegates._exit_filter"], stdin=r, stdout=2,
                                 stderr=subprocess.DEVNULL, env=env, cwd=root, close_fds=True)
    except (OSError, ValueError, subprocess.SubprocessError):
        return
    os.close(r)
    os.dup2(w, 2)
    os.close(w)
    # Not waited for: it must outlive this process's last write. Popen's own bookkeeping would reap it at
    # exit, so it is dropped from that list (the process that started it is exiting; init reaps it).
    with contextlib.suppress(AttributeError, ValueError):
        subprocess._active.remove(child)  # type: ignore[attr-defined]  # noqa: SLF001
    child.returncode = 0   # so Popen.__del__ does not warn about a child still running


def _copy(src: int, dst: int) -> None:
    """The child's loop: copy ``src`` to ``dst`` line by line, dropping native log lines."""
    from delegates._native import native_level  # noqa: PLC0415

    buf = b""
    while True:
        chunk = os.read(src, 65536)
        if not chunk:
            break
        *lines, buf = (buf + chunk).split(b"\n")
        out = b"".join(ln + b"\n" for ln in lines if native_level(ln.decode("utf-8", "replace")) is None)
        if out:
            os.write(dst, out)
    if buf and native_level(buf.decode("utf-8", "replace")) is None:
        os.write(dst, buf)


if __name__ == "__main__":
    _copy(0, 1)
