"""Child-Sum TreeLSTM (Tai et al. 2015), any arity; binding names and equations in docs/design.md §5.

h̃ = Σ_k h_k;  i, o, u = σ, σ, tanh of x·W_iou + h̃·U_iou + b_iou (gate order i, o, u);
f_k = σ(x·W_f + h_k·U_f + b_f);  c = i⊙u + Σ_k f_k⊙c_k;  h = o⊙tanh(c).
A leaf's x is its word's embedding; an internal node's x is zero. So the leaf
cell is x → (h, c) with no child terms, and the internal cell has no x terms
(``W_f`` never contributes: only leaves have an x, and they have no children).
Absent children in a padded batch are zero rows: they add nothing to h̃ and
their c_k = 0 makes f_k⊙c_k = 0, so padding is exact.
"""

from __future__ import annotations

from typing import ClassVar

from recursion.cells import FLOAT, CellBuilder
from recursion.models.base import TreeModel
from recursion.subgraph import InvokeOp, SubGraph, is_internal, is_leaf

__all__ = ["ChildSumTreeLSTM"]


class ChildSumTreeLSTM(TreeModel):
    """Child-Sum TreeLSTM over trees of any arity; ``encode(trees)`` → root h ``[T, H]``.

    ``weights.npz`` keys: ``vocab`` [V] str, ``emb`` [V, D], ``W_iou`` [D, 3H],
    ``U_iou`` [H, 3H], ``b_iou`` [3H], ``W_f`` [D, H], ``U_f`` [H, H], ``b_f`` [H].
    """

    KEYS: ClassVar[dict[str, tuple[str, ...]]] = {
        "vocab": ("V",), "emb": ("V", "D"), "W_iou": ("D", "3*H"), "U_iou": ("H", "3*H"), "b_iou": ("3*H",),
        "W_f": ("D", "H"), "U_f": ("H", "H"), "b_f": ("H",),
    }

    def _bind_dims(self, w, dims) -> None:
        dims["H"] = int(w["U_f"].shape[0]) if w["U_f"].ndim == 2 else -1

    def build_subgraph(self) -> SubGraph:
        """``child_sum_tree_lstm``: leaf branch (word → h, c), internal branch (children's h, c → h, c)."""
        w, H = self.weights, self.hidden
        leaf = CellBuilder("child_sum_leaf")
        iou = leaf.word_linear(self.emb, w["W_iou"], w["b_iou"], self.fold_leaves, "iou")
        i, o, u = leaf.split3(iou, H)
        c = leaf.op("Mul", leaf.op("Sigmoid", i), leaf.op("Tanh", u))
        leaf.output(leaf.op("Mul", leaf.op("Sigmoid", o), leaf.op("Tanh", c)), "h", ["B", H])
        leaf.output(c, "c", ["B", H])

        node = CellBuilder("child_sum_node")
        h_ch = node.input("h_ch", FLOAT, ["B", "K", H])
        c_ch = node.input("c_ch", FLOAT, ["B", "K", H])
        i, o, u = node.split3(node.linear(node.reduce_sum(h_ch, 1), w["U_iou"], w["b_iou"], "iou"), H)
        f = node.op("Sigmoid", node.linear(h_ch, w["U_f"], w["b_f"], "f"))
        c = node.op("Add", node.op("Mul", node.op("Sigmoid", i), node.op("Tanh", u)),
                    node.reduce_sum(node.op("Mul", f, c_ch), 1))
        node.output(node.op("Mul", node.op("Sigmoid", o), node.op("Tanh", c)), "h", ["B", H])
        node.output(c, "c", ["B", H])

        sg = SubGraph("child_sum_tree_lstm", outputs=("h", "c"))
        sg.branch(is_leaf, leaf.build(), fields={"word": "word"}, name="leaf")
        sg.branch(is_internal, node.build(), invokes=[InvokeOp(sg, {"h": "h_ch", "c": "c_ch"})], name="node")
        return sg


