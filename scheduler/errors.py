"""The errors the scheduling layer raises: the root of edgert's exception tree and two leaves.

This is the bottom of the tree because ``scheduler`` is the bottom layer (it imports
nothing of ours). Each error class lives in the lowest layer that raises it and is
re-exported, never redefined, by :mod:`edgert.errors`, the tree's public home, which
draws the whole tree.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO


class EdgeRTError(Exception):
    """Root of every error edgert raises on purpose."""


class ConfigError(EdgeRTError, ValueError):
    """A configuration value is not one we know (names the value and the choices)."""


class TraceError(EdgeRTError, ValueError):
    """A trace, profile or scenario file is malformed (names the file and line)."""


def did_you_mean(kind: str, given: str, choices: Iterable[str]) -> ConfigError:
    """Build a ConfigError for an unknown name, suggesting the closest choices.

    >>> str(did_you_mean("scheduler", "round_robn", ["round_robin", "fixed_worker"]))
    "unknown scheduler 'round_robn'; did you mean 'round_robin'? (choices: fixed_worker, round_robin)"
    """
    choices = sorted(set(choices))
    close = difflib.get_close_matches(given, choices, n=2, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return ConfigError(f"unknown {kind} {given!r}{hint} (choices: {', '.join(choices)})")


def open_input(path: Path, what: str, suffix: str) -> BinaryIO:
    """Open an input file (a device profile, a trace) for reading in binary; every way of failing is
    one TraceError naming ``what`` and the path (missing, a directory, unreadable)."""
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise TraceError(f"{what} {str(path)!r} not found") from None
    except IsADirectoryError:
        raise TraceError(f"{what} {str(path)!r} is a directory; give a {suffix} file") from None
    except OSError as exc:
        raise TraceError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from None
