"""Trees as flat arrays.

A :class:`Tree` stores its nodes in post-order (every child before its
parent, the root last) as numpy arrays, so nothing that walks a tree needs
Python recursion: a 10,000-deep chain and a 100,000-node tree are just longer
arrays. ``recursion.ptb`` reads them from Penn-Treebank brackets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgert.errors import InputError

__all__ = ["Tree"]


@dataclass(frozen=True, slots=True, eq=False)
class Tree:
    """An ordered tree of any arity, nodes in post-order (children before parent).

    Attributes:
        labels: per node, the bracket label (``"3"`` in SST, ``"NP"`` in PTB;
            ``""`` when the bracket had none).
        words: per node, the word of a leaf, ``None`` for an internal node.
        child_ptr: int64 [n + 1]; the children of node ``i`` are
            ``child_idx[child_ptr[i]:child_ptr[i + 1]]``, left to right.
        child_idx: int64 [n - 1], node ids of children.
        height: int64 [n]; 0 for a leaf, 1 + the highest child otherwise.
        first: int64 [n]; the subtree of node ``i`` is the contiguous id range
            ``first[i] .. i`` (a property of post-order).

    The root is the last node (``n - 1``).
    """

    labels: tuple[str, ...]
    words: tuple[str | None, ...]
    child_ptr: np.ndarray
    child_idx: np.ndarray
    height: np.ndarray
    first: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def root(self) -> int:
        """Node id of the root (always the last node)."""
        return len(self.labels) - 1

    @property
    def arity(self) -> np.ndarray:
        """int64 [n]: number of children per node."""
        return np.diff(self.child_ptr)

    @property
    def label(self) -> str:
        """The root's label."""
        return self.labels[-1]

    def children(self, node: int) -> np.ndarray:
        """Node ids of ``node``'s children, left to right."""
        return self.child_idx[self.child_ptr[node] : self.child_ptr[node + 1]]

    def leaves(self) -> list[str]:
        """The words of the leaves, left to right (post-order keeps leaf order)."""
        return [w for w in self.words if w is not None]

    @classmethod
    def from_children(
        cls,
        children: Sequence[Sequence[int]],
        words: Sequence[str | None] | None = None,
        labels: Sequence[str] | None = None,
    ) -> Tree:
        """Build a tree from per-node child lists in post-order (each child id < its parent id).

        Raises InputError when the lists do not form one tree in post-order.
        """
        n = len(children)
        if n == 0:
            raise InputError("a tree needs at least one node")
        arity = np.fromiter((len(c) for c in children), dtype=np.int64, count=n)
        child_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(arity, out=child_ptr[1:])
        child_idx = np.fromiter((c for cs in children for c in cs), dtype=np.int64, count=int(child_ptr[-1]))
        parent_of = np.repeat(np.arange(n, dtype=np.int64), arity)
        if len(child_idx) != n - 1 or np.any(child_idx >= parent_of) or len(np.unique(child_idx)) != n - 1:
            raise InputError("children lists must form one tree in post-order (every child id below its parent's)")
        height, first = _heights(child_ptr, child_idx)
        internal = np.flatnonzero(arity > 0)
        same_parent = parent_of[1:] == parent_of[:-1]
        if np.any(child_idx[child_ptr[internal + 1] - 1] != internal - 1) or np.any(
            first[child_idx[1:]][same_parent] != child_idx[:-1][same_parent] + 1
        ):
            raise InputError("children lists are not in post-order: each subtree must be a contiguous id "
                             "range ending at its root, children left to right")
        if words is None:
            words = tuple(f"w{i}" if arity[i] == 0 else None for i in range(n))
        elif len(words) != n or any((w is None) != (a > 0) for w, a in zip(words, arity.tolist())):
            raise InputError("words must give a word for every leaf and None for every internal node")
        labels = tuple(labels) if labels is not None else ("",) * n
        return cls(labels, tuple(words), child_ptr, child_idx, height, first)


def _heights(child_ptr: np.ndarray, child_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Heights and subtree starts in one pass over post-order (children are already final)."""
    n = len(child_ptr) - 1
    ptr = child_ptr.tolist()
    kids = child_idx.tolist()
    h = [0] * n
    first = list(range(n))
    for p in range(n):
        a, b = ptr[p], ptr[p + 1]
        if b > a:
            h[p] = 1 + max(h[c] for c in kids[a:b])
            first[p] = first[kids[a]]
    return np.array(h, dtype=np.int64), np.array(first, dtype=np.int64)
