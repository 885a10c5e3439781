"""Which onnxruntime build is installed, and whether an accelerator build is shadowed by the CPU wheel.

``onnxruntime``, ``onnxruntime-gpu``, ``onnxruntime-qnn`` and ``onnxruntime-openvino`` are separate
distributions that all write the one package directory ``onnxruntime/``: the wheel installed last
wins, and pip keeps the metadata of both. So ``pip install 'edgert[cuda]'`` (which brings
onnxruntime-gpu beside the core's onnxruntime) can end with the CPU build importable and the GPU
build's metadata present but its files overwritten. This module reads the installed
distributions' metadata (``importlib.metadata``) and the execution providers of the build that
actually imports, and names the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

#: Accelerator builds of ONNX Runtime and the execution provider each one adds.
ORT_BUILDS: dict[str, str] = {
    "onnxruntime-gpu": "CUDAExecutionProvider",
    "onnxruntime-qnn": "QNNExecutionProvider",
    "onnxruntime-openvino": "OpenVINOExecutionProvider",
    "onnxruntime-directml": "DmlExecutionProvider",
}


@dataclass(frozen=True, slots=True)
class Shadowed:
    """An accelerator build whose metadata is installed but whose files another build overwrote."""

    dist: str
    version: str
    provider: str
    others: tuple[str, ...]

    @property
    def fix(self) -> str:
        """The commands that make ``dist`` the imported build again."""
        drop = " ".join(o.split("==")[0] for o in self.others)
        return (f"pip uninstall -y {drop} && pip install --force-reinstall --no-deps {self.dist}=={self.version}"
                if drop else f"pip install --force-reinstall --no-deps {self.dist}=={self.version}")

    def line(self) -> str:
        """One sentence for ``edgert devices``."""
        return (f"{self.dist} {self.version} is installed but shadowed: {', '.join(self.others) or 'another build'} "
                f"wrote the same onnxruntime/ directory after it, so {self.provider} is missing. Fix: {self.fix}")


def installed(dist: str) -> str | None:
    """The installed version of distribution ``dist``, or None."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def ort_builds() -> dict[str, str]:
    """Installed ONNX Runtime distributions: name -> version (``onnxruntime`` and the accelerator builds)."""
    return {d: v for d in ("onnxruntime", *ORT_BUILDS) if (v := installed(d)) is not None}


def shadowed(available: list[str] | None = None) -> list[Shadowed]:
    """Accelerator builds installed (metadata) whose execution provider the imported onnxruntime lacks.

    Args:
        available: ``onnxruntime.get_available_providers()`` of the imported build (default: asked here;
            [] without onnxruntime). Not ``get_all_providers()``: that lists every EP ORT knows of,
            built in or not.
    """
    builds = ort_builds()
    accel = [d for d in builds if d in ORT_BUILDS]
    if not accel:
        return []
    if available is None:
        try:
            import onnxruntime  # noqa: PLC0415 - only when an accelerator build is installed

            available = list(onnxruntime.get_available_providers())
        except ImportError:
            available = []
    out = []
    for d in accel:
        if ORT_BUILDS[d] not in available:
            others = tuple(f"{o}=={v}" for o, v in builds.items() if o != d)
            out.append(Shadowed(d, builds[d], ORT_BUILDS[d], others))
    return out
