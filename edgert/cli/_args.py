"""argparse types for the ``edgert`` command line: every value checked before a command runs.

Each type raises :class:`argparse.ArgumentTypeError`, which argparse prints as one
``edgert <cmd>: error: argument --x: …`` line with exit code 2. Output paths are checked
here too, so a run never ends by failing to write its result.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path

#: Longest simulated or live run accepted (s): one day.
MAX_SECONDS = 86_400.0
#: Largest ``--load`` multiplier.
MAX_LOAD = 1_000.0
#: Largest burst factor.
MAX_BURST_FACTOR = 100.0
#: Image formats ``--plot`` can write (matplotlib's savefig, by suffix).
PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def _float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return v


def number(low: float, high: float, *, low_open: bool = True, unit: str = "") -> Callable[[str], float]:
    """A float type within ``(low, high]`` (``[low, high]`` when not ``low_open``)."""
    def parse(text: str) -> float:
        v = _float(text)
        if not ((v > low if low_open else v >= low) and v <= high):
            op = ">" if low_open else ">="
            raise argparse.ArgumentTypeError(f"must be {op} {low:g} and <= {high:g}{unit}, got {text}")
        return v
    parse.__name__ = "number"   # argparse names the type in its messages
    return parse


def integer(low: int, high: int) -> Callable[[str], int]:
    """An int type within ``[low, high]``."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"must be >= {low} and <= {high}, got {text}")
        return v
    parse.__name__ = "integer"
    return parse


#: Seconds of a run: (0, one day].
seconds = number(0.0, MAX_SECONDS, unit=" s")
#: A request-rate multiplier: (0, MAX_LOAD].
load = number(0.0, MAX_LOAD)
#: A random seed: numpy takes 0 .. 2**63 - 1.
seed = integer(0, 2**63 - 1)
#: A worker count.
workers = integer(0, 1024)   # 0: no CPU worker (a cloud-only runtime with --offload)


def output_path(*suffixes: str) -> Callable[[str], str]:
    """A file the command will write: its directory exists and is writable, it is not a directory,
    and (when ``suffixes`` are given) it ends in one of them."""
    def parse(text: str) -> str:
        p = Path(text)
        if suffixes and p.suffix.lower() not in suffixes:
            raise argparse.ArgumentTypeError(f"must end in {' or '.join(suffixes)} (the file type is taken "
                                             f"from the suffix), got {text!r}")
        if p.is_dir():
            raise argparse.ArgumentTypeError(f"is a directory, give a file name: {text!r}")
        parent = p.resolve().parent
        if not parent.is_dir():
            raise argparse.ArgumentTypeError(f"cannot write {text!r}: directory {str(parent)!r} does not exist")
        if not os.access(parent, os.W_OK):
            raise argparse.ArgumentTypeError(f"cannot write {text!r}: directory {str(parent)!r} is not writable")
        return text
    parse.__name__ = "output path"
    return parse


def burst(text: str) -> str:
    """``START:DUR:FACTOR``: finite seconds within a day, a factor in [1, MAX_BURST_FACTOR]."""
    parts = text.split(":")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"must be START:DUR:FACTOR, e.g. 4:2:3, got {text!r}")
    start, dur, factor = (_float(x) for x in parts)
    if not (0 <= start <= MAX_SECONDS and 0 < dur <= MAX_SECONDS and 1 <= factor <= MAX_BURST_FACTOR):
        raise argparse.ArgumentTypeError(
            f"must be START:DUR:FACTOR with 0 <= START <= {MAX_SECONDS:g} s, 0 < DUR <= {MAX_SECONDS:g} s, "
            f"1 <= FACTOR <= {MAX_BURST_FACTOR:g}, got {text!r}")
    return text
