"""Trees as flat arrays, and the PTB bracket parser.

A :class:`Tree` stores its nodes in post-order (every child before its
parent, the root last) as numpy arrays, so nothing that walks a tree needs
Python recursion: a 10,000-deep chain and a 100,000-node tree are just longer
arrays. :func:`parse_ptb` reads Penn-Treebank brackets of any arity with an
explicit stack and reports malformed input with the character position.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from edgert.errors import InputError

__all__ = ["PTBParseError", "Tree", "parse_ptb", "read_ptb"]

# ASCII whitespace only: SST words contain U+00A0 (e.g. "8\xa01\\/2"), which is part of the word.
_TOKEN = re.compile(r"[ \t\r\n\f\v]*(\(|\)|[^ \t\r\n\f\v()]+)")


class PTBParseError(InputError):
    """A PTB bracket string is malformed; ``position`` is the 0-based character offset."""

    def __init__(self, message: str, text: str, position: int) -> None:
        lo = max(0, position - 25)
        snippet = text[lo : position + 25].replace("\n", " ")
        caret = " " * (position - lo) + "^"
        super().__init__(f"{message} at position {position}\n  {snippet}\n  {caret}")
        self.reason = message
        self.position = position
        self.text = text


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


def parse_ptb(text: str) -> Tree:
    """Parse one PTB bracket tree of any arity, e.g. ``(3 (2 It) (4 (4 works) (2 .)))``.

    ``(LABEL word)`` is a leaf; ``(LABEL child child …)`` an internal node whose
    children are brackets or bare words (a bare word becomes an unlabelled
    leaf); ``( (S …))`` has an empty label. Uses an explicit stack, so depth is
    unbounded. Raises :class:`PTBParseError` (an ``InputError``) naming the
    position of an unbalanced bracket, an empty constituent or trailing text.
    """
    nodes = _Nodes()
    # Stack of open brackets: (label, children ids, position of "(")
    stack: list[tuple[str, list[int], int]] = []
    root: int | None = None
    expect_label = False
    for m in _TOKEN.finditer(text):
        tok = m.group(1)
        start = m.start(1)
        if root is not None:
            what = "unbalanced ')'" if tok == ")" else "unexpected text after the tree is complete"
            raise PTBParseError(what, text, start)
        if tok == "(":
            stack.append(("", [], start))
            expect_label = True
        elif tok == ")":
            if not stack:
                raise PTBParseError("unbalanced ')'", text, start)
            label, children, opened = stack.pop()
            expect_label = False
            node = nodes.close(label, children, text, opened)
            if stack:
                stack[-1][1].append(node)
            else:
                root = node
        elif not stack:
            raise PTBParseError(f"word {tok!r} outside any bracket", text, start)
        elif expect_label:
            stack[-1] = (tok, stack[-1][1], stack[-1][2])
            expect_label = False
        else:
            stack[-1][1].append(nodes.leaf(tok))
    if stack:
        raise PTBParseError(f"{len(stack)} unclosed '(' (opened here)", text, stack[-1][2])
    if root is None:
        raise PTBParseError("no tree found", text, len(text))
    return _finish(nodes.labels, nodes.words, nodes.kids, nodes.height, nodes.first)


class _Nodes:
    """The nodes :func:`parse_ptb` has made, as columns in parse order (leaves when read, internal nodes
    when closed), with each node's height and the first node of its subtree."""

    __slots__ = ("first", "height", "kids", "labels", "words")

    def __init__(self) -> None:
        self.labels: list[str] = []
        self.words: list[str | None] = []
        self.kids: list[list[int]] = []
        self.height: list[int] = []
        self.first: list[int] = []

    def leaf(self, word: str) -> int:
        """A new unlabelled leaf; its id."""
        node = len(self.labels)
        self.labels.append("")
        self.words.append(word)
        self.kids.append([])
        self.height.append(0)
        self.first.append(node)
        return node

    def close(self, label: str, children: list[int], text: str, opened: int) -> int:
        """The node of a closed bracket (opened at ``opened`` in ``text``); its id.

        ``(word)`` is a leaf without a label; ``(LABEL word)`` labels its word's leaf (the bracket itself is
        the leaf); anything else is a new internal node. Raises PTBParseError for ``()``.
        """
        if not children and not label:
            raise PTBParseError("empty constituent '()'", text, opened)
        if not children:
            return self.leaf(label)
        if len(children) == 1 and self.words[children[0]] is not None and not self.labels[children[0]] and label:
            self.labels[children[0]] = label
            return children[0]
        node = len(self.labels)
        self.labels.append(label)
        self.words.append(None)
        self.kids.append(children)
        self.height.append(1 + max(self.height[c] for c in children))
        self.first.append(self.first[children[0]])
        return node


def _finish(
    labels: list[str], words: list[str | None], kids: list[list[int]], height: list[int], first: list[int]
) -> Tree:
    """Renumber parse order (leaves when read, internals when closed) into post-order."""
    n = len(labels)
    # Parse order already puts every child before its parent except that a
    # "(LABEL word)" leaf keeps its word's id, which is also before its parent.
    # Sorting is therefore unnecessary: parse ids are a valid post-order.
    arity = np.fromiter((len(k) for k in kids), dtype=np.int64, count=n)
    child_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(arity, out=child_ptr[1:])
    child_idx = np.fromiter((c for k in kids for c in k), dtype=np.int64, count=int(child_ptr[-1]))
    return Tree(tuple(labels), tuple(words), child_ptr, child_idx,
                np.array(height, dtype=np.int64), np.array(first, dtype=np.int64))


def read_ptb(lines: Iterable[str]) -> list[Tree]:
    """Parse every non-blank line; a PTBParseError names the 1-based line number."""
    trees = []
    for no, line in enumerate(lines, 1):
        if line.strip():
            try:
                trees.append(parse_ptb(line))
            except PTBParseError as exc:
                raise PTBParseError(f"line {no}: {exc.reason}", exc.text, exc.position) from None
    return trees
