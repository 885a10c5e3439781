"""The executor: SubGraph/InvokeOp semantics, batching across trees, parallel groups, depth."""

from __future__ import annotations

import sys
import threading
from concurrent.futures import Future

import numpy as np
import pytest

import edgert
from recursion import Executor, Forest, InvokeOp, OrtRunner, SubGraph, is_internal, is_leaf, parse_ptb
from recursion.cells import FLOAT, CellBuilder
from recursion.models import ChildSumTreeLSTM
from recursion.runners import CellHandle
from delegates import registry
from delegates.base import Artifact, Delegate, Session
from recursion.synth import chain_tree, random_tree, sst_like_tree
from edgert.errors import ConfigError, InferenceError, InputError
from tests.recursion import reference as ref

H = 4


def _leaf_cell(scale: float) -> bytes:
    g = CellBuilder("leaf")
    x = g.op("Cast", g.input("word", 7, ["B"]), to=FLOAT)
    x = g.op("Unsqueeze", x, g.const("ax", np.array([1], np.int64)))
    g.output(g.op("Tanh", g.op("Mul", x, g.const("s", np.full((1, H), scale, np.float32)))), "h", ["B", H])
    return g.build()


def _sum_cell(w: np.ndarray) -> bytes:
    g = CellBuilder("sum")
    hs = g.reduce_sum(g.input("kids", FLOAT, ["B", "K", H]), 1)
    g.output(g.op("Tanh", g.linear(hs, w, None, "w")), "h", ["B", H])
    return g.build()


def test_mutual_recursion_alternates_subgraphs() -> None:
    """even(node) invokes odd on its children and vice versa: two SubGraphs, one batch."""
    rng = np.random.default_rng(0)
    w_even, w_odd = rng.normal(size=(H, H)), rng.normal(size=(H, H))
    even = SubGraph("even", outputs=("h",))
    odd = SubGraph("odd", outputs=("h",))
    even.branch(is_leaf, _leaf_cell(0.1), fields={"word": "word"}, name="leaf")
    even.branch(is_internal, _sum_cell(w_even), invokes=[InvokeOp(odd, {"h": "kids"})], name="node")
    odd.branch(is_leaf, _leaf_cell(-0.2), fields={"word": "word"}, name="leaf")
    odd.branch(is_internal, _sum_cell(w_odd), invokes=[InvokeOp(even, {"h": "kids"})], name="node")
    trees = [random_tree(int(rng.integers(1, 60)), 3, rng) for _ in range(12)]
    forest = Forest.from_trees(trees)
    word = np.arange(forest.n, dtype=np.int64) % 7
    with OrtRunner(2) as runner:
        res = Executor(even, runner).run(forest, {"word": word})
    # reference: depth parity decides the SubGraph; walk each tree root-down with an explicit stack
    for t, tree in enumerate(trees):
        off = int(forest.offsets[t])
        parity = {tree.root: 0}
        order = [tree.root]
        i = 0
        while i < len(order):
            for c in tree.children(order[i]).tolist():
                parity[c] = 1 - parity[order[i]]
                order.append(c)
            i += 1
        h: dict[int, np.ndarray] = {}
        for j in range(len(tree)):  # post-order
            kids = tree.children(j).tolist()
            p = parity[j]
            if not kids:
                h[j] = np.tanh(word[off + j] * (0.1 if p == 0 else -0.2) * np.ones(H))
            else:
                h[j] = np.tanh(sum(h[c] for c in kids) @ (w_even if p == 0 else w_odd))
            got = res.nodes("h", "even" if p == 0 else "odd")[off + j]
            np.testing.assert_allclose(got, h[j], atol=1e-5)
    # every node is invoked by exactly one SubGraph here
    assert ((res.pos["even"] >= 0) ^ (res.pos["odd"] >= 0)).all()


def _summed_cell(w: np.ndarray) -> bytes:
    g = CellBuilder("summed")
    g.output(g.op("Tanh", g.linear(g.input("kids", FLOAT, ["B", H]), w, None, "w")), "h", ["B", H])
    return g.build()


