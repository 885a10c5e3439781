"""TreeRNN (Socher et al. 2011) and RNTN (Socher et al. 2013), over at most N ordered children.

Leaf: h = tanh(x·W_x + b_x) when the weights have ``W_x``/``b_x``, else h = x
(Socher's word vectors; then D must equal H). Internal, with z = [h_1; …; h_N]
(absent children zero):

* TreeRNN: h = tanh(z·W_h + b_h)
* RNTN:    h = tanh(zᵀ V^[1:H] z + z·W + b), V [N·H, N·H, H]
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from edgert.errors import ConfigError
from recursion.cells import FLOAT, CellBuilder
from recursion.models.base import TreeModel
from recursion.subgraph import InvokeOp, SubGraph, is_internal, is_leaf

__all__ = ["RNTN", "TreeRNN"]


class _Recursive(TreeModel):
    """Shared leaf cell and N handling of TreeRNN / RNTN."""

    OPTIONAL: ClassVar[dict[str, tuple[str, ...]]] = {"W_x": ("D", "H"), "b_x": ("H",)}
    N: ClassVar[int] = 2
    _W: ClassVar[str] = "W_h"

    def _bind_dims(self, w, dims) -> None:
        dims["H"] = int(w[self._W].shape[-1])
        dims["N"] = max(1, int(w[self._W].shape[0]) // max(dims["H"], 1))
        if ("W_x" in w) != ("b_x" in w):
            raise ConfigError(f"{type(self).__name__}: give both W_x and b_x, or neither (then h_leaf = x)")
        if "W_x" not in w and dims["D"] != dims["H"]:
            raise ConfigError(f"{type(self).__name__}: without W_x the embedding size D={dims['D']} must equal "
                              f"H={dims['H']} (leaf h = x); add W_x [D, H] and b_x [H]")

    @classmethod
    def random(cls, vocab, input_dim=300, hidden=150, seed=0, runtime=None, shards=None, **dims):
        dims.setdefault("N", cls.N)
        saved = cls.KEYS
        cls.KEYS = {**saved, **cls.OPTIONAL}  # random models get a leaf projection
        try:
            return super().random(vocab, input_dim, hidden, seed, runtime, shards, **dims)
        finally:
            cls.KEYS = saved

    def _leaf(self, name: str) -> bytes:
        g = CellBuilder(name)
        if "W_x" in self.weights:
            x = g.op("Tanh", g.word_linear(self.emb, self.weights["W_x"], self.weights["b_x"], self.fold_leaves,
                                           "leaf"))
        else:
            x = g.word_embedding(self.emb)
        g.output(x, "h", ["B", self.hidden])
        return g.build()

    def _internal(self, g: CellBuilder, z: str) -> str:
        raise NotImplementedError

    def build_subgraph(self) -> SubGraph:
        """Leaf branch (word → h) and internal branch (N stacked children's h → h)."""
        H, N = self.hidden, self.dims["N"]
        name = type(self).__name__.lower()
        node = CellBuilder(f"{name}_node")
        z = node.reshape(node.input("h_ch", FLOAT, ["B", N, H]), [0, N * H])
        node.output(node.op("Tanh", self._internal(node, z)), "h", ["B", H])
        sg = SubGraph(name, outputs=("h",))
        sg.branch(is_leaf, self._leaf(f"{name}_leaf"), fields={"word": "word"}, name="leaf")
        sg.branch(is_internal, node.build(), invokes=[InvokeOp(sg, {"h": "h_ch"}, pad_to=N)], name="node")
        return sg


class TreeRNN(_Recursive):
    """Recursive neural network: h = tanh([h_1; …; h_N]·W_h + b_h).

    ``.npz`` keys: ``vocab``, ``emb`` [V, D], ``W_h`` [N·H, H], ``b_h`` [H];
    optional ``W_x`` [D, H], ``b_x`` [H] (leaf projection).
    """

    KEYS: ClassVar[dict[str, tuple[str, ...]]] = {
        "vocab": ("V",), "emb": ("V", "D"), "W_h": ("N*H", "H"), "b_h": ("H",)}
    _W: ClassVar[str] = "W_h"

    def _internal(self, g: CellBuilder, z: str) -> str:
        return g.linear(z, self.weights["W_h"], self.weights["b_h"], "rnn")


class RNTN(_Recursive):
    """Recursive neural tensor network: h = tanh(zᵀ V^[1:H] z + z·W + b).

    ``.npz`` keys: ``vocab``, ``emb`` [V, D], ``V`` [N·H, N·H, H], ``W`` [N·H, H], ``b`` [H];
    optional ``W_x`` [D, H], ``b_x`` [H] (leaf projection).
    """

    KEYS: ClassVar[dict[str, tuple[str, ...]]] = {
        "vocab": ("V",), "emb": ("V", "D"), "V": ("N*H", "N*H", "H"), "W": ("N*H", "H"), "b": ("H",)}
    _W: ClassVar[str] = "W"

    def _internal(self, g: CellBuilder, z: str) -> str:
        H, N = self.hidden, self.dims["N"]
        V = self.weights["V"]  # [i, j, k]
        # zV[b, j, k] = Σ_i z[b, i] V[i, j, k];  bilinear[b, k] = Σ_j zV[b, j, k] z[b, j]
        zv = g.reshape(g.linear(z, V.reshape(N * H, N * H * H), None, "V"), [0, N * H, H])
        bil = g.reduce_sum(g.op("Mul", zv, g.op("Unsqueeze", z, g.const("ax2", np.array([2], np.int64)))), 1)
        return g.op("Add", bil, g.linear(z, self.weights["W"], self.weights["b"], "W"))
