"""ONNX Runtime's session behind the Session interface (:class:`OrtSession`), the specs it reads, its
node placement. ``delegates/onnxrt.py`` opens sessions (providers, options, probing); this is what runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from delegates._foreign import ort_errors
from delegates.base import Session, TensorSpec
from delegates.errors import InferenceError, ModelLoadError

CPU_EP = "CPUExecutionProvider"

# ORT type strings -> numpy dtypes.
_ORT_DTYPES: dict[str, Any] = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(int16)": np.int16,
    "tensor(uint16)": np.uint16, "tensor(int32)": np.int32, "tensor(uint32)": np.uint32,
    "tensor(int64)": np.int64, "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
    "tensor(string)": np.object_,
}


@dataclass(frozen=True, slots=True)
class AnyRankSpec(TensorSpec):
    """An ONNX input of unknown rank (ORT reports its shape as ``[]``): any shape is passed to ORT,
    which checks it; shown as ``float32[...]``."""

    def accepts_shape(self, shape: tuple[int, ...]) -> bool:
        """Any shape: ONNX Runtime itself decides."""
        return True

    def describe(self) -> str:
        """Like ``float32[...]``."""
        return f"{self.dtype.name}[...]"


def _spec(arg: Any) -> TensorSpec:
    dtype = _ORT_DTYPES.get(arg.type)
    if dtype is None:
        raise ModelLoadError(f"tensor {arg.name!r} has type {arg.type}, which edgert does not map to numpy")
    if not arg.shape:   # None or []: ORT cannot tell a scalar from a tensor of unknown rank
        return AnyRankSpec(arg.name, (), np.dtype(dtype))
    shape = tuple(d if isinstance(d, int) and d >= 0 else None for d in arg.shape)
    return TensorSpec(arg.name, shape, np.dtype(dtype))


def graph_placement(sess: Any) -> dict[str, int]:
    """Nodes per EP of an InferenceSession created with assignment recording on ({} if this ORT cannot say)."""
    getter = getattr(sess, "get_provider_graph_assignment_info", None)
    if getter is None:
        return {}
    counts: dict[str, int] = {}
    try:
        for sub in getter():
            counts[sub.ep_name] = counts.get(sub.ep_name, 0) + len(sub.get_nodes())
    except Exception:  # noqa: BLE001 - recording was off or unsupported: placement unknown, not an error
        return {}
    return counts


class OrtSession(Session):
    """An ``onnxruntime.InferenceSession`` behind the Session interface, with its node placement."""

    #: ``InferenceSession.run`` is thread-safe: the CPU workers share one session (delegates.sharing).
    concurrent = True

    def __init__(self, sess: Any, label: str, provider: str = CPU_EP) -> None:
        self._session = sess
        self._label = label
        self.provider = provider
        self.inputs = tuple(_spec(a) for a in sess.get_inputs())
        self.outputs = tuple(_spec(a) for a in sess.get_outputs())
        self._in_names = [s.name for s in self.inputs]
        self._out_names = [s.name for s in self.outputs]
        self._placement = graph_placement(sess)
        total = sum(self._placement.values())
        if total:
            self.coverage = self._placement.get(provider, 0) / total
        else:  # unknown placement: trust the provider list (every node is on it or on the CPU EP)
            self.coverage = 1.0

    def placement(self) -> dict[str, int]:
        """Graph nodes per execution provider, e.g. ``{"QNNExecutionProvider": 4, "CPUExecutionProvider": 1}``.

        Counted on the graph ORT runs (after its optimizations); empty when
        this onnxruntime cannot report assignments.
        """
        return dict(self._placement)

    def _check_batch(self) -> str:
        """Batches only a model whose every input and output has a symbolic first dim (checked on it too)."""
        from delegates._batching import batch_check  # noqa: PLC0415 - only where batching is asked
        from delegates._ort_serving import batchable  # noqa: PLC0415

        return batchable(self.inputs + self.outputs) or batch_check(self.run, self.inputs, self.outputs, self.precision)

    def run(self, feeds: list[np.ndarray]) -> list[np.ndarray]:
        """Run once; ORT's exceptions become InferenceError (chained)."""
        try:
            return self._session.run(self._out_names, dict(zip(self._in_names, feeds)))
        except ort_errors() as exc:  # ORT's pybind11-mapped classes (no common base); anything else is our bug
            raise InferenceError(f"onnxruntime ({self.provider}) failed running {self._label}: {str(exc).strip()}") from exc

    def close(self) -> None:
        """Drop the session (ORT frees it with the last reference)."""
        self._session = None
