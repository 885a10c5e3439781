"""Synthetic trees for tests and benchmarks: random n-ary trees, SST-shaped binary trees, chains.

Every builder is iterative (no recursion), so depth is unbounded.
"""

from __future__ import annotations

import numpy as np

from recursion.tree import Tree

__all__ = ["chain_tree", "random_tree", "split_tree", "sst_like_tree"]


def random_tree(n_nodes: int, max_arity: int = 4, rng: np.random.Generator | None = None,
                vocab: list[str] | None = None) -> Tree:
    """A random ordered tree of about ``n_nodes`` nodes, arities 1..``max_arity`` (uniform).

    Built top-down by breadth-first expansion, then renumbered to post-order.
    Leaves get words drawn from ``vocab`` (default ``w0``…``w99``).
    """
    rng = rng or np.random.default_rng(0)
    vocab = vocab or [f"w{i}" for i in range(100)]
    kids: list[list[int]] = [[]]
    frontier = [0]
    count = 1
    head = 0
    while head < len(frontier) and count < n_nodes:
        node = frontier[head]
        head += 1
        k = int(rng.integers(1, max_arity + 1))
        k = min(k, n_nodes - count)
        for _ in range(k):
            kids.append([])
            kids[node].append(count)
            frontier.append(count)
            count += 1
    return _postorder(kids, rng, vocab)


def split_tree(n_leaves: int, max_arity: int = 5, rng: np.random.Generator | None = None,
               vocab: list[str] | None = None) -> Tree:
    """A random ordered tree over ``n_leaves`` leaves, shaped like a parse: each node's span of leaves
    is cut into 1..``max_arity`` parts (uniform; never more parts than leaves) at uniform cut points,
    until every part is one leaf; a one-part cut is a unary node (as ``(NP (NN cat))`` in PTB).

    Built top-down with an explicit stack, then renumbered to post-order.
    """
    rng = rng or np.random.default_rng(0)
    vocab = vocab or [f"w{i}" for i in range(100)]
    kids: list[list[int]] = [[]]
    todo = [(0, max(1, int(n_leaves)))]
    while todo:
        node, leaves = todo.pop()
        if leaves == 1:
            continue
        k = int(rng.integers(1, min(max_arity, leaves) + 1))
        cuts = np.sort(rng.choice(np.arange(1, leaves), k - 1, replace=False)) if k > 1 else np.empty(0, int)
        for size in np.diff(np.concatenate(([0], cuts, [leaves]))).tolist():
            kids.append([])
            kids[node].append(len(kids) - 1)
            todo.append((len(kids) - 1, size))
    return _postorder(kids, rng, vocab)


def _postorder(kids: list[list[int]], rng: np.random.Generator, vocab: list[str]) -> Tree:
    """Renumber a tree given as child lists from root 0 into post-order (explicit stack)."""
    n = len(kids)
    order: list[int] = []
    stack = [(0, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        stack.append((node, True))
        for c in reversed(kids[node]):
            stack.append((c, False))
    new_id = {old: i for i, old in enumerate(order)}
    children = [[new_id[c] for c in kids[old]] for old in order]
    words = [None if children[i] else vocab[int(rng.integers(len(vocab)))] for i in range(n)]
    labels = [str(int(rng.integers(5))) for _ in range(n)]
    return Tree.from_children(children, words, labels)


def sst_like_tree(rng: np.random.Generator, vocab: list[str]) -> Tree:
    """A binary tree shaped like SST (see data/sst/README.md): leaves ~ N(19.2, 9.2) in [2, 56],
    left-subtree sizes geometric(p=0.4) truncated to [1, L-1]."""
    n_leaves = int(np.clip(round(rng.normal(19.2, 9.2)), 2, 56))
    kids: list[list[int]] = [[]]
    todo = [(0, n_leaves)]
    while todo:
        node, leaves = todo.pop()
        if leaves == 1:
            continue
        left = min(max(int(rng.geometric(0.4)), 1), leaves - 1)
        for size in (left, leaves - left):
            kids.append([])
            kids[node].append(len(kids) - 1)
            todo.append((len(kids) - 1, size))
    return _postorder(kids, rng, vocab)


def chain_tree(depth: int, word: str = "w0") -> Tree:
    """A left-branching binary chain ``((((w w) w) w) …)`` of the given depth (2·depth + 1 nodes)."""
    children: list[list[int]] = [[]]
    words: list[str | None] = [word]
    prev = 0
    for _ in range(depth):
        leaf = len(children)
        children.append([])
        words.append(word)
        children.append([prev, leaf])
        words.append(None)
        prev = len(children) - 1
    return Tree.from_children(children, words)
