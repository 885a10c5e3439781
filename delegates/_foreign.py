"""The backends' own exception types: what a session maps to ModelLoadError / InferenceError.

Only these are mapped. Anything else raised inside a session is a bug of ours and
propagates: the runtime then fails that one request with the bug chained and logs it
at ERROR with its traceback (``edgert.bug``), so tests see it instead of a backend error.
"""

from __future__ import annotations

import functools

#: What LiteRT's Python API raises for a bad model, a bad tensor or a failed invoke.
LITERT_ERRORS: tuple[type[Exception], ...] = (RuntimeError, ValueError)


@functools.cache
def ort_errors() -> tuple[type[Exception], ...]:
    """onnxruntime's exception classes: every class of ``onnxruntime.capi.onnxruntime_pybind11_state``
    (``Fail``, ``InvalidArgument``, ``RuntimeException``, ``InvalidProtobuf`` …, which share no base
    but Exception), and the RuntimeError / ValueError its Python wrapper raises."""
    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as state  # noqa: PLC0415 - optional SDK
    except ImportError:
        return (RuntimeError, ValueError)
    own = tuple(c for c in vars(state).values() if isinstance(c, type) and issubclass(c, Exception))
    return (*own, RuntimeError, ValueError)
