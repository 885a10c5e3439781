"""The generated networks as ONNX graphs, built with ``onnx.helper`` (opset 17, IR 8).

Every function returns an ``onnx.ModelProto`` that passes ``onnx.checker``;
weights come from :func:`edgert.testing.genmodels._nets.weights`, so the TFLite
twin written by :mod:`edgert.testing.genmodels.tflite_writer` computes the same
function. Image inputs are NHWC (as in TFLite): the CNN transposes to NCHW
inside the graph.
"""

from __future__ import annotations

from typing import Any

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgert.testing.genmodels import _nets

OPSET = 17
IR_VERSION = 8   # the oldest IR that carries opset 17: loadable by older device ORT builds

_DTYPES = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64}


class _G:
    """A tiny graph builder: initializers, nodes, fresh names."""

    def __init__(self, name: str, seed: int) -> None:
        self.net = _nets.spec(name)
        self.w = _nets.weights(name, seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def const(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(self, op: str, inputs: list[str], out: str | None = None, **attrs: Any) -> str:
        self._n += 1
        out = out or f"{op.lower()}_{self._n}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{op}_{self._n}", **attrs))
        return out

    def dense(self, x: str, key: str, out: str | None = None) -> str:
        """``x @ W.T + b`` for the weights ``W<key>``/``b<key>``."""
        return self.node("Gemm", [x, self.const(f"W{key}", self.w[f"W{key}"]),
                                  self.const(f"b{key}", self.w[f"b{key}"])], out, transB=1)

    def model(self) -> onnx.ModelProto:
        def vi(t: _nets.TensorInfo) -> onnx.ValueInfoProto:
            batched = any(inp.shape[:1] == (None,) for inp in self.net.inputs)
            dims = [d if d is not None else ("batch" if i == 0 and batched else f"{t.name}_{i}")
                    for i, d in enumerate(t.shape)]
            return helper.make_tensor_value_info(t.name, _DTYPES[t.dtype], dims)

        graph = helper.make_graph(self.nodes, f"edgert_{self.net.name}",
                                  [vi(t) for t in self.net.inputs], [vi(t) for t in self.net.outputs],
                                  initializer=self.inits)
        m = helper.make_model(graph, producer_name="edgert.testing.genmodels",
                              opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = IR_VERSION
        m.doc_string = self.net.summary
        onnx.checker.check_model(m)
        return m


def tiny(seed: int = 0) -> onnx.ModelProto:
    """``relu(x @ W.T + b)`` on ``x`` [1,64] (about 10 us)."""
    g = _G("tiny", seed)
    g.node("Relu", [g.dense("x", "0")], "y")
    return g.model()


def mlp(seed: int = 0) -> onnx.ModelProto:
    """MLP 256-512-256-10: Gemm+Relu, Gemm+Tanh, Gemm, Sigmoid."""
    g = _G("mlp", seed)
    h = g.node("Relu", [g.dense("x", "0")])
    h = g.node("Tanh", [g.dense(h, "1")])
    g.node("Sigmoid", [g.dense(h, "2")], "y")
    return g.model()


def same_pads(size: int, k: int, stride: int) -> tuple[int, int]:
    """TF "SAME" padding ``(before, after)`` for one spatial dim (the extra pixel goes after)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


def cnn(seed: int = 0) -> onnx.ModelProto:
    """NHWC image [1,64,64,3] -> Transpose to NCHW -> conv3x3+Relu stack -> global mean -> Gemm."""
    g = _G("cnn", seed)
    h = g.node("Transpose", ["image"], perm=[0, 3, 1, 2])
    size = _nets.CNN_HW
    for i, (_c_out, k, stride) in enumerate(_nets.CNN_LAYERS):
        lo, hi = same_pads(size, k, stride)
        w = g.const(f"W{i}", g.w[f"W{i}"].transpose(0, 3, 1, 2))   # OHWI -> OIHW
        h = g.node("Conv", [h, w, g.const(f"b{i}", g.w[f"b{i}"])], kernel_shape=[k, k],
                   strides=[stride, stride], pads=[lo, lo, hi, hi])
        h = g.node("Relu", [h])
        size = -(-size // stride)
    h = g.node("ReduceMean", [h], axes=[2, 3], keepdims=0)
    g.dense(h, "_fc", "logits")
    return g.model()


def multi_input(seed: int = 0) -> onnx.ModelProto:
    """``y = (a @ W_a.T + b_a + b @ W_b.T + b_b) * float(k)``; ``k`` an int64 scalar."""
    g = _G("multi_input", seed)
    s = g.node("Add", [g.dense("a", "_a"), g.dense("b", "_b")])
    kf = g.node("Cast", ["k"], to=TensorProto.FLOAT)
    g.node("Mul", [s, kf], "y")
    return g.model()


def dynamic_batch(seed: int = 0) -> onnx.ModelProto:
    """``x`` [batch,64] -> Gemm 32 + Relu -> Gemm 8; ``batch`` is a symbolic dimension."""
    g = _G("dynamic_batch", seed)
    h = g.node("Relu", [g.dense("x", "0")])
    g.dense(h, "1", "y")
    return g.model()


def stateful(seed: int = 0) -> onnx.ModelProto:
    """A GRU cell: state ``h_prev`` in, ``h_next`` out, plus a readout ``y``.

    z = σ(x W_z^T + b_z + h U_z^T), r = σ(x W_r^T + b_r + h U_r^T),
    n = tanh(x W_n^T + b_n + (r⊙h) U_n^T), h_next = n + z⊙(h − n), y = h_next W_y^T + b_y.
    """
    g = _G("stateful", seed)
    gates = {}
    for gate in ("z", "r"):
        u = g.node("MatMul", ["h_prev", g.const(f"U_{gate}T", g.w[f"U_{gate}"].T)])
        gates[gate] = g.node("Sigmoid", [g.node("Add", [g.dense("x", f"_{gate}"), u])])
    rh = g.node("Mul", [gates["r"], "h_prev"])
    un = g.node("MatMul", [rh, g.const("U_nT", g.w["U_n"].T)])
    n = g.node("Tanh", [g.node("Add", [g.dense("x", "_n"), un])])
    zd = g.node("Mul", [gates["z"], g.node("Sub", ["h_prev", n])])
    h_next = g.node("Add", [n, zd], "h_next")
    g.dense(h_next, "_y", "y")
    return g.model()


def raises(seed: int = 0) -> onnx.ModelProto:
    """``Reshape(x, [4, 4 + fail])``: ``x`` [1,16], ``fail`` an int64 scalar. Runs on zeros (so a
    warm-up passes); fails at run time, inside the backend, for any ``fail`` other than 0."""
    g = _G("raises", seed)
    delta = g.node("Mul", ["fail", g.const("pick_last", np.array([0, 1], np.int64))])
    shape = g.node("Add", [g.const("base_shape", np.array([4, 4], np.int64)), delta])
    g.node("Reshape", ["x", shape], "y")
    return g.model()


BUILDERS: dict[str, Callable[[int], onnx.ModelProto]] = {
    "tiny": tiny, "mlp": mlp, "cnn": cnn, "multi_input": multi_input,
    "dynamic_batch": dynamic_batch, "stateful": stateful, "raises": raises,
}


def build_onnx(name: str, seed: int = 0) -> onnx.ModelProto:
    """The ONNX ``ModelProto`` of generated network ``name``.

    Raises:
        ConfigError: unknown ``name`` (with "did you mean").
    """
    _nets.spec(name)
    return BUILDERS[name](seed)


def save_onnx(name: str, path: str | Path, seed: int = 0) -> Path:
    """Write generated network ``name`` as an ``.onnx`` file at ``path``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(build_onnx(name, seed).SerializeToString())
    return path
