"""LiteRT accelerator delegates loaded with ``load_delegate``: GPU, Qualcomm QNN, legacy Hexagon.

Each is a TFLite *external delegate* plugin: a shared library exporting
``tflite_plugin_create_delegate``, loaded by
``ai_edge_litert.interpreter.load_delegate(library, options)`` and handed to
the ``Interpreter`` as ``experimental_delegates``. The delegate takes the
nodes it supports; the rest stay on the CPU, and the session's
``placement()`` / ``coverage`` say how many went where.

==================  =========  ==================================  ===========================
name                processor  library                             options
==================  =========  ==================================  ===========================
litert-gpu          gpu        libtensorflowlite_gpu_delegate.so   (GPU delegate options)
litert-qnn-htp      npu        libQnnTFLiteDelegate.so             backend_type=htp
litert-qnn-gpu      gpu        libQnnTFLiteDelegate.so             backend_type=gpu
litert-qnn-dsp      dsp        libQnnTFLiteDelegate.so             backend_type=dsp
litert-hexagon      dsp        libhexagon_delegate.so              (+ libhexagon_interface.so)
==================  =========  ==================================  ===========================

Availability is probed: the library must be found (its file name and the
directories searched are in the reason otherwise), must load, must create a
delegate, and the delegate must take a node of a tiny probe model. Foreign
exceptions are mapped at this boundary: ``OSError`` (the dynamic loader) and
``ValueError`` (delegate creation) become reasons / ``DelegateUnavailable``;
a failure while applying the delegate to a model is ``ModelLoadError``.
A library path can be given with ``configure({"library": "/path/lib.so"})``;
every other option goes to the delegate as a string.

Where the libraries come from: the GPU delegate plugin is built from
TensorFlow (``//tensorflow/lite/delegates/gpu:libtensorflowlite_gpu_delegate.so``);
``libQnnTFLiteDelegate.so`` and the ``libQnn*.so`` backends ship in
Qualcomm's QAIRT SDK / on Snapdragon device images; the legacy Hexagon
delegate needs a plugin build of ``//tensorflow/lite/delegates/hexagon``
plus ``libhexagon_interface.so`` and the ``libhexagon_nn_skel*.so`` of the
SoC (Snapdragon 660-865 era DSPs).
"""

from __future__ import annotations

import ctypes
from typing import Any

from delegates._libraries import find_library, searched_dirs
from delegates._native_capture import capture_native_stderr
from delegates._probe_models import tflite_probe
from delegates.base import Delegate, force_fp32_flag
from delegates.litert import LiteRTDelegate, import_interpreter, interpreter_placement, node_count
from delegates.errors import DelegateUnavailable
from scheduler.errors import ConfigError


