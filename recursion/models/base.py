"""What every tree model shares: weights from ``.npz``, the vocabulary, ``run`` / ``encode``.

A model subclass declares its weight keys and expected shapes and builds one
self-recursive :class:`~recursion.SubGraph` (a leaf branch and an internal
branch, each an ONNX cell); the executor does the rest.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import numpy as np

from edgert.errors import ConfigError, ModelLoadError
from recursion.executor import Executor, RunResult, RunStats
from recursion.forest import Forest
from recursion.ptb import read_forest
from recursion.subgraph import SubGraph
from recursion.tree import Tree

#: ``encode`` splits a batch across workers only when each part gets at least this many trees
MIN_TREES_PER_PART = 32
#: ... and this many nodes. Measured on Child-Sum (H 150): 300 small trees (~11,400 nodes) in two parts ran
#: no faster on two workers than in one part on one (1.03x, quiet host), and 0.74-0.88x as fast while
#: other processes held the second core (each part repeats the narrow top levels, and the two parts'
#: products share the cores); 300 large trees (~31,400 nodes) in two parts ran 1.2x faster.
MIN_NODES_PER_PART = 10_000
#: Parts per worker (2 measured slower: the leaf memo shares less across smaller parts).
CHUNKS_PER_WORKER = 1
#: Preparing a part (concatenating its trees, looking up words, planning: Python, holds the GIL) costs
#: about this share of running it (cell calls; measured on the SST test set: ~32 ms vs ~165 ms).
PREP_SHARE = 0.2


def part_sizes(n: int, parts: int, prep_share: float = PREP_SHARE) -> list[int]:
    """Split ``n`` trees into ``parts`` contiguous parts, front-loaded so that all finish together.

    Parts are prepared one after another on one thread and each starts as soon as it is prepared,
    so part ``i`` starts after the preparation of parts ``0..i``; with preparation costing
    ``prep_share`` of running, equal finish times need fractions ``a_i = a_0 - q * S_{i-1}``
    (``q = share / (1 + share)``, ``S`` the running sum), i.e. ``a_0 = q / (1 - (1 - q) ** parts)``.
    """
    if parts <= 1:
        return [n]
    q = prep_share / (1.0 + prep_share)
    a0 = q / (1.0 - (1.0 - q) ** parts) if q > 0 else 1.0 / parts
    fracs, total = [], 0.0
    for _ in range(parts):
        a = a0 - q * total
        fracs.append(a)
        total += a
    bounds = np.rint(np.cumsum([0.0, *fracs]) / total * n).astype(int)
    return np.diff(bounds).tolist()

__all__ = ["UNKNOWN_WORDS", "TreeModel"]

#: Vocabulary entries used for out-of-vocabulary words, first match wins.
UNKNOWN_WORDS = ("<unk>", "UNK", "<UNK>", "*UNKNOWN*")


class TreeModel:
    """Base of the tree models: validated weights, vocabulary, executor.

    Args:
        weights: arrays by key (see the subclass's ``KEYS``); ``vocab`` is a
            str array of V words for ``emb`` [V, D].
        runtime: an ``edgert.Runtime`` to run the cells on (shared with the
            app's other models), a Runner (``recursion.OrtRunner``), or None
            for the process-wide default runtime.
        shards: independent parts per wave (None: one per worker).

    Out-of-vocabulary words use the first of :data:`UNKNOWN_WORDS` in the
    vocabulary, or a zero embedding when it has none.
    """

    #: Required keys → shape pattern (ints or the letters V, D, H, N).
    KEYS: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: Optional keys → shape pattern.
    OPTIONAL: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: Output of the SubGraph that ``encode`` returns at the roots.
    STATE: ClassVar[str] = "h"

    def __init__(self, weights: Mapping[str, np.ndarray], runtime: Any = None, shards: int | None = None) -> None:
        self.weights = {k: np.asarray(v) for k, v in weights.items()}
        self.dims = self._check(self.weights)
        words = [str(w) for w in self.weights["vocab"].tolist()]
        self.vocab: dict[str, int] = {w: i for i, w in enumerate(words)}
        unk = next((self.vocab[w] for w in UNKNOWN_WORDS if w in self.vocab), None)
        emb = self.weights["emb"].astype(np.float32)
        if unk is None:  # a zero row for unknown words
            unk = len(emb)
            emb = np.vstack([emb, np.zeros((1, emb.shape[1]), np.float32)])
        self.unknown = unk
        self.emb = emb
        self._runtime = runtime
        self._shards = shards
        self._executor: Executor | None = None
        #: Leaf cells gather rows of a vocabulary table of the word's input projection (``emb @ W + b``,
        #: made when the cells are built; Child-Sum: of the leaf's whole state, ``cells.tabulate``)
        #: instead of multiplying each leaf's embedding: same states to float32 rounding, a leaf costs a
        #: row copy. The table holds V x (its width) floats instead of the embedding's V x D. Set to
        #: False before the first run to keep the product per leaf.
        self.fold_leaves = True
        #: ``encode`` cuts a batch into one part per worker only when each part has this many nodes.
        self.min_nodes_per_part = MIN_NODES_PER_PART

    # -- weights ------------------------------------------------------------------------
    def _check(self, w: Mapping[str, np.ndarray]) -> dict[str, int]:
        """Validate keys and shapes; returns the bound dims (V, D, H, N)."""
        name = type(self).__name__
        missing = [k for k in self.KEYS if k not in w]
        if missing:
            raise ConfigError(f"{name} weights lack {missing}; expected keys {sorted(self.KEYS)}"
                              + (f" (optional {sorted(self.OPTIONAL)})" if self.OPTIONAL else ""))
        dims: dict[str, int] = {}
        if w["vocab"].ndim != 1:
            raise ConfigError(f"{name}: 'vocab' must be a 1-D str array")
        dims["V"] = len(w["vocab"])
        dims["D"] = int(w["emb"].shape[1]) if w["emb"].ndim == 2 else -1
        self._bind_dims(w, dims)
        for key, pattern in {**self.KEYS, **{k: v for k, v in self.OPTIONAL.items() if k in w}}.items():
            if key == "vocab":
                continue
            want = tuple(d if isinstance(d, int) else _eval_dim(d, dims) for d in pattern)
            if tuple(w[key].shape) != want:
                raise ConfigError(f"{name}: weight {key!r} has shape {tuple(w[key].shape)}, expected {want} "
                                  f"({' x '.join(map(str, pattern))} with {dims})")
        return dims

    def _bind_dims(self, w: Mapping[str, np.ndarray], dims: dict[str, int]) -> None:
        """Subclasses read H (and N) from their weights here."""
        raise NotImplementedError

    @classmethod
    def from_npz(cls, path: str | os.PathLike[str], runtime: Any = None, shards: int | None = None) -> TreeModel:
        """Load weights from ``path`` (``np.savez`` keys, see ``KEYS``); raises ModelLoadError / ConfigError."""
        try:
            with np.load(path, allow_pickle=False) as z:
                weights = {k: z[k] for k in z.files}
        except FileNotFoundError as exc:
            raise ModelLoadError(f"{cls.__name__} weights not found: {os.fspath(path)}") from exc
        except (ValueError, OSError) as exc:
            raise ModelLoadError(f"{cls.__name__}: {os.fspath(path)} is not a readable .npz: {exc}") from exc
        return cls(weights, runtime=runtime, shards=shards)

    def save_npz(self, path: str | os.PathLike[str]) -> None:
        """Write the weights in the format :meth:`from_npz` reads."""
        np.savez(path, **self.weights)

    @property
    def hidden(self) -> int:
        """Hidden size H."""
        return self.dims["H"]

    # -- running ------------------------------------------------------------------------
    def build_subgraph(self) -> SubGraph:
        """The recursive definition (leaf and internal branches as ONNX cells)."""
        raise NotImplementedError

    @property
    def subgraph(self) -> SubGraph:
        """The model's SubGraph (built once)."""
        return self.executor.entry

    @property
    def executor(self) -> Executor:
        """The executor bound to this model's runtime (created on first use)."""
        if self._executor is None:
            self._executor = Executor(self.build_subgraph(), self._runtime, self._shards)
        return self._executor

    def fields(self, forest: Forest) -> dict[str, np.ndarray]:
        """Node fields the cells read: ``word`` (vocabulary id of each leaf, -1 for internal nodes)."""
        return {"word": forest.lookup(self.vocab, self.unknown)}

    def run(self, trees: Sequence[Tree] | Forest) -> RunResult:
        """Evaluate every node of every tree; ``result.nodes("h")`` / ``result.roots("h")``."""
        forest = trees if isinstance(trees, Forest) else Forest.from_trees(trees)
        return self.executor.run(forest, self.fields(forest))

    def encode(self, trees: Sequence[Tree] | Forest) -> np.ndarray:
        """``[len(trees), H]`` float32: the root hidden state of each tree (a Forest: of each of its trees,
        as ``recursion.read_forest`` gives them).

        With several workers and enough trees, the batch is cut into one contiguous part per
        worker, front-loaded (:func:`part_sizes`): this thread prepares the parts one after
        another and each starts running as soon as it is prepared, so a part's planning
        (Python/numpy, holding the GIL) overlaps the earlier parts' cell calls instead of
        preceding all of them, which is what keeps a single plan from scaling with workers. A batch
        with too few nodes for that (``min_nodes_per_part`` a worker) runs its levels in order on this
        thread, as on one worker: cutting its levels across workers pays no better than cutting the
        batch.
        """
        nodes = trees.n if isinstance(trees, Forest) else sum(len(t) for t in trees if isinstance(t, Tree))
        bounds = self._part_bounds(len(trees.roots) if isinstance(trees, Forest) else len(trees), nodes)
        if bounds is None:
            forest = trees if isinstance(trees, Forest) else Forest.from_trees(trees)
            shards = None if nodes >= self._workers() * self.min_nodes_per_part else 1
            return self.executor.run(forest, self.fields(forest), shards, keep=(self.STATE,)).roots(self.STATE)
        if isinstance(trees, Forest):
            return self._encode_parts([trees.part(a, b) for a, b in zip(bounds[:-1], bounds[1:])], lambda f: f)
        return self._encode_parts([trees[a:b] for a, b in zip(bounds[:-1], bounds[1:])], Forest.from_trees)

    def encode_ptb(self, lines: Iterable[str]) -> np.ndarray:
        """``[trees, H]`` float32: the root hidden state of each PTB line (one tree a line, blank lines
        skipped), i.e. ``encode(read_forest(lines))``, except that with several workers each part's lines
        are read as that part is prepared, so reading the later parts overlaps the earlier parts' cells.

        Raises PTBParseError naming the line (1-based, in ``lines``) and the position.
        """
        lines = list(lines)
        at = [i for i, line in enumerate(lines) if line.strip()]
        bounds = self._part_bounds(len(at), sum(line.count("(") for line in lines))   # a node a bracket
        if bounds is None:
            return self.encode(read_forest(lines))
        starts = [0, *(at[b] for b in bounds[1:-1]), len(lines)]
        return self._encode_parts([(a, lines[a:b]) for a, b in zip(starts[:-1], starts[1:])],
                                  lambda part: read_forest(part[1], first_line=part[0] + 1))

    def _part_bounds(self, count: int, nodes: int) -> list[int] | None:
        """Tree index bounds of the parts ``encode`` cuts ``count`` trees of about ``nodes`` nodes into; None
        for one part."""
        parts = self._workers()
        chunks = parts * CHUNKS_PER_WORKER
        if parts <= 1 or count < chunks * MIN_TREES_PER_PART or nodes < chunks * self.min_nodes_per_part:
            return None
        return np.cumsum([0, *part_sizes(count, parts * CHUNKS_PER_WORKER)]).tolist()

    def _workers(self) -> int:
        """The parts ``encode`` can run at once: the runner's workers (or the ``shards`` given)."""
        return self.executor.runner.parallelism if self._shards is None else self._shards

    def _encode_parts(self, chunks: Sequence[Any], to_forest: Callable[[Any], Forest]) -> np.ndarray:
        """Root states of every part, ``to_forest(chunk)`` each: this thread prepares the parts in order and
        hands each to a pool thread as soon as it is ready (the first part computes while the next is
        prepared); it runs the last one itself."""
        ex = self.executor
        ex.warm()

        def prepare(chunk: Any) -> tuple[Forest, dict[str, np.ndarray], Any, float]:
            t = time.perf_counter()
            forest = to_forest(chunk)
            fields = self.fields(forest)
            return forest, fields, ex.plan(forest, fields, shards=1), (time.perf_counter() - t) * 1e3

        def run(prep: tuple[Forest, dict[str, np.ndarray], Any, float]) -> tuple[np.ndarray, RunStats]:
            res = ex.run(prep[0], prep[1], plan=prep[2], keep=(self.STATE,))
            return res.roots(self.STATE), res.stats

        preps: list[float] = []
        with ThreadPoolExecutor(len(chunks) - 1, thread_name_prefix="edgert-encode") as pool:
            futs = []
            for chunk in chunks[:-1]:
                prep = prepare(chunk)
                preps.append(prep[3])
                futs.append(pool.submit(run, prep))
            prep = prepare(chunks[-1])
            preps.append(prep[3])
            last = run(prep)
            done = [f.result() for f in futs] + [last]
        st = [d[1] for d in done]
        ex.last_stats = RunStats(sum(x.trees for x in st), sum(x.nodes for x in st),
                                 sum(x.invocations for x in st), sum(x.calls for x in st),
                                 max(x.waves for x in st), sum(preps), sum(x.run_ms for x in st))
        return np.concatenate([d[0] for d in done], axis=0)

    @classmethod
    def random(cls, vocab: Sequence[str], input_dim: int = 300, hidden: int = 150, seed: int = 0,
               runtime: Any = None, shards: int | None = None, **dims: int) -> TreeModel:
        """A model with Glorot-uniform random weights (for demos, tests and benchmarks)."""
        rng = np.random.default_rng(seed)
        bound = {"V": len(vocab), "D": input_dim, "H": hidden, **dims}
        w: dict[str, np.ndarray] = {"vocab": np.array(list(vocab), dtype=str)}
        for key, pattern in cls.KEYS.items():
            if key == "vocab":
                continue
            shape = tuple(d if isinstance(d, int) else _eval_dim(d, bound) for d in pattern)
            if key == "emb":
                w[key] = rng.normal(0.0, 0.5, shape).astype(np.float32)
            elif len(shape) == 1:
                w[key] = rng.uniform(-0.1, 0.1, shape).astype(np.float32)
            elif len(shape) == 3:  # a bilinear tensor [I, I, H]: each output sums I*I products
                lim = 1.0 / shape[0]
                w[key] = rng.uniform(-lim, lim, shape).astype(np.float32)
            else:
                fan = shape[0] + shape[-1]
                lim = np.sqrt(6.0 / fan)
                w[key] = rng.uniform(-lim, lim, shape).astype(np.float32)
        return cls(w, runtime=runtime, shards=shards)


def _eval_dim(expr: str, dims: Mapping[str, int]) -> int:
    """``"H"``, ``"3*H"``, ``"N*H"`` → int."""
    value = 1
    for part in expr.split("*"):
        value *= int(part) if part.isdigit() else dims[part]
    return value
