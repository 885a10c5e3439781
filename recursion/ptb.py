"""The Penn-Treebank bracket reader: text to :class:`~recursion.tree.Tree` s, whole arrays at a time.

A bracket string is read in three passes that each run in C over every token of
every line at once, so the cost per token is a few numpy operations, not a
Python loop iteration:

1. Tokens: the lines' UTF-8 bytes as one uint8 array mark where each token starts
   (a bracket, or a word character after a non-word one), and one ``bytes.split``
   of the text with brackets blanked out gives the words, in the same order.
2. Validation: a line is well formed when it starts with ``(``, its depth stays
   above zero until its last token, that token ``)`` closes it, and no ``()`` is
   empty. A line that fails is read again by :func:`parse_ptb`, whose scanner
   (:func:`_diagnose`) raises :class:`PTBParseError` at the first position at fault.
3. Structure: brackets are matched by depth (the i-th ``(`` at a depth closes at
   the i-th ``)`` back to it), each token's enclosing bracket is found by a sorted
   search, and nodes are numbered in the order they close, which is post-order.

Node rules (the same as the scanner's): a bare word is an unlabelled leaf;
``(word)`` is an unlabelled leaf; ``(LABEL x)`` whose only child ``x`` is an
unlabelled leaf gives that leaf the label; any other bracket is an internal node.
Depth is unbounded: nothing recurses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

import numpy as np

from edgert.errors import InputError
from recursion.forest import Forest
from recursion.tree import Tree

__all__ = ["PTBParseError", "parse_ptb", "read_forest", "read_ptb"]

# ASCII whitespace only: SST words contain U+00A0 (e.g. "8\xa01\\/2"), which is part of the word.
_SPACE = " \t\r\n\f\v"
_SPACES = str.maketrans({c: " " for c in _SPACE})
_BLANK = bytes(32 if chr(b) in _SPACE + "()" else b for b in range(256))   # words: what remains between blanks
_IS_SPACE = np.zeros(256, dtype=bool)
_IS_SPACE[[ord(c) for c in _SPACE]] = True
_TOKEN = re.compile(f"[{_SPACE}]*(\\(|\\)|[^{_SPACE}()]+)")
_OPEN, _CLOSE, _W = ord("("), ord(")"), ord("w")


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


def parse_ptb(text: str) -> Tree:
    """Parse one PTB bracket tree of any arity, e.g. ``(3 (2 It) (4 (4 works) (2 .)))``.

    ``(LABEL word)`` is a leaf; ``(LABEL child child …)`` an internal node whose
    children are brackets or bare words (a bare word becomes an unlabelled
    leaf); ``( (S …))`` has an empty label. Depth is unbounded (an explicit
    stack). Raises :class:`PTBParseError` (an ``InputError``) naming the
    position of an unbalanced bracket, an empty constituent or trailing text.

    One line at a time this is a Python loop over the tokens (a few hundred ns
    each); :func:`read_ptb` reads many lines at once in numpy.
    """
    columns = _scan(text)
    if columns is None:
        _diagnose(text)
        raise AssertionError(f"the scanner accepts what the parser refused: {text!r}")  # pragma: no cover
    return _tree(*columns)


def _scan(text: str) -> tuple[list[str], list[str | None], list[list[int]], list[int], list[int]] | None:
    """Per node in closing order (post-order): label, word, children, height, first node of its subtree;
    None when ``text`` is not one well-formed tree (:func:`_diagnose` then says where)."""
    labels: list[str] = []
    words: list[str | None] = []
    kids: list[list[int]] = []
    height: list[int] = []
    first: list[int] = []

    def new(label: str, word: str | None, children: list[int]) -> int:
        node = len(labels)
        labels.append(label)
        words.append(word)
        kids.append(children)
        height.append(1 + max([height[c] for c in children]) if children else 0)
        first.append(first[children[0]] if children else node)
        return node

    stack: list[list] = []          # per open bracket: [label, children]
    root = -1
    label_next = False
    for tok in filter(None, text.translate(_SPACES).replace("(", " ( ").replace(")", " ) ").split(" ")):
        if root >= 0:
            return None             # text after the tree
        if tok == "(":
            stack.append(["", []])
            label_next = True
            continue
        if tok != ")":
            if label_next:
                stack[-1][0] = tok
                label_next = False
                continue
            if not stack:
                return None         # a word outside any bracket
            node = new("", tok, [])
        else:
            if not stack:
                return None         # an unbalanced ")"
            label, children = stack.pop()
            label_next = False
            if not children:
                if not label:
                    return None     # "()"
                node = new("", label, [])                   # "(word)": an unlabelled leaf
            elif len(children) == 1 and words[children[0]] is not None and not labels[children[0]] and label:
                node = children[0]                          # "(LABEL x)", x an unlabelled leaf: x's label
                labels[node] = label
            else:
                node = new(label, None, children)           # an internal node
        if stack:
            stack[-1][1].append(node)
        else:
            root = node
    return (labels, words, kids, height, first) if root >= 0 and not stack else None


def _tree(labels: list[str], words: list[str | None], kids: list[list[int]], height: list[int],
          first: list[int]) -> Tree:
    """A :class:`Tree` from per-node columns in post-order (nodes are numbered when they close)."""
    n = len(labels)
    arity = np.fromiter(map(len, kids), dtype=np.int64, count=n)
    child_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(arity, out=child_ptr[1:])
    child_idx = np.fromiter(chain.from_iterable(kids), dtype=np.int64, count=int(child_ptr[-1]))
    return Tree(tuple(labels), tuple(words), child_ptr, child_idx,
                np.array(height, dtype=np.int64), np.array(first, dtype=np.int64))


def read_ptb(lines: Iterable[str]) -> list[Tree]:
    """Parse every non-blank line (one tree a line) in one pass over all of them.

    Raises :class:`PTBParseError` for the first malformed line, its reason
    starting ``line N:`` (1-based) and its position within that line.
    """
    texts, numbers = _lines(lines)
    return _split(*_read(texts, numbers, _name_line)) if texts else []


def read_forest(lines: Iterable[str], first_line: int = 1) -> Forest:
    """:func:`read_ptb` straight to one :class:`~recursion.forest.Forest` (what ``encode`` and the executor
    index), without a Tree object a line; labels are not kept. Raises as :func:`read_ptb` does (lines
    numbered from ``first_line``), and InputError when there is no tree at all."""
    texts, numbers = _lines(lines, first_line)
    if not texts:
        raise InputError("no trees given: every line is blank; pass PTB bracket lines, one tree a line")
    nodes, lengths = _read(texts, numbers, _name_line)
    parent = nodes.parent
    kids = np.flatnonzero(parent >= 0)
    child_idx = kids[_stable_order(parent[kids])]              # children of a parent stay in closing order
    child_ptr = np.zeros(len(parent) + 1, dtype=np.int64)
    np.cumsum(np.bincount(parent[kids], minlength=len(parent)), out=child_ptr[1:])
    roots = np.flatnonzero(parent < 0)
    offsets = np.concatenate(([0], roots + 1))
    return Forest(child_ptr, child_idx, nodes.height, nodes.first, roots, offsets, tuple(nodes.words))


def _lines(lines: Iterable[str], first: int = 1) -> tuple[list[str], list[int]]:
    """The non-blank lines and their numbers (the first line is ``first``)."""
    texts, numbers = [], []
    for no, line in enumerate(lines, first):
        if line.strip():
            texts.append(line)
            numbers.append(no)
    return texts, numbers


def _name_line(no: int, exc: PTBParseError) -> PTBParseError:
    """``exc`` with its reason prefixed by ``line no:``."""
    return PTBParseError(f"line {no}: {exc.reason}", exc.text, exc.position)


def _read(texts: Sequence[str], numbers: Sequence[int],
          wrap: Callable[[int, PTBParseError], PTBParseError]) -> tuple[_Nodes, np.ndarray]:
    """The nodes of ``texts`` and each text's token count; a malformed text is diagnosed and raised through
    ``wrap(line number, error)``."""
    raw = "\n".join(texts).encode("utf-8")
    data = np.frombuffer(raw, dtype=np.uint8)
    bracket = (data == _OPEN) | (data == _CLOSE)
    in_word = ~bracket & ~_IS_SPACE[data]
    starts = bracket.copy()
    starts[0] |= in_word[0]
    starts[1:] |= in_word[1:] & ~in_word[:-1]
    at = np.flatnonzero(starts)
    codes = np.where(bracket[at], data[at], _W).astype(np.uint8)
    line_ends = np.cumsum([len(t.encode("utf-8")) + 1 for t in texts])   # byte offset after each line's "\n"
    lengths = np.diff(np.searchsorted(at, line_ends), prepend=0)          # tokens a line
    bad = _malformed(codes, lengths)
    if len(bad):
        t = int(bad[0])
        try:
            parse_ptb(texts[t])
        except PTBParseError as exc:
            raise wrap(numbers[t], exc) from None
        raise AssertionError(f"the bracket check and the scanner disagree on {texts[t]!r}")  # pragma: no cover
    words = b" ".join(raw.translate(_BLANK).split()).decode("utf-8").split(" ")
    return _structure(codes, words), lengths


def _malformed(codes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices of the lines whose brackets are not one well-formed tree (in line order)."""
    if len(codes) == 0:
        return np.arange(len(lengths))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    line = np.repeat(np.arange(len(lengths)), lengths)
    depth = np.cumsum((codes == _OPEN).astype(np.int64) - (codes == _CLOSE))
    base = np.concatenate(([0], depth))[starts]         # depth before each line's first token
    last = np.zeros(len(codes), dtype=bool)
    last[ends[lengths > 0] - 1] = True
    bad = np.zeros(len(lengths), dtype=bool)
    bad[lengths == 0] = True
    bad[line[(depth - base[line] <= 0) & ~last]] = True   # closed (or below zero) before the line ends
    full = lengths > 0
    bad[full] |= (codes[starts[full]] != _OPEN) | (codes[ends[full] - 1] != _CLOSE)
    bad[full] |= depth[ends[full] - 1] != base[full]
    empty = np.flatnonzero((codes[:-1] == _OPEN) & (codes[1:] == _CLOSE))
    bad[line[empty]] = True                                   # "()" (never across lines: a line ends with ")")
    return np.flatnonzero(bad)


