"""edgert: an on-device multi-DNN runtime for XR apps.

    import edgert
    with edgert.Runtime() as rt:
        hand = rt.load(edgert.models.path("hand_landmark_lite"), name="hand", slo_ms=22.0)
        out = hand(crop)     # crop: float32[1, 224, 224, 3] in [0, 1]

See docs/design.md §4 for the whole public API. The public names are exactly
``__all__``: the classes, the error tree, and the ``errors`` and ``models`` modules.
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
from edgert._core._frame import Frame
from edgert._core._model import Model
from edgert._core._result import Result
from edgert._core._runtime import Runtime
from edgert._core._streams import Stream, StreamFrame
from edgert import errors, models

__version__ = "0.1.0"

# The public classes print as what users import (``edgert.Runtime``, not ``edgert._core._runtime.Runtime``), as
# the error classes do (edgert/errors.py); pickling finds them here too.
for _cls in (Frame, Model, Result, Runtime, Stream, StreamFrame):
    _cls.__module__ = "edgert"
del _cls

__all__ = [
    "ConfigError", "DelegateUnavailable", "EdgeRTError", "Frame", "InferenceError", "InputError",
    "Model", "ModelLoadError", "OffloadError", "RequestDropped", "Result", "Runtime", "Stream", "StreamFrame",
    "TraceError",
    "__version__", "errors", "models",
]
