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

from delegates._batching import check_requests, run_requests
from delegates._specs import PRECISIONS, TOLERANCE, TensorSpec
from delegates.errors import InferenceError
from scheduler.errors import ConfigError

__all__ = ["BATCH_LIMIT", "FORMATS", "PRECISIONS", "TOLERANCE", "Artifact", "Delegate", "DelegateInfo", "Session",
           "TensorSpec"]

_UNPROBED = object()

#: Model file formats a delegate may take.
FORMATS: tuple[str, ...] = ("tflite", "onnx")

#: The most requests one :meth:`Session.run_batch` call takes on a session that batches: LiteRT and ONNX
#: Runtime set no limit of their own; this bounds the arena a batch needs (pose_landmark_full's outputs are
#: 0.9 MB a request) and is more users than one host serves at a frame rate.
BATCH_LIMIT = 8


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
    precision: str = "fp32"
    force_fp32: str = ""
    #: True when the path's processor is a software adapter (a Vulkan device of type CPU, such as
    #: lavapipe): it keeps its processor kind but computes on the CPU cores.
    software: bool = False
    #: The adapter the path would run on ("" when it has none to name).
    adapter: str = ""

    @property
    def tolerance(self) -> float:
        """The declared error bound of this path: share of an output's range (see :data:`TOLERANCE`)."""
        return TOLERANCE[self.precision]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: name, processor, backend, available, reason, formats, precision, tolerance,
        force_fp32 (how to force fp32 on this path; "" when it computes in fp32 or cannot), software
        (True when it computes on the CPU cores through a software adapter) and, where known, adapter."""
        return {"name": self.name, "processor": self.processor, "backend": self.backend,
                "available": self.available, "reason": self.reason, "formats": list(self.formats),
                "precision": self.precision, "tolerance": self.tolerance, "force_fp32": self.force_fp32,
                "software": self.software, **({"adapter": self.adapter} if self.adapter else {})}


class Session(ABC):
    """One model loaded on one delegate. Not thread-safe: one worker uses it at a time."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    #: Share of the graph's nodes the delegate runs itself (1.0 = all); the rest fall back to the CPU.
    coverage: float = 1.0
    #: The arithmetic this session computes in (one of :data:`PRECISIONS`), fixed when it was opened.
    precision: str = "fp32"
    #: Whether ``run`` may be called from several threads at once (then workers share this one session
    #: instead of each opening its own: :mod:`delegates.sharing`).
    concurrent: bool = False

    @abstractmethod
    def run(self, feeds: list[np.ndarray]) -> list[np.ndarray]:
        """Run once on ``feeds`` (input order); return outputs (output order).

        Raises:
            InferenceError: the backend failed; the original is chained.
        """

    @property
    def batch_refusal(self) -> str:
        """Why this session cannot run several requests as one invocation, "" when it can.

        Sessions that can batch (LiteRT, ONNX Runtime) establish it on the model once, at the first
        read (three runs: :func:`delegates._batching.batch_check`); read it at load time, not on a
        request's path. The default: this kind of session does not batch.
        """
        why = self.__dict__.get("_batch_refusal")
        if why is None:
            why = self._batch_refusal = self._check_batch()
        return why

    @property
    def max_batch(self) -> int:
        """The most requests one :meth:`run_batch` call takes: 1 when the session cannot batch
        (:attr:`batch_refusal` says why), else :data:`BATCH_LIMIT`."""
        return 1 if self.batch_refusal else BATCH_LIMIT

    def _check_batch(self) -> str:
        """Establish whether this session batches: "" or the reason (uncached; see :attr:`batch_refusal`)."""
        return f"{type(self).__name__} does not run batches (LiteRT and ONNX Runtime sessions do)"

    def run_batch(self, feeds_list: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        """Run several requests (each a feed list in input order, batch dimension first) as ONE invocation;
        return each request's outputs (output order), as :meth:`run` of that request alone would.

        One request is run with :meth:`run`. More than one on a session that cannot batch is refused, not
        run one by one: a caller gathered them because one batched run costs less than separate runs, and
        running them in turn would silently break the timing it counted on; run them with :meth:`run`.

        Raises:
            ValueError: more requests than :attr:`max_batch` (the reason when it is 1).
            InputError: a request whose feeds do not fit the model or the other requests (names them).
            InferenceError: the backend failed; the original is chained.
        """
        if len(feeds_list) <= 1:
            return [self.run(list(f)) for f in feeds_list]
        if len(feeds_list) > self.max_batch:
            why = self.batch_refusal
            raise ValueError(f"run_batch got {len(feeds_list)} requests; this session takes "
                             + (f"one at a time: {why}" if why else f"at most {self.max_batch} in one run")
                             + "; check Session.max_batch and run the others with run()")
        check_requests(self.inputs, feeds_list)
        return run_requests(self.run, feeds_list, str(getattr(self, "_label", type(self).__name__)))

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
    #: What configuring ``{"force_fp32": True}`` does on this path ("" when it has nothing to force).
    force_fp32_note: str = ""
    #: Whether ``"auto"`` includes it (False for a second path to an engine another path gives).
    in_auto: bool = True
    #: True when its processor is a software adapter that computes on the CPU cores (lavapipe): never
    #: in ``"auto"``, used only when named. Answered without loading a driver (:mod:`delegates._adapters`).
    software: bool = False
    #: The adapter it would run on, "" when it has none to name.
    adapter: str = ""

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

    @property
    def precision(self) -> str:
        """The arithmetic this path computes in with its current options (one of :data:`PRECISIONS`)."""
        return "fp32"

    @property
    def tolerance(self) -> float:
        """Declared error bound (share of an output's range) for the current :attr:`precision`."""
        return TOLERANCE[self.precision]

    def info(self) -> DelegateInfo:
        """Probe and describe this delegate."""
        reason = self.probe()
        software = self.software
        if reason is None and software:
            reason = (f"software adapter, computes on the CPU cores: {self.adapter or 'unnamed'}; "
                      f"not used by delegates=\"auto\", name it to use it")
        return DelegateInfo(self.name, self.processor, self.backend, self.probe() is None, reason or "",
                            self.formats, self.precision, self.force_fp32_note, software, self.adapter)


def force_fp32_flag(options: dict[str, Any]) -> bool | None:
    """Pop ``force_fp32`` from delegate ``options``: True / False, or None when not given.

    Raises:
        ConfigError: a value that is not a bool (or 0 / 1).
    """
    if "force_fp32" not in options:
        return None
    v = options.pop("force_fp32")
    if v not in (True, False, 0, 1):
        raise ConfigError(f"force_fp32 must be True or False, got {v!r}")
    return bool(v)


def conform(outputs: list[np.ndarray], specs: tuple[TensorSpec, ...], label: str) -> list[np.ndarray]:
    """Outputs as ``specs`` declare them: a flat buffer of the right size is reshaped to the static
    shape; a different dtype or element count is a backend fault.

    Raises:
        InferenceError: an output has the wrong element count or dtype (names it, expected and got).
    """
    out = []
    for arr, spec in zip(outputs, specs):
        if arr.dtype != spec.dtype:
            raise InferenceError(f"{label}: output {spec.name!r} came back {arr.dtype}, the model declares "
                                 f"{spec.describe()}")
        if arr.shape != spec.shape and None not in spec.shape:
            shape = spec.concrete_shape()
            if arr.size != int(np.prod(shape, dtype=np.int64)):
                raise InferenceError(f"{label}: output {spec.name!r} came back with shape {list(arr.shape)}, "
                                     f"the model declares {spec.describe()}")
            arr = arr.reshape(shape)
        out.append(arr)
    return out