def test_summed_invoke_equals_stacked_and_needs_no_buckets() -> None:
    """``reduce="sum"`` hands the cell its children's sum: the same states as stacking them and summing in
    the cell, in one group a wave whatever the child counts (no padding)."""
    rng = np.random.default_rng(4)
    w = rng.normal(size=(H, H))
    stacked = SubGraph("stacked", outputs=("h",))
    stacked.branch(is_leaf, _leaf_cell(0.1), fields={"word": "word"}, name="leaf")
    stacked.branch(is_internal, _sum_cell(w), invokes=[InvokeOp(stacked, {"h": "kids"})], name="node")
    summed = SubGraph("summed", outputs=("h",))
    summed.branch(is_leaf, _leaf_cell(0.1), fields={"word": "word"}, name="leaf")
    summed.branch(is_internal, _summed_cell(w), invokes=[InvokeOp(summed, {"h": "kids"}, reduce="sum")], name="node")
    trees = [random_tree(int(rng.integers(1, 60)), 6, rng) for _ in range(40)]
    forest = Forest.from_trees(trees)
    fields = {"word": np.arange(forest.n, dtype=np.int64) % 7}
    with OrtRunner(1) as runner:
        want = Executor(stacked, runner, shards=1).run(forest, fields)
        ex = Executor(summed, runner, shards=1, max_rows=10**9)
        got = ex.run(forest, fields)
        plan = ex.plan(forest, fields)
    np.testing.assert_allclose(got.nodes("h"), want.nodes("h"), atol=1e-6)
    assert len(plan.groups) == plan.waves                       # leaves in wave 0, then one call a wave
    with pytest.raises(ConfigError, match="reduce="):
        SubGraph("bad", outputs=("h",)).branch(is_internal, _summed_cell(w),
                                               invokes=[InvokeOp(summed, {"h": "kids"}, reduce="mean")])


def test_one_call_per_wave_across_trees() -> None:
    rng = np.random.default_rng(1)
    vocab = [f"w{i}" for i in range(50)]
    trees = [sst_like_tree(rng, vocab) for _ in range(200)]
    model = ChildSumTreeLSTM.random(vocab, input_dim=6, hidden=5, runtime=OrtRunner(1))
    ex = Executor(model.build_subgraph(), model.executor.runner, shards=1, max_rows=10**9)
    forest = Forest.from_trees(trees)
    plan = ex.plan(forest, model.fields(forest))
    assert len(plan.groups) == plan.waves == int(forest.height.max()) + 1  # siblings AND trees batched
    words = model.fields(forest)["word"]
    n_leaf_rows = len(np.unique(words[words >= 0]))  # a repeated word is one leaf invocation
    assert sum(g.stop - g.start for g in plan.groups) == int((forest.arity > 0).sum()) + n_leaf_rows
    two = Executor(ex.entry, ex.runner, shards=2, max_rows=10**9).plan(forest, model.fields(forest))
    by_wave: dict[int, list] = {}
    for g in two.groups:
        by_wave.setdefault(g.wave, []).append(g)
    for gs in by_wave.values():  # groups of one wave never wait on each other
        ids = {g.id for g in gs}
        assert all(not ids.intersection(g.deps) for g in gs)
    # a plan made ahead (on another thread, as encode does) runs as is; one for another forest is refused
    fields = model.fields(forest)
    np.testing.assert_array_equal(ex.run(forest, fields, plan=plan).roots("h"), ex.run(forest, fields).roots("h"))
    small = Forest.from_trees(trees[:3])
    with pytest.raises(ConfigError, match="plan given to run"):
        ex.run(small, model.fields(small), plan=plan)
    model.executor.runner.close()


def test_memoized_leaves_equal_unmemoized() -> None:
    rng = np.random.default_rng(5)
    vocab = [f"w{i}" for i in range(20)]
    trees = [sst_like_tree(rng, vocab) for _ in range(50)]
    with OrtRunner(1) as runner:
        model = ChildSumTreeLSTM.random(vocab, input_dim=6, hidden=5, runtime=runner)
        memo = model.run(trees)
        model.executor.memoize = False
        plain = model.run(trees)
    assert memo.stats.invocations < plain.stats.invocations == plain.stats.nodes
    np.testing.assert_array_equal(memo.nodes("h"), plain.nodes("h"))
    np.testing.assert_array_equal(memo.nodes("c"), plain.nodes("c"))


