"""N-ary TreeLSTM (Tai et al. 2015, §3.2): positional gates over at most N ordered children.

With z = [h_1; …; h_N] (absent children are zero):
i, o, u = σ, σ, tanh of x·W_iou + z·U_iou + b_iou;  f_k = σ(x·W_f + z·U_f[:, kH:(k+1)H] + b_f);
c = i⊙u + Σ_k f_k⊙c_k;  h = o⊙tanh(c).  As in the Child-Sum model, x is the word
embedding at a leaf and zero at an internal node. ``BinaryTreeLSTM`` is N = 2
(the constituency TreeLSTM for SST).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from recursion.cells import FLOAT, CellBuilder
from recursion.models.base import TreeModel
from recursion.subgraph import InvokeOp, SubGraph, is_internal, is_leaf

__all__ = ["BinaryTreeLSTM", "NaryTreeLSTM"]


class NaryTreeLSTM(TreeModel):
    """N-ary TreeLSTM; N is read from the weights (``U_iou`` is [N·H, 3H]).

    ``.npz`` keys: ``vocab`` [V], ``emb`` [V, D], ``W_iou`` [D, 3H], ``U_iou`` [N·H, 3H],
    ``b_iou`` [3H], ``W_f`` [D, H], ``U_f`` [N·H, N·H], ``b_f`` [H]. A node with more
    than N children fails with an InputError.
    """

    KEYS: ClassVar[dict[str, tuple[str, ...]]] = {
        "vocab": ("V",), "emb": ("V", "D"), "W_iou": ("D", "3*H"), "U_iou": ("N*H", "3*H"), "b_iou": ("3*H",),
        "W_f": ("D", "H"), "U_f": ("N*H", "N*H"), "b_f": ("H",),
    }
    #: Default N for :meth:`random`.
    N: ClassVar[int] = 2

    def _bind_dims(self, w, dims) -> None:
        dims["H"] = int(w["b_f"].shape[0]) if w["b_f"].ndim == 1 else -1
        dims["N"] = max(1, int(w["U_iou"].shape[0]) // max(dims["H"], 1))

    @classmethod
    def random(cls, vocab, input_dim=300, hidden=150, seed=0, runtime=None, shards=None, **dims):
        dims.setdefault("N", cls.N)
        return super().random(vocab, input_dim, hidden, seed, runtime, shards, **dims)

    def build_subgraph(self) -> SubGraph:
        """``nary_tree_lstm``: leaf (word → h, c) and internal (N stacked children → h, c)."""
        w, H, N = self.weights, self.hidden, self.dims["N"]
        leaf = CellBuilder("nary_leaf")
        iou = leaf.word_linear(self.emb, w["W_iou"], w["b_iou"], self.fold_leaves, "iou")
        i, o, u = leaf.split3(iou, H)
        c = leaf.op("Mul", leaf.op("Sigmoid", i), leaf.op("Tanh", u))
        leaf.output(leaf.op("Mul", leaf.op("Sigmoid", o), leaf.op("Tanh", c)), "h", ["B", H])
        leaf.output(c, "c", ["B", H])

        node = CellBuilder("nary_node")
        h_ch = node.input("h_ch", FLOAT, ["B", N, H])
        c_ch = node.input("c_ch", FLOAT, ["B", N, H])
        z = node.reshape(h_ch, [0, N * H])
        i, o, u = node.split3(node.linear(z, w["U_iou"], w["b_iou"], "iou"), H)
        f = node.op("Sigmoid", node.reshape(node.linear(z, w["U_f"], np.tile(w["b_f"], N), "f"), [0, N, H]))
        c = node.op("Add", node.op("Mul", node.op("Sigmoid", i), node.op("Tanh", u)),
                    node.reduce_sum(node.op("Mul", f, c_ch), 1))
        node.output(node.op("Mul", node.op("Sigmoid", o), node.op("Tanh", c)), "h", ["B", H])
        node.output(c, "c", ["B", H])

        sg = SubGraph("nary_tree_lstm", outputs=("h", "c"))
        sg.branch(is_leaf, leaf.build(), fields={"word": "word"}, name="leaf")
        sg.branch(is_internal, node.build(), invokes=[InvokeOp(sg, {"h": "h_ch", "c": "c_ch"}, pad_to=N)],
                  name="node")
        return sg


class BinaryTreeLSTM(NaryTreeLSTM):
    """The N = 2 TreeLSTM (binary constituency trees such as SST)."""

    N: ClassVar[int] = 2
