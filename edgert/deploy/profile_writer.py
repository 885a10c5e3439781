"""Turn collected measurements into a device profile (docs/design.md §6).

The profile is a :class:`scheduler.profile.DeviceProfile`: one processor per
path that produced at least one number, ``latency_ms[model][processor]``,
``latency_p90_ms`` where the tool printed a 90th percentile, ``energy_mj``
where the deployer sampled power during the run, and ``sources``
naming the device, the tool and its version, and how every number was taken.
Paths that failed are listed under ``sources["unmeasured/<model>/<processor>"]``
so a reader sees what is missing and why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from edgert.deploy.runner import Collector
from scheduler.profile import DeviceProfile, ProcessorSpec


def slug(text: str) -> str:
    """``Google Pixel 7`` → ``google-pixel-7`` (a profile name)."""
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s or "device"


def build_profile(name: str, description: str, collected: Collector,
                  sources: Mapping[str, str]) -> DeviceProfile:
    """Build the profile of one deployment from ``collected`` and device/tool ``sources``.

    Processors keep the order in which they were first measured. Raises
    nothing: an empty collection gives a profile with no processors.
    """
    procs: dict[str, str] = {}
    latency: dict[str, dict[str, float]] = {}
    p90: dict[str, dict[str, float]] = {}
    energy: dict[str, dict[str, float]] = {}
    src: dict[str, str] = dict(sources)
    for m in collected.measurements:
        procs.setdefault(m.processor, m.kind)
        latency.setdefault(m.model, {})[m.processor] = round(m.latency_ms, 6)
        if m.p90_ms is not None:
            p90.setdefault(m.model, {})[m.processor] = round(m.p90_ms, 6)
        src[f"latency_ms/{m.model}/{m.processor}"] = m.source
        if m.energy_mj is not None and m.energy_mj > 0:
            energy.setdefault(m.model, {})[m.processor] = round(m.energy_mj, 6)
            src[f"energy_mj/{m.model}/{m.processor}"] = m.energy_source
    for f in collected.failures:
        src[f"unmeasured/{f.model or '*'}/{f.processor}"] = f.reason
    return DeviceProfile(
        name=name,
        description=description,
        processors=[ProcessorSpec(n, k) for n, k in procs.items()],
        latency_ms=latency,
        latency_p90_ms=p90,
        energy_mj=energy,
        sources=src,
    )


def write_profile(profile: DeviceProfile, path: str | Path) -> Path:
    """Validate ``profile`` by round-tripping it through the §6 reader, then save it to ``path``."""
    DeviceProfile.from_json(profile.to_json(), origin=str(path))
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    profile.save(p)
    return p
