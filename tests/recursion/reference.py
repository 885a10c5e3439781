"""Plain per-node numpy references (float64) for the tree models: the ground truth of the tests.

Each walks the nodes of one tree in post-order with a for loop (children are
always done first), applying the paper's equations literally, e.g. for
Child-Sum including the x·W_f term with x = 0 at internal nodes.
"""

from __future__ import annotations

import numpy as np

from recursion.models.base import TreeModel
from recursion.tree import Tree


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _x(model: TreeModel, tree: Tree, i: int) -> np.ndarray:
    """A leaf's embedding (the unknown row for OOV), zero for an internal node."""
    w = tree.words[i]
    D = model.emb.shape[1]
    if w is None:
        return np.zeros(D)
    return model.emb[model.vocab.get(w, model.unknown)].astype(np.float64)


def child_sum(model: TreeModel, tree: Tree) -> tuple[np.ndarray, np.ndarray]:
    """h, c [n, H] of every node."""
    w = {k: v.astype(np.float64) for k, v in model.weights.items() if k != "vocab"}
    n, H = len(tree), model.hidden
    h = np.zeros((n, H))
    c = np.zeros((n, H))
    for j in range(n):
        x = _x(model, tree, j)
        kids = tree.children(j)
        h_sum = h[kids].sum(axis=0) if len(kids) else np.zeros(H)
        iou = x @ w["W_iou"] + h_sum @ w["U_iou"] + w["b_iou"]
        i, o, u = sigmoid(iou[:H]), sigmoid(iou[H:2 * H]), np.tanh(iou[2 * H:])
        cj = i * u
        for k in kids:
            f = sigmoid(x @ w["W_f"] + h[k] @ w["U_f"] + w["b_f"])
            cj = cj + f * c[k]
        c[j] = cj
        h[j] = o * np.tanh(cj)
    return h, c


def nary_lstm(model: TreeModel, tree: Tree) -> tuple[np.ndarray, np.ndarray]:
    """N-ary TreeLSTM (Tai et al.): positional U over the N children, absent children zero."""
    w = {k: v.astype(np.float64) for k, v in model.weights.items() if k != "vocab"}
    n, H, N = len(tree), model.hidden, model.dims["N"]
    h = np.zeros((n, H))
    c = np.zeros((n, H))
    for j in range(n):
        x = _x(model, tree, j)
        kids = tree.children(j)
        assert len(kids) <= N
        hcat = np.zeros(N * H)
        ccs = np.zeros((N, H))
        for p, k in enumerate(kids):
            hcat[p * H:(p + 1) * H] = h[k]
            ccs[p] = c[k]
        iou = x @ w["W_iou"] + hcat @ w["U_iou"] + w["b_iou"]
        i, o, u = sigmoid(iou[:H]), sigmoid(iou[H:2 * H]), np.tanh(iou[2 * H:])
        cj = i * u
        for p in range(N):
            f = sigmoid(x @ w["W_f"] + hcat @ w["U_f"][:, p * H:(p + 1) * H] + w["b_f"])
            cj = cj + f * ccs[p]
        c[j] = cj
        h[j] = o * np.tanh(cj)
    return h, c


def _leaf_h(model: TreeModel, w: dict, x: np.ndarray) -> np.ndarray:
    if "W_x" in w:
        return np.tanh(x @ w["W_x"] + w["b_x"])
    return x


def _concat_children(model: TreeModel, tree: Tree, internal) -> np.ndarray:
    """Per node in post order: leaf h = tanh(x·W_x + b_x) (or x); internal h = ``internal(z, w)`` with
    z = [h_1;…;h_N] (zero-padded to N children), in float64."""
    w = {k: v.astype(np.float64) for k, v in model.weights.items() if k != "vocab"}
    n, H, N = len(tree), model.hidden, model.dims["N"]
    h = np.zeros((n, H))
    for j in range(n):
        kids = tree.children(j)
        if len(kids) == 0:
            h[j] = _leaf_h(model, w, _x(model, tree, j))
            continue
        z = np.zeros(N * H)
        for p, k in enumerate(kids):
            z[p * H:(p + 1) * H] = h[k]
        h[j] = internal(z, w)
    return h


def tree_rnn(model: TreeModel, tree: Tree) -> np.ndarray:
    """TreeRNN: leaf h = tanh(x·W_x + b_x) (or x); internal h = tanh([h_1;…;h_N]·W_h + b_h)."""
    return _concat_children(model, tree, lambda z, w: np.tanh(z @ w["W_h"] + w["b_h"]))


def rntn(model: TreeModel, tree: Tree) -> np.ndarray:
    """RNTN (Socher et al. 2013): h = tanh(zᵀ V^[1:H] z + z·W + b), z = [h_1;…;h_N]."""
    def internal(z: np.ndarray, w: dict) -> np.ndarray:
        bilinear = np.array([z @ w["V"][:, :, k] @ z for k in range(len(w["b"]))])
        return np.tanh(bilinear + z @ w["W"] + w["b"])

    return _concat_children(model, tree, internal)
