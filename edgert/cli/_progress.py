"""Progress on stderr for any step over a second, one look for every command (no dependency).

On a terminal: one line redrawn in place (``label  [#####-----]  42%  3.1 s``, and
``ETA 4.2 s`` when asked for), cleared when done. Piped: a line at each quarter (or each
``1/steps``), so a log shows the run moving without filling up.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

#: Bar width in characters.
BAR = 20


class Progress:
    """``update(fraction)`` as work goes on, ``close()`` at the end (or use it as a context manager)."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True, *,
                 eta: bool = False, steps: int = 4) -> None:
        """``eta``: show the time left (from the pace so far); ``steps``: piped lines over the run."""
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.eta = eta
        self.steps = steps
        self._tty = self.stream.isatty()
        self._t0 = time.perf_counter()
        self._last_draw = 0.0
        self._quarter = 0

    def update(self, fraction: float, note: str = "") -> None:
        """Show ``fraction`` (0..1) done; ``note`` adds a few words (e.g. ``run 2/4``)."""
        if not self.enabled:
            return
        f = min(1.0, max(0.0, fraction))
        now = time.perf_counter()
        elapsed = now - self._t0
        if self._tty:
            if now - self._last_draw < 0.1 and f < 1.0:
                return
            self._last_draw = now
            fill = int(round(BAR * f))
            self.stream.write(f"\r{self.label}  [{'#' * fill}{'-' * (BAR - fill)}] {100 * f:3.0f}%  "
                              f"{elapsed:.1f} s{self._eta(f, elapsed)}  {note}\x1b[K")
            self.stream.flush()
        elif int(f * self.steps) > self._quarter:
            self._quarter = int(f * self.steps)
            print(f"{self.label}: {100 * f:.0f}% after {elapsed:.1f} s{self._eta(f, elapsed)} {note}".rstrip(),
                  file=self.stream, flush=True)

    def _eta(self, f: float, elapsed: float) -> str:
        if not self.eta or f <= 0.0 or f >= 1.0:
            return ""
        return f", ETA {elapsed * (1.0 - f) / f:.0f} s"

    def close(self) -> None:
        """Clear the line on a terminal."""
        if self.enabled and self._tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
