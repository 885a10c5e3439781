"""Every tree model equals its plain per-node numpy reference (float64) to <= 1e-5.

On SST test trees (binary, with out-of-vocabulary words) and on random n-ary
trees, through a real edgert.Runtime (ONNX Runtime CPU) and through OrtRunner.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import edgert
from recursion.data import SST_DIR
from recursion import Forest, OrtRunner, read_ptb
from recursion.models import RNTN, BinaryTreeLSTM, ChildSumTreeLSTM, TreeRNN
from recursion.synth import random_tree
from edgert.errors import ConfigError, InputError, ModelLoadError
from tests.recursion import reference as ref

SST = SST_DIR
TOL = 1e-5


@pytest.fixture(scope="module")
def rt():
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=2, warmup_runs=1) as runtime:
        yield runtime


@pytest.fixture(scope="module")
def ort_runner():
    with OrtRunner(2) as runner:
        yield runner


@pytest.fixture(scope="module")
def sst_trees():
    with open(SST / "test.txt") as f:
        return read_ptb([next(f) for _ in range(60)])


def _vocab(trees):
    words = sorted({w for t in trees for w in t.leaves()})
    return words[: int(len(words) * 0.9)]  # ~10% of words are out of vocabulary


def _max_err(model, trees, reference) -> float:
    res = model.run(trees)
    err = 0.0
    for t, tree in enumerate(trees):
        want = reference(model, tree)
        want = want if isinstance(want, tuple) else (want,)
        a, b = res.forest.offsets[t], res.forest.offsets[t + 1]
        for name, w in zip(("h", "c"), want):
            err = max(err, float(np.abs(res.nodes(name)[a:b] - w).max()))
    np.testing.assert_array_equal(model.encode(trees), res.roots("h"))
    return err


CASES = [
    (ChildSumTreeLSTM, ref.child_sum, {}),
    (BinaryTreeLSTM, ref.nary_lstm, {}),
    (TreeRNN, ref.tree_rnn, {}),
    (RNTN, ref.rntn, {"hidden": 8}),
]


@pytest.mark.parametrize(("cls", "reference", "kw"), CASES, ids=[c[0].__name__ for c in CASES])
def test_sst_trees_match_reference_through_runtime(rt, sst_trees, cls, reference, kw) -> None:
    model = cls.random(_vocab(sst_trees), input_dim=24, hidden=kw.get("hidden", 20), seed=1, runtime=rt)
    assert _max_err(model, sst_trees, reference) <= TOL


@pytest.mark.parametrize(("cls", "reference", "kw"), CASES, ids=[c[0].__name__ for c in CASES])
def test_nary_trees_match_reference(ort_runner, cls, reference, kw) -> None:
    rng = np.random.default_rng(7)
    vocab = [f"w{i}" for i in range(100)]
    trees = [random_tree(int(rng.integers(1, 120)), 4, rng, vocab) for _ in range(25)]
    dims = {} if cls is ChildSumTreeLSTM else {"N": 4}
    model = cls.random(vocab[:90], input_dim=12, hidden=kw.get("hidden", 16), seed=2, runtime=ort_runner, **dims)
    assert _max_err(model, trees, reference) <= TOL


def test_child_sum_wide_nodes_are_bucketed_exactly(ort_runner) -> None:
    rng = np.random.default_rng(3)
    trees = [random_tree(400, 40, rng) for _ in range(3)]  # arities 1..40 -> several buckets a wave
    model = ChildSumTreeLSTM.random([f"w{i}" for i in range(100)], input_dim=8, hidden=8, runtime=ort_runner)
    assert _max_err(model, trees, ref.child_sum) <= TOL
    forest = Forest.from_trees(trees)
    plan = model.executor.plan(forest, model.fields(forest))
    ks = {ga.rows.shape[1] for g in plan.groups for ga in g.gathers}
    assert len(ks) > 2  # grouped by child-count bucket, not padded to the widest node


def test_from_npz_keys_and_encode_shape(tmp_path, rt, sst_trees) -> None:
    src = ChildSumTreeLSTM.random(_vocab(sst_trees), input_dim=10, hidden=6, seed=4, runtime=rt)
    path = tmp_path / "weights.npz"
    src.save_npz(path)
    with np.load(path) as z:
        assert sorted(z.files) == sorted(["vocab", "emb", "W_iou", "U_iou", "b_iou", "W_f", "U_f", "b_f"])
    model = ChildSumTreeLSTM.from_npz(path, runtime=rt)
    H = model.encode(sst_trees[:7])
    assert H.shape == (7, 6) and H.dtype == np.float32
    np.testing.assert_allclose(H, src.encode(sst_trees[:7]), atol=0)


def test_weight_errors_name_the_key(tmp_path) -> None:
    good = ChildSumTreeLSTM.random(["a", "b"], input_dim=4, hidden=3).weights  # no runtime needed
    bad = dict(good, U_f=np.zeros((3, 4), np.float32))
    with pytest.raises(ConfigError, match=r"weight 'U_f' has shape \(3, 4\), expected \(3, 3\)"):
        ChildSumTreeLSTM(bad)
    with pytest.raises(ConfigError, match=r"lack \['b_f'\]"):
        ChildSumTreeLSTM({k: v for k, v in good.items() if k != "b_f"})
    with pytest.raises(ModelLoadError, match="not found"):
        ChildSumTreeLSTM.from_npz(tmp_path / "missing.npz")


def test_binary_model_rejects_wider_nodes(ort_runner) -> None:
    from recursion import parse_ptb

    model = BinaryTreeLSTM.random(["a"], input_dim=4, hidden=4, runtime=ort_runner)
    with pytest.raises(InputError, match="at most 2 children, a node has 3"):
        model.encode([parse_ptb("(1 (1 a) (1 a) (1 a))")])


def test_encode_in_parts_equals_one_run(rt, sst_trees) -> None:
    """With two workers and enough trees, encode prepares front-loaded parts on one thread and runs
    them concurrently; the root states are those of one whole-batch run, in order."""
    trees = (sst_trees * 3)[:150]
    model = ChildSumTreeLSTM.random(_vocab(sst_trees), input_dim=12, hidden=8, seed=5, runtime=rt)
    model.min_nodes_per_part = 100          # parts of this small batch (a real one splits from 10,000 nodes)
    ex = model.executor
    planned: list[tuple[int, threading.Thread]] = []
    plan = ex.plan

    def spy_plan(forest, fields=None, shards=None):   # a spy (test double) around the real planner
        planned.append((forest.n, threading.current_thread()))
        return plan(forest, fields, shards)

    ex.plan = spy_plan
    try:
        H = model.encode(trees)
    finally:
        del ex.plan
    # two parts, front-loaded, both planned on this thread (one runs on a pool thread)
    assert [t for _, t in planned] == [threading.current_thread()] * 2
    assert planned[0][0] > planned[1][0] and sum(n for n, _ in planned) == sum(len(t) for t in trees)
    np.testing.assert_allclose(H, model.run(trees).roots("h"), atol=1e-6)
    assert ex.last_stats.trees == 150


def test_part_sizes_are_front_loaded_and_cover_the_batch() -> None:
    from recursion.models.base import part_sizes

    for n, k in ((2210, 2), (2210, 4), (97, 3), (5, 1)):
        sizes = part_sizes(n, k)
        assert sum(sizes) == n and len(sizes) == k
        assert sizes == sorted(sizes, reverse=True)   # earlier parts start earlier, so they get more
    assert part_sizes(100, 4, prep_share=0.0) == [25, 25, 25, 25]
    a, b = part_sizes(10_000, 2, prep_share=0.2)
    assert abs(a / 10_000 - 0.2 / 1.2 / (1 - (1 - 0.2 / 1.2) ** 2)) < 1e-3


@pytest.mark.parametrize("cls", [ChildSumTreeLSTM, BinaryTreeLSTM, TreeRNN], ids=lambda c: c.__name__)
def test_folded_leaf_table_equals_the_product_per_leaf(ort_runner, sst_trees, cls) -> None:
    """``fold_leaves`` (the default): the leaf cell gathers rows of a table taken once over the vocabulary
    (``emb @ W + b``; Child-Sum: the leaf's whole state), no MatMul left in it; every node's state equals
    that of the cell that multiplies each leaf's embedding."""
    import onnx

    folded = cls.random(_vocab(sst_trees), input_dim=24, hidden=20, seed=1, runtime=ort_runner)
    plain = cls(folded.weights, runtime=ort_runner)
    plain.fold_leaves = False

    def leaf_ops(model):
        return {n.op_type for n in onnx.load_from_string(model.subgraph.branches[0].cell).graph.node}

    assert "MatMul" not in leaf_ops(folded) and "MatMul" in leaf_ops(plain)
    np.testing.assert_allclose(folded.run(sst_trees).nodes("h"), plain.run(sst_trees).nodes("h"), atol=1e-5)



def test_encode_of_a_forest_equals_encode_of_its_trees(rt, sst_trees) -> None:
    """encode takes read_forest's Forest as it takes read_ptb's trees (and cuts it in parts the same way)."""
    from recursion import read_forest
    from tests.recursion.test_parse import to_ptb

    model = ChildSumTreeLSTM.random(_vocab(sst_trees), input_dim=10, hidden=6, seed=4, runtime=rt)
    trees = sst_trees * 3    # enough trees for one part a worker
    forest = read_forest([to_ptb(t) for t in trees])
    np.testing.assert_allclose(model.encode(forest), model.encode(trees), atol=1e-6)


def test_encode_ptb_reads_each_part_as_it_goes(rt, sst_trees) -> None:
    """encode_ptb(lines) == encode(read_forest(lines)), parts read one at a time (2 workers, enough trees),
    and a bad line in a later part is named by its number in the whole text."""
    from recursion import PTBParseError, read_forest
    from tests.recursion.test_parse import to_ptb

    model = ChildSumTreeLSTM.random(_vocab(sst_trees), input_dim=10, hidden=6, seed=4, runtime=rt)
    lines = [to_ptb(t) for t in sst_trees * 3]
    lines[7:7] = ["", "  "]
    np.testing.assert_allclose(model.encode_ptb(lines), model.encode(read_forest(lines)), atol=1e-6)
    assert model.executor.last_stats.trees == len(sst_trees) * 3
    np.testing.assert_allclose(model.encode_ptb(lines[:20]), model.encode(read_forest(lines[:20])), atol=1e-6)
    lines[170] = "(1 a))"
    with pytest.raises(PTBParseError, match="^line 171: unbalanced"):
        model.encode_ptb(lines)
