"""The Penn-Treebank bracket reader: text to :class:`~recursion.tree.Tree` s, whole arrays at a time.

A bracket string is read in three passes that each run in C over every token of
every line at once, so the cost per token is a few numpy operations, not a
Python loop iteration:

1. Tokens: the lines' UTF-8 bytes, translated to one shape a byte (blank, ``(``,
   ``)``, word) as one uint8 array, mark where each token starts (a bracket, or a
   word byte after a non-word one); one split of the text with brackets blanked
   out gives the words, in the same order. The depth after each token is one
   cumulative sum.
2. Validation: a line is well formed when it starts with ``(``, its depth stays
   above zero until its last token, that token ``)`` closes it, and no ``()`` is
   empty (when every line is, the depth is zero exactly at the lines' ends: one
   check for all of them). A line that fails is read again by :func:`parse_ptb`,
   whose scanner (:func:`_diagnose`) raises :class:`PTBParseError` at the first
   position at fault.
3. Structure: which tokens make a node follows from each token's neighbours (the
   rules below are patterns a few tokens long); nodes are numbered in the order
   they close, which is post-order. A node's level is the depth of its bracket,
   and in post-order a node's parent is the next node one level up: one sorted
   search over the nodes ordered by (level, id). Subtrees' first nodes follow
   first-child pointers, doubled; heights are range maxima of the levels.

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
_BLANKED = bytes(32 if chr(b) in _SPACE + "()" else b for b in range(256))   # words: what remains between blanks
#: Bytes that ``str.split()`` cuts at but ``bytes.split()`` does not (ASCII file and group separators).
_STR_ONLY_SPACES = (b"\x1c", b"\x1d", b"\x1e", b"\x1f")
_TOKEN = re.compile(f"[{_SPACE}]*(\\(|\\)|[^{_SPACE}()]+)")
#: Token shapes (and byte shapes, with _BLANK_BYTE for whitespace).
_BLANK_BYTE, _OPEN, _CLOSE, _WORD = 0, 1, 2, 3
_BYTE_SHAPE = bytes(_BLANK_BYTE if chr(b) in _SPACE else _OPEN if b == ord("(") else _CLOSE if b == ord(")")
                    else _WORD for b in range(256))


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
    if not texts:
        return []
    tokens = _tokens(texts, numbers, _name_line)
    return _split(tokens, _nodes(tokens))


def read_forest(lines: Iterable[str], first_line: int = 1) -> Forest:
    """:func:`read_ptb` straight to one :class:`~recursion.forest.Forest` (what ``encode`` and the executor
    index), without a Tree object a line; labels are not kept. Raises as :func:`read_ptb` does (lines
    numbered from ``first_line``), and InputError when there is no tree at all."""
    texts, numbers = _lines(lines, first_line)
    if not texts:
        raise InputError("no trees given: every line is blank; pass PTB bracket lines, one tree a line")
    tokens = _tokens(texts, numbers, _name_line)
    nodes = _nodes(tokens)
    roots = np.flatnonzero(nodes.parent < 0)
    offsets = np.concatenate(([0], roots + 1))
    return Forest(nodes.child_ptr, nodes.child_idx, nodes.height, nodes.first, roots, offsets,
                  _node_words(nodes.word, tokens.words))


def _lines(lines: Iterable[str], first: int = 1) -> tuple[list[str], list[int]]:
    """The non-blank lines and their numbers (the first line is ``first``)."""
    every = list(lines)
    numbers = [no for no, line in enumerate(every, first) if line and not line.isspace()]
    if len(numbers) == len(every):
        return every, numbers
    return [every[no - first] for no in numbers], numbers


def _name_line(no: int, exc: PTBParseError) -> PTBParseError:
    """``exc`` with its reason prefixed by ``line no:``."""
    return PTBParseError(f"line {no}: {exc.reason}", exc.text, exc.position)


@dataclass(frozen=True, slots=True)
class _Tokens:
    """Every token of every line, lines one after another."""

    shape: np.ndarray       # uint8 [tokens]: _OPEN, _CLOSE or _WORD
    depth: np.ndarray       # int32 [tokens]: brackets open after the token
    lengths: np.ndarray     # int64 [lines]: tokens a line
    words: list[str]        # the text of every word token (labels included), in token order


def _tokens(texts: Sequence[str], numbers: Sequence[int],
            wrap: Callable[[int, PTBParseError], PTBParseError]) -> _Tokens:
    """The tokens of ``texts``; a malformed text is diagnosed and raised through ``wrap(line number, error)``."""
    text = "\n".join(texts)
    raw = text.encode("utf-8")
    byte_shape = np.frombuffer(raw.translate(_BYTE_SHAPE), dtype=np.uint8)
    in_word = byte_shape == _WORD
    starts = byte_shape != _BLANK_BYTE                          # a bracket, or a word's first byte
    starts[1:] &= ~(in_word[1:] & in_word[:-1])
    at = np.flatnonzero(starts)
    shape = byte_shape[at]
    depth = np.cumsum((shape == _OPEN).view(np.int8) - (shape == _CLOSE).view(np.int8), dtype=np.int32)
    if text.isascii():                                          # a byte a character
        line_ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1)
    else:
        line_ends = np.cumsum([len(t.encode("utf-8")) + 1 for t in texts])
    lengths = np.diff(np.searchsorted(at, line_ends), prepend=0)   # tokens a line
    bad = _malformed(shape, depth, lengths)
    if len(bad):
        t = int(bad[0])
        try:
            parse_ptb(texts[t])
        except PTBParseError as exc:
            raise wrap(numbers[t], exc) from None
        raise AssertionError(f"the bracket check and the scanner disagree on {texts[t]!r}")  # pragma: no cover
    return _Tokens(shape, depth, lengths, _words(text, raw))


def _words(text: str, raw: bytes) -> list[str]:
    """The word tokens of ``text`` (``raw``: its UTF-8), in order: what remains between blanks and brackets."""
    blanked = raw.translate(_BLANKED)
    if text.isascii() and not any(c in raw for c in _STR_ONLY_SPACES):
        return blanked.decode("ascii").split()                 # str.split: the same cuts, no bytes objects
    return b" ".join(blanked.split()).decode("utf-8").split(" ")


def _malformed(shape: np.ndarray, depth: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices of the lines whose brackets are not one well-formed tree (in line order)."""
    ends = np.cumsum(lengths)
    if len(shape) and np.all(lengths) and shape[0] == _OPEN:
        # Every line well formed (the common case) when the brackets close to depth 0 exactly at each
        # line's last token, every line starts with "(" and nothing is "()": one pass each.
        closed = np.flatnonzero(depth <= 0)
        if (len(closed) == len(ends) and np.array_equal(closed, ends - 1) and not np.any(depth[closed])
                and np.all(shape[ends[:-1]] == _OPEN) and not np.any((shape[:-1] == _OPEN) & (shape[1:] == _CLOSE))):
            return closed[:0]
    return _malformed_lines(shape, depth, lengths)


