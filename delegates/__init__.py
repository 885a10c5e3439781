"""Backends: one module per family (LiteRT, ONNX Runtime, cloud), discovered lazily.

See :mod:`delegates.base` for the Delegate / Session interface and
:mod:`delegates.registry` for discovery.
"""

from delegates.base import Artifact, Delegate, DelegateInfo, Session, TensorSpec
from delegates.registry import all_delegates, describe, resolve

__all__ = ["Artifact", "Delegate", "DelegateInfo", "Session", "TensorSpec", "all_delegates", "describe", "resolve"]
