"""A batch of trees as one set of arrays: what a plan and the executor index by global node id."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter, itemgetter

import numpy as np

from edgert.errors import InputError
from recursion.tree import Tree


_labels = attrgetter("labels")


@dataclass(frozen=True, slots=True, eq=False)
class Forest:
    """A batch of trees as one set of arrays (global node ids).

    Attributes:
        child_ptr, child_idx: CSR children of every node (global ids).
        height, first: per node, as in :class:`~recursion.tree.Tree`, global ids.
        roots: int64 [T], the root of each tree.
        offsets: int64 [T + 1], tree ``t`` owns nodes ``offsets[t]:offsets[t+1]``.
        words: per node, the leaf word or None.
    """

    child_ptr: np.ndarray
    child_idx: np.ndarray
    height: np.ndarray
    first: np.ndarray
    roots: np.ndarray
    offsets: np.ndarray
    words: tuple[str | None, ...]

    @property
    def n(self) -> int:
        """Number of nodes in the batch."""
        return len(self.height)

    @property
    def arity(self) -> np.ndarray:
        """int64 [n]: children per node."""
        return np.diff(self.child_ptr)

    @classmethod
    def from_trees(cls, trees: Sequence[Tree]) -> Forest:
        """Concatenate ``trees`` (raises InputError on an empty batch or a non-Tree)."""
        if len(trees) == 0:
            raise InputError("no trees given; pass a list of recursion.Tree (from recursion.parse_ptb)")
        for i, t in enumerate(trees):
            if not isinstance(t, Tree):
                raise InputError(f"trees[{i}] is a {type(t).__name__}, not a recursion.Tree; parse it with "
                                 "recursion.parse_ptb(line)")
        sizes = np.fromiter(map(len, map(_labels, trees)), dtype=np.int64, count=len(trees))
        offsets = np.zeros(len(trees) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        kids = [t.child_idx for t in trees]
        n_edges = np.fromiter(map(len, kids), dtype=np.int64, count=len(trees))
        edge_off = np.concatenate(([0], np.cumsum(n_edges)))
        child_ptr = np.empty(offsets[-1] + 1, dtype=np.int64)
        child_ptr[:-1] = np.concatenate([t.child_ptr[:-1] for t in trees]) + np.repeat(edge_off[:-1], sizes)
        child_ptr[-1] = edge_off[-1]
        child_idx = np.concatenate(kids) + np.repeat(offsets[:-1], n_edges)
        first = np.concatenate([t.first for t in trees]) + np.repeat(offsets[:-1], sizes)
        words: tuple[str | None, ...] = tuple(chain.from_iterable(t.words for t in trees))
        return cls(child_ptr, child_idx, np.concatenate([t.height for t in trees]), first,
                   offsets[1:] - 1, offsets, words)

    def part(self, start: int, stop: int) -> Forest:
        """Trees ``start .. stop - 1`` as a Forest of their own (node ids from 0; arrays are views or copies)."""
        n0, n1 = int(self.offsets[start]), int(self.offsets[stop])
        e0, e1 = int(self.child_ptr[n0]), int(self.child_ptr[n1])
        return Forest(self.child_ptr[n0 : n1 + 1] - e0, self.child_idx[e0:e1] - n0, self.height[n0:n1],
                      self.first[n0:n1] - n0, self.roots[start:stop] - n0, self.offsets[start : stop + 1] - n0,
                      self.words[n0:n1])

    def lookup(self, vocab: Mapping[str, int], unknown: int) -> np.ndarray:
        """int64 [n]: vocabulary id of each leaf's word (``unknown`` if absent), -1 for internal nodes."""
        ids = np.full(self.n, -1, dtype=np.int64)
        leaves = np.flatnonzero(self.child_ptr[1:] == self.child_ptr[:-1])
        if len(leaves):
            # C-level passes over the leaves' words only (about half the nodes of a parse tree)
            words = itemgetter(*leaves.tolist())(self.words) if len(leaves) > 1 else (self.words[leaves[0]],)
            ids[leaves] = np.fromiter(map(vocab.get, words, repeat(unknown)), dtype=np.int64, count=len(leaves))
        return ids

    def children_of(self, nodes: np.ndarray) -> np.ndarray:
        """All children of ``nodes`` concatenated (vectorised CSR expansion)."""
        starts = self.child_ptr[nodes]
        counts = self.child_ptr[nodes + 1] - starts
        total = int(counts.sum())
        if total == 0:
            return np.empty(0, dtype=np.int64)
        shift = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        return self.child_idx[shift + np.arange(total)]