def test_kept_outputs_only_and_what_parents_read() -> None:
    """``keep`` leaves out the outputs no InvokeOp reads (c here) and changes no value; encode keeps h."""
    rng = np.random.default_rng(6)
    vocab = [f"w{i}" for i in range(20)]
    trees = [sst_like_tree(rng, vocab) for _ in range(30)]
    with OrtRunner(1) as runner:
        model = ChildSumTreeLSTM.random(vocab, input_dim=6, hidden=5, runtime=runner)
        forest = Forest.from_trees(trees)
        full = model.executor.run(forest, model.fields(forest))
        lean = model.executor.run(forest, model.fields(forest), keep=("h",))
        encoded = model.encode(trees)
    sg = model.subgraph.name
    assert set(full.buffers[sg]) == {"h", "c", "fc"} and set(lean.buffers[sg]) == {"h", "fc"}
    np.testing.assert_array_equal(lean.nodes("h"), full.nodes("h"))
    np.testing.assert_array_equal(encoded, full.roots("h"))


#: How long a gated call waits for a second call to be in flight before the test calls it serial (s).
GATE_S = 30.0


class ConcurrencyRecorderDouble:
    """Test double around a real runner: records how many cell calls (submitted or sync) overlap.

    A call of the kind ``hold`` names (``"submit"`` or ``"call"``) does not complete until a second
    call is in flight (or ``GATE_S`` passed): the overlap the test asks for is then a fact of the
    order of calls, not of how fast a cell runs. Without it, a cell done before the next one was
    issued read as serial (the old test failed 4 runs in 20 on an idle host).
    """

    def __init__(self, inner, hold: str) -> None:
        self.inner = inner
        self.hold = hold
        self.parallelism = inner.parallelism
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()
        self.overlapped = threading.Event()
        self.gate_timed_out = False

    def _enter(self) -> None:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            if self.active >= 2:
                self.overlapped.set()

    def _leave(self, kind: str) -> None:
        """Wait for an overlap (once: a timeout means serial, and opens the gate for the rest)."""
        if kind == self.hold and not self.overlapped.wait(GATE_S):
            self.gate_timed_out = True
            self.overlapped.set()
        with self.lock:
            self.active -= 1

    def load_cell(self, name: str, model: bytes) -> CellHandle:
        h = self.inner.load_cell(name, model)

        def submit(inputs):
            self._enter()
            out: Future = Future()

            def done(fut: Future) -> None:
                self._leave("submit")
                if fut.exception() is not None:
                    out.set_exception(fut.exception())
                else:
                    out.set_result(fut.result())

            # on a thread of its own: a future already done runs its callback on this (the caller's)
            # thread, and holding it there would keep the executor from submitting the next group
            h.submit(inputs).add_done_callback(lambda fut: threading.Thread(target=done, args=(fut,)).start())
            return out

        def call(inputs):
            self._enter()
            try:
                return h.call(inputs)
            finally:
                self._leave("call")

        return CellHandle(name, submit, h.unwrap, call)


def _overlap_run(how: str) -> ConcurrencyRecorderDouble:
    rng = np.random.default_rng(2)
    vocab = [f"w{i}" for i in range(50)]
    trees = [sst_like_tree(rng, vocab) for _ in range(300)]
    with OrtRunner(2) as runner:
        # one run's parallel groups are submitted; encode's parts (one group per wave) are sync calls
        double = ConcurrencyRecorderDouble(runner, hold="submit" if how == "run" else "call")
        model = ChildSumTreeLSTM.random(vocab, input_dim=32, hidden=32, runtime=double)
        model.min_nodes_per_part = 1000         # parts of this small batch (a real one splits from 10,000 nodes)
        got = model.run(trees).roots("h") if how == "run" else model.encode(trees)
        np.testing.assert_allclose(ChildSumTreeLSTM(model.weights, runtime=OrtRunner(1)).run(trees).roots("h"),
                                   got, atol=1e-6)
    return double