@dataclass(frozen=True, slots=True)
class _Nodes:
    """Every node of every line, numbered in closing order (post-order per line, lines one after another)."""

    parent: np.ndarray      # int64 [n], -1 at a root
    height: np.ndarray      # int64 [n]
    first: np.ndarray       # int64 [n], first node of the subtree
    label_word: np.ndarray  # int64 [n], index into ``vocab`` of the node's label, -1: none
    words: list[str | None]
    vocab: list[str]        # every word token of every line, labels included
    token: np.ndarray       # int64 [n], the token that made the node (its word, or its closing bracket)


@dataclass(frozen=True, slots=True)
class _Brackets:
    """Where each token sits: brackets numbered in opening order, bare words (not labels) in token order."""

    depth: np.ndarray       # int64 [tokens], brackets open after each token
    word_of: np.ndarray     # int64 [tokens], index into the words of a word token
    opens: np.ndarray       # int64 [brackets], the token of each "("
    level: np.ndarray       # int64 [brackets], its depth (1: a line's outer bracket)
    close_of: np.ndarray    # int64 [brackets], the token of its ")"
    up: np.ndarray          # int64 [brackets], the bracket around it, -1 for a line's outer one
    has_label: np.ndarray   # bool [brackets], a word right after its "("
    bare: np.ndarray        # int64 [bare words], their tokens
    bare_up: np.ndarray     # int64 [bare words], the bracket around each


