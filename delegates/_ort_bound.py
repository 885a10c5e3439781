"""An ONNX Runtime session served through IO binding (``io_binding=True``, :mod:`delegates._ort_serving`).

:class:`BoundOrtSession` is an :class:`~delegates.onnxrt.OrtSession` whose ``run`` goes through one
:class:`~delegates._ort_serving.BoundRunner`: on CUDA / TensorRT the inputs and outputs live in device
buffers kept across calls (what a CUDA graph replays), on any other EP (the CPU one, in CI) the same code
binds host buffers. The runner keeps state between calls, so the session is not ``concurrent``: workers
that share a model get one such session each (:func:`delegates.sharing.shared_session`'s pool).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from delegates._ort_serving import BoundRunner, device_of
from delegates.errors import InferenceError
from delegates._ort_session import OrtSession


class BoundOrtSession(OrtSession):
    """An ORT session run through IO binding with buffers reused across calls (one caller at a time).

    Args:
        sess: the ``onnxruntime.InferenceSession``.
        label: the model's name for errors.
        provider: the EP the session runs on (its device holds the bound buffers).
        device_id: the GPU's ordinal (CUDA / TensorRT ``device_id``).
        cuda_graph: whether the session was created with CUDA graphs (captured on the first run).
    """

    concurrent = False

    def __init__(self, sess: Any, label: str, provider: str, device_id: int = 0, cuda_graph: bool = False) -> None:
        super().__init__(sess, label, provider)
        self.device = device_of(provider)
        self.cuda_graph = cuda_graph
        self._bound: BoundRunner | None = BoundRunner(sess, self.device, device_id)

    def run(self, feeds: list[np.ndarray]) -> list[np.ndarray]:
        """Run once through the binding; returns host copies of the outputs (output order).

        Raises:
            InferenceError: ORT failed (chained), or the session is closed.
        """
        bound = self._bound
        if bound is None:
            raise InferenceError(f"the IO-bound session of {self._label} is closed")
        try:
            return bound.run(feeds)
        except InferenceError as exc:
            raise InferenceError(f"onnxruntime ({self.provider}, io_binding) failed running {self._label}: "
                                 f"{exc.__cause__ or exc}") from (exc.__cause__ or exc)

    def close(self) -> None:
        """Drop the binding and the session."""
        self._bound = None
        super().close()
