"""edgert's exception tree: the one place to import errors from (also re-exported by ``edgert``)::

    EdgeRTError              root: catch this to catch everything of ours
    ├── ConfigError          unknown scheduler / delegate / profile name ("did you mean …"), bad option
    ├── TraceError           malformed trace / profile / scenario (names the file and line)
    ├── ModelLoadError       missing, corrupt or unsupported model file
    ├── InputError           wrong input name, shape or dtype — raised before anything is queued
    ├── DelegateUnavailable  a delegate asked for by name cannot run here (``.reason``)
    ├── InferenceError       the backend raised while running a request (``__cause__``)
    ├── RequestDropped       a sync call's request was dropped (``.reason``)
    ├── OffloadError         the cloud path failed: broker, timeout, error reply
    ├── edgert.deploy.DeployError  a deploy step failed: no device, unauthorized, tool missing
    └── edgert.deploy.ParseError   a device tool printed something we cannot read

Layering: each class is defined in the lowest layer that raises it — the root,
``ConfigError`` and ``TraceError`` in :mod:`scheduler.errors`, the backend errors in
:mod:`delegates.errors`, ``RequestDropped`` and ``OffloadError`` here — and this
module re-exports them, never redefining one. Every class reports its public path
(``edgert.ModelLoadError``), as trio does. ``ConfigError``, ``InputError`` and
``TraceError`` are also ``ValueError`` s.

Foreign exceptions (onnxruntime, LiteRT, MQTT) are translated where they cross into
our code and chained with ``raise ... from exc``.
"""

from __future__ import annotations

from delegates.errors import DelegateUnavailable, InferenceError, InputError, ModelLoadError
from scheduler.errors import ConfigError, EdgeRTError, TraceError, did_you_mean


class RequestDropped(EdgeRTError):
    """Raised by a sync call whose request was dropped; ``reason`` says why."""

    def __init__(self, model: str, reason: str) -> None:
        super().__init__(f"request for model {model!r} was dropped: {reason}")
        self.model = model
        self.reason = reason


class OffloadError(EdgeRTError):
    """The cloud path failed: broker unreachable, timeout, or an error reply."""


__all__ = [
    "ConfigError", "DelegateUnavailable", "EdgeRTError", "InferenceError", "InputError",
    "ModelLoadError", "OffloadError", "RequestDropped", "TraceError", "did_you_mean",
]

for _cls in (ConfigError, DelegateUnavailable, EdgeRTError, InferenceError, InputError,
             ModelLoadError, OffloadError, RequestDropped, TraceError):
    _cls.__module__ = "edgert"
del _cls
