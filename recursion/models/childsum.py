"""Child-Sum TreeLSTM (Tai et al. 2015), any arity; binding names and equations in docs/design.md §5.

h̃ = Σ_k h_k;  i, o, u = σ, σ, tanh of x·W_iou + h̃·U_iou + b_iou (gate order i, o, u);
f_k = σ(x·W_f + h_k·U_f + b_f);  c = i⊙u + Σ_k f_k⊙c_k;  h = o⊙tanh(c).
A leaf's x is its word's embedding; an internal node's x is zero. So the leaf
cell is x → (h, c) with no child terms, and the internal cell has no x terms
(``W_f`` never contributes: only leaves have an x, and they have no children).
Each node also outputs f⊙c for its parent (``fc``, see ``build_subgraph``); the
internal cell takes h̃ and Σ_k f_k⊙c_k, which its InvokeOp sums as it gathers.
"""

from __future__ import annotations

from typing import ClassVar

from recursion.cells import FLOAT, CellBuilder, tabulate
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
        """``child_sum_tree_lstm``: leaf branch (word → h, c, fc), internal branch (children's h, fc → h, c, fc).

        ``fc`` is what a node hands its parent for the forget path, ``σ(h·U_f + b_f) ⊙ c``: its
        parent is internal, whose x is zero, so f_k depends on the child alone and is taken once, with
        the child, as one [B, H] × [H, H] product. The parent then only needs the sums of its children's
        ``h`` and ``fc``: its InvokeOp hands them over summed (``reduce="sum"``), added up as they are
        gathered, so nodes of every child count share one call and no child is padded.
        """
        w, H = self.weights, self.hidden
        leaf = CellBuilder("child_sum_leaf")
        iou = leaf.word_linear(self.emb, w["W_iou"], w["b_iou"], self.fold_leaves, "iou")
        i, o, u = leaf.split3(iou, H)
        _outputs(leaf, leaf.op("Mul", leaf.op("Sigmoid", i), leaf.op("Tanh", u)), o, w, H)

        node = CellBuilder("child_sum_node")
        h_sum = node.input("h_ch", FLOAT, ["B", H])        # summed over the children as they are gathered
        fc_sum = node.input("fc_ch", FLOAT, ["B", H])
        # a product per gate (column blocks of U_iou), not one [H, 3H] product split three ways: no copy
        # for the split, and ONNX Runtime fuses each gate's bias and activation into its product
        i, o, u = (node.linear(h_sum, w["U_iou"][:, g * H:(g + 1) * H], w["b_iou"][g * H:(g + 1) * H], gate)
                   for g, gate in enumerate("iou"))
        _outputs(node, node.op("Add", node.op("Mul", node.op("Sigmoid", i), node.op("Tanh", u)), fc_sum), o, w, H)

        # folded, a leaf's (h, c, fc) is a row of a table over the vocabulary (V x 3H floats, as many
        # as the folded input projection it replaces)
        leaf_cell = tabulate(leaf.build(), "word", len(self.emb)) if self.fold_leaves else leaf.build()
        sg = SubGraph("child_sum_tree_lstm", outputs=("h", "c", "fc"))
        sg.branch(is_leaf, leaf_cell, fields={"word": "word"}, name="leaf")
        sg.branch(is_internal, node.build(), invokes=[InvokeOp(sg, {"h": "h_ch", "fc": "fc_ch"}, reduce="sum")],
                  name="node")
        return sg


def _outputs(g: CellBuilder, c: str, o: str, w, H: int) -> None:
    """Outputs ``h = σ(o) ⊙ tanh(c)``, ``c`` and the parent's forget term ``fc = σ(h·U_f + b_f) ⊙ c``."""
    h = g.op("Mul", g.op("Sigmoid", o), g.op("Tanh", c))
    g.output(h, "h", ["B", H])
    g.output(c, "c", ["B", H])
    g.output(g.op("Mul", g.op("Sigmoid", g.linear(h, w["U_f"], w["b_f"], "f")), c), "fc", ["B", H])
