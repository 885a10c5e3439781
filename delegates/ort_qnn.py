"""ONNX Runtime's QNN execution provider: Qualcomm HTP (``npu``) and Adreno GPU (``gpu``) backends.

Two forms exist and both are handled:

* **plugin** (``onnxruntime-qnn`` 2.x, the ``[qnn]`` extra): a separate
  ``onnxruntime_qnn`` package beside the stock ``onnxruntime``. Its EP
  library is registered once per process
  (``onnxruntime.register_execution_provider_library``), its devices listed
  (``onnxruntime.get_ep_devices``) and attached to a session with
  ``SessionOptions.add_provider_for_devices(devices, options)``.
* **built-in** (``onnxruntime-qnn`` 1.x, which replaces the ``onnxruntime``
  package, or an Android/Windows-on-Arm build): ``QNNExecutionProvider`` is
  already in ``get_available_providers()`` and takes ``providers=[...]``.

On an x86 host the plugin's ``libQnnHtp.so`` runs the HTP backend through
Qualcomm's emulator: slow, but the real NPU code path, so it is listed as
available on ``npu`` with a note that it is emulated. The GPU backend needs
an Adreno GPU; elsewhere its probe fails with QNN's own error.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from delegates._native_capture import capture_native_stderr
from delegates.base import Delegate, DelegateInfo
from delegates.onnxrt import OrtDelegate, _import_ort

QNN_EP = "QNNExecutionProvider"

_register_lock = threading.Lock()
_plugin: dict[str, Any] = {}  # "form": "plugin" | "builtin", "error": str, "library": path


def qnn_form() -> tuple[str | None, str]:
    """How QNN is available in this process: (``"plugin"`` | ``"builtin"`` | None, detail or reason).

    The first call registers the ``onnxruntime_qnn`` plugin library when the
    EP is not built in; later calls return the cached answer.
    """
    with _register_lock:
        if not _plugin:
            with capture_native_stderr():  # the QNN libraries print a banner when loaded
                _plugin.update(_discover())
        return _plugin.get("form"), _plugin.get("detail", "")


def _discover() -> dict[str, Any]:
    try:
        ort = _import_ort()
    except ImportError as exc:
        return {"form": None, "detail": f"onnxruntime is not installed ({exc}); pip install onnxruntime"}
    if QNN_EP in ort.get_available_providers():
        return {"form": "builtin", "detail": f"built into onnxruntime {ort.__version__}"}
    try:
        import onnxruntime_qnn  # noqa: PLC0415 - lazy: optional extra
    except ImportError:
        return {"form": None, "detail": (f"{QNN_EP} is not in this onnxruntime {ort.__version__} build and "
                                         "onnxruntime-qnn is not installed; pip install 'edgert[qnn]'")}
    if not hasattr(ort, "register_execution_provider_library"):
        return {"form": None, "detail": (f"onnxruntime-qnn {getattr(onnxruntime_qnn, '__version__', '?')} is a plugin "
                                         f"but onnxruntime {ort.__version__} cannot load plugins; "
                                         "pip install -U 'onnxruntime>=1.24.2'")}
    lib = onnxruntime_qnn.get_library_path()
    try:
        ort.register_execution_provider_library(QNN_EP, lib)
    except Exception as exc:  # noqa: BLE001 - ORT's RuntimeException / Fail: the reason
        if "already registered" not in str(exc):
            return {"form": None, "detail": f"could not register the QNN EP library {lib}: {exc}"}
    return {"form": "plugin", "library": lib,
            "detail": f"onnxruntime-qnn {onnxruntime_qnn.__version__} plugin ({lib})"}


def _device_type(dev: Any) -> str:
    return str(getattr(dev.device.type, "name", dev.device.type)).upper()


class QnnOrtDelegate(OrtDelegate):
    """QNN EP with one backend: ``htp`` (Hexagon Tensor Processor, ``npu``) or ``gpu`` (Adreno, ``gpu``)."""

    def __init__(self, name: str, processor: str, backend_type: str,
                 provider_options: Mapping[str, Any] | None = None) -> None:
        super().__init__(name, processor, QNN_EP, {"backend_type": backend_type, **(provider_options or {})},
                         probe_session=True)
        self.backend_type = backend_type
        #: True when the chosen QNN device is the host CPU (the x86 HTP emulator), set by the probe.
        self.emulated = False

    def _provider_missing(self, ort: Any) -> str | None:
        form, detail = qnn_form()
        if form is None:
            return detail
        if form == "plugin" and not self._devices(ort):
            return f"the QNN plugin lists no devices ({detail})"
        return None

    def _devices(self, ort: Any) -> list[Any]:
        """The QNN EP devices to use: those of the backend's hardware type, else all (the emulator is 'CPU')."""
        devs = [d for d in ort.get_ep_devices() if d.ep_name == QNN_EP]
        want = {"htp": "NPU", "dsp": "NPU", "gpu": "GPU"}.get(self.backend_type)
        typed = [d for d in devs if _device_type(d) == want]
        self.emulated = bool(devs) and not typed and self.backend_type == "htp"
        return typed or devs

    def _configure_session(self, so: Any, threads: int) -> list[Any] | None:
        form, _ = qnn_form()
        opts = {k: str(v) for k, v in self.provider_options.items()}
        if form == "plugin":
            so.add_provider_for_devices(self._devices(_import_ort()), opts)
            return None
        return [(QNN_EP, opts), "CPUExecutionProvider"]

    def info(self) -> DelegateInfo:
        """Probe and describe; an available emulated HTP says so in ``reason``."""
        info = super().info()
        if info.available and self.emulated:
            return DelegateInfo(info.name, info.processor, info.backend, True,
                                "emulated: QNN HTP emulator on this x86 host (runs on the host CPU)", info.formats,
                                info.precision, info.force_fp32)
        return info


def delegates() -> list[Delegate]:
    """The QNN delegate paths of ONNX Runtime."""
    return [
        QnnOrtDelegate("ort-qnn-htp", "npu", "htp"),
        QnnOrtDelegate("ort-qnn-gpu", "gpu", "gpu"),
    ]
