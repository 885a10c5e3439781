"""A sweep's grid: a TOML file of lists under ``edgert simulate``'s names, checked whole before a cell runs.

::

    scenario  = ["ar_assistant", "social_a"]      # or trace = ["run.jsonl"]
    device    = ["galaxy-s23", "xr2-gen2"]        # shipped names or JSON paths
    scheduler = ["edgert", "fixed_worker"]
    load      = [1, 2]
    seed      = [0, 1]
    duration  = 600                               # simulated seconds (a number)
    streams   = true                              # frames through the stream controller (load = users)
    priority  = ["hand_tracking=critical", "none"]  # as simulate --priority (turns streams on)

A key left out takes ``edgert simulate``'s default; a single value may stand without a list.
Every combination is a cell, in the grid's key order (the last key varies fastest). Paths are
taken relative to the grid file's directory. ``objective`` applies to the schedulers that have
one (edgert's): a scheduler without one gets one cell per combination of the other keys, its
``objective`` left empty.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgert.errors import ConfigError

#: The grid's keys, in the order of ``edgert simulate``'s options.
KEYS: tuple[str, ...] = ("scenario", "trace", "device", "scheduler", "objective", "load", "seed", "burst",
                         "duration", "streams", "priority")
#: Largest ``load`` (as ``edgert simulate --load``).
MAX_LOAD = 1_000.0
#: Longest ``duration`` (s), as ``edgert simulate --duration``.
MAX_SECONDS = 86_400.0
#: Most requests one cell may generate (as ``edgert simulate``).
MAX_SIM_REQUESTS = 20_000_000


@dataclass(frozen=True, slots=True)
class Cell:
    """One combination of the grid: ``params`` as written (grid keys, grid order) and what they mean.

    Attributes:
        params: ``(key, value as written in the grid)`` for every grid key (``objective`` None where the
            scheduler has none).
        trace / device_path: resolved paths of file inputs (None for a scenario / a shipped profile).
        duration_s: simulated seconds (None: simulate's default).
    """

    params: tuple[tuple[str, Any], ...]
    scenario: str | None
    trace: Path | None
    device: str
    device_path: Path | None
    scheduler: str | None
    objective: str | None
    load: float
    seed: int
    burst: str | None
    duration_s: float | None
    #: as ``edgert simulate --streams`` (None: its default)
    streams: bool | None = None
    #: as ``edgert simulate --priority`` (``STREAM=LEVEL,...``; None: none)
    priority: str | None = None

    def key(self, version: str, digests: Mapping[str, str]) -> str:
        """The cell's identity in an output: its params, edgert's version and its input files' sha256."""
        blob = json.dumps([list(self.params), version, sorted(digests.items())], default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def label(self) -> str:
        """``scenario=ar_assistant device=pixel4 …`` (the values as written)."""
        return " ".join(f"{k}={v}" for k, v in self.params if v is not None)


@dataclass(frozen=True, slots=True)
class Grid:
    """A checked grid: its file, its keys in order, and every cell."""

    path: Path
    keys: tuple[str, ...]
    cells: tuple[Cell, ...]


def load_grid(path: str | Path) -> Grid:
    """Read and check a grid file.

    Raises:
        ConfigError: one line naming what is wrong: the file, TOML syntax, an unknown key (with "did you
            mean"), an unknown scenario / device / scheduler / objective, a value out of range, a cell too
            large to simulate.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read grid {str(p)!r}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"grid {str(p)!r} is not TOML: {exc}") from None
    return parse_grid(data, p)


def parse_grid(data: Mapping[str, Any], path: Path) -> Grid:
    """A :class:`Grid` from parsed TOML (``path``: the grid file, whose directory relative paths start from)."""
    from scheduler.errors import did_you_mean  # noqa: PLC0415

    where = f"grid {path.name}"
    for k in data:
        if k not in KEYS:
            raise ConfigError(f"{where}: {did_you_mean('key', k, KEYS)}")
    if ("scenario" in data) == ("trace" in data):
        raise ConfigError(f"{where}: give one of scenario = [...] or trace = [...]")
    if "device" not in data:
        raise ConfigError(f"{where}: no device = [...] (a shipped profile name or a JSON path)")
    values = {k: _as_list(where, k, data[k]) for k in KEYS if k in data}
    base = path.resolve().parent
    checked = {k: [_check(where, k, v, base) for v in vs] for k, vs in values.items()}
    has_objective = {s: _has_objective(s) for s in checked.get("scheduler", [None])}
    cells: dict[tuple, Cell] = {}
    keys = tuple(values)
    for combo in itertools.product(*(range(len(values[k])) for k in keys)):
        written = {k: values[k][i] for k, i in zip(keys, combo)}
        meant = {k: checked[k][i] for k, i in zip(keys, combo)}
        if not has_objective[meant.get("scheduler")] and "objective" in meant:
            written["objective"] = meant["objective"] = None
        cell = _cell(written, meant, keys)
        _check_size(where, cell)
        cells.setdefault(cell.params, cell)
    return Grid(path=path, keys=keys, cells=tuple(cells.values()))


def _as_list(where: str, key: str, value: Any) -> list[Any]:
    vs = value if isinstance(value, list) else [value]
    if not vs:
        raise ConfigError(f"{where}: {key} is an empty list; give at least one value or leave the key out")
    if key == "duration" and not isinstance(value, int | float) and len(vs) > 1:
        raise ConfigError(f"{where}: duration must be a number (simulated seconds), got {value!r}")
    seen = set()
    for v in vs:
        if not isinstance(v, str | int | float):   # bool is an int; a table, a nested list, a date are not
            raise ConfigError(f"{where}: {key} holds {v!r}; give a list of plain values")
        if json.dumps(v) in seen:
            raise ConfigError(f"{where}: {key} lists {v!r} twice")
        seen.add(json.dumps(v))
    return vs


def _check(where: str, key: str, v: Any, base: Path) -> Any:
    """What value ``v`` of ``key`` means (a resolved path, a float …), or ConfigError naming it."""
    from scheduler.errors import did_you_mean  # noqa: PLC0415

    if key == "scenario":
        from scheduler.sim.workload import SCENARIOS  # noqa: PLC0415

        if not isinstance(v, str) or v not in SCENARIOS:
            raise ConfigError(f"{where}: {did_you_mean('scenario', str(v), SCENARIOS)}")
        return v
    if key == "trace":
        p = base / str(v)
        if not isinstance(v, str) or not p.is_file():
            raise ConfigError(f"{where}: trace {v!r} is not a file (paths are relative to the grid's directory)")
        return p
    if key == "device":
        return _device(where, v, base)
    if key == "scheduler":
        from scheduler.registry import policy_names  # noqa: PLC0415

        if not isinstance(v, str) or v not in policy_names():
            raise ConfigError(f"{where}: {did_you_mean('scheduler', str(v), policy_names())}")
        return v
    if key == "objective":
        from scheduler.registry import OBJECTIVES  # noqa: PLC0415

        if not isinstance(v, str) or v not in OBJECTIVES:
            raise ConfigError(f"{where}: {did_you_mean('objective', str(v), OBJECTIVES)}")
        return v
    if key == "load":
        return _number(where, key, v, MAX_LOAD)
    if key == "duration":
        return _number(where, key, v, MAX_SECONDS)
    if key == "seed":
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**63:
            raise ConfigError(f"{where}: seed must be a whole number >= 0, got {v!r}")
        return v
    if key == "streams":
        if not isinstance(v, bool):
            raise ConfigError(f"{where}: streams must be true or false, got {v!r}")
        return v
    if key == "priority":
        from scheduler.sim.streams import parse_priorities  # noqa: PLC0415

        if v in ("", "none"):
            return None
        try:
            parse_priorities(v if isinstance(v, str) else repr(v))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        return v
    return _burst(where, v)


def _number(where: str, key: str, v: Any, high: float) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and 0 < v <= high):
        raise ConfigError(f"{where}: {key} must be a number > 0 and <= {high:g}, got {v!r}")
    return float(v)


def _burst(where: str, v: Any) -> str | None:
    """``"START:DUR:FACTOR"``, or ``false`` / ``""`` / ``"none"`` for no burst."""
    from scheduler.sim.workload import Burst  # noqa: PLC0415

    if v is False or v in ("", "none"):
        return None
    if not isinstance(v, str):
        raise ConfigError(f"{where}: burst must be \"START:DUR:FACTOR\" (e.g. \"4:2:3\") or false, got {v!r}")
    try:
        Burst.parse(v)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return v


def _device(where: str, v: Any, base: Path) -> tuple[str, Path | None]:
    """``(name as simulate takes it, resolved JSON path or None)``; the profile is loaded to check it."""
    from scheduler.sim.profiles import PROFILE_DIR, load_profile  # noqa: PLC0415

    if not isinstance(v, str):
        raise ConfigError(f"{where}: device must be a profile name or a JSON path, got {v!r}")
    if (PROFILE_DIR / f"{v}.json").is_file():
        return v, None
    p = base / v
    try:
        if not p.exists():
            load_profile(v)   # raises with "did you mean" for a name that is neither shipped nor a file
            raise ConfigError(f"device {v!r} is not in the grid's directory {str(base)!r} (paths are "
                              "relative to the grid file)")
        load_profile(p)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a profile file that does not load: one line naming it
        raise ConfigError(f"{where}: device {v!r}: {exc}") from None
    return v, p


def _has_objective(scheduler: str | None) -> bool:
    """Whether ``scheduler`` (None: the default policy) takes an objective (edgert's does)."""
    from scheduler.registry import make_policy  # noqa: PLC0415

    try:
        make_policy(scheduler, objective="deadlines")
    except ConfigError:
        return False
    return True


def _cell(written: dict[str, Any], meant: dict[str, Any], keys: tuple[str, ...]) -> Cell:
    device, device_path = meant["device"]
    return Cell(params=tuple((k, written[k]) for k in keys), scenario=meant.get("scenario"),
                trace=meant.get("trace"), device=device, device_path=device_path,
                scheduler=meant.get("scheduler"), objective=meant.get("objective"),
                load=meant.get("load", 1.0), seed=meant.get("seed", 0), burst=meant.get("burst"),
                duration_s=meant.get("duration"), streams=meant.get("streams"), priority=meant.get("priority"))


def _check_size(where: str, cell: Cell) -> None:
    """Refuse a scenario cell too large to hold (as ``edgert simulate`` does)."""
    from scheduler.sim.run import DEFAULT_DURATION_S  # noqa: PLC0415
    from scheduler.sim.workload import SCENARIOS  # noqa: PLC0415

    if cell.scenario is None:
        return
    dur = cell.duration_s if cell.duration_s is not None else DEFAULT_DURATION_S
    factor = float(cell.burst.split(":")[2]) if cell.burst else 1.0
    n = sum(s.fps * s.p for s in SCENARIOS[cell.scenario]) * cell.load * factor * dur
    if n > MAX_SIM_REQUESTS:
        raise ConfigError(f"{where}: load {cell.load:g} x duration {dur:g} s of scenario {cell.scenario} is "
                          f"~{n:.2g} requests, over the simulator's {MAX_SIM_REQUESTS:.0e}; lower load or duration")
