"""ONNX Runtime and its execution providers (docs/design.md §3).

Each :class:`OrtDelegate` is one execution provider (EP) mapped to a
processor kind: CPU and XNNPACK on ``cpu``; CUDA, TensorRT and CoreML on
``gpu``; TensorRT with DLA (Jetson), NNAPI, CoreML's Neural Engine and
OpenVINO's NPU on ``npu``. QNN lives in :mod:`delegates.ort_qnn`.

* Availability is probed, never assumed: the EP must be in this build, a
  host requirement (e.g. a Jetson for DLA) must hold, and an accelerator EP
  must actually take a node of a tiny probe model (a listed CUDA EP whose
  driver is missing does not).
* Partial support is measured: ORT records which nodes each EP took
  (``session.record_ep_graph_assignment_info``); a session's ``coverage`` is
  the share of nodes on its EP and ``placement()`` counts nodes per EP. A
  session whose EP took no node is refused (it would be a CPU session
  pretending to be a GPU one).
* ORT's Python fallback (silently re-creating or re-running a failed session
  on the CPU EP) is disabled, so a failing accelerator fails visibly.
* Provider options are passed through: the constructor's defaults merged
  with :meth:`OrtDelegate.configure` (``delegates.registry.configure``).
* Serving options (``io_binding``, ``cuda_graph``, ``instances``, ``max_batch``) ride on the same
  options and are applied or refused with the reason (:mod:`delegates._ort_serving`).

Sessions are single-threaded by default (``intra_op_num_threads=1``): a
worker per core with one thread each beats ORT's default thread pools, which
oversubscribe a small CPU and halve throughput (measured, docs/design.md §3).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from delegates._foreign import ort_errors
from delegates._host import jetson_model
from delegates._native_capture import capture_native_stderr, native_quiet
from delegates._ort_session import CPU_EP, OrtSession, graph_placement
from delegates._ort_serving import (
    GPU_PROVIDERS,
    ServingOptions,
    check_model,
    path_refusals,
    pop_serving,
    provider_options,
)
from delegates._probe_models import onnx_probe
from delegates.base import Artifact, Delegate, force_fp32_flag
from delegates.precision import ort_force_fp32, ort_precision
from delegates.errors import DelegateUnavailable, ModelLoadError
from scheduler.errors import ConfigError

#: What to install (or build) to get an EP that this onnxruntime build lacks.
_INSTALL_HINT: dict[str, str] = {
    "CUDAExecutionProvider": "pip install 'edgert[cuda]' (onnxruntime-gpu; needs an NVIDIA driver, CUDA 12 "
                             "and cuDNN 9)",
    "TensorrtExecutionProvider": "pip install onnxruntime-gpu and TensorRT 10 (on Jetson: JetPack's onnxruntime-gpu wheel)",
    "OpenVINOExecutionProvider": "pip install onnxruntime-openvino",
    "XnnpackExecutionProvider": "the PyPI onnxruntime wheel is built without it; use onnxruntime-android or build with --use_xnnpack",
    "NnapiExecutionProvider": "only onnxruntime builds for Android have it (onnxruntime-android, or --use_nnapi)",
    "CoreMLExecutionProvider": "only onnxruntime builds for macOS/iOS have it",
    "QNNExecutionProvider": "pip install 'edgert[qnn]' (onnxruntime-qnn)",
}



def _import_ort() -> Any:
    import onnxruntime  # noqa: PLC0415 - lazy: a missing SDK must not break the rest

    return onnxruntime


class OrtDelegate(Delegate):
    """One ONNX Runtime execution provider on one processor kind, e.g. ``CUDAExecutionProvider`` on ``gpu``.

    Args:
        name: registry name (``ort-cuda``).
        processor: cpu, gpu, dsp or npu.
        provider: the EP's ORT name.
        provider_options: default EP options; :meth:`configure` merges more.
        probe_session: probe by opening a tiny model (default: for every EP but the CPU one).
        requirement: extra host check, returning the reason it fails or None.
    """

    backend = "onnxruntime"
    formats = ("onnx",)

    def __init__(self, name: str, processor: str, provider: str,
                 provider_options: Mapping[str, Any] | None = None, *,
                 probe_session: bool | None = None,
                 requirement: Callable[[], str | None] | None = None) -> None:
        self.name = name
        self.processor = processor
        self.provider = provider
        self.provider_options: dict[str, Any] = dict(provider_options or {})
        self.probe_session = provider != CPU_EP if probe_session is None else probe_session
        self._requirement = requirement
        #: what sessions opened from now on are served with (:meth:`configure`'s serving keys)
        self.serving = ServingOptions()

    # -- configuration and probing -------------------------------------------------------------
    def configure(self, options: Mapping[str, Any]) -> None:
        """Merge EP options (passed to ORT as given) and forget the cached probe.

        ``force_fp32=True`` sets the EP's own options for fp32 arithmetic (CUDA ``use_tf32=0``,
        TensorRT without fp16 / int8, OpenVINO ``precision=FP32``; :mod:`delegates.precision`).

        The serving keys (``io_binding``, ``cuda_graph``, ``instances``, ``max_batch``) set
        :attr:`serving` for the sessions opened from now on (see :mod:`delegates._ort_serving`); one that
        cannot apply on this path is refused here, with nothing changed.

        Raises:
            ConfigError: ``force_fp32`` on an EP that cannot compute in fp32 (DLA, NNAPI's NPU …); a serving
                option of the wrong type, or one this path cannot apply (the option, the reason and the fix).
        """
        opts = dict(options)
        asked = pop_serving(opts)
        serving = self._serving_with(asked) if asked else self.serving
        force = force_fp32_flag(opts)
        if force:
            opts.update(ort_force_fp32(self.name, self.provider, self.provider_options))
        self.serving = serving
        self.provider_options.update(opts)
        self.invalidate()

    @property
    def serves_instances(self) -> bool:
        """Whether several sessions of one model on this path run on one GPU side by side (CUDA / TensorRT
        on ``gpu``, a CUDA stream each): the paths ``edgert profile`` measures instance counts on."""
        return self.processor == "gpu" and self.provider in GPU_PROVIDERS

    def _serving_with(self, asked: dict[str, Any]) -> ServingOptions:
        """:attr:`serving` with ``asked`` applied, or ConfigError naming the first option this path refuses."""
        try:
            new = replace(self.serving, **asked)
        except ValueError as exc:
            raise ConfigError(f"{self.name}: {exc}") from exc
        try:
            have = list(_import_ort().get_available_providers())
        except ImportError:
            have = []
        refused = path_refusals(new, self.provider, have)
        if refused:
            option, why = next(iter(refused.items()))
            raise ConfigError(f"{self.name} cannot serve with {option}={getattr(new, option)!r}: {why}")
        return new

    @property
    def precision(self) -> str:
        """The arithmetic this EP computes in with its current options (:func:`delegates.precision.ort_precision`)."""
        return ort_precision(self.provider, self.provider_options)

    @property
    def force_fp32_note(self) -> str:  # type: ignore[override]
        """The EP options ``force_fp32`` sets ("" when there is nothing to force)."""
        try:
            opts = ort_force_fp32(self.name, self.provider, self.provider_options)
        except Exception:  # noqa: BLE001 - cannot be forced: say so in devices
            return "cannot: " + ("DLA computes in fp16 / int8 only" if "dla" in self.name else "not supported")
        return ", ".join(f"{k}={v}" for k, v in opts.items())



    def _probe(self) -> str | None:
        try:
            ort = _import_ort()
        except ImportError as exc:
            return f"onnxruntime is not installed ({exc}); pip install onnxruntime"
        if self._requirement is not None and (why := self._requirement()) is not None:
            return why
        if (why := self._provider_missing(ort)) is not None:
            return why
        if not self.probe_session:
            return None
        return self._probe_with_model()

    def _provider_missing(self, ort: Any) -> str | None:
        have = ort.get_available_providers()
        if self.provider in have:
            return None
        hint = _INSTALL_HINT.get(self.provider, "")
        from delegates._install import shadowed  # noqa: PLC0415 - only when an EP is missing

        hint = next((sh.line() for sh in shadowed(list(have)) if sh.provider == self.provider), hint)
        return (f"{self.provider} is not in this onnxruntime {ort.__version__} build "
                f"(has: {', '.join(have)})" + (f"; {hint}" if hint else ""))

    def _probe_with_model(self) -> str | None:
        with capture_native_stderr() as log:
            try:
                sess = self._create(onnx_probe(), threads=1, quiet=True)
                err: Exception | None = None
            except Exception as exc:  # noqa: BLE001 - any failure here is the reason
                err = exc
        native = log.errors(1, prefer=r"failed|error")
        if err is not None:
            msg = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
            return f"{self.provider} failed to start: {msg[:300]}" + (f" [native: {native[:300]}]" if native else "")
        if self.provider not in sess.get_providers():
            return f"{self.provider} was dropped from the session (has: {', '.join(sess.get_providers())})"
        placed = graph_placement(sess)
        if placed and not placed.get(self.provider):
            return (f"{self.provider} took none of the probe model's nodes (no usable device?)"
                    + (f" [native: {native[:300]}]" if native else ""))
        return None

    # -- sessions ------------------------------------------------------------------------------
    def session_options(self, threads: int, quiet: bool = False) -> Any:
        """Sequential session options with ``threads`` intra-op threads and node-placement recording.

        ``quiet`` is accepted for probes; errors are still logged (probes capture them as the reason).
        """
        ort = _import_ort()
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        return so

    def _configure_session(self, so: Any, threads: int) -> list[Any] | None:
        """Attach this EP: return the ``providers=`` list, or None when it was added to ``so`` itself."""
        opts = dict(self.provider_options)
        opts.update(provider_options(self.serving, self.provider))   # CUDA graphs: the EP's own flag
        if self.provider == "XnnpackExecutionProvider":
            opts.setdefault("intra_op_num_threads", threads)
        if self.provider == CPU_EP:
            return [(CPU_EP, opts)]
        return [(self.provider, opts), CPU_EP]

    def _create(self, source: str | bytes, threads: int, quiet: bool = False) -> Any:
        ort = _import_ort()
        so = self.session_options(threads, quiet)
        providers = self._configure_session(so, threads)
        # enable_fallback=0: never re-create or re-run on the CPU EP behind the caller's back.
        return ort.InferenceSession(source, so, providers=providers, enable_fallback=0)

    def open(self, artifact: Artifact, threads: int = 1) -> OrtSession:
        """Create an InferenceSession on this EP.

        Raises:
            DelegateUnavailable: the EP cannot run on this host (the probe's reason).
            ModelLoadError: the file is missing or invalid, or the EP rejected it or took none of its nodes.
        """
        if (reason := self.probe()) is not None:
            raise DelegateUnavailable(self.name, reason)
        if artifact.path is not None and not artifact.path.exists():
            raise ModelLoadError(f"model file {artifact.label} does not exist")
        source = str(artifact.path) if artifact.path is not None else artifact.read()
        try:
            with native_quiet():   # e.g. "No registered plugin EP device found for 'CUDAExecutionProvider'"
                sess = self._create(source, threads)
        except ort_errors() as exc:
            raise ModelLoadError(
                f"onnxruntime could not load {artifact.label} on {self.provider} ({self.name}): {exc}"
                " (is it a valid .onnx file? re-export or re-download it)") from exc
        if self.provider not in sess.get_providers():
            raise ModelLoadError(f"{self.provider} dropped out while loading {artifact.label}; "
                                 f"the session only has {', '.join(sess.get_providers())}")
        session = self._session(sess, artifact.label)
        session.precision = self.precision
        placed = session.placement()
        if self.provider != CPU_EP and placed and not placed.get(self.provider):
            raise ModelLoadError(
                f"{self.provider} ({self.name}) took none of the {sum(placed.values())} nodes of {artifact.label}: "
                f"it would run entirely on the CPU; run this model on a cpu delegate instead")
        return session

    def _session(self, sess: Any, label: str) -> OrtSession:
        """The session as served: IO-bound (``delegates._ort_bound``) when :attr:`serving` asks for it.

        Raises:
            ServingRefused: a serving option cannot apply to this model (e.g. CUDA graphs, symbolic shapes).
        """
        plain = OrtSession(sess, label, self.provider)
        check_model(self.serving, self.provider, _import_ort().get_available_providers(), plain.inputs,
                    plain.outputs, self.name, label)
        if not self.serving.io_binding:
            return plain
        from delegates._ort_bound import BoundOrtSession  # noqa: PLC0415 - only with io_binding

        return BoundOrtSession(sess, label, self.provider, int(self.provider_options.get("device_id", 0)),
                               self.serving.cuda_graph)


def _dla_requirement() -> str | None:
    if jetson_model() is None:
        return "no DLA: DLA cores exist only on NVIDIA Jetson (AGX Xavier/Orin, Orin NX); this host is not a Jetson"
    return None


def delegates() -> list[Delegate]:
    """The ONNX Runtime delegate paths of this family (QNN is in :mod:`delegates.ort_qnn`)."""
    return [
        OrtDelegate("ort-cpu", "cpu", CPU_EP),
        OrtDelegate("ort-xnnpack", "cpu", "XnnpackExecutionProvider"),
        OrtDelegate("ort-cuda", "gpu", "CUDAExecutionProvider", {"device_id": 0}),
        OrtDelegate("ort-tensorrt", "gpu", "TensorrtExecutionProvider", {"device_id": 0}),
        OrtDelegate("ort-tensorrt-dla", "npu", "TensorrtExecutionProvider",
                    {"device_id": 0, "trt_dla_enable": True, "trt_dla_core": 0, "trt_fp16_enable": True},
                    requirement=_dla_requirement),
        OrtDelegate("ort-nnapi", "npu", "NnapiExecutionProvider"),
        OrtDelegate("ort-coreml", "gpu", "CoreMLExecutionProvider", {"MLComputeUnits": "CPUAndGPU"}),
        OrtDelegate("ort-coreml-ane", "npu", "CoreMLExecutionProvider", {"MLComputeUnits": "CPUAndNeuralEngine"}),
        OrtDelegate("ort-openvino-cpu", "cpu", "OpenVINOExecutionProvider", {"device_type": "CPU"}),
        OrtDelegate("ort-openvino-gpu", "gpu", "OpenVINOExecutionProvider", {"device_type": "GPU"}),
        OrtDelegate("ort-openvino-npu", "npu", "OpenVINOExecutionProvider", {"device_type": "NPU"}),
    ]