def _brackets(codes: np.ndarray) -> _Brackets:
    """Match the brackets of well-formed lines (``codes``: one shape per token) and find what encloses what."""
    n_tok = len(codes)
    is_open, is_word = codes == _OPEN, codes == _W
    depth = np.cumsum(is_open.astype(np.int64) - (codes == _CLOSE))
    is_label = np.zeros(n_tok, dtype=bool)
    is_label[1:] = is_word[1:] & is_open[:-1]
    bare = np.flatnonzero(is_word & ~is_label)
    # the i-th "(" at a depth closes at the i-th ")" back to it
    opens = np.flatnonzero(is_open)
    closes = np.flatnonzero(codes == _CLOSE)
    level = depth[opens]
    by_level = _stable_order(level)                            # by level, then position
    close_of = np.empty(len(opens), dtype=np.int64)
    close_of[by_level] = closes[_stable_order(depth[closes])]
    keys = level[by_level] * n_tok + opens[by_level]

    def enclosing(lvl: np.ndarray, at: np.ndarray) -> np.ndarray:
        """The bracket at level ``lvl`` that encloses token ``at`` (the last opened before it); given in
        (level, position) order, the queries walk the keys once."""
        return by_level[np.searchsorted(keys, lvl * n_tok + at) - 1]

    up = np.full(len(opens), -1, dtype=np.int64)
    inner = by_level[level[by_level] > 1]
    up[inner] = enclosing(level[inner] - 1, opens[inner])
    bare_up = np.empty(len(bare), dtype=np.int64)
    by_depth = _stable_order(depth[bare])
    bare_up[by_depth] = enclosing(depth[bare[by_depth]], bare[by_depth])
    return _Brackets(depth, np.cumsum(is_word) - 1, opens, level, close_of, up, is_label[opens + 1], bare, bare_up)


