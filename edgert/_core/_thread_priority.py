"""A request's level as its worker thread's OS priority, so a critical run is not time-sliced with a busy process.

An XR device's cores are shared with the renderer, the OS and other apps. The runtime's policy orders
the requests it holds; the OS decides which thread of all processes runs. A worker runs each request
at its level's niceness (:data:`NICENESS`: ``critical`` 10 and ``high`` 5 below the process's own,
``normal`` and ``low`` at it), as Android's NNAPI takes a compilation's priority
(``ANEURALNETWORKS_PRIORITY_HIGH``) and the platform runs an app's render thread at
``THREAD_PRIORITY_DISPLAY``. Nothing changes until the app declares a level above ``normal``.

Linux keeps a niceness per thread (``setpriority(2)`` on a thread id; Python's ``os.setpriority`` with
``threading.get_native_id()``). Lowering a thread's niceness needs ``CAP_SYS_NICE`` or an
``RLIMIT_NICE`` that allows it; without that, the first raise fails, the runtime runs every request at
the process's niceness from then on, and :attr:`ThreadPriority.state` says why (the demo's summary
prints it). ``low`` is not made nicer than the process: a run is never preempted by the runtime, so a
low request slowed on a worker would hold the critical one queued behind it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator

from scheduler.priority import NICENESS

_log = logging.getLogger("edgert")


class ThreadPriority:
    """Whether worker threads take their request's level as their niceness, and whether the OS lets them.

    Args:
        enabled: False runs every request at the process's niceness (``Runtime(thread_priority=False)``).
    """

    def __init__(self, enabled: bool = True) -> None:
        supported = hasattr(os, "setpriority") and hasattr(threading, "get_native_id")
        self.enabled = enabled and supported
        self._lock = threading.Lock()
        self._caller = threading.local()   # .offset: the niceness offset a frame block holds on this thread
        self.state = ("on: critical runs at niceness -10, high at -5 (relative to the process)" if self.enabled
                      else "off (thread_priority=False)" if supported
                      else "off: this OS has no per-thread niceness (os.setpriority)")
        if self.enabled:
            self._probe()

    def _probe(self) -> None:
        """Whether the OS lets this process lower a thread's niceness, tried once on the calling thread and undone
        at once (raising it back is always allowed), so that :attr:`state` says from the start whether critical
        work can run ahead of other processes, not only after the first refusal."""
        tid = threading.get_native_id()
        base = os.getpriority(os.PRIO_PROCESS, tid)
        if base <= -20:
            return
        if self.set(tid, base - 1):
            self.set(tid, base)

    def refuse(self, exc: OSError) -> None:
        """The OS refused a raise: every thread stays at the process's niceness from now on; said once."""
        with self._lock:
            if not self.enabled:
                return
            self.enabled = False
            self.state = (f"off: the OS refused a higher thread priority ({exc.strerror}); grant CAP_SYS_NICE "
                          "or raise RLIMIT_NICE (ulimit -e) to let critical work run ahead of other processes")
        _log.info("edgert: thread priorities %s", self.state)

    def set(self, tid: int, niceness: int) -> bool:
        """Set thread ``tid``'s niceness (clamped to -20‥19); False, with the feature turned off (:meth:`refuse`),
        when the OS refuses."""
        try:
            os.setpriority(os.PRIO_PROCESS, tid, max(-20, min(19, niceness)))
            return True
        except OSError as exc:   # EPERM / EACCES: not allowed to lower it
            self.refuse(exc)
            return False

    @contextlib.contextmanager
    def caller_at(self, level: str | None) -> Iterator[None]:
        """The calling thread at ``level``'s niceness (relative to its own) for the block, then back: a critical
        frame's own pre- and post-processing (``rt.frame(priority=)``) runs as its requests do."""
        off = NICENESS.get(level or "normal", 0) if self.enabled else 0
        held = getattr(self._caller, "offset", 0)   # a frame around this one already lowered it
        if off >= held:   # no more important than the frame it is in (or nothing to do): nothing compounds
            yield
            return
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        if not self.set(tid, before - held + off):   # from the thread's own niceness, not the lowered one
            yield
            return
        self._caller.offset = off
        try:
            yield
        finally:
            self._caller.offset = held
            self.set(tid, before)   # back up: always allowed


class ThreadNice:
    """One worker thread's niceness, set to each request's level before its run (:meth:`run_at`).

    Made on the thread it serves (it reads that thread's id and niceness once)."""

    def __init__(self, policy: ThreadPriority) -> None:
        self.policy = policy
        self.tid = threading.get_native_id() if policy.enabled else 0
        self.base = os.getpriority(os.PRIO_PROCESS, self.tid) if policy.enabled else 0
        self.now = 0   # offset from base in effect

    def run_at(self, level: str) -> None:
        """Make this thread's niceness the process's plus ``level``'s offset (one syscall when it changes)."""
        want = NICENESS.get(level, 0) if self.policy.enabled else 0
        if want == self.now:
            return
        if self.policy.set(self.tid, self.base + want):
            self.now = want
        elif self.now and self.policy.set(self.tid, self.base):   # refused: back to the base (always allowed)
            self.now = 0
