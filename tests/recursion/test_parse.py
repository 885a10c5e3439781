"""parse_ptb: SST and n-ary PTB brackets, round trips, errors with positions, unbounded depth."""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recursion
from recursion.data import SST_DIR
from recursion import PTBParseError, Tree, parse_ptb, read_ptb
from recursion.synth import chain_tree
from edgert.errors import InputError

SST = SST_DIR


def to_ptb(t: Tree) -> str:
    """``t`` as one line of PTB brackets (no recursion), for round trips through ``parse_ptb``.

    An unlabelled leaf is written ``(word)`` so that it can never be read as the label of an
    unlabelled parent."""
    text: list[str] = [""] * len(t)
    for i in range(len(t)):
        head = f"({t.labels[i]} " if t.labels[i] else "("
        if t.words[i] is not None:
            text[i] = f"{head}{t.words[i]})"
        else:
            text[i] = head + " ".join(text[c] for c in t.children(i)) + ")"
    return text[-1]


def test_sst_line_structure() -> None:
    t = parse_ptb("(3 (2 It) (4 (4 works) (2 .)))")
    assert t.leaves() == ["It", "works", "."]
    assert t.labels == ("2", "4", "2", "4", "3")
    assert t.label == "3" and t.root == 4
    assert t.children(4).tolist() == [0, 3] and t.children(3).tolist() == [1, 2]
    assert t.height.tolist() == [0, 0, 0, 1, 2]
    assert t.first.tolist() == [0, 1, 2, 1, 0]
    assert [int(x) for x in t.labels] == [2, 4, 2, 4, 3]


def test_nary_ptb_with_bare_words_and_empty_root_label() -> None:
    t = parse_ptb("( (S (NP the big cat) (VP (VBD sat)) (. .)))")
    assert t.leaves() == ["the", "big", "cat", "sat", "."]
    arity = {t.labels[i]: int(t.arity[i]) for i in range(len(t)) if t.words[i] is None}
    assert arity == {"NP": 3, "VP": 1, "S": 3, "": 1}
    assert to_ptb(parse_ptb(to_ptb(t))) == to_ptb(t)


def test_sst_test_set_round_trips() -> None:
    lines = (SST / "test.txt").read_text().splitlines()
    trees = read_ptb(lines)
    assert len(trees) == 2210
    assert all(to_ptb(t) == line.strip() for t, line in zip(trees, lines))
    assert max(int(t.height.max()) for t in trees) == 28
    assert all(int(t.arity.max()) == 2 for t in trees if len(t) > 1)


@pytest.mark.parametrize(
    ("text", "reason", "position"),
    [
        ("(3 (2 It) (4 works)", "1 unclosed '(' (opened here)", 0),
        ("(3 (2 It)))", "unbalanced ')'", 10),
        ("(3 (2 It) ())", "empty constituent '()'", 10),
        ("word (3 x)", "word 'word' outside any bracket", 0),
        ("(a b) (c d)", "unexpected text after the tree is complete", 6),
        ("   ", "no tree found", 3),
    ],
)
def test_parse_errors_name_the_position(text: str, reason: str, position: int) -> None:
    with pytest.raises(PTBParseError) as info:
        parse_ptb(text)
    assert info.value.reason == reason
    assert info.value.position == position
    assert f"at position {position}" in str(info.value)
    assert isinstance(info.value, InputError)


def test_error_message_points_at_the_spot() -> None:
    with pytest.raises(PTBParseError) as info:
        parse_ptb("(3 (2 It)))")
    snippet, caret = str(info.value).splitlines()[1:]
    assert snippet.strip() == "(3 (2 It)))"
    assert caret.index("^") == snippet.index("(") + 10


def test_read_ptb_names_the_line() -> None:
    with pytest.raises(PTBParseError, match=r"^line 2: unbalanced"):
        read_ptb(["(1 a)", "(1 a))"])


def test_deep_chain_parses_without_recursion() -> None:
    text = "(1 " * 10_000 + "(0 w)" + " (0 x))" * 10_000
    t = parse_ptb(text)
    assert len(t) == 20_001 and int(t.height.max()) == 10_000
    chain = chain_tree(10_000)
    assert len(parse_ptb(to_ptb(chain))) == len(chain)


def test_from_children_checks_post_order() -> None:
    t = Tree.from_children([[], [], [0, 1]])
    assert t.height.tolist() == [0, 0, 1]
    with pytest.raises(InputError, match="post-order"):
        Tree.from_children([[], [], [0], [1, 2]])
    with pytest.raises(InputError, match="one tree"):
        Tree.from_children([[], [], [0]])


def test_public_exports() -> None:
    assert {"SubGraph", "InvokeOp", "Executor", "parse_ptb", "Tree"} <= set(recursion.__all__)
    assert np.array_equal(recursion.parse_ptb("(1 a)").height, [0])