def _structure(codes: np.ndarray, words: list[str]) -> _Nodes:
    """The nodes of well-formed lines whose shapes are ``codes`` and whose word tokens are ``words``."""
    b = _brackets(codes)
    inner = b.up >= 0
    n_bare = np.bincount(b.bare_up, minlength=len(b.opens))
    n_sub = np.bincount(b.up[inner], minlength=len(b.opens))
    lone = n_bare + n_sub == 0                                 # "(word)": an unlabelled leaf
    n_lone = np.bincount(b.up[inner & lone], minlength=len(b.opens))
    # "(LABEL x)" with x an unlabelled leaf labels x and makes no node of its own
    merged = b.has_label & (((n_bare == 1) & (n_sub == 0)) | ((n_bare == 0) & (n_sub == 1) & (n_lone == 1)))
    made = np.zeros(len(codes), dtype=bool)                    # tokens that make a node, in closing order
    made[b.bare] = True
    made[b.close_of[~merged]] = True
    node_at = np.cumsum(made) - 1
    n = int(node_at[-1]) + 1
    bracket_node = node_at[b.close_of]
    bracket_node[merged] = -1

    # Each element (bare word, bracket) sits in a bracket; one inside a merged bracket moves up past it.
    child = np.concatenate((b.bare, b.close_of))
    src = np.concatenate((b.bare_up, b.up))
    into_merged = np.append(merged, False)[src]                # (index -1, no bracket: False)
    holder = np.full(len(b.opens), -1, dtype=np.int64)        # the leaf a merged bracket labels
    holder[src[into_merged]] = node_at[child[into_merged]]
    src[into_merged] = b.up[src[into_merged]]
    elem_node = np.concatenate((node_at[b.bare], bracket_node))
    parent = np.full(n, -1, dtype=np.int64)
    has_up = (elem_node >= 0) & (src >= 0)
    parent[elem_node[has_up]] = bracket_node[src[has_up]]

    label_word = np.full(n, -1, dtype=np.int64)
    own = ~merged & ~lone & b.has_label
    label_word[bracket_node[own]] = b.word_of[b.opens[own] + 1]
    label_word[holder[merged]] = b.word_of[b.opens[merged] + 1]
    leaf_word = np.full(n, -1, dtype=np.int64)
    leaf_word[node_at[b.bare]] = b.word_of[b.bare]
    leaf_word[bracket_node[lone & ~merged]] = b.word_of[b.opens[lone & ~merged] + 1]
    first = np.arange(n, dtype=np.int64)
    internal = ~merged & ~lone
    first[bracket_node[internal]] = node_at[b.opens[internal]] + 1     # the nodes made before its "("
    level_of = np.zeros(n, dtype=np.int64)
    level_of[node_at[b.bare]] = b.depth[b.bare] + 1
    level_of[bracket_node[~merged]] = b.level[~merged]
    return _Nodes(parent, _heights(parent, level_of), first, label_word, _leaf_words(leaf_word, words), words,
                  np.flatnonzero(made))


