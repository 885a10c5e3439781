"""The arithmetic each ONNX Runtime execution provider computes in, and how to force fp32 on it.

What a path declares is what its backend does by default with the options given (one of
:data:`delegates.base.PRECISIONS`: ``fp32``, ``tf32``, ``fp16``, ``int8``, ``mixed``):

=========================  ==========================================  ===================================
execution provider         default (options that change it)            force_fp32 sets
=========================  ==========================================  ===================================
CPU, XNNPACK               fp32                                        (nothing to force)
CUDA                       tf32: cuBLAS / cuDNN round matmul and       ``use_tf32=0``
                           conv inputs to 10 mantissa bits on Ampere+
                           (``use_tf32=0``: fp32)
TensorRT                   tf32 (``trt_fp16_enable``: mixed;           ``trt_fp16_enable=False``,
                           ``trt_int8_enable``: int8)                  ``trt_int8_enable=False`` (TensorRT
                                                                       keeps TF32 for matmuls: tf32)
TensorRT with DLA          fp16 (``trt_int8_enable``: int8)            cannot: DLA has no fp32
OpenVINO                   CPU fp32, GPU / NPU fp16 (``precision``)    ``precision=FP32`` (not on the NPU)
CoreML                     GPU mixed, Neural Engine fp16               cannot: CoreML picks the arithmetic
NNAPI                      fp32 (``NNAPI_FLAG_USE_FP16``: fp16)        drops NNAPI_FLAG_USE_FP16 (the
                                                                       driver may still relax to fp16)
QNN (HTP)                  int8 (``enable_htp_fp16_precision=1``:      cannot: the HTP has no fp32
                           fp16)
QNN (GPU)                  fp16                                        cannot
=========================  ==========================================  ===================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.errors import ConfigError


def _on(v: Any) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def ort_precision(provider: str, options: Mapping[str, Any]) -> str:
    """The precision ``provider`` computes in with ``options`` (see the module table)."""
    if provider in ("CPUExecutionProvider", "XnnpackExecutionProvider"):
        return "fp32"
    if provider == "CUDAExecutionProvider":
        return "tf32" if _on(options.get("use_tf32", 1)) else "fp32"
    if provider == "TensorrtExecutionProvider":
        if _on(options.get("trt_int8_enable", 0)):
            return "int8"
        if _on(options.get("trt_dla_enable", 0)):
            return "fp16"
        return "mixed" if _on(options.get("trt_fp16_enable", 0)) else "tf32"
    if provider == "OpenVINOExecutionProvider":
        prec = str(options.get("precision", "")).upper()
        if prec == "FP32":
            return "fp32"
        if prec in ("FP16", "ACCURACY"):
            return "fp16" if prec == "FP16" else "mixed"
        return "fp32" if str(options.get("device_type", "CPU")).upper().startswith("CPU") else "fp16"
    if provider == "CoreMLExecutionProvider":
        return "fp16" if "Neural" in str(options.get("MLComputeUnits", "")) else "mixed"
    if provider == "NnapiExecutionProvider":
        return "fp16" if "USE_FP16" in str(options.get("flags", "")) else "fp32"
    if provider == "QNNExecutionProvider":
        if str(options.get("backend_type", "htp")) == "gpu":
            return "fp16"
        return "fp16" if _on(options.get("enable_htp_fp16_precision", 0)) else "int8"
    return "mixed"


def ort_force_fp32(name: str, provider: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The EP options that make ``provider`` compute in fp32 (what it can), merged over ``options``.

    Raises:
        ConfigError: the EP has no fp32 mode (DLA, CoreML, QNN), naming the path and why.
    """
    if provider in ("CPUExecutionProvider", "XnnpackExecutionProvider"):
        return {}
    if provider == "CUDAExecutionProvider":
        return {"use_tf32": 0}
    if provider == "TensorrtExecutionProvider":
        if _on(options.get("trt_dla_enable", 0)):
            raise ConfigError(f"{name} cannot force fp32: DLA cores compute in fp16 or int8 only; "
                              "use ort-tensorrt or ort-cuda with force_fp32")
        return {"trt_fp16_enable": 0, "trt_int8_enable": 0}
    if provider == "OpenVINOExecutionProvider":
        if str(options.get("device_type", "")).upper().startswith("NPU"):
            raise ConfigError(f"{name} cannot force fp32: OpenVINO's NPU plugin has no FP32 inference precision")
        return {"precision": "FP32"}
    if provider == "NnapiExecutionProvider":
        flags = "|".join(f for f in str(options.get("flags", "")).split("|") if f and f != "NNAPI_FLAG_USE_FP16")
        return {"flags": flags} if flags else {}
    raise ConfigError(f"{name} cannot force fp32: {provider} has no option for it "
                      f"(it computes in {ort_precision(provider, options)})")