def test_independent_groups_run_at_the_same_time() -> None:
    """One run: each wave is cut into one part per worker, submitted together (no waiting between)."""
    double = _overlap_run("run")
    assert not double.gate_timed_out, "no cell call was joined by a second one: the groups ran serially"
    assert double.peak >= 2 and double.active == 0


def test_encode_runs_its_parts_at_the_same_time() -> None:
    """encode: the parts of a batch run on pool threads while the next part is planned."""
    double = _overlap_run("encode")
    assert not double.gate_timed_out, "no cell call was joined by a second one: the parts ran serially"
    assert double.peak >= 2 and double.active == 0


def test_encode_splits_only_batches_large_enough() -> None:
    """Two workers: a batch is cut in two only when each part has enough trees and nodes to pay."""
    with OrtRunner(2) as runner:
        model = ChildSumTreeLSTM.random(["a"], input_dim=4, hidden=4, runtime=runner)
        assert model._part_bounds(300, 11_400) is None                 # 300 small trees: one part
        assert model._part_bounds(300, 31_400) is not None             # 300 large ones: two
        assert model._part_bounds(40, 31_400) is None                  # too few trees
        # a batch too small to cut runs its levels in order, as on one worker (no level cut in two)
        trees = [sst_like_tree(np.random.default_rng(7), ["a"]) for _ in range(100)]
        forest = Forest.from_trees(trees)
        model.encode(trees)
        assert model.executor.last_stats.calls == len(model.executor.plan(forest, model.fields(forest), 1).groups)


class GatedDelegateDouble(Delegate):
    """Test double around the real ``ort-cpu`` delegate: once ``armed``, a run on a runtime worker
    thread or an ``encode`` part thread does not end until another run has started (or ``GATE_S`` passed).

    Two runs at once can only be on two different workers (each runs one invocation at a time), so
    an overlap proves the runtime spread the groups; a runtime that queued the second group behind
    the first leaves the first waiting until the gate times out.
    """

    processor, backend, formats = "cpu", "onnxruntime", ("onnx",)

    def __init__(self) -> None:
        self.name = "ort-cpu-gated"
        self.inner = registry.get("ort-cpu")
        self.armed = False
        self.running = 0
        self.lock = threading.Lock()
        self.overlapped = threading.Event()
        self.gate_timed_out = False

    def _probe(self) -> str | None:
        return self.inner.probe()

    def open(self, artifact: Artifact, threads: int = 1) -> Session:
        return _GatedSessionDouble(self, self.inner.open(artifact, threads))


class _GatedSessionDouble(Session):
    """The session of :class:`GatedDelegateDouble`: the real session's run behind the gate."""

    def __init__(self, gate: GatedDelegateDouble, inner: Session) -> None:
        self.gate, self.inner = gate, inner
        self.inputs, self.outputs = inner.inputs, inner.outputs

    def run(self, feeds):
        g = self.gate
        # worker threads and encode's part threads wait; the calling thread must not (it runs the last
        # part, whose run is what opens the gate for the others)
        gated = g.armed and threading.current_thread().name.startswith(("edgert-cpu", "edgert-encode"))
        with g.lock:
            g.running += 1
            if g.running >= 2:
                g.overlapped.set()
        try:
            out = self.inner.run(feeds)
            if gated and not g.overlapped.wait(GATE_S):
                g.gate_timed_out = True
                g.overlapped.set()
            return out
        finally:
            with g.lock:
                g.running -= 1

    def close(self) -> None:
        self.inner.close()


def test_runtime_spreads_groups_over_both_cpu_workers() -> None:
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(50)]
    trees = [sst_like_tree(rng, vocab) for _ in range(400)]
    gate = GatedDelegateDouble()
    with edgert.Runtime(delegates=[gate], cpu_workers=2, warmup_runs=1) as rt:
        model = ChildSumTreeLSTM.random(vocab, input_dim=64, hidden=64, runtime=rt)
        model.min_nodes_per_part = 1000         # parts of this small batch (a real one splits from 10,000 nodes)
        model.executor.warm()
        # Estimates far above a cell's real run: a run held open by the gate must read as busy to the
        # policy (a run past its estimate reads as ending now, and a tie would go to cpu0).
        for name in rt.stats():
            for proc in rt.processors:
                rt.estimator.seed(name, proc, 1_000.0)
        gate.armed = True
        H1 = model.encode(trees)
        stats = rt.stats().values()
        procs = {p for s in stats for p in s["by_processor"]}
    assert not gate.gate_timed_out, "no two cell runs overlapped: the runtime did not use both CPU workers"
    assert procs == {"cpu0", "cpu1"}
    assert all(s["ok"] + s["late"] == s["requests"] > 0 for s in stats)
    with OrtRunner(1) as runner:  # same answer on another backend path
        other = ChildSumTreeLSTM(model.weights, runtime=runner)
        np.testing.assert_allclose(other.encode(trees), H1, atol=1e-6)


