"""LiteRT ``CompiledModel`` on one hardware accelerator: CPU, GPU, NPU (where present).

``ai_edge_litert.compiled_model.CompiledModel`` (LiteRT 2.x) compiles a
``.tflite`` model for a set of accelerators (``HardwareAccelerator.CPU`` via
XNNPACK, ``GPU`` via the bundled WebGPU/OpenCL accelerator, ``NPU`` via a
vendor dispatch library). ``litert-compiled-cpu`` exists so that the session
code the GPU and NPU paths share (tensor buffers, signature 0, outputs read
back flat and reshaped to the declared shape) runs on every host, CI
included. These paths open a model with the accelerator *alone*: if some
op is not accelerated LiteRT refuses ("Some ops are not accelerated") and
edgert raises ModelLoadError, because LiteRT does not report how a
GPU|CPU compilation was split — use the ``litert-gpu`` delegate (which
reports partitions) or a CPU path for such a model. A session opened here
therefore has ``coverage`` 1.0.

Availability is probed by compiling a tiny model for the accelerator; the
reason is LiteRT's own log line (e.g. "Failed to initialize WebGPU
environment: INTERNAL: No adapters found", "NPU accelerator could not be
loaded and registered: kLiteRtStatusErrorNotFound").

Precision: the GPU accelerator computes in fp16 unless
``GpuOptions(enforce_f32=True)`` is given (measured on an H100: |GPU - CPU|
up to 793 on pose_landmark_full in fp16); ``configure({"force_fp32": True})``
sets it. The CPU accelerator computes in fp32; an NPU's arithmetic is the
vendor compiler's choice (declared ``mixed``).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from typing import Any, TypeVar

import numpy as np

from delegates._adapters import vulkan_adapters
from delegates._foreign import LITERT_ERRORS
from delegates._native_capture import capture_native_stderr, native_quiet
from delegates._probe_models import tflite_probe
from delegates.base import Artifact, Delegate, Session, TensorSpec, conform, force_fp32_flag
from delegates.errors import DelegateUnavailable, InferenceError, ModelLoadError
from scheduler.errors import ConfigError


def _import_compiled() -> tuple[Any, Any]:
    from ai_edge_litert.compiled_model import CompiledModel  # noqa: PLC0415 - lazy, LiteRT 2.x only
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator  # noqa: PLC0415

    return CompiledModel, HardwareAccelerator


#: Element types ``ai_edge_litert.tensor_buffer.TensorBuffer`` reads and writes (2.3; no int64).
BUFFER_DTYPES: frozenset[np.dtype] = frozenset(np.dtype(t) for t in (
    np.float32, np.float16, np.int32, np.int8, np.uint8, np.bool_))

#: The share of a run's shortest recent time (the run asked for, to its outputs read) that the calling thread sleeps
#: before reading them, when the run came back before that: a GPU's run returns at once and LiteRT's
#: ``TensorBuffer.read`` then waits for the GPU holding the GIL (95 % of a GPU run's wall time on the generated CNN,
#: ``benchmarks/gil_hold.py``), which would stop every other thread of the process for the run. Asleep, the worker
#: lets them go on; the read waits out the rest. A CPU run ends inside the call, so nothing is slept there.
YIELD_SHARE = 0.8
#: runs whose times the shortest is taken over
RUN_TIMES_KEPT = 16

_E = TypeVar("_E", bound=BaseException)


def _untraced(exc: _E) -> _E:
    """``exc`` without its traceback. Its frames hold LiteRT's environment (a local of ``from_buffer``):
    kept alive by the exception, the environment would be destroyed, logging "DestroyAccelerator" from
    C++, wherever the caller drops the exception, outside the block that routes native lines."""
    exc.__traceback__ = None
    return exc


def dynamic_tensors(data: bytes) -> list[str]:
    """Names of subgraph 0's inputs / outputs whose shape signature has a dynamic (-1) dim.

    ``CompiledModel`` reports only the static shape (a dynamic batch shows as 1), so the flatbuffer's
    ``shape_signature`` is read with the schema ai_edge_litert ships; [] if it cannot be parsed.
    """
    try:
        from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415

        sg = schema.Model.GetRootAsModel(data, 0).Subgraphs(0)
        out = []
        for idx in [*sg.InputsAsNumpy().tolist(), *sg.OutputsAsNumpy().tolist()]:
            t = sg.Tensors(int(idx))
            if t.ShapeSignatureLength() and (t.ShapeSignatureAsNumpy() < 0).any():
                out.append((t.Name() or b"?").decode("utf-8", "replace"))
        return out
    except Exception:  # noqa: BLE001 - an unparsable file fails in LiteRT itself, with its message
        return []


def _model_options(accel: Any, accelerator: str, force_fp32: bool, threads: int = 1) -> dict[str, Any]:
    """``from_file`` / ``from_buffer`` keyword arguments: grouped ``Options`` (``threads`` CPU threads,
    ``GpuOptions.enforce_f32`` when asked) where this LiteRT has them, else the legacy flag.

    Raises:
        ConfigError: fp32 is forced but this LiteRT has no ``GpuOptions`` to say so.
    """
    try:
        from ai_edge_litert.options import CpuOptions, GpuOptions, Options  # noqa: PLC0415 - LiteRT >= 2.3
    except ImportError:
        if force_fp32 and accelerator == "GPU":
            raise ConfigError("force_fp32 on litert-compiled-gpu needs ai_edge_litert.options.GpuOptions "
                              "(ai-edge-litert >= 2.3): pip install -U ai-edge-litert") from None
        return {"hardware_accel": accel}
    opts = Options(hardware_accelerators=accel, cpu_options=CpuOptions(num_threads=threads),
                   gpu_options=GpuOptions(enforce_f32=True) if force_fp32 and accelerator == "GPU" else None)
    return {"options": opts}


class CompiledSession(Session):
    """One ``CompiledModel`` (signature 0) behind the Session interface; static shapes only."""

    def __init__(self, model: Any, label: str, engine: str, precision: str = "fp32") -> None:
        self._model: Any = None
        self._in_bufs: list[Any] = []
        self._out_bufs: list[Any] = []
        try:
            self._setup(model, label, engine, precision)
        except BaseException:
            self._model = None
            self._in_bufs = self._out_bufs = []
            raise

    def _setup(self, model: Any, label: str, engine: str, precision: str) -> None:
        self._model = model
        self.precision = precision
        self._label = label
        key = next(iter(model.get_signature_list()))
        ins = model.get_input_tensor_details(key)
        outs = model.get_output_tensor_details(key)
        self.inputs = tuple(TensorSpec(n, tuple(int(x) for x in d["shape"]), np.dtype(d["dtype"])) for n, d in ins.items())
        self.outputs = tuple(TensorSpec(n, tuple(int(x) for x in d["shape"]), np.dtype(d["dtype"])) for n, d in outs.items())
        dynamic = [s.name for s in (*self.inputs, *self.outputs) if any(x is None or x < 0 for x in s.shape)]
        if dynamic:
            raise ModelLoadError(f"{label} has tensors of dynamic shape ({', '.join(dynamic)}), which a "
                                 "CompiledModel path does not resize; use litert-xnnpack")
        odd = [f"{s.name} ({s.dtype})" for s in (*self.inputs, *self.outputs) if s.dtype not in BUFFER_DTYPES]
        if odd:
            raise ModelLoadError(f"{label} has tensors LiteRT's TensorBuffer cannot read or write: "
                                 f"{', '.join(odd)} (it takes {', '.join(sorted(d.name for d in BUFFER_DTYPES))}); "
                                 "use litert-xnnpack")
        self._in_bufs = model.create_input_buffers(0)
        self._out_bufs = model.create_output_buffers(0)
        self._out_n = [int(np.prod(s.concrete_shape(), dtype=np.int64)) for s in self.outputs]   # static
        self._run_s: deque[float] = deque(maxlen=RUN_TIMES_KEPT)   # recent runs' times, to the outputs read (s)
        self.coverage = 1.0
        self._engine = engine
        # LiteRT creates a process-wide environment on the first run and logs that at INFO from C++: run
        # once on zeros now, where the caller (open) routes native lines to logging, not mid-request.
        model.run_by_index(0, self._in_bufs, self._out_bufs)

    def placement(self) -> dict[str, int]:
        """``{engine: 1}``: the whole graph was compiled for the accelerator (node counts are not exposed)."""
        return {self._engine: 1}

    def run(self, feeds: list[np.ndarray]) -> list[np.ndarray]:
        """Write inputs, run signature 0, read outputs back in their declared shapes and dtypes.

        A tensor buffer reads back flat (1-D); each output is reshaped to the shape the model
        declares (static here), and a wrong element count or dtype is an InferenceError.

        Raises:
            InferenceError: LiteRT failed (chained), or an output does not match its declaration.
        """
        for spec, arr in zip(self.inputs, feeds):
            if arr.shape != spec.shape:
                raise InferenceError(f"LiteRT CompiledModel running {self._label}: input {spec.name!r} has shape "
                                     f"{list(arr.shape)}, the compiled model takes {spec.describe()} only")
        try:
            for buf, spec, arr in zip(self._in_bufs, self.inputs, feeds):
                buf.write(np.ascontiguousarray(arr, dtype=spec.dtype))
            start = time.perf_counter()
            self._model.run_by_index(0, self._in_bufs, self._out_bufs)
            self._yield_while_it_runs(start)
            flat = [np.asarray(buf.read(n, s.dtype)) for buf, n, s in zip(self._out_bufs, self._out_n, self.outputs)]
            self._run_s.append(time.perf_counter() - start)
        except LITERT_ERRORS as exc:   # anything else is a bug of ours: it propagates
            raise InferenceError(f"LiteRT CompiledModel failed running {self._label}: {exc}") from exc
        return conform(flat, self.outputs, f"LiteRT CompiledModel running {self._label}")

    def _yield_while_it_runs(self, start: float) -> None:
        """Sleep (the GIL released) until :data:`YIELD_SHARE` of the shortest recent run time since ``start`` has
        passed, when the run came back before that (see :data:`YIELD_SHARE`). The times kept include the sleep, so a
        run that became faster sleeps a little longer than it needs for a few runs: the shortest falls by a fifth
        a run until it is the run's own."""
        if self._run_s:
            left = YIELD_SHARE * min(self._run_s) - (time.perf_counter() - start)
            if left > 0.0:
                time.sleep(left)

    def close(self) -> None:
        """Release the compiled model, its buffers and LiteRT environment (whose teardown logs
        "DestroyAccelerator" at INFO from C++: routed to logging)."""
        if self._model is not None:
            with native_quiet():
                self._model.close()
                self._model = None
                self._in_bufs = self._out_bufs = []

    def __del__(self) -> None:
        """A session dropped without close() releases LiteRT quietly too."""
        with contextlib.suppress(Exception):
            self.close()


