"""Importance levels an app declares for its streams and models: who gives way first under overload.

``critical`` > ``high`` > ``normal`` (the default) > ``low``. Under overload the lowest level gives
way first (its rate steps down, its frames are skipped); a critical stream keeps its full rate
while any lower stream can still yield. A level's whole meaning is one row of :data:`LEVELS`:
its rank, the lead edgert's policy gives its requests, the OS niceness its runs take, and the
margin the stream controller (:mod:`scheduler.streams`) keeps when it admits its frames.
:func:`check` validates a level and :func:`parse_levels` reads ``stream=level,…`` (the demo's ``--priority``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.errors import ConfigError, did_you_mean


@dataclass(frozen=True, slots=True)
class Level:
    """What one importance level means, everywhere it matters.

    Attributes:
        rank: 0 = most important.
        lead_ms: ms edgert's policy subtracts from a request's effective deadline when it orders requests
            (``scheduler.policies._reserve``): of two requests due about together the more important goes first.
        niceness: the OS niceness a worker thread runs the level's requests at, relative to the process
            (``edgert._core._thread_priority``); negative: more CPU when the cores are contended.
        error_quantile: the quantile of a stream's recent finish-time prediction errors that the stream
            controller adds to a frame's predicted finish before it compares it with the deadline, at the
            start (it then follows the stream's late share, :data:`scheduler.streams.LATE_TARGET`). A
            critical frame takes a lower one: skipping it is a sure miss of the stream that matters most.
        urgent: an urgent lane (``edgert.Runtime(urgent_workers=)``) runs its requests.
    """

    rank: int
    lead_ms: float
    niceness: int
    error_quantile: float
    urgent: bool


#: the levels, most important first, and what each means
LEVELS: dict[str, Level] = {
    "critical": Level(rank=0, lead_ms=16.0, niceness=-10, error_quantile=0.75, urgent=True),
    "high": Level(rank=1, lead_ms=8.0, niceness=-5, error_quantile=0.9, urgent=True),
    "normal": Level(rank=2, lead_ms=0.0, niceness=0, error_quantile=0.9, urgent=False),
    "low": Level(rank=3, lead_ms=-8.0, niceness=0, error_quantile=0.9, urgent=False),
}
#: the levels, most important first
PRIORITIES: tuple[str, ...] = tuple(LEVELS)
#: the level of anything that declares none
DEFAULT_PRIORITY = "normal"
#: level -> rank, 0 = most important
RANK: dict[str, int] = {p: v.rank for p, v in LEVELS.items()}
#: the levels an urgent lane runs (``edgert.Runtime(urgent_workers=)``)
URGENT_LEVELS: frozenset[str] = frozenset(p for p, v in LEVELS.items() if v.urgent)
#: urgency lead per level (ms; :attr:`Level.lead_ms`)
LEAD_MS: dict[str, float] = {p: v.lead_ms for p, v in LEVELS.items()}
#: niceness per level, relative to the process (:attr:`Level.niceness`)
NICENESS: dict[str, int] = {p: v.niceness for p, v in LEVELS.items()}


def check(level: object, where: str = "priority") -> str:
    """``level`` when it is one of :data:`PRIORITIES`.

    Raises:
        ConfigError: not a string, or an unknown level ("did you mean …").
    """
    if not isinstance(level, str):
        raise ConfigError(f"{where} must be one of {', '.join(PRIORITIES)} (a string), got {level!r}")
    if level not in RANK:
        raise did_you_mean(f"{where} level", level, PRIORITIES)
    return level


def parse_levels(spec: str, streams: Iterable[str]) -> dict[str, str]:
    """``"hands=critical,pose=low"`` as ``{"hands": "critical", "pose": "low"}``, each name one of ``streams``.

    Raises:
        ConfigError: an item without ``=``, an unknown stream or level ("did you mean …"), a stream named twice.
    """
    known = list(streams)
    out: dict[str, str] = {}
    for item in (x.strip() for x in spec.split(",")):
        if not item:
            continue
        name, eq, level = (s.strip() for s in item.partition("="))
        if not eq or not name:
            raise ConfigError(f"--priority takes stream=level items separated by commas "
                              f"(e.g. hands=critical,pose=low), got {item!r}")
        if name not in known:
            raise did_you_mean("stream", name, known)
        if name in out:
            raise ConfigError(f"--priority names stream {name!r} twice")
        out[name] = check(level, f"priority of stream {name!r}")
    return out