def _leaf_words(leaf_word: np.ndarray, words: list[str]) -> list[str | None]:
    """Per node, ``words[leaf_word]`` at a leaf, None where ``leaf_word`` is -1."""
    out = np.full(len(leaf_word), None, dtype=object)
    leaves = np.flatnonzero(leaf_word >= 0)
    if len(leaves):
        out[leaves] = itemgetter(*leaf_word[leaves].tolist())(words)
    return out.tolist()


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for small non-negative ints (depths, node ids): as int16 when
    they fit, where numpy's stable sort is a radix sort (several times faster than on int64)."""
    small = len(keys) == 0 or int(keys.max()) < 2**15
    return np.argsort(keys.astype(np.int16) if small else keys, kind="stable")


def _heights(parent: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Height of every node: deepest level first, each level raises its parents (one numpy step a level)."""
    height = np.zeros(len(parent), dtype=np.int64)
    order = _stable_order(level)[::-1]
    bounds = np.flatnonzero(np.diff(level[order])) + 1
    for nodes in np.split(order, bounds):
        nodes = nodes[parent[nodes] >= 0]
        np.maximum.at(height, parent[nodes], height[nodes] + 1)
    return height


def _split(nodes: _Nodes, lengths: np.ndarray) -> list[Tree]:
    """One :class:`Tree` per line: views of the arrays of all lines, renumbered from 0 in each."""
    n = len(nodes.parent)
    line_ends = np.cumsum(lengths)
    sizes = np.diff(np.searchsorted(nodes.token, line_ends), prepend=0)    # nodes a line
    off = np.concatenate(([0], np.cumsum(sizes)))
    tree_of = np.repeat(np.arange(len(sizes)), sizes)
    start = off[:-1][tree_of]
    has_up = nodes.parent >= 0
    kids = np.flatnonzero(has_up)
    order = _stable_order(nodes.parent[kids])                  # children of a parent stay in closing order
    child_idx = kids[order] - start[kids[order]]
    arity = np.bincount(nodes.parent[kids], minlength=n)
    edge_ptr = np.concatenate(([0], np.cumsum(arity)))
    # child_ptr of tree t is ptr[off[t] + t : off[t + 1] + t + 1]: each tree's n + 1 entries, one after another
    ptr = np.empty(n + len(sizes), dtype=np.int64)
    edge_start = edge_ptr[off[:-1]]
    ptr[np.arange(n) + tree_of] = edge_ptr[:-1] - edge_start[tree_of]
    ptr[off[1:] + np.arange(len(sizes))] = edge_ptr[off[1:]] - edge_start
    first = nodes.first - start
    labels = np.array(nodes.vocab + [""], dtype=object)[nodes.label_word].tolist()  # index -1: no label
    trees = []
    for t, (a, b) in enumerate(zip(off[:-1].tolist(), off[1:].tolist())):
        ea, eb = int(edge_start[t]), int(edge_ptr[b])
        trees.append(Tree(tuple(labels[a:b]), tuple(nodes.words[a:b]), ptr[a + t : b + t + 1],
                          child_idx[ea:eb], nodes.height[a:b], first[a:b]))
    return trees


def _diagnose(text: str) -> None:
    """Scan ``text`` with an explicit stack; raises :class:`PTBParseError` at the first fault (if any)."""
    stack: list[list] = []          # per open bracket: [position of "(", has a label or child]
    done = False
    for m in _TOKEN.finditer(text):
        tok, start = m.group(1), m.start(1)
        if done:
            raise PTBParseError("unbalanced ')'" if tok == ")" else "unexpected text after the tree is complete",
                                text, start)
        if tok == "(":
            stack.append([start, False])
        elif tok == ")":
            if not stack:
                raise PTBParseError("unbalanced ')'", text, start)
            opened, filled = stack.pop()
            if not filled:
                raise PTBParseError("empty constituent '()'", text, opened)
            if stack:
                stack[-1][1] = True
            done = not stack
        elif not stack:
            raise PTBParseError(f"word {tok!r} outside any bracket", text, start)
        else:
            stack[-1][1] = True
    if stack:
        raise PTBParseError(f"{len(stack)} unclosed '(' (opened here)", text, stack[-1][0])
    if not done:
        raise PTBParseError("no tree found", text, len(text))
