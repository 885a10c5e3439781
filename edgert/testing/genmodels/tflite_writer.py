"""The generated networks as ``.tflite`` flatbuffers, written with the schema ai_edge_litert ships.

No TensorFlow: the model is assembled with the flatbuffer object API of
``ai_edge_litert.schema_py_generated`` and serialized with the ``flatbuffers``
package. Weights come from :func:`edgert.testing.genmodels._nets.weights`, the same
arrays the ONNX twin uses, so both take the same input tensors and give the
same outputs (to float rounding). Operators used: FULLY_CONNECTED, CONV_2D,
MEAN, ADD, SUB, MUL, RELU, TANH, LOGISTIC, CAST, RESHAPE.

Dynamic dimensions are written as ``shape`` 1 with ``shape_signature`` -1;
resize the input (``resize_tensor_input`` + ``allocate_tensors``) to run
another batch size.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import flatbuffers
import numpy as np

from edgert.testing.genmodels import _nets

try:
    from ai_edge_litert import schema_py_generated as fb
except ImportError as exc:  # pragma: no cover - depends on the host
    raise ImportError(
        "edgert.testing.genmodels.tflite_writer needs ai_edge_litert (its flatbuffer schema): pip install ai-edge-litert"
    ) from exc

_OP = fb.BuiltinOperator
_OPT = fb.BuiltinOptions
_ACT = fb.ActivationFunctionType
_TYPES = {np.dtype(np.float32): fb.TensorType.FLOAT32, np.dtype(np.int32): fb.TensorType.INT32,
          np.dtype(np.int64): fb.TensorType.INT64}
_ALIGN = 16   # bytes; constant buffers start on this boundary so kernels may read them in place
_SCHEMA_VERSION = 3


class _AlignedBufferT(fb.BufferT):
    """A ``BufferT`` whose data vector starts on a 16-byte boundary."""

    def Pack(self, builder: flatbuffers.Builder) -> int:  # noqa: N802 - flatbuffers' name
        data = None
        if self.data is not None and len(self.data):
            payload = bytes(self.data)
            builder.StartVector(1, len(payload), _ALIGN)
            builder.head -= len(payload)
            builder.Bytes[builder.head:builder.head + len(payload)] = payload
            builder.vectorNumElems = len(payload)
            data = builder.EndVector()
        fb.BufferStart(builder)
        if data is not None:
            fb.BufferAddData(builder, data)
        return fb.BufferEnd(builder)


class TFLiteGraph:
    """A one-subgraph TFLite model under construction: tensors, constant buffers, operators."""

    def __init__(self, description: str = "edgert.testing.genmodels") -> None:
        self.description = description
        self.tensors: list[fb.TensorT] = []
        self.buffers: list[fb.BufferT] = [_AlignedBufferT()]   # buffer 0: the empty sentinel
        self.operators: list[fb.OperatorT] = []
        self.opcodes: dict[int, int] = {}
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def tensor(self, name: str, shape: tuple[int | None, ...], dtype: str | np.dtype = "float32",
               buffer: int = 0) -> int:
        """Add a tensor (``None`` in ``shape`` = dynamic, written as 1 with signature -1); returns its index."""
        t = fb.TensorT()
        t.name = name
        t.shape = [1 if d is None else int(d) for d in shape]
        if any(d is None for d in shape):
            t.shapeSignature = [-1 if d is None else int(d) for d in shape]
        t.type = _TYPES[np.dtype(dtype)]
        t.buffer = buffer
        self.tensors.append(t)
        return len(self.tensors) - 1

    def input(self, info: _nets.TensorInfo) -> int:
        """Add a graph input from its spec."""
        idx = self.tensor(info.name, info.shape, info.dtype)
        self.inputs.append(idx)
        return idx

    def const(self, name: str, arr: np.ndarray) -> int:
        """Add a constant tensor holding ``arr`` (little-endian, C order)."""
        arr = np.ascontiguousarray(arr)
        buf = _AlignedBufferT()
        buf.data = np.frombuffer(arr.astype(arr.dtype.newbyteorder("<")).tobytes(), dtype=np.uint8)
        self.buffers.append(buf)
        return self.tensor(name, arr.shape, arr.dtype, buffer=len(self.buffers) - 1)

    def op(self, code: int, inputs: list[int], outputs: list[int],
           options_type: int = 0, options: object = None) -> None:
        """Append an operator (a builtin ``code``); ``-1`` in ``inputs`` marks an omitted optional input."""
        o = fb.OperatorT()
        o.opcodeIndex = self.opcodes.setdefault(code, len(self.opcodes))
        o.inputs, o.outputs = list(inputs), list(outputs)
        if options is not None:
            o.builtinOptionsType, o.builtinOptions = options_type, options
        self.operators.append(o)

    def unary(self, code: int, x: int, name: str) -> int:
        """``code(x)`` for an element-wise op without options (RELU, TANH, LOGISTIC); returns the output."""
        out = self.tensor(name, self._shape(x))
        self.op(code, [x], [out])
        return out

    def binary(self, code: int, a: int, b: int, name: str, shape: tuple[int | None, ...] | None = None) -> int:
        """ADD / SUB / MUL of ``a`` and ``b`` (broadcasting); returns the output."""
        opts = {_OP.ADD: (_OPT.AddOptions, fb.AddOptionsT), _OP.SUB: (_OPT.SubOptions, fb.SubOptionsT),
                _OP.MUL: (_OPT.MulOptions, fb.MulOptionsT)}[code]
        out = self.tensor(name, shape or self._shape(a))
        self.op(code, [a, b], [out], opts[0], opts[1]())
        return out

    def dense(self, x: int, w: np.ndarray, b: np.ndarray | None, name: str, act: int = _ACT.NONE) -> int:
        """FULLY_CONNECTED ``x @ w.T + b`` (``w`` is [out, in]); returns the output."""
        wi = self.const(f"{name}/W", w)
        bi = self.const(f"{name}/b", b) if b is not None else -1
        shape = self._shape(x)
        out = self.tensor(name, (*shape[:-1], w.shape[0]))
        opts = fb.FullyConnectedOptionsT()
        opts.fusedActivationFunction = act
        self.op(_OP.FULLY_CONNECTED, [x, wi, bi], [out], _OPT.FullyConnectedOptions, opts)
        return out

    def _shape(self, idx: int) -> tuple[int | None, ...]:
        t = self.tensors[idx]
        sig = t.shapeSignature or t.shape
        return tuple(None if d < 0 else d for d in sig)

    def serialize(self) -> bytes:
        """The finished model as ``.tflite`` bytes (file identifier ``TFL3``)."""
        sub = fb.SubGraphT()
        sub.tensors, sub.operators, sub.name = self.tensors, self.operators, "main"
        sub.inputs, sub.outputs = list(self.inputs), list(self.outputs)
        model = fb.ModelT()
        model.version = _SCHEMA_VERSION
        model.description = self.description
        model.subgraphs = [sub]
        model.buffers = self.buffers
        model.operatorCodes = []
        for code in sorted(self.opcodes, key=self.opcodes.__getitem__):
            oc = fb.OperatorCodeT()
            oc.builtinCode = code
            oc.deprecatedBuiltinCode = min(code, _OP.PLACEHOLDER_FOR_GREATER_OP_CODES)
            oc.version = 1
            model.operatorCodes.append(oc)
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())


def _start(name: str, seed: int) -> tuple[TFLiteGraph, _nets.NetSpec, dict[str, np.ndarray], list[int]]:
    net = _nets.spec(name)
    g = TFLiteGraph(f"edgert.testing.genmodels {name} seed={seed}: {net.summary}")
    return g, net, _nets.weights(name, seed), [g.input(t) for t in net.inputs]


def tiny(seed: int = 0) -> bytes:
    """``relu(x @ W.T + b)`` on ``x`` [1,64]: FULLY_CONNECTED then RELU."""
    g, _, w, (x,) = _start("tiny", seed)
    g.outputs = [g.unary(_OP.RELU, g.dense(x, w["W0"], w["b0"], "fc0"), "y")]
    return g.serialize()


def mlp(seed: int = 0) -> bytes:
    """MLP 256-512-256-10: FC (fused ReLU), FC + TANH, FC + LOGISTIC."""
    g, _, w, (x,) = _start("mlp", seed)
    h = g.dense(x, w["W0"], w["b0"], "fc0", _ACT.RELU)
    h = g.unary(_OP.TANH, g.dense(h, w["W1"], w["b1"], "fc1"), "tanh1")
    g.outputs = [g.unary(_OP.LOGISTIC, g.dense(h, w["W2"], w["b2"], "fc2"), "y")]
    return g.serialize()


def cnn(seed: int = 0) -> bytes:
    """NHWC [1,64,64,3] -> CONV_2D (SAME, fused ReLU) stack -> MEAN over H,W -> FULLY_CONNECTED."""
    g, _, w, (h,) = _start("cnn", seed)
    size = _nets.CNN_HW
    for i, (c_out, _k, stride) in enumerate(_nets.CNN_LAYERS):
        wi, bi = g.const(f"conv{i}/W", w[f"W{i}"]), g.const(f"conv{i}/b", w[f"b{i}"])
        size = -(-size // stride)
        out = g.tensor(f"conv{i}", (1, size, size, c_out))
        opts = fb.Conv2DOptionsT()
        opts.padding, opts.strideH, opts.strideW = fb.Padding.SAME, stride, stride
        opts.fusedActivationFunction = _ACT.RELU
        g.op(_OP.CONV_2D, [h, wi, bi], [out], _OPT.Conv2DOptions, opts)
        h = out
    axes = g.const("mean/axes", np.array([1, 2], dtype=np.int32))
    pooled = g.tensor("mean", (1, _nets.CNN_LAYERS[-1][0]))
    red = fb.ReducerOptionsT()
    red.keepDims = False
    g.op(_OP.MEAN, [h, axes], [pooled], _OPT.ReducerOptions, red)
    g.outputs = [g.dense(pooled, w["W_fc"], w["b_fc"], "logits")]
    return g.serialize()


def multi_input(seed: int = 0) -> bytes:
    """``y = (FC_a(a) + FC_b(b)) * CAST(k)``; ``k`` is an int64 scalar, cast to float32."""
    g, _, w, (a, b, k) = _start("multi_input", seed)
    s = g.binary(_OP.ADD, g.dense(a, w["W_a"], w["b_a"], "fc_a"), g.dense(b, w["W_b"], w["b_b"], "fc_b"), "sum")
    kf = g.tensor("k_float", ())
    cast = fb.CastOptionsT()
    cast.inDataType, cast.outDataType = fb.TensorType.INT64, fb.TensorType.FLOAT32
    g.op(_OP.CAST, [k], [kf], _OPT.CastOptions, cast)
    g.outputs = [g.binary(_OP.MUL, s, kf, "y")]
    return g.serialize()


def dynamic_batch(seed: int = 0) -> bytes:
    """``x`` [N,64] -> FC 32 (fused ReLU) -> FC 8; N is written with shape_signature -1."""
    g, _, w, (x,) = _start("dynamic_batch", seed)
    h = g.dense(x, w["W0"], w["b0"], "fc0", _ACT.RELU)
    g.outputs = [g.dense(h, w["W1"], w["b1"], "y")]
    return g.serialize()


def stateful(seed: int = 0) -> bytes:
    """The GRU cell of :func:`edgert.testing.genmodels.onnx_models.stateful`, from FC/ADD/SUB/MUL/LOGISTIC/TANH."""
    g, _, w, (x, h) = _start("stateful", seed)
    gates = {}
    for gate in ("z", "r"):
        s = g.binary(_OP.ADD, g.dense(x, w[f"W_{gate}"], w[f"b_{gate}"], f"x{gate}"),
                     g.dense(h, w[f"U_{gate}"], None, f"h{gate}"), f"pre_{gate}")
        gates[gate] = g.unary(_OP.LOGISTIC, s, gate)
    rh = g.binary(_OP.MUL, gates["r"], h, "rh")
    s = g.binary(_OP.ADD, g.dense(x, w["W_n"], w["b_n"], "xn"), g.dense(rh, w["U_n"], None, "hn"), "pre_n")
    n = g.unary(_OP.TANH, s, "n")
    zd = g.binary(_OP.MUL, gates["z"], g.binary(_OP.SUB, h, n, "h_minus_n"), "z_dh")
    h_next = g.binary(_OP.ADD, n, zd, "h_next")
    g.outputs = [g.dense(h_next, w["W_y"], w["b_y"], "y"), h_next]
    return g.serialize()


def raises(seed: int = 0) -> bytes:
    """RESHAPE ``x`` [1,16] to ``[4, 4] + [0, 1] * CAST(fail)`` (int32): invoke fails for any ``fail`` != 0."""
    g, _, _, (x, fail) = _start("raises", seed)
    f32 = g.tensor("fail_i32", (), "int32")
    cast = fb.CastOptionsT()
    cast.inDataType, cast.outDataType = fb.TensorType.INT64, fb.TensorType.INT32
    g.op(_OP.CAST, [fail], [f32], _OPT.CastOptions, cast)
    delta = g.tensor("delta", (2,), "int32")
    g.op(_OP.MUL, [g.const("pick_last", np.array([0, 1], np.int32)), f32], [delta], _OPT.MulOptions, fb.MulOptionsT())
    shape = g.tensor("new_shape", (2,), "int32")
    g.op(_OP.ADD, [g.const("base_shape", np.array([4, 4], np.int32)), delta], [shape], _OPT.AddOptions,
         fb.AddOptionsT())
    y = g.tensor("y", (4, None))
    g.op(_OP.RESHAPE, [x, shape], [y], _OPT.ReshapeOptions, fb.ReshapeOptionsT())
    g.outputs = [y]
    return g.serialize()


BUILDERS: dict[str, Callable[[int], bytes]] = {
    "tiny": tiny, "mlp": mlp, "cnn": cnn, "multi_input": multi_input,
    "dynamic_batch": dynamic_batch, "stateful": stateful, "raises": raises,
}


def build_tflite(name: str, seed: int = 0) -> bytes:
    """The ``.tflite`` bytes of generated network ``name``.

    Raises:
        ConfigError: unknown ``name`` (with "did you mean").
    """
    _nets.spec(name)
    return BUILDERS[name](seed)


def save_tflite(name: str, path: str | Path, seed: int = 0) -> Path:
    """Write generated network ``name`` as a ``.tflite`` file at ``path``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(build_tflite(name, seed))
    return path
