"""ONNX Runtime's WebGPU plugin execution provider (``onnxruntime-ep-webgpu``): Dawn on Vulkan / Metal / D3D12.

The plugin (``pip install onnxruntime-ep-webgpu``, for onnxruntime >= 1.24.4) is registered once per
process (``onnxruntime.register_execution_provider_library``) and attached to a session through the
device ONNX Runtime offers it (``get_ep_devices()``, ``SessionOptions.add_provider_for_devices``): a
plugin EP takes no ``providers=[...]`` form.

What was found on a host whose only Vulkan adapter is Mesa's lavapipe: the library registers, but ONNX
Runtime offers it no device. ONNX Runtime lists the host's hardware devices itself (on Linux, GPUs from
``/sys/class/drm``) and a plugin EP can only claim one of those; a software adapter is no DRM device,
so the list holds the CPU alone and the WebGPU EP never gets to ask Dawn for an adapter (a Dawn toggle
that would accept a CPU adapter has nothing to apply to). The probe says so as its reason.
"""

from __future__ import annotations

import threading
from typing import Any

from delegates._adapters import vulkan_adapters
from delegates._native_capture import capture_native_stderr
from delegates.base import Delegate
from delegates.onnxrt import OrtDelegate, _import_ort

WEBGPU_EP = "WebGpuExecutionProvider"

_lock = threading.Lock()
_plugin: dict[str, Any] = {}   # "ok": bool, "detail": str


def webgpu_plugin() -> tuple[bool, str]:
    """Whether the WebGPU plugin is registered in this process, and its version or why not (cached)."""
    with _lock:
        if not _plugin:
            with capture_native_stderr():
                _plugin.update(_register())
        return bool(_plugin.get("ok")), str(_plugin.get("detail", ""))


def _register() -> dict[str, Any]:
    try:
        ort = _import_ort()
    except ImportError as exc:
        return {"ok": False, "detail": f"onnxruntime is not installed ({exc})"}
    try:
        import onnxruntime_ep_webgpu as plugin  # noqa: PLC0415 - optional
    except ImportError:
        return {"ok": False, "detail": "onnxruntime-ep-webgpu is not installed; pip install onnxruntime-ep-webgpu "
                                       "(a Vulkan loader, libvulkan1, on Linux)"}
    if not hasattr(ort, "register_execution_provider_library"):
        return {"ok": False, "detail": f"onnxruntime {ort.__version__} cannot load plugin EPs; "
                                       "pip install -U 'onnxruntime>=1.24.4'"}
    lib = plugin.get_library_path()
    try:
        ort.register_execution_provider_library(WEBGPU_EP, str(lib))
    except Exception as exc:  # noqa: BLE001 - ORT's Fail: the reason
        if "already registered" not in str(exc):
            return {"ok": False, "detail": f"could not register {lib}: {str(exc)[:200]}"}
    from importlib.metadata import version  # noqa: PLC0415

    return {"ok": True, "detail": f"onnxruntime-ep-webgpu {version('onnxruntime-ep-webgpu')}"}


class WebGpuOrtDelegate(OrtDelegate):
    """The WebGPU plugin EP on ``gpu``; fp32 arithmetic for an fp32 model."""

    def __init__(self) -> None:
        super().__init__("ort-webgpu", "gpu", WEBGPU_EP, probe_session=True)

    @property
    def precision(self) -> str:
        """``fp32``: WebGPU shaders compute an fp32 model in f32."""
        return "fp32"

    @property
    def force_fp32_note(self) -> str:  # type: ignore[override]
        """Nothing to force."""
        return ""

    @property
    def software(self) -> bool:  # type: ignore[override]
        """True when every Vulkan adapter here is software (:mod:`delegates._adapters`), asked without loading one."""
        return vulkan_adapters().software_only

    @property
    def adapter(self) -> str:  # type: ignore[override]
        """The Vulkan adapter Dawn would use (hardware first), "" when none is found."""
        ads = vulkan_adapters().adapters
        return ads[0].name if ads else ""

    def configure(self, options: Any) -> None:
        """EP options as strings (``ep.webgpuexecutionprovider.*`` keys); ``force_fp32`` changes nothing."""
        opts = dict(options)
        opts.pop("force_fp32", None)
        super().configure(opts)

    def _devices(self, ort: Any) -> list[Any]:
        return [d for d in ort.get_ep_devices() if d.ep_name == WEBGPU_EP]

    def _provider_missing(self, ort: Any) -> str | None:
        ok, detail = webgpu_plugin()
        if not ok:
            return detail
        if not self._devices(ort):
            kinds = sorted({str(getattr(d.device.type, "name", d.device.type)) for d in ort.get_ep_devices()})
            return (f"{detail} is registered, but ONNX Runtime offers it no device: it lists the host's devices "
                    f"itself (GPUs on Linux from /sys/class/drm) and found {', '.join(kinds) or 'none'} only; a software "
                    "Vulkan adapter (lavapipe) is not one of them, so Dawn is never asked for an adapter")
        return None

    def _configure_session(self, so: Any, threads: int) -> list[Any] | None:
        opts = {k: str(v) for k, v in self.provider_options.items()}
        so.add_provider_for_devices(self._devices(_import_ort()), opts)
        return None


def delegates() -> list[Delegate]:
    """The WebGPU path of ONNX Runtime."""
    return [WebGpuOrtDelegate()]
