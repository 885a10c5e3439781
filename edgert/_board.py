"""What board a profile was measured on: model (device tree), architecture, kernel, and emulation.

``edgert profile`` writes these into a profile's ``sources`` (:func:`board_sources`), so a profile made
on a board by ``edgert deploy linux`` says where its numbers came from. A board that runs under a
user-mode emulator (qemu-user: an arm64 root on an x86 host) tells on itself: ``uname -m`` names one
architecture while the kernel (``/proc/sys/kernel/arch``) is of another, or ``/proc/cpuinfo`` describes
the host's CPU (qemu-user before 8.2). Such a profile says so in
its ``sources["emulation"]`` and its description: its latencies are the emulator's, never the board's.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

#: Where Linux exposes the device tree's board model (ARM boards; absent on x86 and ACPI servers).
DEVICE_TREE_MODELS = (Path("/proc/device-tree/model"), Path("/sys/firmware/devicetree/base/model"))
_ARM = ("aarch64", "arm64", "armv7l", "armv8l", "armv6l")
_X86 = ("x86_64", "amd64", "i686", "i386")


@dataclass(frozen=True, slots=True)
class BoardFacts:
    """The board this process runs on, as it describes itself."""

    arch: str
    kernel: str
    model: str
    emulation: str

    def sources(self) -> dict[str, str]:
        """Profile ``sources`` entries: ``board``, ``arch``, ``kernel`` and, under emulation, ``emulation``."""
        out = {"board": self.model or "no device tree model (/proc/device-tree/model absent)",
               "arch": self.arch, "kernel": f"Linux {self.kernel}" if self.kernel else "unknown"}
        if self.emulation:
            out["emulation"] = (f"measured under emulation: {self.emulation}; these latencies are the "
                                "emulator's, not the board's speed")
        return out


def cpu_family(cpuinfo: str) -> str:
    """``x86``, ``arm`` or ``""`` (unknown) from the text of ``/proc/cpuinfo``."""
    keys = {line.split(":", 1)[0].strip().lower() for line in cpuinfo.splitlines() if ":" in line}
    if "vendor_id" in keys or "flags" in keys:
        return "x86"
    if "cpu implementer" in keys or "features" in keys:
        return "arm"
    return ""


def emulation_of(arch: str, cpuinfo: str, kernel_arch: str = "") -> str:
    """Why this looks like an emulated board ("" when it does not).

    ``arch`` is ``uname -m`` (what the emulator reports), ``kernel_arch`` the kernel's own
    ``/proc/sys/kernel/arch`` (which a user-mode emulator passes through), ``cpuinfo`` the text of
    ``/proc/cpuinfo`` (which qemu-user before 8 passes through too). A 32-bit userland on a 64-bit kernel
    of the same family (armv7l on aarch64) is native.
    """
    machine = _family(arch)
    kernel = _family(kernel_arch)
    if machine and kernel and machine != kernel:
        return (f"uname -m says {arch} but the kernel is {kernel_arch} (/proc/sys/kernel/arch): a user-mode "
                "emulator such as qemu-user runs this board's code")
    family = cpu_family(cpuinfo)
    if machine and family and machine != family:
        vendor = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines()
                       if ln.lower().startswith(("vendor_id", "model name"))), f"an {family} CPU")
        return (f"uname -m says {arch} but /proc/cpuinfo describes an {family} CPU ({vendor}): a user-mode "
                "emulator such as qemu-user runs this board's code")
    return ""


def _family(arch: str) -> str:
    a = arch.lower()
    return "arm" if a in _ARM else "x86" if a in _X86 else ""


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def board_facts() -> BoardFacts:
    """This process's board: device-tree model, ``uname -m``, kernel release, and emulation ("" if native)."""
    model = next((m for m in (_read(p).replace("\x00", "").strip() for p in DEVICE_TREE_MODELS) if m), "")
    arch = platform.machine()
    emulation = emulation_of(arch, _read(Path("/proc/cpuinfo")), _read(Path("/proc/sys/kernel/arch")).strip())
    return BoardFacts(arch, platform.release(), model, emulation)
