"""Importance levels an app declares for its streams and models: who gives way first under overload.

``critical`` > ``high`` > ``normal`` (the default) > ``low``. Under overload the lowest level gives
way first (its rate steps down, its frames are skipped); a critical stream keeps its full rate
while any lower stream can still yield. :data:`RANK` orders them (0 = critical); :func:`check`
validates a level and :func:`parse_levels` reads ``stream=level,…`` (the demo's ``--priority``).
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.errors import ConfigError, did_you_mean

#: the levels, most important first
PRIORITIES: tuple[str, ...] = ("critical", "high", "normal", "low")
#: the level of anything that declares none
DEFAULT_PRIORITY = "normal"
#: level -> rank, 0 = most important
RANK: dict[str, int] = {p: i for i, p in enumerate(PRIORITIES)}
#: the levels above the default: an urgent lane runs them (``edgert.Runtime(urgent_workers=)``)
URGENT_LEVELS: frozenset[str] = frozenset(p for p in PRIORITIES if RANK[p] < RANK[DEFAULT_PRIORITY])
#: urgency lead per level: ms edgert's policy subtracts from a request's effective deadline when it
#: orders requests (``scheduler.policies._reserve``), so the more important of two due about together goes first
LEAD_MS: dict[str, float] = {"critical": 16.0, "high": 8.0, "normal": 0.0, "low": -8.0}


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
