"""edgert: an on-device multi-DNN runtime for XR apps.

    import edgert
    with edgert.Runtime() as rt:
        hand = rt.load("hand_landmark_lite.tflite", name="hand", slo_ms=22.0)
        out = hand(frame)

See docs/design.md §4 for the whole public API.
"""

from edgert.errors import (
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
from edgert._frame import Frame
from edgert._model import Model
from edgert._result import Result
from edgert._runtime import Runtime

__version__ = "0.1.0"

__all__ = [
    "ConfigError", "DelegateUnavailable", "EdgeRTError", "Frame", "InferenceError", "InputError",
    "Model", "ModelLoadError", "OffloadError", "RequestDropped", "Result", "Runtime", "TraceError",
    "__version__",
]
