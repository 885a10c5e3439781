"""The errors the delegate layer raises (loading and running a model on a backend).

They subclass :class:`scheduler.errors.EdgeRTError`; :mod:`edgert.errors`, the public
home of the tree, re-exports them. Foreign exceptions (onnxruntime, LiteRT) are
translated into these where they cross into our code, chained with ``raise ... from``.
"""

from __future__ import annotations

from scheduler.errors import EdgeRTError


class ModelLoadError(EdgeRTError):
    """A model file is missing, corrupt, or no delegate of this host can run it."""


class InputError(EdgeRTError, ValueError):
    """An input does not match the model (name, shape or dtype); nothing was queued."""


class DelegateUnavailable(EdgeRTError):
    """A delegate was asked for by name but cannot run here; ``reason`` says why."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"delegate {name!r} is unavailable on this host: {reason}")
        self.name = name
        self.reason = reason


class InferenceError(EdgeRTError):
    """The backend raised while running a request (the original is ``__cause__``)."""
