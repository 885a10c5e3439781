"""Power counters of this host: what the live runtime could read energy from, or why it cannot.

The live runtime does not guess energy. It looks for a counter it could sample around
invocations, in the places the deploy tools read on real devices:

* a battery fuel gauge: ``/sys/class/power_supply/*/power_now`` or ``current_now`` and
  ``voltage_now`` (Android phones, laptops);
* Intel RAPL: ``/sys/class/powercap/intel-rapl:*/energy_uj`` (x86 package energy);
* the INA3221 rail monitors of Jetson boards: ``/sys/bus/i2c/drivers/ina3221*/``.

:func:`power_counters` reports the first one readable, or ``None`` with the reason. The
runtime says so once per process (logger ``edgert``, INFO); ``edgert devices`` prints it.
Energy figures of processors this host lacks come from device profiles (``scheduler.power``).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("edgert")


@dataclass(frozen=True, slots=True)
class PowerCounters:
    """The outcome of the probe: ``source`` (a path) when readable, else None and ``reason``."""

    source: str | None
    reason: str

    def line(self) -> str:
        """One line for people: ``power counters: …``."""
        return f"power counters: {self.source} ({self.reason})" if self.source else f"power counters: none ({self.reason})"


def _readable(p: Path) -> bool:
    try:
        p.read_text()
        return True
    except OSError:
        return False


def probe(root: Path = Path("/sys")) -> PowerCounters:
    """Look for a readable power or energy counter under ``root`` (``/sys``; a test passes a tree)."""
    for supply in sorted((root / "class" / "power_supply").glob("*")):
        if _readable(supply / "power_now"):
            return PowerCounters(str(supply / "power_now"), "fuel gauge power")
        if _readable(supply / "current_now") and _readable(supply / "voltage_now"):
            return PowerCounters(str(supply / "current_now"), "fuel gauge current × voltage")
    for zone in sorted((root / "class" / "powercap").glob("intel-rapl:*")):
        if _readable(zone / "energy_uj"):
            return PowerCounters(str(zone / "energy_uj"), "Intel RAPL package energy")
    for rails in sorted((root / "bus" / "i2c" / "drivers").glob("ina3221*")):
        return PowerCounters(str(rails), "INA3221 rail monitors")
    return PowerCounters(None, "no battery fuel gauge, no Intel RAPL zone and no INA3221 rails are "
                               f"readable under {root}; energy figures come from device profiles only")


@functools.cache
def power_counters() -> PowerCounters:
    """This host's probe, once per process; logs its outcome once (INFO)."""
    found = probe()
    log.info("edgert: %s", found.line())
    return found