def _limited_recursion(fn):
    """Run fn with a tight recursion limit: a recursive walk over a deep tree would fail."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        return fn()
    finally:
        sys.setrecursionlimit(old)


def test_10000_deep_chain() -> None:
    chain = chain_tree(10_000)
    with OrtRunner(1) as runner:
        model = ChildSumTreeLSTM.random(["w0"], input_dim=4, hidden=H, runtime=runner)
        res = _limited_recursion(lambda: model.run([chain]))
    assert res.stats.waves == 10_001
    h, c = ref.child_sum(model, chain)
    np.testing.assert_allclose(res.nodes("h"), h, atol=1e-5)
    np.testing.assert_allclose(res.nodes("c"), c, atol=1e-4 * max(1.0, float(np.abs(c).max())))


def test_100000_node_tree() -> None:
    tree = random_tree(100_000, 4, np.random.default_rng(4))
    with OrtRunner(2) as runner:
        model = ChildSumTreeLSTM.random([f"w{i}" for i in range(100)], input_dim=4, hidden=H, runtime=runner)
        res = _limited_recursion(lambda: model.run([tree]))
    assert res.stats.nodes == 100_000 and res.stats.invocations == 100_000 - (tree.arity == 0).sum() + 100
    h, _ = ref.child_sum(model, tree)
    np.testing.assert_allclose(res.nodes("h"), h, atol=1e-5)


def test_no_branch_matches_names_the_node() -> None:
    sg = SubGraph("leaves_only", outputs=("h",))
    sg.branch(is_leaf, _leaf_cell(1.0), fields={"word": "word"})
    tree = parse_ptb("(1 (1 a) (1 b))")
    forest = Forest.from_trees([tree])
    with OrtRunner(1) as runner, pytest.raises(InputError, match="no branch matches node 2 of tree 0"):
        Executor(sg, runner).run(forest, {"word": np.zeros(3, np.int64)})


def test_missing_field_and_bad_definitions() -> None:
    sg = SubGraph("s", outputs=("h",))
    sg.branch(is_leaf, _leaf_cell(1.0), fields={"word": "word"})
    forest = Forest.from_trees([parse_ptb("(1 a)")])
    with OrtRunner(1) as runner, pytest.raises(ConfigError, match=r"needs node fields \['word'\]"):
        Executor(sg, runner).run(forest, {})
    with pytest.raises(ConfigError, match="must be ONNX model bytes"):
        sg.branch(is_internal, "cell.onnx")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"asks for \['c'\]"):
        sg.branch(is_internal, _sum_cell(np.eye(H)), invokes=[InvokeOp(sg, {"c": "kids"})])


class FailingRunnerDouble:
    """Test double: every cell call fails the way a backend error would."""

    parallelism = 1

    def load_cell(self, name: str, model: bytes) -> CellHandle:
        def submit(inputs):
            fut: Future = Future()
            fut.set_exception(RuntimeError("backend exploded"))
            return fut

        def call(inputs):
            raise RuntimeError("backend exploded")

        return CellHandle(name, submit, lambda r: r, call)


def test_cell_failure_names_the_subgraph() -> None:
    model = ChildSumTreeLSTM.random(["a"], input_dim=4, hidden=4, runtime=FailingRunnerDouble())
    with pytest.raises(InferenceError, match=r"SubGraph 'child_sum_tree_lstm' branch 'leaf'.*backend exploded"):
        model.encode([parse_ptb("(1 (1 a) (1 a))")])