def _malformed_lines(shape: np.ndarray, depth: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """:func:`_malformed` line by line: each line's depths relative to the depth before it."""
    if len(shape) == 0:
        return np.arange(len(lengths))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    line = np.repeat(np.arange(len(lengths)), lengths)
    base = np.where(starts > 0, depth[starts - 1], 0)    # depth before each line's first token
    last = np.zeros(len(shape), dtype=bool)
    last[ends[lengths > 0] - 1] = True
    bad = np.zeros(len(lengths), dtype=bool)
    bad[lengths == 0] = True
    bad[line[(depth - base[line] <= 0) & ~last]] = True   # closed (or below zero) before the line ends
    full = lengths > 0
    bad[full] |= (shape[starts[full]] != _OPEN) | (shape[ends[full] - 1] != _CLOSE)
    bad[full] |= depth[ends[full] - 1] != base[full]
    empty = np.flatnonzero((shape[:-1] == _OPEN) & (shape[1:] == _CLOSE))
    bad[line[empty]] = True                                   # "()" (never across lines: a line ends with ")")
    return np.flatnonzero(bad)


@dataclass(frozen=True, slots=True)
class _Roles:
    """What each token of well-formed lines is to its tree (bool [tokens] each)."""

    label: np.ndarray       # a word right after "(": a label, or the word of "(word)"
    bare: np.ndarray        # a word that is not: a leaf
    lone: np.ndarray        # the ")" of "(word)": an unlabelled leaf
    folded: np.ndarray      # the ")" of "(LABEL x)", x an unlabelled leaf: x takes the label, no node of its own
    makes: np.ndarray       # makes a node: a bare word, or a ")" not folded


def _roles(shape: np.ndarray) -> _Roles:
    """The role of every token, from its neighbours alone (the patterns are a few tokens long)."""
    is_open, is_close, is_word = shape == _OPEN, shape == _CLOSE, shape == _WORD
    after_open = np.zeros_like(is_open)
    after_open[1:] = is_open[:-1]
    label, bare = is_word & after_open, is_word & ~after_open
    lone = np.zeros_like(is_open)
    lone[1:] = is_close[1:] & label[:-1]                                    # ( w )
    folded = np.zeros_like(is_open)
    folded[2:] = is_close[2:] & bare[1:-1] & label[:-2]                     # ( LABEL w )
    folded[4:] |= lone[3:-1] & is_close[4:] & label[:-4]                    # ( LABEL ( w ) )
    return _Roles(label, bare, lone, folded, bare | (is_close & ~folded))


@dataclass(frozen=True, slots=True)
class _Nodes:
    """Every node of every line, numbered in closing order (post-order per line, lines one after another)."""

    token: np.ndarray       # int64 [n]: the token that makes the node (its word, or its ")")
    roles: _Roles
    parent: np.ndarray      # int64 [n], -1 at a root
    child_ptr: np.ndarray   # int64 [n + 1]: CSR children, in closing order
    child_idx: np.ndarray   # int64 [edges]
    height: np.ndarray      # int64 [n]
    first: np.ndarray       # int64 [n]: first node of the subtree
    word: np.ndarray        # int64 [n]: index into the words of a leaf's word, -1 at an internal node


def _nodes(tokens: _Tokens) -> _Nodes:
    """The nodes of well-formed lines and how they link.

    A node's level is its bracket's depth (1: a line's outer bracket; a bare word counts as a bracket of
    its own; a folded bracket's leaf takes the folded bracket's level). In closing order a node's parent
    is the next node one level up, its subtree the run of deeper nodes just before it.
    """
    roles = _roles(tokens.shape)
    token = np.flatnonzero(roles.makes)
    folded_next = np.append(roles.folded[1:], False)[token]
    level = tokens.depth[token] + 1 - folded_next
    parent = _parents(level)
    kids = np.flatnonzero(parent >= 0)
    child_idx = kids[_stable_order(parent[kids])]              # children of a parent stay in closing order
    child_ptr = np.zeros(len(token) + 1, dtype=np.int64)
    np.cumsum(np.bincount(parent[kids], minlength=len(token)), out=child_ptr[1:])
    first = _firsts(child_ptr, child_idx, int(level.max()))
    # A leaf's word is a bare word, or the word inside "(word)"; leaves and their words come in the same order.
    is_leaf = roles.bare[token] | roles.lone[token]
    word = np.full(len(token), -1, dtype=np.int64)
    word_tokens = np.flatnonzero(tokens.shape == _WORD)
    word[is_leaf] = np.flatnonzero(roles.bare[word_tokens] | roles.lone[word_tokens + 1])
    return _Nodes(token, roles, parent, child_ptr, child_idx, _heights(level, first, ~is_leaf), first, word)


def _word_index(shape: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The index among the word tokens of the word tokens ``at`` (ascending)."""
    return np.searchsorted(np.flatnonzero(shape == _WORD), at)


def _parents(level: np.ndarray) -> np.ndarray:
    """int64 [n]: each node's parent, -1 at a root: the next node (in closing order) one level up, found by
    one sorted search over the nodes ordered by (level, id)."""
    n = len(level)
    order = _stable_order(level)
    up = level[order].astype(np.int64) * n
    at = np.searchsorted(up + order, up - n + order)          # the first node one level up after each
    parent = np.full(n, -1, dtype=np.int64)
    parent[order] = np.where(up > n, order[np.minimum(at, n - 1)], -1)       # level 1: a root
    return parent


def _firsts(child_ptr: np.ndarray, child_idx: np.ndarray, levels: int) -> np.ndarray:
    """int64 [n]: the first node of each subtree, its leftmost leaf: each node points at its first child,
    and pointers are doubled until they reach the leaves (log2 of the deepest path steps)."""
    n = len(child_ptr) - 1
    first = np.arange(n, dtype=np.int64)
    inner = np.flatnonzero(child_ptr[1:] > child_ptr[:-1])
    first[inner] = child_idx[child_ptr[inner]]
    for _ in range(levels.bit_length()):
        first = first[first]
    return first


def _heights(level: np.ndarray, first: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """int64 [n]: each node's height, the deepest level in its subtree (``first[i] .. i``) less its own (0 at
    a leaf; ``inner``: the other nodes): range maxima from a table of the deepest level of every
    power-of-two run of nodes (log2 of the largest subtree steps)."""
    n = len(level)
    height = np.zeros(n, dtype=np.int64)
    node = np.flatnonzero(inner)
    if len(node) == 0:
        return height
    start = first[node]
    span = np.frexp(node - start + 1)[1] - 1                    # floor(log2(subtree size))
    runs = np.empty((int(span.max()) + 1, n), dtype=level.dtype)  # runs[k, i]: deepest of level[i : i + 2**k]
    runs[0] = level
    for k in range(1, len(runs)):
        half = 1 << (k - 1)
        runs[k, -half:] = runs[k - 1, -half:]
        np.maximum(runs[k - 1, :-half], runs[k - 1, half:], out=runs[k, :-half])
    height[node] = np.maximum(runs[span, start], runs[span, node + 1 - (1 << span)]) - level[node]
    return height


def _node_words(word: np.ndarray, words: list[str]) -> tuple[str | None, ...]:
    """Per node, ``words[word]`` at a leaf, None where ``word`` is -1."""
    return _pick([*words, None], word)


def _pick(items: list, index: np.ndarray) -> tuple:
    """``items[i]`` for each ``i`` of ``index`` (-1: the last item), as a tuple: one C call."""
    picked = itemgetter(*index.tolist())(items)
    return picked if len(index) != 1 else (picked,)


def _labels(tokens: _Tokens, nodes: _Nodes) -> tuple[str, ...]:
    """Per node, its label ("" where none): the word after an internal node's "(", and a folded bracket's
    label at the leaf it folded into."""
    shape, roles, token = tokens.shape, nodes.roles, nodes.token
    label_token = np.full(len(token), -1, dtype=np.int64)
    inner = np.flatnonzero(nodes.child_ptr[1:] > nodes.child_ptr[:-1])
    opened = _openings(shape, tokens.depth, token[inner])
    labelled = roles.label[opened + 1]
    label_token[inner[labelled]] = opened[labelled] + 1
    folded_next = np.append(roles.folded[1:], False)[token]
    leaf = np.flatnonzero(folded_next)                          # "(LABEL w)" or "(LABEL (w))"
    label_token[leaf] = np.where(roles.bare[token[leaf]], token[leaf] - 1, token[leaf] - 3)
    index = np.full(len(token), -1, dtype=np.int64)
    has = np.flatnonzero(label_token >= 0)
    index[has] = _word_index(shape, label_token[has])
    return _pick([*tokens.words, ""], index)


def _openings(shape: np.ndarray, depth: np.ndarray, closes: np.ndarray) -> np.ndarray:
    """The "(" of each of the ")" tokens ``closes``: the last "(" before it that opened its depth."""
    opens = np.flatnonzero(shape == _OPEN)
    order = opens[_stable_order(depth[opens])]                  # by depth, then position
    keys = depth[order].astype(np.int64) * len(shape) + order
    return order[np.searchsorted(keys, (depth[closes].astype(np.int64) + 1) * len(shape) + closes) - 1]


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for small non-negative ints (depths, node ids): as uint16 when
    they fit, where numpy's stable sort is a radix sort (several times faster than on int64)."""
    small = len(keys) == 0 or int(keys.max()) < 2**16
    return np.argsort(keys.astype(np.uint16) if small else keys, kind="stable")


def _split(tokens: _Tokens, nodes: _Nodes) -> list[Tree]:
    """One :class:`Tree` per line: views of the arrays of all lines, renumbered from 0 in each."""
    n = len(nodes.token)
    line_ends = np.cumsum(tokens.lengths)
    sizes = np.diff(np.searchsorted(nodes.token, line_ends), prepend=0)    # nodes a line
    off = np.concatenate(([0], np.cumsum(sizes)))
    tree_of = np.repeat(np.arange(len(sizes)), sizes)
    start = off[:-1][tree_of]
    child_idx = nodes.child_idx - start[nodes.child_idx]
    edge_ptr = nodes.child_ptr
    # child_ptr of tree t is ptr[off[t] + t : off[t + 1] + t + 1]: each tree's n + 1 entries, one after another
    ptr = np.empty(n + len(sizes), dtype=np.int64)
    edge_start = edge_ptr[off[:-1]]
    ptr[np.arange(n) + tree_of] = edge_ptr[:-1] - edge_start[tree_of]
    ptr[off[1:] + np.arange(len(sizes))] = edge_ptr[off[1:]] - edge_start
    first = nodes.first - start
    labels = _labels(tokens, nodes)
    words = _node_words(nodes.word, tokens.words)
    trees = []
    for t, (a, b) in enumerate(zip(off[:-1].tolist(), off[1:].tolist())):
        ea, eb = int(edge_start[t]), int(edge_ptr[b])
        trees.append(Tree(labels[a:b], words[a:b], ptr[a + t : b + t + 1],
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
