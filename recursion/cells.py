"""A tiny builder for cell graphs (ONNX, ``onnx.helper``), batch dimension dynamic.

    g = CellBuilder("leaf")
    word = g.input("word", onnx.TensorProto.INT64, ["B"])
    x = g.op("Gather", g.const("emb", emb), word)
    g.output(g.op("Tanh", x), "h", ["B", H])
    model_bytes = g.build()
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["FLOAT", "INT64", "OPSET", "CellBuilder", "tabulate"]

#: ONNX opset of every cell (ReduceSum/Split take their axes/splits as inputs).
OPSET = 17
FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64


class CellBuilder:
    """Accumulates nodes, constants, inputs and outputs of one ONNX graph."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._nodes: list[onnx.NodeProto] = []
        self._inits: list[onnx.TensorProto] = []
        self._inputs: list[onnx.ValueInfoProto] = []
        self._outputs: list[onnx.ValueInfoProto] = []
        self._made: set[str] = set()         # names written by this graph's nodes
        self._exposed: dict[str, str] = {}   # a node's output -> the graph output name it is written as
        self._n = 0

    def _fresh(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def input(self, name: str, elem: int, shape: Sequence[int | str]) -> str:
        """Declare a graph input; a str dim (``"B"``, ``"K"``) is dynamic."""
        self._inputs.append(helper.make_tensor_value_info(name, elem, list(shape)))
        return name

    def const(self, name: str, value: np.ndarray) -> str:
        """Add an initializer (float arrays are stored as float32)."""
        arr = np.asarray(value)
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float32)
        self._inits.append(numpy_helper.from_array(arr, name=name))
        return name

    def op(self, op_type: str, *inputs: str, n_out: int = 1, **attrs: object) -> str | list[str]:
        """Add a node; returns its output name (a list when ``n_out > 1``)."""
        outs = [self._fresh(op_type.lower()) for _ in range(n_out)]
        self._made.update(outs)
        self._nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def output(self, src: str, name: str, shape: Sequence[int | str]) -> None:
        """Expose ``src`` as graph output ``name`` (float32) with ``shape``.

        The node that makes ``src`` writes ``name`` itself (its later uses read ``name``), so an output
        costs no copy; an input, a constant or a value already exposed goes through an Identity.
        """
        if src in self._made and src not in self._exposed:
            self._exposed[src] = name
        else:
            self._nodes.append(helper.make_node("Identity", [src], [name]))
        self._outputs.append(helper.make_tensor_value_info(name, FLOAT, list(shape)))

    def build(self) -> bytes:
        """Check and serialise the model."""
        for node in self._nodes:
            for names in (node.input, node.output):
                names[:] = [self._exposed.get(x, x) for x in names]
        graph = helper.make_graph(self._nodes, self.name, self._inputs, self._outputs, self._inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="edgert.recursion")
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model.SerializeToString()

    # Small composites used by the tree models -------------------------------------------

    def linear(self, x: str, w: np.ndarray, b: np.ndarray | None, hint: str) -> str:
        """``x @ w (+ b)``."""
        y = self.op("MatMul", x, self.const(self._fresh(hint + "_W"), w))
        return y if b is None else self.op("Add", y, self.const(self._fresh(hint + "_b"), b))

    def split3(self, x: str, h: int) -> list[str]:
        """Split the last axis of ``x`` into three parts of ``h``."""
        return self.op("Split", x, self.const(self._fresh("split"), np.array([h, h, h], np.int64)),
                       n_out=3, axis=-1)

    def reduce_sum(self, x: str, axis: int) -> str:
        """Sum over ``axis`` (dropped)."""
        return self.op("ReduceSum", x, self.const(self._fresh("axes"), np.array([axis], np.int64)), keepdims=0)

    def reshape(self, x: str, shape: Sequence[int]) -> str:
        """Reshape with 0 = keep, -1 = infer."""
        return self.op("Reshape", x, self.const(self._fresh("shape"), np.array(shape, np.int64)))

    def word_embedding(self, emb: np.ndarray, name: str = "word") -> str:
        """Input ``word`` [B] int64 → embedding rows [B, D]."""
        return self.op("Gather", self.const("emb", emb), self.input(name, INT64, ["B"]), axis=0)

    def word_linear(self, emb: np.ndarray, w: np.ndarray, b: np.ndarray, folded: bool, hint: str,
                    name: str = "word") -> str:
        """Input ``word`` [B] int64 → ``emb[word] @ w + b`` [B, O].

        ``folded``: the product is taken once here for the whole vocabulary (``emb @ w + b``, a
        [V, O] table) and the cell only gathers its rows, so a leaf costs a row copy instead of a
        [D] x [D, O] product per call; the table holds V·O floats instead of the embedding's V·D.
        Both give the same rows to float32 rounding (~1e-6).
        """
        if folded:
            table = np.asarray(emb, np.float32) @ np.asarray(w, np.float32) + np.asarray(b, np.float32)
            return self.op("Gather", self.const(self._fresh(hint + "_table"), table),
                           self.input(name, INT64, ["B"]), axis=0)
        return self.linear(self.word_embedding(emb, name), w, b, hint)


def tabulate(cell: bytes, name: str, size: int) -> bytes:
    """``cell``, whose only input ``name`` is an int64 id in ``[0, size)`` ([B]), as a lookup table: the
    cell is run once on every id (ONNX Runtime, CPU) and the new cell gathers its rows of the outputs.

    A leaf whose state depends only on its word costs a row copy instead of its cell's work; the table
    holds ``size`` rows of every output. Outputs are float32, [B, …] as in ``cell``.
    """
    import onnxruntime as ort   # lazily: only tabulating needs it here

    model = onnx.ModelProto()
    model.ParseFromString(cell)
    if [i.name for i in model.graph.input] != [name]:
        raise ValueError(f"tabulate: the cell's inputs are {[i.name for i in model.graph.input]}, not [{name!r}]")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(cell, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    values = sess.run(names, {name: np.arange(size, dtype=np.int64)})
    g = CellBuilder(model.graph.name + "_table")
    ids = g.input(name, INT64, ["B"])
    for out, value in zip(names, values):
        rows = g.op("Gather", g.const(out + "_table", value), ids, axis=0)
        g.output(rows, out, ["B", *value.shape[1:]])
    return g.build()
