"""What every delegate family provides: artifacts in, sessions out.

A *delegate* is a software path that runs a model on a processor kind
(docs/design.md §3). A :class:`Delegate` probes whether it can run on this host (never
assumed) and opens a :class:`Session` for one model artifact. A session is
used by one worker at a time; it runs feeds given in input order and returns
outputs in output order. Foreign exceptions are mapped here, at the boundary:
load failures become ``ModelLoadError``, run failures ``InferenceError``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

_UNPROBED = object()

#: Model file formats a delegate may take.
FORMATS: tuple[str, ...] = ("tflite", "onnx")


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """An input or output of a model: name, shape (None = dynamic dim) and dtype."""

    name: str
    shape: tuple[int | None, ...]
    dtype: np.dtype

    def accepts_shape(self, shape: tuple[int, ...]) -> bool:
        """True when ``shape`` matches, treating None dims as wildcards."""
        if shape == self.shape:  # the common case: a static shape, given right
            return True
        return len(shape) == len(self.shape) and all(e is None or e == g for e, g in zip(self.shape, shape))

    def concrete_shape(self, dynamic: int = 1) -> tuple[int, ...]:
        """The shape with every dynamic dim replaced by ``dynamic`` (for warm-up feeds)."""
        return tuple(dynamic if d is None else d for d in self.shape)

    def describe(self) -> str:
        """Like ``float32[1,224,224,3]`` with ``?`` for dynamic dims."""
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype.name}[{dims}]"


@dataclass(frozen=True, slots=True)
class Artifact:
    """One file of a model (``path``) or its bytes (``data``), in ``format``."""

    format: str
    path: Path | None = None
    data: bytes | None = None

    @property
    def label(self) -> str:
        """A human name for errors: the path, or ``<N bytes of onnx>``."""
        return str(self.path) if self.path is not None else f"<{len(self.data or b'')} bytes of {self.format}>"

    def read(self) -> bytes:
        """The artifact's bytes."""
        return self.data if self.data is not None else Path(self.path).read_bytes()  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class DelegateInfo:
    """What ``edgert devices`` prints for one delegate path."""

    name: str
    processor: str
    backend: str
    available: bool
    reason: str = ""
    formats: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: name, processor, backend, available, reason, formats."""
        return {"name": self.name, "processor": self.processor, "backend": self.backend,
                "available": self.available, "reason": self.reason, "formats": list(self.formats)}


class Session(ABC):
    """One model loaded on one delegate. Not thread-safe: one worker uses it at a time."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    #: Share of the graph's nodes the delegate runs itself (1.0 = all); the rest fall back to the CPU.
    coverage: float = 1.0
    #: Whether ``run`` may be called from several threads at once (then workers share this one session
    #: instead of each opening its own: :mod:`delegates.sharing`).
    concurrent: bool = False

    @abstractmethod
    def run(self, feeds: list[np.ndarray]) -> list[np.ndarray]:
        """Run once on ``feeds`` (input order); return outputs (output order).

        Raises:
            InferenceError: the backend failed; the original is chained.
        """

    def placement(self) -> dict[str, int]:
        """Graph nodes per executor (e.g. ``{"QNNExecutionProvider": 4, "CPUExecutionProvider": 1}``);
        empty when the backend does not say."""
        return {}

    def close(self) -> None:
        """Release the backend's resources (idempotent)."""


class Delegate(ABC):
    """A way to run models on one processor kind, e.g. LiteRT+XNNPACK on ``cpu``."""

    #: Registry name, e.g. ``litert-xnnpack`` or ``ort-cpu``.
    name: str
    #: Processor kind: cpu, gpu, dsp, npu, cloud.
    processor: str
    #: Backend family: ``litert``, ``onnxruntime``, ``mqtt``.
    backend: str
    #: Model formats it opens.
    formats: tuple[str, ...]

    #: The cached probe result (``_UNPROBED`` until the first :meth:`probe`).
    _probed: object = None

    def probe(self) -> str | None:
        """None when this delegate can run on this host, else the reason it cannot.

        Cached until :meth:`invalidate`: a probe may open a tiny model on the accelerator.
        """
        probed = self.__dict__.get("_probed", _UNPROBED)
        if probed is _UNPROBED:
            probed = self._probed = self._probe()
        return probed  # type: ignore[return-value]

    def invalidate(self) -> None:
        """Forget the cached probe result, so the next :meth:`probe` tries again."""
        self.__dict__.pop("_probed", None)

    @abstractmethod
    def _probe(self) -> str | None:
        """Probe for real (uncached): None when usable here, else the concrete reason."""

    @abstractmethod
    def open(self, artifact: Artifact, threads: int = 1) -> Session:
        """Load ``artifact`` with ``threads`` intra-op threads.

        Raises:
            ModelLoadError: the artifact is missing, corrupt or unsupported here.
        """

    def info(self) -> DelegateInfo:
        """Probe and describe this delegate."""
        reason = self.probe()
        return DelegateInfo(self.name, self.processor, self.backend, reason is None, reason or "", self.formats)
