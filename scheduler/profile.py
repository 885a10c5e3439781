"""Device profiles (DESIGN.md §6): which processors a device has and how fast each runs each model.

JSON shape::

    {
      "name": "galaxy-s23",
      "description": "...",
      "processors": [{"name": "cpu0", "kind": "cpu"}, {"name": "gpu", "kind": "gpu", "memory_mb": 512}],
      "latency_ms": {"hand": {"cpu0": 9.1, "gpu": 3.2}},
      "memory_mb": {"hand": {"cpu0": 14.2, "gpu": 9.0}},          # optional, MB resident per model
      "latency_p90_ms": {"hand": {"cpu0": 9.8}},                  # optional
      "energy_mj": {"hand": {"gpu": 4.0}},                        # optional, mJ per inference
      "background": {"cpu0": 0.5},                                # optional, share taken by other processes
      "cpu_cores": 2,                                             # optional, cores the cpu processors share
      "power": {"processors": {"gpu": {"active_w": 3.0, "idle_w": 0.1}}},  # optional (scheduler.power)
      "thermal": {"capacitance_j_per_k": 180, "resistance_k_per_w": 5, ...},  # optional (scheduler.power)
      "cloud": {"rtt_ms": 20.0, "uplink_mbps": 50.0, "downlink_mbps": 100.0,
                "latency_ms": {"hand": 1.5},
                "input_bytes": {"hand": 150528}, "output_bytes": {"hand": 252}},  # optional
      "sources": {"latency_ms/hand/cpu0": "measured on ... with ...", "host": "..."}
    }

A processor may say ``"urgent": true``: it is an urgent lane of the runtime (``Runtime(urgent_workers=)``, named
``cpu-urgent``), which runs only critical and high requests unless the streams open it to any work; the
simulator keeps it so (``edgert profile --from-trace`` marks the lanes of the run it reads).

``cpu_cores`` (optional) is how many CPU cores the ``cpu`` processors share, when they are more than the cores
(a runtime's CPU workers and urgent lanes are threads on the host's cores): a run that starts on one while more
of them run than there are cores takes ``running / cpu_cores`` times as long (``running`` counts it), and
``latency_ms`` is then a run's time with a core to itself (``edgert profile --from-trace`` takes each live run's
share apart so). Without it each processor has its own core.

``background`` (optional) is the share (0 <= share < 1) of a processor's time that other processes take (a
busy neighbour on that core): the simulator stretches every run there to ``latency / (1 - share)``, the time
it takes when the scheduler gives the runs only the rest (``latency_ms`` stays what an idle processor does).

``memory_mb`` (optional) is what a model keeps resident on a processor, in MB (10^6 bytes): its weights
and the state its delegate holds to run it, as ``edgert profile`` measures it (the growth of the
process's resident memory when one session of the model is opened and run). A processor's
``memory_mb`` (optional) is the memory it has for models; the simulator refuses to place a model on a
processor that this would overflow (:mod:`scheduler.sim.memory`). Either may be left out: a
processor without it is not limited, a model without it takes no memory there.

``sources`` says where every number came from: a key ``latency_ms/<model>/<processor>``
(``*`` may stand for any part) maps to "measured on <device> with <tool>",
"published: <table>", or "derived: <how>". ``edgert profile`` and
``edgert deploy`` write this format; the simulator and the runtime read it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.errors import TraceError, open_input
from scheduler.power import PowerSpec, ThermalSpec, check_energy_table, parse_power, parse_thermal
from scheduler.types import PROCESSOR_KINDS


@dataclass(frozen=True, slots=True)
class ProcessorSpec:
    """A processor of a device: unique ``name``, a ``kind`` from PROCESSOR_KINDS, and the memory it has for
    models (MB; None: not limited). ``urgent``: an urgent lane (``Runtime(urgent_workers=)``): it runs only
    critical and high requests, unless the streams open it to any work."""

    name: str
    kind: str
    memory_mb: float | None = None
    urgent: bool = False


@dataclass(slots=True)
class CloudSpec:
    """The cloud path: round trip (ms), link speeds (Mbit/s) and server latency per model (ms)."""

    rtt_ms: float
    uplink_mbps: float
    downlink_mbps: float
    latency_ms: dict[str, float] = field(default_factory=dict)
    input_bytes: dict[str, int] = field(default_factory=dict)
    output_bytes: dict[str, int] = field(default_factory=dict)

    def expected_ms(self, model: str) -> float | None:
        """RTT + bytes / bandwidth both ways + server latency; None if the server lacks ``model``."""
        server = self.latency_ms.get(model)
        if server is None:
            return None
        up = self.input_bytes.get(model, 0) * 8 / (self.uplink_mbps * 1e3)
        down = self.output_bytes.get(model, 0) * 8 / (self.downlink_mbps * 1e3)
        return self.rtt_ms + up + down + server


@dataclass(slots=True)
class DeviceProfile:
    """A device: processors, ``latency_ms[model][processor]``, optional energy and cloud, sources."""

    name: str
    processors: list[ProcessorSpec]
    latency_ms: dict[str, dict[str, float]]
    sources: dict[str, str] = field(default_factory=dict)
    description: str = ""
    latency_p90_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    energy_mj: dict[str, dict[str, float]] = field(default_factory=dict)
    #: MB each model keeps resident on each processor (optional; see the module docstring)
    memory_mb: dict[str, dict[str, float]] = field(default_factory=dict)
    cloud: CloudSpec | None = None
    power: PowerSpec | None = None
    thermal: ThermalSpec | None = None
    #: share (0..1) of each processor's time taken by other processes (a busy neighbour); the simulator
    #: stretches runs there by 1 / (1 - share)
    background: dict[str, float] = field(default_factory=dict)
    #: the CPU cores the ``cpu`` processors share (more CPU workers than cores: a run on one of them, while
    #: more of them run than there are cores, takes that much longer); None: each its own core
    cpu_cores: int | None = None

    @property
    def models(self) -> list[str]:
        """Model names with at least one latency."""
        return sorted(self.latency_ms)

    def to_json(self) -> dict[str, Any]:
        """The JSON object of DESIGN.md §6."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "processors": [{"name": p.name, "kind": p.kind,
                            **({} if p.memory_mb is None else {"memory_mb": p.memory_mb}),
                            **({"urgent": True} if p.urgent else {})} for p in self.processors],
            "latency_ms": self.latency_ms,
        }
        if self.latency_p90_ms:
            out["latency_p90_ms"] = self.latency_p90_ms
        if self.energy_mj:
            out["energy_mj"] = self.energy_mj
        if self.memory_mb:
            out["memory_mb"] = self.memory_mb
        if self.background:
            out["background"] = self.background
        if self.cpu_cores is not None:
            out["cpu_cores"] = self.cpu_cores
        if self.cloud is not None:
            c = self.cloud
            out["cloud"] = {
                "rtt_ms": c.rtt_ms,
                "uplink_mbps": c.uplink_mbps,
                "downlink_mbps": c.downlink_mbps,
                "latency_ms": c.latency_ms,
                "input_bytes": c.input_bytes,
                "output_bytes": c.output_bytes,
            }
        if self.power is not None:
            out["power"] = self.power.to_json()
        if self.thermal is not None:
            out["thermal"] = self.thermal.to_json()
        out["sources"] = self.sources
        return out

    def save(self, path: str | Path) -> None:
        """Write the profile as indented JSON."""
        Path(path).write_text(json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n")

    @classmethod
    def from_json(cls, obj: Any, origin: str = "<profile>") -> DeviceProfile:
        """Validate and build a profile; raises TraceError naming ``origin``, the field and the fix."""
        def bad(msg: str) -> TraceError:
            return TraceError(f"profile {origin}: {msg}")

        if not isinstance(obj, dict):
            raise bad(f"a device profile is a JSON object {{name, processors, latency_ms, ...}}, "
                      f"got {_kind(obj)}")
        for key in ("processors", "latency_ms"):
            if key not in obj:
                raise bad(f"missing required field {key!r}")
        procs = _processors(obj["processors"], bad)
        names = {p.name for p in procs}
        lat = _table(obj["latency_ms"], "latency_ms", bad, _latency)
        for model, row in lat.items():
            unknown = set(row) - names
            if unknown:
                raise bad(f"latency_ms[{model!r}] names unknown processor(s) {sorted(unknown)}; known: {sorted(names)}")
        p90 = _table(obj.get("latency_p90_ms", {}), "latency_p90_ms", bad, _latency)
        _check_p90(p90, lat, bad)
        prof = cls(
            name=_text(obj, "name", Path(origin).stem, bad),
            description=_text(obj, "description", "", bad),
            processors=procs,
            latency_ms=lat,
            latency_p90_ms=p90,
            energy_mj=_table(obj.get("energy_mj", {}), "energy_mj", bad, _energy),
            memory_mb=_memory_table(obj.get("memory_mb", {}), names, bad),
            cloud=_cloud(obj.get("cloud"), bad),
            sources=_sources(obj.get("sources", {}), bad),
            background=_background(obj.get("background", {}), names, bad),
            cpu_cores=_cores(obj.get("cpu_cores"), bad),
        )
        _attach_power(prof, obj, bad)
        return prof

    @classmethod
    def load(cls, path: str | Path) -> DeviceProfile:
        """Read a profile JSON file; raises TraceError on a missing, unreadable or malformed file."""
        return cls.from_json(_read_json(Path(path)), origin=str(path))


def _cores(v: Any, bad: Any) -> int | None:
    """``cpu_cores``: the CPU cores the ``cpu`` processors share (an int >= 1), or None."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise bad(f"cpu_cores is the number of CPU cores the cpu processors share, an int >= 1, got {_kind(v)}")
    return v


def _background(v: Any, names: set[str], bad: Any) -> dict[str, float]:
    """``background``: processor name -> share of its time other processes take (0 <= share < 1)."""
    if not isinstance(v, dict):
        raise bad(f"background is {{processor: share}}, e.g. {{\"cpu0\": 0.5}}, got {_kind(v)}")
    out: dict[str, float] = {}
    for name, share in v.items():
        if name not in names:
            raise bad(f"background names unknown processor {name!r}; known: {sorted(names)}")
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share < 1.0:
            raise bad(f"background[{name!r}] is the share of its time other processes take, 0 <= share < 1, "
                      f"got {share!r}")
        out[name] = float(share)
    return out


def _attach_power(prof: DeviceProfile, obj: dict[str, Any], bad: Any) -> None:
    """Parse the optional ``power``/``thermal`` sections and check ``energy_mj`` (scheduler.power)."""
    names = [p.name for p in prof.processors]
    check_energy_table(prof.energy_mj, names, bad)
    if obj.get("power") is not None:
        prof.power = parse_power(obj["power"], names, bad)
    if obj.get("thermal") is not None:
        prof.thermal = parse_thermal(obj["thermal"], names, bad)


# -- validation: one helper per field; each raises ``bad(...)`` naming the field, the value and the fix --

#: Largest latency a profile may give (ms): 1000 s; anything above is a unit mix-up.
MAX_LATENCY_MS = 1e6
#: Largest p90 / latency ratio accepted: beyond it the log-normal noise model explodes.
MAX_P90_RATIO = 100.0
#: Link speeds accepted (Mbit/s): 1 kbit/s .. 1 Tbit/s.
MBPS_RANGE = (1e-3, 1e6)
#: Largest payload (bytes) a cloud entry may declare: 4 GiB.
MAX_BYTES = 1 << 32


def _read_json(p: Path) -> Any:
    """The parsed JSON of a profile file; every way of failing is one TraceError line."""
    with open_input(p, "device profile", ".json") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(f"profile {p}: not UTF-8 text (byte {exc.start}); save it as UTF-8 JSON") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"profile {p}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise TraceError(f"profile {p}: JSON nested too deeply") from None


def _kind(v: Any) -> str:
    """A short description of a JSON value for messages: ``3``, ``a list``, ``null``."""
    if v is None:
        return "null"
    if isinstance(v, (bool, int, float)):
        return json.dumps(v)
    if isinstance(v, str):
        return repr(v) if len(v) <= 40 else f"a string of {len(v)} characters"
    return {"dict": "an object", "list": "a list"}.get(type(v).__name__, type(v).__name__)


def _processors(raw: Any, bad: Any) -> list[ProcessorSpec]:
    if not isinstance(raw, list) or not raw:
        raise bad(f"processors must be a non-empty list of {{name, kind}} objects, got {_kind(raw)}")
    procs: list[ProcessorSpec] = []
    for i, p in enumerate(raw):
        if not isinstance(p, dict) or "name" not in p or "kind" not in p:
            raise bad(f"processors[{i}] must be an object with 'name' and 'kind', got {_kind(p)}")
        if not isinstance(p["name"], str) or not p["name"]:
            raise bad(f"processors[{i}].name must be a non-empty string, got {_kind(p['name'])}")
        if p["kind"] not in PROCESSOR_KINDS:
            raise bad(f"processors[{i}].kind {_kind(p['kind'])} is not one of {', '.join(PROCESSOR_KINDS)}")
        mem = p.get("memory_mb")
        urgent = p.get("urgent", False)
        if not isinstance(urgent, bool):
            raise bad(f"processors[{i}].urgent must be true or false (an urgent lane), got {_kind(urgent)}")
        procs.append(ProcessorSpec(p["name"], p["kind"],
                                   None if mem is None else _megabytes(mem, f"processors[{i}].memory_mb", bad),
                                   urgent))
    if len({p.name for p in procs}) != len(procs):
        raise bad("processor names must be unique")
    return procs


def _number(v: Any, where: str, bad: Any) -> float:
    """A JSON number (not a bool, not a string) that is finite."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise bad(f"{where} must be a number, got {_kind(v)}")
    f = float(v)
    if not math.isfinite(f):
        raise bad(f"{where} must be a finite number, got {v}")
    return f


def _latency(v: Any, where: str, bad: Any) -> float:
    """A latency in ms: a number in (0, MAX_LATENCY_MS]."""
    f = _number(v, where, bad)
    if not 0 < f <= MAX_LATENCY_MS:
        raise bad(f"{where} must be a latency in ms, > 0 and <= {MAX_LATENCY_MS:g}, got {v}")
    return f


def _energy(v: Any, where: str, bad: Any) -> float:
    """An energy per inference in mJ: a positive number, at most 1e9."""
    f = _number(v, where, bad)
    if not 0 < f <= 1e9:
        raise bad(f"{where} must be a positive energy in mJ, at most 1e9, got {v}")
    return f


#: Largest memory a profile may give (MB): 16 TB; anything above is a unit mix-up (bytes for MB).
MAX_MEMORY_MB = 1.6e7


def _megabytes(v: Any, where: str, bad: Any) -> float:
    """A memory size in MB: a number in [0, MAX_MEMORY_MB]."""
    f = _number(v, where, bad)
    if not 0 <= f <= MAX_MEMORY_MB:
        raise bad(f"{where} must be a memory size in MB (10^6 bytes), >= 0 and <= {MAX_MEMORY_MB:g}, got {v}")
    return f


def _memory_table(obj: Any, names: set[str], bad: Any) -> dict[str, dict[str, float]]:
    """``memory_mb``: ``{model: {processor: MB}}`` naming only the profile's processors."""
    table = _table(obj, "memory_mb", bad, _megabytes)
    for model, row in table.items():
        unknown = set(row) - names
        if unknown:
            raise bad(f"memory_mb[{model!r}] names unknown processor(s) {sorted(unknown)}; known: {sorted(names)}")
    return table


def _table(obj: Any, field_name: str, bad: Any, check: Any = _latency) -> dict[str, dict[str, float]]:
    """``{model: {processor: number}}`` with every number passed through ``check``."""
    if not isinstance(obj, dict):
        raise bad(f"{field_name} must be an object {{model: {{processor: number}}}}, got {_kind(obj)}")
    out: dict[str, dict[str, float]] = {}
    for model, row in obj.items():
        if not isinstance(row, dict):
            raise bad(f"{field_name}[{model!r}] must be an object {{processor: number}}, got {_kind(row)}")
        out[model] = {p: check(v, f"{field_name}[{model!r}][{p!r}]", bad) for p, v in row.items()}
    return out


def _check_p90(p90: dict[str, dict[str, float]], lat: dict[str, dict[str, float]], bad: Any) -> None:
    for model, row in p90.items():
        for proc, v in row.items():
            base = lat.get(model, {}).get(proc)
            if base is not None and v > MAX_P90_RATIO * base:
                raise bad(f"latency_p90_ms[{model!r}][{proc!r}] = {v:g} is over {MAX_P90_RATIO:g}x its "
                          f"latency_ms ({base:g}); both must be ms of the same runs")


def _text(obj: dict[str, Any], key: str, default: str, bad: Any) -> str:
    v = obj.get(key, default)
    if not isinstance(v, str) or (key == "name" and not v):
        raise bad(f"{key} must be a{' non-empty' if key == 'name' else ''} string, got {_kind(v)}")
    return v


def _sources(raw: Any, bad: Any) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise bad(f"sources must be an object {{\"latency_ms/<model>/<processor>\": \"where it came from\"}}, "
                  f"got {_kind(raw)}")
    return dict(raw)


def _cloud(c: Any, bad: Any) -> CloudSpec | None:
    if c is None:
        return None
    if not isinstance(c, dict):
        raise bad(f"cloud must be an object {{rtt_ms, uplink_mbps, latency_ms, ...}}, got {_kind(c)}")
    for key in ("rtt_ms", "uplink_mbps"):
        if key not in c:
            raise bad(f"cloud needs {key!r}")
    rtt = _number(c["rtt_ms"], "cloud.rtt_ms", bad)
    if not 0 <= rtt <= MAX_LATENCY_MS:
        raise bad(f"cloud.rtt_ms must be >= 0 and <= {MAX_LATENCY_MS:g} ms, got {c['rtt_ms']}")
    speeds = []
    for key in ("uplink_mbps", "downlink_mbps"):
        v = _number(c.get(key, c["uplink_mbps"]), f"cloud.{key}", bad)
        if not MBPS_RANGE[0] <= v <= MBPS_RANGE[1]:
            raise bad(f"cloud.{key} must be a link speed in Mbit/s, >= {MBPS_RANGE[0]:g} and "
                      f"<= {MBPS_RANGE[1]:g}, got {c.get(key, c['uplink_mbps'])}")
        speeds.append(v)
    lat = c.get("latency_ms", {})
    if not isinstance(lat, dict):
        raise bad(f"cloud.latency_ms must be an object {{model: ms}}, got {_kind(lat)}")
    return CloudSpec(rtt, speeds[0], speeds[1],
                     latency_ms={m: _latency(v, f"cloud.latency_ms[{m!r}]", bad) for m, v in lat.items()},
                     input_bytes=_byte_counts(c, "input_bytes", bad),
                     output_bytes=_byte_counts(c, "output_bytes", bad))


def _byte_counts(c: dict[str, Any], key: str, bad: Any) -> dict[str, int]:
    raw = c.get(key, {})
    if not isinstance(raw, dict):
        raise bad(f"cloud.{key} must be an object {{model: bytes}}, got {_kind(raw)}")
    out = {}
    for m, v in raw.items():
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_BYTES:
            raise bad(f"cloud.{key}[{m!r}] must be a whole number of bytes, >= 0 and <= {MAX_BYTES}, got {_kind(v)}")
        out[m] = v
    return out
