"""Tiny real models, built in memory, that probes load to check a delegate can run at all.

A probe that only checked "the provider name is listed" would report paths
that fail on the first model (a GPU provider whose driver is missing, a QNN
backend with no device behind it). So accelerator probes open one of these
and check the accelerator took at least one node.

* :func:`onnx_probe` — ``y = tanh(relu(x @ W1) @ W2)`` (opset 17), x: float32[1, 16].
* :func:`tflite_probe` — ``y = tanh(fully_connected(x, W, b))``, x: float32[1, 16];
  with ``unsupported_op=True`` a CUMSUM sits between the two (XNNPACK does not
  take it, so the graph is split into two delegated partitions around it).
"""

from __future__ import annotations

import functools

import numpy as np


@functools.cache
def onnx_probe(extra_erf: bool = False) -> bytes:
    """Serialized ONNX MLP; ``extra_erf`` appends ``y + erf(y)`` (an op the QNN HTP EP leaves to the CPU)."""
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415 - lazy: only probes and tests need it

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array((rng.standard_normal((16, 32)) * 0.2).astype(np.float32), "W1")
    w2 = numpy_helper.from_array((rng.standard_normal((32, 8)) * 0.2).astype(np.float32), "W2")
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "W2"], ["z"], name="mm2"),
             helper.make_node("Tanh", ["z"], ["t" if extra_erf else "y"], name="tanh")]
    if extra_erf:
        nodes += [helper.make_node("Erf", ["t"], ["e"], name="erf"),
                  helper.make_node("Add", ["t", "e"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "edgert_probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="edgert")
    model.ir_version = 9
    return model.SerializeToString()


@functools.cache
def tflite_probe(unsupported_op: bool = False) -> bytes:
    """Serialized ``.tflite`` flatbuffer (schema from ai_edge_litert); see the module docstring."""
    import flatbuffers  # noqa: PLC0415
    from ai_edge_litert import schema_py_generated as s  # noqa: PLC0415

    rng = np.random.default_rng(0)
    buffers = [s.BufferT()]
    tensors: list[object] = []
    codes: list[int] = []

    def tensor(name: str, shape: list[int], data: np.ndarray | None = None, ttype: int = s.TensorType.FLOAT32) -> int:
        buf = s.BufferT()
        if data is not None:
            buf.data = np.frombuffer(data.tobytes(), np.uint8)
        buffers.append(buf)
        t = s.TensorT()
        t.name, t.shape, t.type, t.buffer = name.encode(), shape, ttype, len(buffers) - 1
        tensors.append(t)
        return len(tensors) - 1

    def op(code: int, ins: list[int], outs: list[int], opt_type: int = 0, opt: object = None) -> object:
        if code not in codes:
            codes.append(code)
        o = s.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = codes.index(code), ins, outs
        if opt is not None:
            o.builtinOptionsType, o.builtinOptions = opt_type, opt
        return o

    x = tensor("x", [1, 16])
    w = tensor("w", [8, 16], (rng.standard_normal((8, 16)) * 0.2).astype(np.float32))
    b = tensor("b", [8], np.zeros(8, np.float32))
    h = tensor("h", [1, 8])
    ops = [op(s.BuiltinOperator.FULLY_CONNECTED, [x, w, b], [h],
              s.BuiltinOptions.FullyConnectedOptions, s.FullyConnectedOptionsT())]
    if unsupported_op:
        axis = tensor("axis", [], np.array(1, np.int32), s.TensorType.INT32)
        c = tensor("c", [1, 8])
        ops.append(op(s.BuiltinOperator.CUMSUM, [h, axis], [c], s.BuiltinOptions.CumsumOptions, s.CumsumOptionsT()))
        h = c
    y = tensor("y", [1, 8])
    ops.append(op(s.BuiltinOperator.TANH, [h], [y]))
    sg = s.SubGraphT()
    sg.tensors, sg.inputs, sg.outputs, sg.operators, sg.name = tensors, [x], [y], ops, b"main"
    model = s.ModelT()
    model.version, model.description, model.subgraphs, model.buffers = 3, b"edgert probe", [sg], buffers
    model.operatorCodes = []
    for code in codes:
        oc = s.OperatorCodeT()
        oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = code, min(code, 127), 1
        model.operatorCodes.append(oc)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