class ExternalDelegate(LiteRTDelegate):
    """A LiteRT external delegate plugin on one processor kind.

    Args:
        name: registry name.
        processor: gpu, dsp or npu.
        library: the plugin's file name (searched for) or path.
        options: delegate options (strings); ``library`` overrides the path.
        requires: further libraries the plugin needs at run time (checked by name).
        engine: label of the delegate's nodes in ``placement()``.
    """

    def __init__(self, name: str, processor: str, library: str, options: dict[str, Any] | None = None,
                 requires: tuple[str, ...] = (), engine: str | None = None) -> None:
        super().__init__(name, processor, options)
        self.library = library
        self.requires = requires
        self.engine = engine or processor
        self._path: str | None = None

    @property
    def precision(self) -> str:
        """GPU delegate: fp32 unless ``precision_loss_allowed`` (then fp16); QNN HTP: int8 (fp16 with
        ``htp_precision=1``), QNN GPU fp16, Hexagon int8 (it takes quantized models only)."""
        if self.library.startswith("libtensorflowlite_gpu"):
            return "fp16" if str(self.options.get("precision_loss_allowed", "0")).lower() in ("1", "true") else "fp32"
        if self.name == "litert-hexagon":
            return "int8"
        if self.options.get("backend_type") == "gpu":
            return "fp16"
        return "fp16" if str(self.options.get("htp_precision", "0")) == "1" else "int8"

    @property
    def force_fp32_note(self) -> str:  # type: ignore[override]
        """What ``force_fp32`` does here."""
        return "precision_loss_allowed=0" if self.library.startswith("libtensorflowlite_gpu") else "cannot"

    def configure(self, options: dict[str, Any]) -> None:
        """Merge delegate options; ``force_fp32=True`` turns off the GPU delegate's precision loss.

        Raises:
            ConfigError: ``force_fp32`` on a QNN / Hexagon path (they have no fp32 mode).
        """
        opts = dict(options)
        force = force_fp32_flag(opts)
        if force:
            if not self.library.startswith("libtensorflowlite_gpu"):
                raise ConfigError(f"{self.name} cannot force fp32: it computes in {self.precision} only")
            opts["precision_loss_allowed"] = "0"
        super().configure(opts)

    def _delegate_options(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.options.items() if k != "library"}

    def _interpreter_kwargs(self) -> dict[str, Any]:
        return {}

    def _probe(self) -> str | None:
        base = super()._probe()
        if base is not None:
            return base
        lib = str(self.options.get("library", self.library))
        path = find_library(lib)
        if path is None:
            return f"{lib} not found (searched {searched_dirs()}); install the delegate or configure its 'library' path"
        missing = [r for r in self.requires if find_library(r) is None]
        if missing:
            return f"{lib} needs {', '.join(missing)}, not found (searched {searched_dirs()})"
        try:
            handle = ctypes.CDLL(path)
        except OSError as exc:
            return f"{path} does not load: {exc}"
        if not hasattr(handle, "tflite_plugin_create_delegate"):
            return f"{path} is not a TFLite external delegate (no tflite_plugin_create_delegate symbol)"
        self._path = path
        return self._probe_with_model()

    def _load(self) -> Any:
        """A fresh delegate instance (one per interpreter)."""
        interpreter = import_interpreter()
        return interpreter.load_delegate(self._path or self.library, self._delegate_options())

    def _probe_with_model(self) -> str | None:
        interpreter = import_interpreter()
        with capture_native_stderr() as log:
            try:
                delegate = self._load()
                interp = interpreter.Interpreter(model_content=tflite_probe(), experimental_delegates=[delegate])
                applied = node_count(interp)
                interp.allocate_tensors()
                placed = interpreter_placement(interp, [(self.engine, applied)])
                err: Exception | None = None
            except (OSError, ValueError, RuntimeError) as exc:
                err, placed = exc, {}
        native = log.errors()
        suffix = f" [native: {native[:300]}]" if native else ""
        if err is not None:
            return f"{self.name}: {self._path} failed to start: {str(err).strip()[:300]}{suffix}"
        if placed and not placed.get(self.engine):
            return f"{self.name} took none of the probe model's nodes (no usable device?){suffix}"
        return None

    def _session_delegates(self) -> list[Any]:
        try:
            return [self._load()]
        except (OSError, ValueError, RuntimeError) as exc:
            self.invalidate()
            raise DelegateUnavailable(self.name, f"load_delegate({self._path or self.library}) failed: {exc}") from exc


def delegates() -> list[Delegate]:
    """The LiteRT external-delegate paths."""
    qnn_libs = ("libQnnTFLiteDelegate.so",)
    return [
        ExternalDelegate("litert-gpu", "gpu", "libtensorflowlite_gpu_delegate.so"),
        ExternalDelegate("litert-qnn-htp", "npu", qnn_libs[0], {"backend_type": "htp"}, requires=("libQnnHtp.so",)),
        ExternalDelegate("litert-qnn-gpu", "gpu", qnn_libs[0], {"backend_type": "gpu"}, requires=("libQnnGpu.so",)),
        ExternalDelegate("litert-qnn-dsp", "dsp", qnn_libs[0], {"backend_type": "dsp"}, requires=("libQnnDsp.so",)),
        ExternalDelegate("litert-hexagon", "dsp", "libhexagon_delegate.so", requires=("libhexagon_interface.so",)),
    ]
