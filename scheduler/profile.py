"""Device profiles (DESIGN.md §6): which processors a device has and how fast each runs each model.

JSON shape::

    {
      "name": "galaxy-s23",
      "description": "...",
      "processors": [{"name": "cpu0", "kind": "cpu"}, {"name": "gpu", "kind": "gpu"}],
      "latency_ms": {"hand": {"cpu0": 9.1, "gpu": 3.2}},
      "latency_p90_ms": {"hand": {"cpu0": 9.8}},                  # optional
      "energy_mj": {"hand": {"gpu": 4.0}},                        # optional, mJ per inference
      "power": {"processors": {"gpu": {"active_w": 3.0, "idle_w": 0.1}}},  # optional (scheduler.power)
      "thermal": {"capacitance_j_per_k": 180, "resistance_k_per_w": 5, ...},  # optional (scheduler.power)
      "cloud": {"rtt_ms": 20.0, "uplink_mbps": 50.0, "downlink_mbps": 100.0,
                "latency_ms": {"hand": 1.5},
                "input_bytes": {"hand": 150528}, "output_bytes": {"hand": 252}},  # optional
      "sources": {"latency_ms/hand/cpu0": "measured on ... with ...", "host": "..."}
    }

``sources`` says where every number came from: a key ``latency_ms/<model>/<processor>``
(``*`` may stand for any part) maps to "measured on <device> with <tool>",
"published: <table>", or "derived: <how>". ``edgert profile`` and
``edgert deploy`` write this format; the simulator and the runtime read it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.errors import TraceError
from scheduler.power import PowerSpec, ThermalSpec, check_energy_table, parse_power, parse_thermal
from scheduler.types import PROCESSOR_KINDS


@dataclass(frozen=True, slots=True)
class ProcessorSpec:
    """A processor of a device: unique ``name`` and a ``kind`` from PROCESSOR_KINDS."""

    name: str
    kind: str


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
    cloud: CloudSpec | None = None
    power: PowerSpec | None = None
    thermal: ThermalSpec | None = None

    @property
    def models(self) -> list[str]:
        """Model names with at least one latency."""
        return sorted(self.latency_ms)

    def to_json(self) -> dict[str, Any]:
        """The JSON object of DESIGN.md §6."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "processors": [{"name": p.name, "kind": p.kind} for p in self.processors],
            "latency_ms": self.latency_ms,
        }
        if self.latency_p90_ms:
            out["latency_p90_ms"] = self.latency_p90_ms
        if self.energy_mj:
            out["energy_mj"] = self.energy_mj
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
        """Validate and build a profile; raises TraceError naming ``origin`` and the field."""
        def bad(msg: str) -> TraceError:
            return TraceError(f"{origin}: {msg}")

        if not isinstance(obj, dict):
            raise bad("a device profile is a JSON object")
        for key in ("processors", "latency_ms"):
            if key not in obj:
                raise bad(f"missing required field {key!r}")
        procs: list[ProcessorSpec] = []
        for i, p in enumerate(obj["processors"]):
            if not isinstance(p, dict) or "name" not in p or "kind" not in p:
                raise bad(f"processors[{i}] needs 'name' and 'kind'")
            if p["kind"] not in PROCESSOR_KINDS:
                raise bad(f"processors[{i}].kind {p['kind']!r} is not one of {', '.join(PROCESSOR_KINDS)}")
            procs.append(ProcessorSpec(str(p["name"]), str(p["kind"])))
        names = {p.name for p in procs}
        if len(names) != len(procs):
            raise bad("processor names must be unique")
        lat = _table(obj["latency_ms"], "latency_ms", bad)
        for model, row in lat.items():
            unknown = set(row) - names
            if unknown:
                raise bad(f"latency_ms[{model!r}] names unknown processor(s) {sorted(unknown)}; known: {sorted(names)}")
        cloud = None
        if obj.get("cloud") is not None:
            c = obj["cloud"]
            try:
                cloud = CloudSpec(
                    rtt_ms=float(c["rtt_ms"]),
                    uplink_mbps=float(c["uplink_mbps"]),
                    downlink_mbps=float(c.get("downlink_mbps", c["uplink_mbps"])),
                    latency_ms={str(k): float(v) for k, v in c.get("latency_ms", {}).items()},
                    input_bytes={str(k): int(v) for k, v in c.get("input_bytes", {}).items()},
                    output_bytes={str(k): int(v) for k, v in c.get("output_bytes", {}).items()},
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise bad(f"cloud section is malformed ({exc}); needs rtt_ms, uplink_mbps, latency_ms") from exc
        prof = cls(
            name=str(obj.get("name", Path(origin).stem)),
            description=str(obj.get("description", "")),
            processors=procs,
            latency_ms=lat,
            latency_p90_ms=_table(obj.get("latency_p90_ms", {}), "latency_p90_ms", bad),
            energy_mj=_table(obj.get("energy_mj", {}), "energy_mj", bad),
            cloud=cloud,
            sources={str(k): str(v) for k, v in obj.get("sources", {}).items()},
        )
        _attach_power(prof, obj, bad)
        return prof

    @classmethod
    def load(cls, path: str | Path) -> DeviceProfile:
        """Read a profile JSON file; raises TraceError on a missing or malformed file."""
        p = Path(path)
        try:
            obj = json.loads(p.read_text())
        except FileNotFoundError as exc:
            raise TraceError(f"device profile {str(p)!r} not found") from exc
        except json.JSONDecodeError as exc:
            raise TraceError(f"{p}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
        return cls.from_json(obj, origin=str(p))


def _attach_power(prof: DeviceProfile, obj: dict[str, Any], bad: Any) -> None:
    """Parse the optional ``power``/``thermal`` sections and check ``energy_mj`` (scheduler.power)."""
    names = [p.name for p in prof.processors]
    check_energy_table(prof.energy_mj, names, bad)
    if obj.get("power") is not None:
        prof.power = parse_power(obj["power"], names, bad)
    if obj.get("thermal") is not None:
        prof.thermal = parse_thermal(obj["thermal"], names, bad)


def _table(obj: Any, field_name: str, bad: Any) -> dict[str, dict[str, float]]:
    if not isinstance(obj, dict):
        raise bad(f"{field_name} must be an object {{model: {{processor: number}}}}")
    out: dict[str, dict[str, float]] = {}
    for model, row in obj.items():
        if not isinstance(row, dict):
            raise bad(f"{field_name}[{model!r}] must be an object {{processor: number}}")
        try:
            out[str(model)] = {str(p): float(v) for p, v in row.items()}
        except (TypeError, ValueError) as exc:
            raise bad(f"{field_name}[{model!r}] has a non-numeric value ({exc})") from exc
    return out
