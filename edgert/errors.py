"""edgert's exception tree (re-exported from the lowest layer, :mod:`scheduler.errors`)::

    EdgeRTError
    ├── ConfigError          unknown scheduler / delegate name ("did you mean …"), bad option
    ├── ModelLoadError       missing, corrupt or unsupported model file
    ├── InputError           wrong input name, shape or dtype — raised before anything is queued
    ├── DelegateUnavailable  a delegate asked for by name cannot run here (``.reason``)
    ├── InferenceError       the backend raised while running a request
    ├── RequestDropped       a sync call's request was dropped (``.reason``)
    ├── OffloadError         the cloud path failed
    ├── TraceError           malformed trace / profile / scenario
    ├── DeployError          (edgert.deploy) a deploy step failed: no device, unauthorized, tool missing
    └── ParseError           (edgert.deploy) a device tool printed something we cannot read

Foreign exceptions (onnxruntime, LiteRT, MQTT) are translated at the
delegate boundary and chained with ``from``.
"""

from scheduler.errors import (
    ConfigError,
    DelegateUnavailable,
    EdgeRTError,
    InferenceError,
    InputError,
    ModelLoadError,
    OffloadError,
    RequestDropped,
    TraceError,
)

__all__ = [
    "ConfigError", "DelegateUnavailable", "EdgeRTError", "InferenceError", "InputError",
    "ModelLoadError", "OffloadError", "RequestDropped", "TraceError",
]
