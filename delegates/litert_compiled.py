"""LiteRT ``CompiledModel`` with its hardware-accelerator flags (GPU, NPU), where present.

``ai_edge_litert.compiled_model.CompiledModel`` (LiteRT 2.x) compiles a
``.tflite`` model for a set of accelerators (``HardwareAccelerator.GPU`` via
the bundled WebGPU/OpenCL accelerator, ``NPU`` via a vendor dispatch
library). These paths open a model with the accelerator *alone*: if some
op is not accelerated LiteRT refuses ("Some ops are not accelerated") and
edgert raises ModelLoadError, because LiteRT does not report how a
GPU|CPU compilation was split — use the ``litert-gpu`` delegate (which
reports partitions) or a CPU path for such a model. A session opened here
therefore has ``coverage`` 1.0.

Availability is probed by compiling a tiny model for the accelerator; the
reason is LiteRT's own log line (e.g. "Failed to initialize WebGPU
environment: INTERNAL: No adapters found", "NPU accelerator could not be
loaded and registered: kLiteRtStatusErrorNotFound").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from delegates._foreign import LITERT_ERRORS
from delegates._native import capture_native_stderr
from delegates._probe_models import tflite_probe
from delegates.base import Artifact, Delegate, Session, TensorSpec
from delegates.errors import DelegateUnavailable, InferenceError, ModelLoadError


def _import_compiled() -> tuple[Any, Any]:
    from ai_edge_litert.compiled_model import CompiledModel  # noqa: PLC0415 - lazy, LiteRT 2.x only
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator  # noqa: PLC0415

    return CompiledModel, HardwareAccelerator


class CompiledSession(Session):
    """One ``CompiledModel`` (signature 0) behind the Session interface; static shapes only."""

    def __init__(self, model: Any, label: str, engine: str) -> None:
        self._model = model
        self._label = label
        key = next(iter(model.get_signature_list()))
        ins = model.get_input_tensor_details(key)
        outs = model.get_output_tensor_details(key)
        self.inputs = tuple(TensorSpec(n, tuple(int(x) for x in d["shape"]), np.dtype(d["dtype"])) for n, d in ins.items())
        self.outputs = tuple(TensorSpec(n, tuple(int(x) for x in d["shape"]), np.dtype(d["dtype"])) for n, d in outs.items())
        self._in_bufs = model.create_input_buffers(0)
        self._out_bufs = model.create_output_buffers(0)
        self.coverage = 1.0
        self._engine = engine

    def placement(self) -> dict[str, int]:
        """``{engine: 1}``: the whole graph was compiled for the accelerator (node counts are not exposed)."""
        return {self._engine: 1}

    def run(self, feeds: list[np.ndarray]) -> list[np.ndarray]:
        """Write inputs, run signature 0, read outputs; LiteRT's errors become InferenceError."""
        try:
            for buf, spec, arr in zip(self._in_bufs, self.inputs, feeds):
                buf.write(np.ascontiguousarray(arr, dtype=spec.dtype))
            self._model.run_by_index(0, self._in_bufs, self._out_bufs)
            return [buf.read(int(np.prod(s.shape)), s.dtype)  # type: ignore[arg-type]  # output shapes are static.reshape(s.shape)
                    for buf, s in zip(self._out_bufs, self.outputs)]
        except LITERT_ERRORS as exc:   # anything else is a bug of ours: it propagates
            raise InferenceError(f"LiteRT CompiledModel failed running {self._label}: {exc}") from exc

    def close(self) -> None:
        """Release the compiled model."""
        if self._model is not None:
            self._model.close()
            self._model = None


class CompiledModelDelegate(Delegate):
    """``CompiledModel`` with one accelerator flag (``GPU`` or ``NPU``) on a processor kind."""

    backend = "litert"
    formats = ("tflite",)

    def __init__(self, name: str, processor: str, accelerator: str) -> None:
        self.name = name
        self.processor = processor
        self.accelerator = accelerator


    def configure(self, options: dict[str, Any]) -> None:
        """No options are taken yet; any key is an error (names the path)."""
        if options:
            from scheduler.errors import ConfigError  # noqa: PLC0415

            raise ConfigError(f"{self.name} takes no options (got {sorted(options)})")


    @property
    def _telling(self) -> str:
        """Regex of the log lines that explain this accelerator's failure best."""
        return r"webgpu|adapter|opencl|metal" if self.accelerator == "GPU" else r"NPU accelerator|dispatch"

    def _flag(self) -> Any:
        _, hw = _import_compiled()
        return getattr(hw, self.accelerator)

    def _probe(self) -> str | None:
        try:
            compiled, _ = _import_compiled()
        except ImportError as exc:
            return f"this LiteRT has no CompiledModel API ({exc}); pip install -U 'ai-edge-litert>=2'"
        with capture_native_stderr() as log:
            try:
                compiled.from_buffer(tflite_probe(), hardware_accel=self._flag()).close()
                err: Exception | None = None
            except Exception as exc:  # noqa: BLE001 - LiteRT raises RuntimeError with its status
                err = exc
        if err is None:
            return None
        native = log.errors(1, prefer=self._telling)
        hint = ("; no NPU vendor dispatch library for this SoC (LiteRT's Qualcomm / MediaTek / Google Tensor / "
                "Intel OpenVINO plugins need the vendor runtime on the device)" if self.accelerator == "NPU" else "")
        return (f"LiteRT cannot compile for {self.accelerator}: "
                + (native[:400] if native else str(err).strip().replace("\n", " ")[:300]) + hint)

    def open(self, artifact: Artifact, threads: int = 1) -> CompiledSession:
        """Compile ``artifact`` for the accelerator alone.

        Raises:
            DelegateUnavailable: the accelerator is not usable here.
            ModelLoadError: the file is missing/invalid or some op is not accelerated.
        """
        if (reason := self.probe()) is not None:
            raise DelegateUnavailable(self.name, reason)
        if artifact.path is not None and not artifact.path.exists():
            raise ModelLoadError(f"model file {artifact.label} does not exist")
        compiled, _ = _import_compiled()
        with capture_native_stderr() as log:
            try:
                model = (compiled.from_file(str(artifact.path), hardware_accel=self._flag()) if artifact.path
                         else compiled.from_buffer(artifact.read(), hardware_accel=self._flag()))
                err: Exception | None = None
            except Exception as exc:  # noqa: BLE001
                err = exc
        if err is not None:
            detail = log.errors(2, prefer=r"not accelerated|" + self._telling) or str(err).strip().replace("\n", " ")
            hint = (" (not every op runs on it; use a delegate path that partitions, e.g. litert-gpu, or a cpu path)"
                    if "not accelerated" in (str(err) + log.text) else "")
            raise ModelLoadError(f"{self.name} could not compile {artifact.label}: {detail[:400]}{hint}") from err
        return CompiledSession(model, artifact.label, self.processor)


def delegates() -> list[Delegate]:
    """The CompiledModel accelerator paths."""
    return [CompiledModelDelegate("litert-compiled-gpu", "gpu", "GPU"),
            CompiledModelDelegate("litert-compiled-npu", "npu", "NPU")]