def test_non_breaking_space_is_part_of_a_word() -> None:
    """SST has words such as '8\\xa01\\/2': only ASCII whitespace separates tokens."""
    t = parse_ptb("(2 (2 like) (2 8\xa01\\/2))")
    assert t.leaves() == ["like", "8\xa01\\/2"] and "" not in t.labels


def _same(a: Tree, b: Tree) -> None:
    assert a.labels == b.labels and a.words == b.words
    for f in ("child_ptr", "child_idx", "height", "first"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)


EDGE_CASES = ["(NP (cat))", "((cat))", "(S (NP (cat)))", "(a)", "(a b)", "(a b c)", "( a)", "(X (Y (Z a)))",
              "((a) (b))", "(x ((a)) b)", "(NP)", "(S (NP) (VP x))", "( (S (NP the big cat) (VP (VBD sat)) (. .)))",
              "(2 (2 like) (2 8\xa01\\/2))", "\t(3\r(2 It)\v(4 works))\n", "(é (ü ö) ∂)"]


def test_read_ptb_equals_parse_ptb_line_by_line() -> None:
    """read_ptb reads all lines at once in numpy; parse_ptb one line in Python: the same trees."""
    from recursion.synth import random_tree, split_tree

    rng = np.random.default_rng(3)
    lines = (SST / "test.txt").read_text().splitlines()[:400] + EDGE_CASES
    lines += [to_ptb(split_tree(int(rng.integers(1, 40)), 6, rng)) for _ in range(200)]
    lines += [to_ptb(random_tree(int(rng.integers(1, 60)), 5, rng)) for _ in range(200)]
    for line, tree in zip(lines, read_ptb(lines)):
        _same(parse_ptb(line), tree)
    deep = "(1 " * 3000 + "(0 w)" + " (0 x))" * 3000
    _same(read_ptb([deep])[0], parse_ptb(deep))


@pytest.mark.parametrize(("text", "reason", "position"), [
    ("(3 (2 It) (4 works)", "1 unclosed '(' (opened here)", 0),
    ("(3 (2 It)))", "unbalanced ')'", 10),
    ("(3 (2 It) ())", "empty constituent '()'", 10),
    ("word (3 x)", "word 'word' outside any bracket", 0),
    ("(a b) (c d)", "unexpected text after the tree is complete", 6),
    (")", "unbalanced ')'", 0),
])
def test_read_ptb_names_the_line_and_position_among_good_lines(text: str, reason: str, position: int) -> None:
    lines = ["(1 a)", "", "(2 (1 b) (1 c))", text, "(1 a"]
    with pytest.raises(PTBParseError) as info:
        read_ptb(lines)
    assert info.value.reason == f"line 4: {reason}" and info.value.position == position


def test_read_ptb_of_nothing_is_empty() -> None:
    assert read_ptb([]) == [] and read_ptb(["", "  \n"]) == []


def test_read_forest_is_the_forest_of_read_ptb() -> None:
    """read_forest skips the Tree a line: the same arrays as Forest.from_trees(read_ptb(lines)), and its parts
    are the forests of the lines' slices."""
    from recursion import Forest, read_forest

    lines = (SST / "test.txt").read_text().splitlines()[:300] + ["", *EDGE_CASES]
    want, got = Forest.from_trees(read_ptb(lines)), read_forest(lines)
    for a, b in ((want, got), (Forest.from_trees(read_ptb(lines[100:250])), got.part(100, 250))):
        for f in ("child_ptr", "child_idx", "height", "first", "roots", "offsets"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
        assert a.words == b.words
    with pytest.raises(PTBParseError, match="^line 2: unbalanced"):
        read_forest(["(1 a)", "(1 a))"])
    with pytest.raises(InputError, match="no trees given"):
        read_forest(["", " "])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["(", ")", " ", "a", "bc", "\t", "(x", "é"]), max_size=16).map("".join))
def test_any_text_reads_the_same_one_line_or_many(text: str) -> None:
    """parse_ptb (a Python loop) and read_ptb / read_forest (numpy over all lines) accept the same lines,
    build the same trees, and refuse the rest with the same reason and position."""
    from recursion import Forest, read_forest

    try:
        want: Tree | PTBParseError = parse_ptb(text)
    except PTBParseError as exc:
        want = exc
    if not text.strip():
        return
    lines = ["(1 a)", text, "(2 (1 b) c)"]
    if isinstance(want, PTBParseError):
        for read in (read_ptb, read_forest):
            with pytest.raises(PTBParseError) as info:
                read(lines)
            assert (info.value.reason, info.value.position) == (f"line 2: {want.reason}", want.position)
    else:
        _same(read_ptb(lines)[1], want)
        forest = read_forest(lines)
        np.testing.assert_array_equal(forest.child_idx, Forest.from_trees(read_ptb(lines)).child_idx)