class CompiledModelDelegate(Delegate):
    """``CompiledModel`` with one accelerator flag (``CPU``, ``GPU`` or ``NPU``) on a processor kind."""

    backend = "litert"
    formats = ("tflite",)

    def __init__(self, name: str, processor: str, accelerator: str) -> None:
        self.name = name
        self.processor = processor
        self.accelerator = accelerator
        self.force_fp32 = False
        self.force_fp32_note = ("GpuOptions(enforce_f32=True)" if accelerator == "GPU" else "")
        #: The CPU accelerator is XNNPACK again (litert-xnnpack's engine): usable by name, and kept
        #: out of "auto" so that a CPU worker does not warm up one engine twice per model.
        self.in_auto = accelerator != "CPU"

    @property
    def precision(self) -> str:
        """``fp32`` on the CPU, ``fp16`` on the GPU (``fp32`` when forced), ``mixed`` on an NPU."""
        if self.accelerator == "CPU":
            return "fp32"
        if self.accelerator == "GPU":
            return "fp32" if self.force_fp32 else "fp16"
        return "mixed"

    def configure(self, options: dict[str, Any]) -> None:
        """Takes ``force_fp32`` (GPU: ``GpuOptions.enforce_f32``); any other key is an error.

        Raises:
            ConfigError: an unknown key, or forcing fp32 on an NPU (its compiler decides).
        """
        opts = dict(options)
        force = force_fp32_flag(opts)
        if opts:
            raise ConfigError(f"{self.name} takes only force_fp32 (got {sorted(opts)})")
        if force and self.accelerator == "NPU":
            raise ConfigError(f"{self.name} cannot force fp32: the NPU vendor's compiler picks the arithmetic")
        if force is not None:
            self.force_fp32 = force and self.accelerator == "GPU"

    @property
    def software(self) -> bool:  # type: ignore[override]
        """GPU: True when every Vulkan adapter here is software (lavapipe, SwiftShader), so that LiteRT's
        WebGPU accelerator would compute on the CPU cores; asked of a child process, never of this one
        (:func:`delegates._adapters.vulkan_adapters`). A hardware adapter beside it is the one used."""
        return self.accelerator == "GPU" and vulkan_adapters().software_only

    @property
    def adapter(self) -> str:  # type: ignore[override]
        """GPU: the Vulkan adapter LiteRT's accelerator would use (hardware first), "" when none is found."""
        if self.accelerator != "GPU":
            return ""
        ads = vulkan_adapters().adapters
        return ads[0].name if ads else ""

    @property
    def _telling(self) -> str:
        """Regex of the log lines that explain this accelerator's failure best."""
        return {"GPU": r"webgpu|adapter|opencl|metal", "NPU": r"NPU accelerator|dispatch"}.get(self.accelerator,
                                                                                             r"xnnpack|cpu")

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
                compiled.from_buffer(tflite_probe(), **_model_options(self._flag(), self.accelerator, False)).close()
                err: Exception | None = None
            except Exception as exc:  # noqa: BLE001 - LiteRT raises RuntimeError with its status
                err = _untraced(exc)
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
        data = artifact.read()
        if dynamic := dynamic_tensors(data):
            raise ModelLoadError(f"{self.name} cannot run {artifact.label}: tensors of dynamic shape "
                                 f"({', '.join(dynamic)}), which a CompiledModel path does not resize; "
                                 "use litert-xnnpack")
        compiled, _ = _import_compiled()
        kwargs = _model_options(self._flag(), self.accelerator, self.force_fp32, threads)
        with capture_native_stderr() as log:
            try:
                model = (compiled.from_file(str(artifact.path), **kwargs) if artifact.path
                         else compiled.from_buffer(data, **kwargs))
                err: Exception | None = None
            except Exception as exc:  # noqa: BLE001
                err = _untraced(exc)
        if err is not None:
            detail = log.errors(2, prefer=r"not accelerated|" + self._telling) or str(err).strip().replace("\n", " ")
            hint = (" (not every op runs on it; use a delegate path that partitions, e.g. litert-gpu, or a cpu path)"
                    if "not accelerated" in (str(err) + log.text) else "")
            raise ModelLoadError(f"{self.name} could not compile {artifact.label}: {detail[:400]}{hint}") from err
        try:
            with native_quiet():
                try:
                    return CompiledSession(model, artifact.label, self.processor, self.precision)
                except BaseException as exc:
                    model.close()
                    del model   # LiteRT's environment goes now, while its log lines are routed
                    raise _untraced(exc)  # noqa: B904 - the same exception, without the frames holding LiteRT
        except LITERT_ERRORS as exc:
            raise ModelLoadError(f"{self.name} compiled {artifact.label} but cannot make its tensor buffers: "
                                 f"{exc} (a model with dynamic shapes needs litert-xnnpack)") from exc


def delegates() -> list[Delegate]:
    """The CompiledModel accelerator paths."""
    return [CompiledModelDelegate("litert-compiled-cpu", "cpu", "CPU"),
            CompiledModelDelegate("litert-compiled-gpu", "gpu", "GPU"),
            CompiledModelDelegate("litert-compiled-npu", "npu", "NPU")]
