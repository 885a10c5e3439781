"""What host this is: an NVIDIA Jetson board or not, and a one-line summary for profile sources."""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path


def jetson_model() -> str | None:
    """The Jetson board name when this host is an NVIDIA Jetson (Tegra), else None."""
    for p in ("/proc/device-tree/model", "/sys/firmware/devicetree/base/model"):
        with contextlib.suppress(OSError):
            text = Path(p).read_text(errors="replace").strip("\x00 \n")
            if "jetson" in text.lower() or "tegra" in text.lower():
                return text
    if Path("/etc/nv_tegra_release").exists():
        return "NVIDIA Tegra (/etc/nv_tegra_release)"
    return None


def host_summary() -> str:
    """``Linux 6.1 x86_64, AMD EPYC …, 2 logical CPUs, Python 3.11.7`` for profile sources."""
    cpu = platform.processor() or ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware")):
                cpu = line.split(":", 1)[1].strip()
                break
    board = jetson_model()
    parts = [f"{platform.system()} {platform.release()} {platform.machine()}", cpu or "unknown CPU",
             f"{os.cpu_count()} logical CPUs", f"Python {platform.python_version()}"]
    if board:
        parts.insert(1, board)
    return ", ".join(parts)
